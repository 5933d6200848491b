"""Chunked prefill over the paged cache (`*_paged_mqa_logits_chunked`): many query rows per
request read straight from the decode cache, each row with its own limit (SPEC.md, "Chunked
prefill over the paged cache"). Compute-bound like prefill."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from indexer_logits._identity import Config, PREFILL_PAGED, Problem, default_scale_layout

from ..buckets import DEFAULT_CHUNKED_WIDTHS, DEFAULT_PREFILL_ROWS
from ..gates import chunked_graph_gate, poison_gate
from ..inputs import PrefillPagedInputs, make_prefill_paged_inputs
from .base import GateStep
from .prefill_common import PREFILL_AXES, PrefillFamily
from .typical import TRITON_DTYPE, TYPICAL_CONTEXT, TYPICAL_ROWS, kv_descriptor, paged_strides


class PrefillPaged(PrefillFamily):
    kind = PREFILL_PAGED
    template = "prefill_paged.py.jinja"
    # It reads the paged cache like decode and offers its 16-token tiles too.
    axes = {**PREFILL_AXES, "block_t": (16, 32, 64, 128, 256)}
    default_batches = DEFAULT_PREFILL_ROWS
    default_contexts = DEFAULT_CHUNKED_WIDTHS
    bench_fills = ("full",)  # the rows at the end of full tables, as tune times them
    gate_shape_gpu = (256, 20480)

    def problems(self, dtype: str, next_ns: Sequence[int], page_size: int, scale_layout: str | None, heads: int,
                 head_dim: int, lens_mode: str) -> list[Problem]:
        # The decode cache (page size, scale layout as for decode); each query row has its own limit.
        layout = scale_layout or default_scale_layout(dtype)
        if any(n != 1 for n in next_ns):
            raise ValueError(f"next_n: prefill_paged takes next_n=1 (each query row has its own limit), "
                             f"got {list(next_ns)}")
        if lens_mode != "1d":
            raise ValueError(f"lens_mode: prefill_paged takes lens_mode='1d' (each query row has its own limit), "
                             f"got {lens_mode!r}")
        return [Problem(family=self.name, q_dtype=dtype, cache_dtype=dtype, page_size=page_size, scale_layout=layout,
                        heads=heads, head_dim=head_dim, next_n=1, lens_mode="1d")]

    def default_tile(self, problem: Problem) -> int:
        # prefill's tile, kept within or a multiple of the page (64 divides or is a multiple of
        # every served page size; 16 for a page it would split unevenly)
        return 16 if problem.page_size > 64 and problem.page_size % 64 else 64

    def gate_inputs(self, problem, batch, context, seed, device):
        # rows over 3 requests, more where a chunk would pass the width
        return make_prefill_paged_inputs(problem, batch, context, num_requests=max(3, -(-batch // context) + 1),
                                         seed=seed, device=device)

    def verify_inputs(self, problem, shape, seed, device):
        # rows over 2 requests, chunks at p0 > 0
        return make_prefill_paged_inputs(problem, shape[0], shape[1], num_requests=min(2, shape[0]), seed=seed,
                                         device=device)

    def timing_inputs(self, problem, bucket, lens, *, device, seed, sets, min_pool_bytes, max_pool_bytes,
                      page_gap_bytes):
        """bucket.batch query rows against a table of bucket.context tokens. lens="full": the rows
        are the last positions of one request's full table (row r of the chunk at p0 = context -
        rows sees t <= p0 + r; more rows than the context are split over requests). Otherwise the
        rows are split over a few requests (2 to 4) at random chunk starts. One input set: the
        pages of a request are reused by all its rows anyway."""
        rows, width = bucket.batch, bucket.context
        if lens == "full":
            n = -(-rows // width)
            chunk_lens = [rows // n + (i < rows % n) for i in range(n)]
            return [make_prefill_paged_inputs(problem, rows, width, chunk_lens=chunk_lens,
                                              chunk_starts=[width - v for v in chunk_lens], seed=seed, device=device,
                                              pool_factor=1.0, page_gap_bytes=page_gap_bytes)]
        n = max(2, min(4, rows // 512), -(-rows // width))
        return [make_prefill_paged_inputs(problem, rows, width, num_requests=n, seed=seed, device=device,
                                          pool_factor=1.0, page_gap_bytes=page_gap_bytes)]

    def mock_inputs(self, problem, batch, context):
        meta = lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta")  # noqa: E731
        qdtype = torch.float8_e4m3fn if problem.q_dtype == "fp8" else torch.bfloat16
        h, d = problem.heads, problem.head_dim
        # As timing_inputs: the rows over ceil(rows / width) requests, a pool of exactly their
        # pages; the page stride from a tiny real cache built the same way (the launcher reads the
        # stride only when the pool holds more than one page).
        small = make_prefill_paged_inputs(problem, 1, 2 * problem.page_size, num_requests=1, pool_factor=1.0)
        cache = small.kv_cache
        requests, max_pages = -(-batch // context), -(-context // problem.page_size)
        kv_cache = torch.empty_strided((min(2, requests * max_pages),) + tuple(cache.shape[1:]), cache.stride(),
                                       dtype=cache.dtype, device="meta")
        return PrefillPagedInputs(meta((batch, h, d), qdtype), kv_cache, meta((batch, h), torch.float32),
                                  meta((batch,), torch.int32), meta((batch,), torch.int32),
                                  meta((requests, max_pages), torch.int32), context, problem.scale_layout)

    def gate_steps(self, problem: Problem) -> list[GateStep]:
        return [("poison", lambda m, p, x, clean, seed: poison_gate(m, x, clean)),
                ("graph", lambda m, p, x, clean, seed: chunked_graph_gate(m, x, clean, seed))]

    def typical_args(self, problem: Problem, config: Config | None) -> dict[str, Any]:
        """TYPICAL_ROWS rows over a TYPICAL_CONTEXT table."""
        dt, h, d = TRITON_DTYPE[problem.cache_dtype], problem.heads, problem.head_dim
        page_stride, scale_ptr, scale_page_stride = paged_strides(problem)
        return {
            "q_ptr": f"*{dt}", "kv_ptr": f"*{dt}", "kv_desc": kv_descriptor(problem, config), "scale_ptr": scale_ptr,
            "w_ptr": "*fp32", "req_ptr": "*i32", "limit_ptr": "*i32", "bt_ptr": "*i32", "out_ptr": "*fp32",
            "q_stride": h * d, "page_stride": page_stride, "scale_page_stride": scale_page_stride, "w_stride": h,
            "bt_stride": TYPICAL_CONTEXT // problem.page_size, "out_stride": TYPICAL_CONTEXT,
            "num_rows": TYPICAL_ROWS, "max_context_len": TYPICAL_CONTEXT,
        }


FAMILY = PrefillPaged()
