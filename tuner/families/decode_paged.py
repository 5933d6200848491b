"""Decode over the paged cache (`*_paged_mqa_logits`): B requests of next_n query rows each,
memory-bound (SPEC.md, "Decode")."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import torch

from indexer_logits._identity import Bucket, Config, DECODE_PAGED, Problem, default_scale_layout

from ..buckets import DECODE_LENS_MODES, DEFAULT_DECODE_CONTEXTS, SGLANG_DECODE_BATCHES
from ..gates import graph_gate, poison_gate
from ..inputs import DecodeInputs, make_decode_inputs, make_lens
from .base import Family, GateStep
from .typical import TILE_MAX_ARGS, TRITON_DTYPE, TYPICAL_BATCH, TYPICAL_CONTEXT, kv_descriptor, paged_strides


class DecodePaged(Family):
    kind = DECODE_PAGED
    template = "decode_paged.py.jinja"
    axes = {
        "block_t": (16, 32, 64, 128, 256),
        # Powers of two and 3x them: a decode kernel's time is ~fixed + tiles, and a grid that
        # just fills the resident slots of every SM in one wave (e.g. 6 programs of 33 KB per SM
        # at bt64 / 3 stages: 8192 tiles / 12 per program = 704 <= 792 slots) needs the 3x steps.
        "tiles_per_program": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32),
        "num_warps": (2, 4, 8),
        "num_stages": (1, 2, 3, 4),
        "block_m": (1,),
        "dot_dtype": ("native", "fp16", "bf16", "fp32"),
        "orient": ("q_rows", "k_rows"),
        "programs_per_sm": (0, 1, 2, 3, 4, 6, 8),
        # When the logits are written: after each tile, or once after the program's run (fewer
        # writes between the cache reads, more registers: a per-bucket choice, docs/PERF.md).
        "store": ("tile", "run"),
        # The weighted head sum as tl.sum or as a chain (tuner.families.prefill_common): under
        # Triton 3.7+ next_n = 2 pays +56 FP instructions a tile for the tree (1.05-1.08x on the
        # H200), next_n = 1 +28, hidden by its memory bound; the tuner decides per bucket.
        "head_sum": ("tree", "chain"),
    }
    default_batches = SGLANG_DECODE_BATCHES
    default_contexts = DEFAULT_DECODE_CONTEXTS
    timing_lens = DECODE_LENS_MODES
    bench_fills = ("full", "quarter")
    gate_shape_gpu = (4, 20480)
    verify_shape_gpu = (8, 4096)
    verify_shape_cpu = (2, 256)

    def problems(self, dtype: str, next_ns: Sequence[int], page_size: int, scale_layout: str | None, heads: int,
                 head_dim: int, lens_mode: str) -> list[Problem]:
        layout = scale_layout or default_scale_layout(dtype)
        return [Problem(family=self.name, q_dtype=dtype, cache_dtype=dtype, page_size=page_size, scale_layout=layout,
                        heads=heads, head_dim=head_dim, next_n=n, lens_mode=lens_mode)
                for n in sorted(set(next_ns))]

    def default_problems(self, dtype, page_size, heads, head_dim) -> list[Problem]:
        layout = default_scale_layout(dtype)
        return [Problem(self.name, dtype, dtype, page_size, layout, heads, head_dim, n, lens)
                for n in range(1, 5) for lens in ("1d", "2d")]

    def gate_shape_cpu(self, batches, contexts) -> tuple[int, int]:
        return min(2, min(batches)), min(contexts)

    def default_config(self, problem: Problem, dot_dtype: str = "native") -> Config:
        """The best general config of the H200 sweeps (docs/PERF.md): the key tile on the dot's M
        side (`k_rows`), 128 tokens per tile for 64 query rows, fewer when next_n * heads grows
        so the accumulator stays within 64 fp32 registers per thread at 4 warps."""
        rows = self.dot_rows(problem, None)
        per_rows = 8192 // max(rows, 1)  # a power of two (the tile axis) at most 8192 / rows
        block_t = max(16, min(128, 1 << max(per_rows.bit_length() - 1, 0)))
        if problem.page_size > block_t and problem.page_size % block_t:
            block_t = 16
        return Config(block_t=block_t, tiles_per_program=4, num_warps=4, num_stages=2, block_m=1,
                      dot_dtype=dot_dtype, orient="k_rows")

    def dot_rows(self, problem: Problem, config: Config | None) -> int:
        return problem.next_n * problem.heads  # all next_n rows of a request share one dot

    def gate_inputs(self, problem, batch, context, seed, device):
        return make_decode_inputs(problem, batch, context, "random", seed=seed, device=device)

    def verify_inputs(self, problem, shape, seed, device):
        return make_decode_inputs(problem, shape[0], shape[1], "random", seed=seed, device=device)

    def timing_inputs(self, problem, bucket, lens, *, device, seed, sets, min_pool_bytes, max_pool_bytes,
                      page_gap_bytes):
        """Sets that share one pool larger than the L2 (a replay cannot be served from cache) and
        differ in their block tables."""
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

    def partial_timing_inputs(self, problem: Problem, bucket: Bucket, sets: list, seed: int) -> list:
        lens = make_lens(problem, bucket.batch, bucket.context, "quarter", seed + 5).to(sets[0].context_lens.device)
        return [replace(x, context_lens=lens) for x in sets]  # same pool: no second copy

    def mock_inputs(self, problem, batch, context):
        meta = lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta")  # noqa: E731
        qdtype = torch.float8_e4m3fn if problem.q_dtype == "fp8" else torch.bfloat16
        h, d = problem.heads, problem.head_dim
        # The page stride comes from a tiny real cache built the way the timing inputs are.
        small = make_decode_inputs(problem, 1, 2 * problem.page_size, "full", pool_factor=2.0)
        cache = small.kv_cache
        kv_cache = torch.empty_strided((2,) + tuple(cache.shape[1:]), cache.stride(), dtype=cache.dtype, device="meta")
        n, max_pages = problem.next_n, -(-context // problem.page_size)
        lens = meta((batch,) if problem.lens_mode == "1d" else (batch, n), torch.int32)
        return DecodeInputs(meta((batch, n, h, d), qdtype), kv_cache, meta((batch * n, h), torch.float32), lens,
                            meta((batch, max_pages), torch.int32), context, problem.scale_layout)

    def gate_steps(self, problem: Problem) -> list[GateStep]:
        return [("poison", lambda m, p, x, clean, seed: poison_gate(m, x, clean)),
                ("graph", lambda m, p, x, clean, seed: graph_gate(m, p, x, clean, seed))]

    def typical_args(self, problem: Problem, config: Config | None) -> dict[str, Any]:
        dt, h, d = TRITON_DTYPE[problem.cache_dtype], problem.heads, problem.head_dim
        page_stride, scale_ptr, scale_page_stride = paged_strides(problem)
        return {
            "q_ptr": f"*{dt}", "kv_ptr": f"*{dt}", "kv_desc": kv_descriptor(problem, config), "scale_ptr": scale_ptr,
            "w_ptr": "*fp32", "lens_ptr": "*i32", "bt_ptr": "*i32", "out_ptr": "*fp32",
            "q_stride_b": problem.next_n * h * d, "q_stride_n": h * d,
            "page_stride": page_stride, "scale_page_stride": scale_page_stride, "w_stride": h,
            "lens_stride": problem.next_n if problem.lens_mode == "2d" else 0,
            "bt_stride": TYPICAL_CONTEXT // problem.page_size, "out_stride": TYPICAL_CONTEXT,
            "max_context_len": TYPICAL_CONTEXT, "batch": TYPICAL_BATCH,
            "bt_cols": TYPICAL_CONTEXT // problem.page_size,  # the block table's width (bt_stride if contiguous)
            "guess_per": 16,  # the split grid's tiles per program for a request that fills the table
            # the top-k's tile maxima (launch(tile_max=...)), off as the logits calls launch it: None
            **dict.fromkeys(TILE_MAX_ARGS),
        }


FAMILY = DecodePaged()
