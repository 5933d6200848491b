"""Timing inputs and the timing of one candidate on one bucket.

Decode inputs for timing share one page pool larger than the L2 (so a replay cannot be served
from cache) and differ in their block tables, which the captured graph cycles through.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .gates import launch, new_output
from .inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
from indexer_logits._identity import Bucket, Problem
from .timing import DEFAULT_WARMUP_MS, Timing, time_cuda_graph, time_wall_clock

MIN_POOL_BYTES = 1 << 30  # >> the 50-60 MB L2 of current GPUs
MAX_POOL_BYTES = 24 << 30


def timing_inputs(problem: Problem, bucket: Bucket, lens="full", *, device="cuda", seed: int = 0,
                  sets: int = 4, min_pool_bytes: int = MIN_POOL_BYTES, max_pool_bytes: int = MAX_POOL_BYTES,
                  page_gap_bytes: int = 64):
    """Input sets for timing one bucket; for decode they share one pool and differ in tables.
    page_gap_bytes: bytes between consecutive pages of the pool beyond a page (the paged
    families); 64 makes every other page start off a 128-byte line."""
    if problem.family == "prefill_paged":
        return [chunked_timing_inputs(problem, bucket, lens, device=device, seed=seed, page_gap_bytes=page_gap_bytes)]
    if not problem.is_decode:
        # "full" and "causal": one causal sequence whose last `batch` positions are the rows (what
        # tune times); anything else: the rows split over several shorter sequences.
        x = make_prefill_inputs(problem, bucket.batch, bucket.context, seed=seed, device=device,
                                num_seqs=1 if lens in ("full", "causal") else max(1, bucket.batch // 512))
        return [x]
    page_bytes = problem.page_size * problem.token_bytes + 64
    needed = bucket.batch * (-(-bucket.context // problem.page_size)) * page_bytes
    factor = max(1.0, min_pool_bytes / needed)
    base = make_decode_inputs(problem, bucket.batch, bucket.context, lens, seed=seed, device=device,
                              pool_factor=factor, max_pool_bytes=max_pool_bytes, page_gap_bytes=page_gap_bytes)
    out = [base]
    g = torch.Generator(device=base.block_table.device).manual_seed(seed + 17)
    num_pages = base.kv_cache.shape[0]
    for _ in range(sets - 1):
        ids = torch.randint(0, num_pages, base.block_table.shape, generator=g, device=base.block_table.device)
        out.append(replace(base, block_table=ids.to(torch.int32)))
    return out


def chunked_timing_inputs(problem: Problem, bucket: Bucket, lens="full", *, device="cuda", seed: int = 0,
                          page_gap_bytes: int = 64):
    """Chunked prefill: bucket.batch query rows against a table of bucket.context tokens.
    lens="full": the rows are the last positions of one request's full table (row r of the
    chunk at p0 = context - rows sees t <= p0 + r; more rows than the context are split over
    requests). Otherwise the rows are split over a few requests (2 to 4) at random chunk starts.
    Compute-bound: one input set (the pages of a request are reused by all its rows anyway)."""
    rows, width = bucket.batch, bucket.context
    if lens == "full":
        n = -(-rows // width)
        chunk_lens = [rows // n + (i < rows % n) for i in range(n)]
        return make_prefill_paged_inputs(problem, rows, width, chunk_lens=chunk_lens,
                                         chunk_starts=[width - v for v in chunk_lens], seed=seed, device=device,
                                         pool_factor=1.0, page_gap_bytes=page_gap_bytes)
    n = max(2, min(4, rows // 512), -(-rows // width))
    return make_prefill_paged_inputs(problem, rows, width, num_requests=n, seed=seed, device=device, pool_factor=1.0,
                                     page_gap_bytes=page_gap_bytes)


def time_candidate(module, input_sets, clean_logits: bool, method: str = "cuda_graph", replays: int = 30,
                   warmup_ms: float = DEFAULT_WARMUP_MS) -> Timing:
    outs = [new_output(x, 0.0) for x in input_sets]
    fns = [lambda x=x, o=o: launch(module, x, o, clean_logits) for x, o in zip(input_sets, outs)]
    if method == "cuda_graph":
        return time_cuda_graph(fns, replays=replays, warmup_ms=warmup_ms)
    if method == "wall_clock":
        return time_wall_clock(fns, reps=max(3, replays // 10))
    raise ValueError(f"method: expected 'cuda_graph' or 'wall_clock', got {method!r}")
