"""The shape buckets a tuning run covers, and the problems it tunes them for.

A decode bucket is (requests captured in one CUDA graph, page-table width in tokens); a prefill
bucket is (query rows, key tokens); a chunked-prefill bucket (prefill_paged) is (query rows,
page-table width in tokens). The defaults follow what serving engines use: SGLang's decode
CUDA-graph capture sizes and page-table widths from 4K to the 1M-token context.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Sequence

from indexer_logits._identity import Bucket

# SGLang's default decode CUDA-graph capture batch sizes: 1, 2, 4, 8, 12, 16, then every 8 to 256.
SGLANG_DECODE_BATCHES = (1, 2, 4, 8, 12, 16) + tuple(range(24, 257, 8))
POW2_BATCHES = tuple(2**i for i in range(9))  # 1 .. 256
DEFAULT_DECODE_CONTEXTS = (4096, 8192, 32768, 131072, 1048576)
DEFAULT_PREFILL_ROWS = (4096,)
DEFAULT_PREFILL_KEYS = (8192, 16384, 32768, 65536)
DEFAULT_CHUNKED_WIDTHS = (22528, 131072)  # a 22K and a 128K page table (docs/PERF.md, chunked prefill)
SHORTHANDS = {"pow2": POW2_BATCHES, "sglang": SGLANG_DECODE_BATCHES}

# How the lengths of a timed decode bucket are filled: the full width (the graph's worst case)
# and about a quarter of it (the partly filled tables engines mostly replay with).
DECODE_LENS_MODES = ("full", "quarter")

_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}


def parse_sizes(values: Iterable[str] | str, what: str) -> tuple[int, ...]:
    """'1,2,4', '4K', '1M', 'pow2' (repeatable) -> sorted distinct positive ints.

    Raises ValueError naming `what` on anything else."""
    if isinstance(values, str):
        values = [values]
    out: list[int] = []
    for value in values:
        for item in str(value).split(","):
            item = item.strip().lower()
            if not item:
                continue
            if item in SHORTHANDS:
                out += SHORTHANDS[item]
                continue
            m = re.fullmatch(r"(\d+)([km]?)", item)
            if not m or int(m.group(1)) < 1:
                raise ValueError(f"{what}: expected positive integers (a K or M suffix allowed, e.g. 4K, 1M) "
                                 f"or one of {sorted(SHORTHANDS)}, got {item!r}")
            out.append(int(m.group(1)) * _SUFFIX[m.group(2)])
    if not out:
        raise ValueError(f"{what}: expected at least one size")
    return tuple(sorted(set(out)))


_BUCKET_SPEC = re.compile(r"(\d+)x(\d+)(?::(\w+))?")


def parse_bucket_specs(text: str, what: str = "--buckets", lens_modes: Sequence[str] | None = None,
                       ) -> list[tuple[Bucket, str]]:
    """`BxCONTEXT[:lens],...` (e.g. "64x8192:quarter,1x1048576") as (bucket, lens) pairs, lens
    "full" where none is given; with `lens_modes`, any other lens is refused. The GPU scripts'
    bucket lists."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        m = _BUCKET_SPEC.fullmatch(item.lower())
        if not item or m is None:
            raise ValueError(f"{what}: expected BxCONTEXT[:lens] items separated by commas, got {item!r}")
        lens = m.group(3) or "full"
        if lens_modes is not None and lens not in lens_modes:
            raise ValueError(f"{what}: lens {lens!r} in {item!r} is not one of {list(lens_modes)}")
        try:
            out.append((Bucket(int(m.group(1)), int(m.group(2))), lens))
        except ValueError as exc:
            raise ValueError(f"{what}: {item!r}: {exc}") from None
    return out


def bucket_distance(a: Bucket, b: Bucket) -> float:
    """How far apart two buckets are, in doublings of batch and context."""
    return abs(math.log2(a.batch) - math.log2(b.batch)) + abs(math.log2(a.context) - math.log2(b.context))


def by_distance(bucket: Bucket, done: Iterable[Bucket]) -> list[Bucket]:
    """The finished buckets other than `bucket`, nearest first (ties: the smaller one)."""
    return sorted((b for b in done if b != bucket), key=lambda b: (bucket_distance(bucket, b), b.context, b.batch))
