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

from indexer_logits._identity import DECODE_PAGED, PREFILL_PAGED, PREFILL_RAGGED, Bucket, Problem

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
PREFILL_LENS_MODES = ("full",)

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


def default_sizes(family: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(batches, contexts) a family is tuned for when the user names none."""
    if family == DECODE_PAGED.name:
        return SGLANG_DECODE_BATCHES, DEFAULT_DECODE_CONTEXTS
    if family == PREFILL_PAGED.name:
        return DEFAULT_PREFILL_ROWS, DEFAULT_CHUNKED_WIDTHS
    return DEFAULT_PREFILL_ROWS, DEFAULT_PREFILL_KEYS


def make_problems(family: str, dtype: str, next_ns: Sequence[int], page_size: int, scale_layout: str | None,
                  heads: int, head_dim: int, lens_mode: str) -> list[Problem]:
    """One Problem per next_n (decode) or the single prefill problem. Raises ValueError whose
    message starts with the offending Problem field (the CLI maps it to its option)."""
    layout = scale_layout or ("none" if dtype == "bf16" else "page_blocked")
    if family == PREFILL_PAGED.name:
        # The decode cache (page size, scale layout as for decode); each query row has its own limit.
        if any(n != 1 for n in next_ns):
            raise ValueError(f"next_n: prefill_paged takes next_n=1 (each query row has its own limit), "
                             f"got {list(next_ns)}")
        if lens_mode != "1d":
            raise ValueError(f"lens_mode: prefill_paged takes lens_mode='1d' (each query row has its own limit), "
                             f"got {lens_mode!r}")
        return [Problem(family=family, q_dtype=dtype, cache_dtype=dtype, page_size=page_size, scale_layout=layout,
                        heads=heads, head_dim=head_dim, next_n=1, lens_mode="1d")]
    if family == PREFILL_RAGGED.name:
        if layout == "token_interleaved":
            raise ValueError("scale_layout: prefill_ragged keeps scales in a separate tensor; "
                             "use page_blocked (fp8) or none (bf16)")
        if any(n != 1 for n in next_ns):
            raise ValueError(f"next_n: prefill_ragged takes next_n=1, got {list(next_ns)}")
        if lens_mode != "1d":
            raise ValueError(f"lens_mode: prefill_ragged takes lens_mode='1d' (each row has its own window), "
                             f"got {lens_mode!r}")
        return [Problem(family=family, q_dtype=dtype, cache_dtype=dtype, page_size=0, scale_layout=layout,
                        heads=heads, head_dim=head_dim, next_n=1, lens_mode="1d")]
    return [Problem(family=family, q_dtype=dtype, cache_dtype=dtype, page_size=page_size, scale_layout=layout,
                    heads=heads, head_dim=head_dim, next_n=n, lens_mode=lens_mode)
            for n in sorted(set(next_ns))]


def make_buckets(problem: Problem, batches: Sequence[int], contexts: Sequence[int]) -> list[Bucket]:
    """Every (batch, context) pair, in tuning order: by context, then batch (so each bucket's
    nearest finished neighbour is usually one batch size away). Chunked prefill takes any rows
    and width (more rows than the width are split over requests)."""
    if problem.family == PREFILL_RAGGED.name:
        too_few = [(r, k) for r in batches for k in contexts if k < r]
        if too_few:
            raise ValueError(f"context: prefill keys must be >= query rows (causal windows), got rows/keys {too_few[:4]}")
    return [Bucket(b, c) for c in sorted(set(contexts)) for b in sorted(set(batches))]


def lens_modes(problem: Problem) -> tuple[str, ...]:
    return DECODE_LENS_MODES if problem.is_decode else PREFILL_LENS_MODES


def bucket_distance(a: Bucket, b: Bucket) -> float:
    """How far apart two buckets are, in doublings of batch and context."""
    return abs(math.log2(a.batch) - math.log2(b.batch)) + abs(math.log2(a.context) - math.log2(b.context))


def by_distance(bucket: Bucket, done: Iterable[Bucket]) -> list[Bucket]:
    """The finished buckets other than `bucket`, nearest first (ties: the smaller one)."""
    return sorted((b for b in done if b != bucket), key=lambda b: (bucket_distance(bucket, b), b.context, b.batch))
