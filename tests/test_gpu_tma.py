"""The bulk-copy (TMA) path of the shipped paged kernels on a real GPU, at the edges of the cache
pool: no pages, one page (whose stride the launcher cannot read off the tensor), pages at a
stride TMA cannot take (the per-thread-load fallback), and the usual scattered pool. Each call
must match the reference. Run on a GPU host: python3 -m pytest -q -s -m gpu tests/test_gpu_tma.py
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from _helpers import check_output

from tuner.inputs import make_decode_inputs, make_prefill_paged_inputs
from indexer_logits._identity import Config, Problem
from tuner.reference import paged_mqa_logits_chunked_ref, paged_mqa_logits_ref
from tuner.render import emit, load_module

DECODE = Problem()  # fp8, H=64, D=128, page 64, page-blocked, next_n 1
PREFILL = Problem(family="prefill_paged")
TMA_DECODE = Config(block_t=64, tiles_per_program=8, num_warps=4, num_stages=3, orient="k_rows")
TMA_PREFILL = Config(block_t=64, tiles_per_program=4, num_warps=4, num_stages=3, block_m=4, orient="k_rows")


def _padded_nan(rows: int, cols: int):
    """A NaN-filled output with 3 spare columns a row, which must stay NaN."""
    buf = torch.full((rows, cols + 3), float("nan"), device="cuda")
    return buf, buf[:, :cols]


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["no_pages", "one_page", "gap4", "gap64"])
def test_decode_tma_edges(case, tmp_path):
    module = load_module(emit(DECODE, TMA_DECODE, tmp_path))
    if case == "no_pages":
        x = make_decode_inputs(DECODE, 2, 256, [0, 0], seed=1, device="cuda")
        x = replace(x, kv_cache=x.kv_cache[:0])
    elif case == "one_page":
        x = make_decode_inputs(DECODE, 1, 64, [50], seed=2, device="cuda", pool_factor=1.0)
        assert x.kv_cache.shape[0] == 1
    else:
        x = make_decode_inputs(DECODE, 3, 700, "random", seed=3, device="cuda", page_gap_bytes=int(case[3:]))
    buf, out = _padded_nan(x.q.shape[0] * x.q.shape[1], x.max_context_len)
    module.launch(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, out, x.max_context_len, True)
    ref = paged_mqa_logits_ref(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in x.args()],
                               scale_layout=x.scale_layout)
    check_output(buf, out, ref.to(out.device), x.valid_mask(), True, "the valid rule")


@pytest.mark.gpu
@pytest.mark.parametrize("gap", [4, 64])
def test_prefill_paged_tma_and_fallback(gap, tmp_path):
    module = load_module(emit(PREFILL, TMA_PREFILL, tmp_path))
    x = make_prefill_paged_inputs(PREFILL, 40, 700, num_requests=3, seed=4, device="cuda", page_gap_bytes=gap)
    buf, out = _padded_nan(40, 700)
    module.launch(x.q, x.kv_cache, x.weights, x.row_request, x.row_limit, x.block_table, out, 700, True)
    ref = paged_mqa_logits_chunked_ref(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in x.args()],
                                       scale_layout=x.scale_layout)
    check_output(buf, out, ref.to(out.device), x.valid_mask(), True, "the chunk rule")
