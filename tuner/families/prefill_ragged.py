"""Prefill over ragged K (`*_mqa_logits`): M query rows, each with its own key window [ks, ke),
compute-bound (SPEC.md, "Prefill")."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from indexer_logits._identity import Config, PREFILL_RAGGED, Problem, default_scale_layout

from ..buckets import DEFAULT_PREFILL_KEYS, DEFAULT_PREFILL_ROWS
from ..inputs import PrefillInputs, make_prefill_inputs
from .prefill_common import PrefillFamily
from .typical import TILE_MAX_ARGS, TRITON_DTYPE, TYPICAL_KEYS, TYPICAL_ROWS


class PrefillRagged(PrefillFamily):
    kind = PREFILL_RAGGED
    # How a key tile is loaded: per-thread cp.async ('threads') or one bulk tensor copy ('tma', no
    # per-tile proxy fence under Triton 3.7+; templates/_k_load.py.jinja).
    axes = {**PrefillFamily.axes, "k_load": ("threads", "tma")}
    template = "prefill_ragged.py.jinja"
    default_batches = DEFAULT_PREFILL_ROWS
    default_contexts = DEFAULT_PREFILL_KEYS
    bench_fills = ("causal",)
    gate_shape_gpu = (256, 2048)
    unused_options = ("page_size", "next_n", "lens_mode")

    def problems(self, dtype: str, next_ns: Sequence[int], page_size: int, scale_layout: str | None, heads: int,
                 head_dim: int, lens_mode: str) -> list[Problem]:
        layout = scale_layout or default_scale_layout(dtype)
        if layout == "token_interleaved":
            raise ValueError("scale_layout: prefill_ragged keeps scales in a separate tensor; "
                             "use page_blocked (fp8) or none (bf16)")
        if any(n != 1 for n in next_ns):
            raise ValueError(f"next_n: prefill_ragged takes next_n=1, got {list(next_ns)}")
        if lens_mode != "1d":
            raise ValueError(f"lens_mode: prefill_ragged takes lens_mode='1d' (each row has its own window), "
                             f"got {lens_mode!r}")
        return [Problem(family=self.name, q_dtype=dtype, cache_dtype=dtype, page_size=0, scale_layout=layout,
                        heads=heads, head_dim=head_dim, next_n=1, lens_mode="1d")]

    def check_buckets(self, batches, contexts) -> None:
        too_few = [(r, k) for r in batches for k in contexts if k < r]
        if too_few:
            raise ValueError(f"context: prefill keys must be >= query rows (causal windows), got rows/keys {too_few[:4]}")

    def gate_inputs(self, problem, batch, context, seed, device):
        return make_prefill_inputs(problem, batch, context, "random", seed=seed, device=device)

    def verify_inputs(self, problem, shape, seed, device):
        return make_prefill_inputs(problem, shape[0], shape[1], "causal", seed=seed, device=device,
                                   num_seqs=min(2, shape[0]))

    def timing_inputs(self, problem, bucket, lens, *, device, seed, sets, min_pool_bytes, max_pool_bytes,
                      page_gap_bytes):
        # "full" and "causal": one causal sequence whose last `batch` positions are the rows (what
        # tune times); anything else: the rows split over several shorter sequences.
        return [make_prefill_inputs(problem, bucket.batch, bucket.context, seed=seed, device=device,
                                    num_seqs=1 if lens in ("full", "causal") else max(1, bucket.batch // 512))]

    def mock_inputs(self, problem, batch, context):
        meta = lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta")  # noqa: E731
        qdtype = torch.float8_e4m3fn if problem.q_dtype == "fp8" else torch.bfloat16
        h, d = problem.heads, problem.head_dim
        kv = (meta((context, d), qdtype),) + ((meta((context,), torch.float32),) if problem.cache_dtype == "fp8" else ())
        return PrefillInputs(meta((batch, h, d), qdtype), kv, meta((batch, h), torch.float32),
                             meta((batch,), torch.int32), meta((batch,), torch.int32))

    def typical_args(self, problem: Problem, config: Config | None) -> dict[str, Any]:
        dt, h, d = TRITON_DTYPE[problem.cache_dtype], problem.heads, problem.head_dim
        return {
            "q_ptr": f"*{dt}", "k_ptr": f"*{dt}",
            # the key tile's TMA descriptor (k_load 'tma'; only a kernel's own parameters are looked up)
            "k_desc": f"tensordesc<{dt}[{config.block_t if config else 64}, {d}]>",
            "k_scale_ptr": "*fp32" if problem.cache_dtype == "fp8" else f"*{dt}",
            "w_ptr": "*fp32", "ks_ptr": "*i32", "ke_ptr": "*i32", "out_ptr": "*fp32",
            "q_stride": h * d, "k_stride": d, "w_stride": h, "out_stride": TYPICAL_KEYS,
            "num_rows": TYPICAL_ROWS, "num_keys": TYPICAL_KEYS,
            # the top-k's tile maxima (launch(tile_max=...)), off as the logits calls launch it: None
            **dict.fromkeys(TILE_MAX_ARGS),
        }


FAMILY = PrefillRagged()
