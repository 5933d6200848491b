"""Head counts, head dims and page sizes other than DeepSeek's 64 x 128 at page 64 (issue 26,
item 2): vLLM's and DeepGEMM 54e2261's tests call with H=32 and D=64 or 32, DeepGEMM 00b1d2d's
paged test with 32-token pages, and a tensor-parallel split of 64 heads gives 32 or 16. The
family defaults cover H in {16, 32, 64, 128} x D in {32, 64, 128}, and the paged families over
an fp8 cache at pages 64 and 32, so a kernel (the "default" rung, never the torch reference)
serves each of them, on CPU under the interpreter and on the GPU, with DeepGEMM's pass
criterion and the exact -inf mask."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import indexer_logits as K
from indexer_logits import _chunked, _decode, _prefill
from indexer_logits._dispatch import TABLES_DIR
from indexer_logits._identity import Problem
from tuner import tables
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
from tuner.reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref

SHAPES = [(32, 64), (16, 128), (128, 64), (32, 128), (128, 128), (32, 32), (64, 32)]
PAGE32 = [(64, 128), (32, 32), (16, 64)]  # (heads, head_dim) at 32-token pages


@pytest.fixture(autouse=True)
def _clean(clean_runtime):
    yield


@pytest.fixture
def no_reference(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("the torch reference served a call a kernel should serve")

    monkeypatch.setattr(_prefill, "mqa_logits_ref", boom)
    monkeypatch.setattr(_decode, "paged_mqa_logits_ref", boom)
    monkeypatch.setattr(_chunked, "paged_mqa_logits_chunked_ref", boom)


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def test_every_head_count_dim_and_page_has_a_default():
    problems = {(p.family, p.q_dtype, p.page_size, p.heads, p.head_dim, p.next_n, p.lens_mode)
                for p in tables.default_problems()}
    for heads in (16, 32, 64, 128):
        for dim in (32, 64, 128):
            for dtype in ("fp8", "bf16"):
                assert ("prefill_ragged", dtype, 0, heads, dim, 1, "1d") in problems
                for page in ((64, 32) if dtype == "fp8" else (64,)):
                    assert ("prefill_paged", dtype, page, heads, dim, 1, "1d") in problems
                    for n in (1, 2, 4):
                        for lens in ("1d", "2d"):
                            assert ("decode_paged", dtype, page, heads, dim, n, lens) in problems
    assert not any(p.page_size == 32 and p.cache_dtype == "bf16" for p in tables.default_problems())


def test_the_committed_defaults_serve_them():
    """default/dispatch.json has a native and an interpreter variant for each default problem
    whose dot rows are a power of two (next_n = 3 has none)."""
    table = K.load_table(Path(TABLES_DIR) / "default" / "dispatch.json", "default")
    for p in tables.default_problems():
        if p.next_n == 3:
            continue
        for section in ("defaults", "interpreter_defaults"):
            variant = table[section].get(p.key)
            assert variant and f"__{p.slug}__" in variant, (section, p.slug)


def _gpu_scale(device: str, small: int, large: int) -> int:
    return small if device == "cpu" else large


@pytest.mark.parametrize("heads,dim", SHAPES, ids=[f"h{h}_d{d}" for h, d in SHAPES])
@pytest.mark.parametrize("next_n", [1, 2])
def test_decode_is_served_by_a_kernel(heads, dim, next_n, device, no_reference):
    problem = Problem(heads=heads, head_dim=dim, next_n=next_n)
    _decode_is_served(problem, _gpu_scale(device, 2, 64), _gpu_scale(device, 192, 8192), heads + dim + next_n, device,
                      f"h{heads}_d{dim}")


def _decode_is_served(problem: Problem, batch: int, width: int, seed: int, device: str, part: str) -> None:
    """The kernel rung serves the decode problem (its variant names `part`) and matches the reference."""
    x = make_decode_inputs(problem, batch, width, seed=seed, device=device)
    sel = K.paged_selection(*x.args())
    assert sel.rung != "reference" and sel.variant and part in sel.variant, sel
    out = K.fp8_paged_mqa_logits(*x.args()[:5], None, x.max_context_len, True)
    ref = paged_mqa_logits_ref(*x.args())
    valid = x.valid_mask()
    assert calc_diff(out.masked_fill(~valid, 0), ref.masked_fill(~valid, 0)) < 1e-3
    assert torch.equal(torch.isneginf(out), ~valid)


@pytest.mark.parametrize("heads,dim", SHAPES, ids=[f"h{h}_d{d}" for h, d in SHAPES])
def test_prefill_is_served_by_a_kernel(heads, dim, device, no_reference):
    problem = Problem(family="prefill_ragged", page_size=0, heads=heads, head_dim=dim)
    rows, keys = _gpu_scale(device, 8, 1024), _gpu_scale(device, 40, 8192)
    x = make_prefill_inputs(problem, rows, keys, "random", seed=heads * dim, device=device)
    sel = K.ragged_selection(*x.args())
    assert sel.rung != "reference" and f"h{heads}_d{dim}" in sel.variant, sel
    out = K.fp8_mqa_logits(*x.args(), clean_logits=True)
    ref = mqa_logits_ref(*x.args(), True)
    valid = x.valid_mask()
    assert calc_diff(out.masked_fill(~valid, 0), ref.masked_fill(~valid, 0)) < 1e-3
    assert torch.equal(torch.isneginf(out), ~valid)


@pytest.mark.parametrize("heads,dim", PAGE32, ids=[f"h{h}_d{d}" for h, d in PAGE32])
@pytest.mark.parametrize("next_n,lens", [(1, "1d"), (2, "2d")])
def test_page32_decode_is_served_by_a_kernel(heads, dim, next_n, lens, device, no_reference):
    problem = Problem(page_size=32, heads=heads, head_dim=dim, next_n=next_n, lens_mode=lens)
    _decode_is_served(problem, _gpu_scale(device, 3, 64), _gpu_scale(device, 160, 8192), heads + dim, device,
                      f"pg32_h{heads}_d{dim}")


@pytest.mark.parametrize("heads,dim", PAGE32, ids=[f"h{h}_d{d}" for h, d in PAGE32])
def test_page32_chunked_prefill_is_served_by_a_kernel(heads, dim, device, no_reference):
    problem = Problem(family="prefill_paged", page_size=32, heads=heads, head_dim=dim)
    rows, width = _gpu_scale(device, 10, 512), _gpu_scale(device, 160, 8192)
    x = make_prefill_paged_inputs(problem, rows, width, seed=heads * dim, device=device)
    sel = K.chunked_selection(*x.args())
    assert sel.rung != "reference" and f"pg32_h{heads}_d{dim}" in sel.variant, sel
    out = K.fp8_paged_mqa_logits_chunked(*x.args())
    ref = paged_mqa_logits_chunked_ref(*x.args())
    valid = ~torch.isneginf(ref)
    assert calc_diff(out.masked_fill(~valid, 0), ref.masked_fill(~valid, 0)) < 1e-3
    assert torch.equal(torch.isneginf(out), ~valid)
