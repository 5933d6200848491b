"""What `tune --engine` covers: the problems and buckets a serving engine calls on DeepSeek-V3.2's
indexer (H=64, D=128), in one run with one time budget (run.sh's GPU tune).

- fp8 decode over the paged cache, next_n 1 and 2 (MTP), 1-D lengths, page 64: the pow2 batches
  1..256 over 4K..1M (the runtime serves a 2-D problem from its 1-D twin's entry, and the other
  capture sizes from the nearest bucket);
- fp8 prefill over ragged K: 4096 rows over 8K..64K keys;
- fp8 chunked prefill over the paged cache: 4096 rows over a 22K and a 128K page table.
"""

from __future__ import annotations

from indexer_logits._identity import Bucket, Problem

from .buckets import POW2_BATCHES
from .families import family_of

ENGINE_HEADS, ENGINE_HEAD_DIM, ENGINE_PAGE = 64, 128, 64
ENGINE_DECODE_NEXT_N = (1, 2)
# The options `--engine` decides, at their values when not given (cli.py tune's defaults): another
# value beside --engine is refused, naming the option.
ENGINE_DECIDES = {"family": "decode_paged", "dtype": "fp8", "next_n": (), "page_size": 64, "scale_layout": None,
                  "heads": 64, "head_dim": 128, "lens_mode": "1d", "batch": (), "context": ()}


def engine_plan() -> list[tuple[Problem, list[Bucket]]]:
    """[(problem, buckets), ...] of an engine's calls (see the module docstring)."""
    plan = []
    for family in ("decode_paged", "prefill_ragged", "prefill_paged"):
        fam = family_of(family)
        next_ns = ENGINE_DECODE_NEXT_N if fam.kind.decode else (1,)
        problems = fam.problems("fp8", next_ns, ENGINE_PAGE, None, ENGINE_HEADS, ENGINE_HEAD_DIM, "1d")
        batches = POW2_BATCHES if fam.kind.decode else fam.default_batches
        plan += [(p, fam.buckets(batches, fam.default_contexts)) for p in problems]
    return plan
