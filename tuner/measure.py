"""Timing inputs and the timing of one candidate on one bucket.

Decode inputs for timing share one page pool larger than the L2 (so a replay cannot be served
from cache) and differ in their block tables, which the captured graph cycles through.
"""

from __future__ import annotations

from indexer_logits._identity import Bucket, Problem

from .families import family_of
from .gates import launch, new_output
from .timing import DEFAULT_BUDGET_MS, DEFAULT_WARMUP_MS, Timing, time_cuda_graph, time_wall_clock

MIN_POOL_BYTES = 1 << 30  # >> the 50-60 MB L2 of current GPUs
MAX_POOL_BYTES = 24 << 30


def timing_inputs(problem: Problem, bucket: Bucket, lens="full", *, device="cuda", seed: int = 0,
                  sets: int = 4, min_pool_bytes: int = MIN_POOL_BYTES, max_pool_bytes: int = MAX_POOL_BYTES,
                  page_gap_bytes: int = 64):
    """Input sets for timing one bucket (the family's; a captured graph cycles through them).
    page_gap_bytes: bytes between consecutive pages of the pool beyond a page (the paged
    families); 64 makes every other page start off a 128-byte line."""
    return family_of(problem).timing_inputs(problem, bucket, lens, device=device, seed=seed, sets=sets,
                                            min_pool_bytes=min_pool_bytes, max_pool_bytes=max_pool_bytes,
                                            page_gap_bytes=page_gap_bytes)


def time_candidate(module, input_sets, clean_logits: bool, method: str = "cuda_graph", replays: int = 30,
                   warmup_ms: float = DEFAULT_WARMUP_MS, budget_ms: float = DEFAULT_BUDGET_MS,
                   min_launches: int = 8, **graph_options) -> Timing:
    outs = [new_output(x, 0.0) for x in input_sets]
    fns = [lambda x=x, o=o: launch(module, x, o, clean_logits) for x, o in zip(input_sets, outs)]
    if method == "cuda_graph":
        return time_cuda_graph(fns, replays=replays, warmup_ms=warmup_ms, budget_ms=budget_ms,
                               min_launches=min_launches, **graph_options)
    if method == "wall_clock":
        return time_wall_clock(fns, reps=max(3, replays // 10))
    raise ValueError(f"method: expected 'cuda_graph' or 'wall_clock', got {method!r}")
