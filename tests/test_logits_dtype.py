"""bf16 logits (DeepGEMM 54e2261's logits_dtype=torch.bfloat16): served by the same kernels as
float32, whose tl.store converts the fp32 sums to the output pointer's bf16.

What is checked, against the same call with float32 logits (never the torch reference, which
is patched to fail, and the dispatch rung is asserted):
- the output's dtype, shape and -inf mask;
- its values are the float32 logits rounded to bf16: on the GPU exactly `.to(torch.bfloat16)`
  (round to nearest even: Triton emits cvt.rn.bf16.f32 for sm_90 and sm_120); under the CPU
  interpreter, which truncates instead, one of the two bf16 neighbours of the float32 value;
- an out= buffer of bf16 is written and returned; a float32 one is refused for bf16 logits;
- on the GPU, a shape's bf16 and float32 calls are two keys of the cached launch, and the bf16
  replay is the full path bit for bit.
CPU: `.venv/bin/python -m pytest -q tests/test_logits_dtype.py`; GPU (H200):
`python3 -m pytest -q -m gpu tests/test_logits_dtype.py`.
"""

from __future__ import annotations

import pytest
import torch

import indexer_logits as K
from indexer_logits import _decode, _fastpath, _prefill
from indexer_logits._identity import Problem
from tuner.inputs import make_decode_inputs, make_prefill_inputs

from conftest import INTERPRET

BF16 = torch.bfloat16


@pytest.fixture(autouse=True)
def kernel_only(clean_runtime, monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("the torch reference served a call a kernel should serve")

    monkeypatch.setattr(_prefill, "mqa_logits_ref", boom)
    monkeypatch.setattr(_decode, "paged_mqa_logits_ref", boom)
    monkeypatch.delenv(_fastpath.ENV_FAST_LAUNCH, raising=False)
    _fastpath.clear()
    yield
    _fastpath.clear()


def bf16_neighbours(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The bf16 values either side of each finite float32 (toward zero, and one bf16 step away)."""
    bits = x.contiguous().view(torch.int32)
    toward_zero = (bits & -65536).view(torch.float32)
    away = (bits.masked_fill(~torch.isfinite(x), 0) & -65536) + 65536
    return toward_zero, away.view(torch.float32)


def assert_rounded(b: torch.Tensor, a: torch.Tensor) -> None:
    """b (bf16) is a (float32) rounded: exactly RNE on the GPU, a bf16 neighbour under the interpreter."""
    assert b.dtype == BF16 and b.shape == a.shape
    assert torch.equal(torch.isneginf(b), torch.isneginf(a)), "the -inf mask differs from the float32 call's"
    if not INTERPRET:
        assert torch.equal(b, a.to(BF16)), "bf16 logits are not the float32 logits rounded to nearest even"
        return
    finite = torch.isfinite(a)
    low, high = bf16_neighbours(a)
    got = b.float()
    ok = (got == low) | (got == high)
    assert bool(ok[finite].all()), f"{int((~ok & finite).sum())} bf16 logits are not a neighbour of the float32 value"


def test_the_neighbour_check_can_fail():
    a = torch.tensor([1.0, -2.7643239, 3.8108227, float("-inf")])
    assert_rounded(a.to(BF16), a)
    low, high = bf16_neighbours(a)
    assert low[1] == -2.75 and high[1] == -2.765625 and low[2] == 3.796875 and high[2] == 3.8125
    wrong = a.to(BF16).clone()
    wrong[2] = 3.828125  # two bf16 steps off
    with pytest.raises(AssertionError):
        assert_rounded(wrong, a)
    masked = a.to(BF16).clone()
    masked[0] = float("-inf")
    with pytest.raises(AssertionError, match="-inf mask"):
        assert_rounded(masked, a)


DECODE = [("fp8", 1, "1d"), ("fp8", 2, "2d"), ("bf16", 2, "1d")]


@pytest.mark.parametrize("dtype,next_n,lens", DECODE, ids=["-".join(map(str, c)) for c in DECODE])
def test_decode_bf16_logits_are_the_kernels_logits_rounded(dtype, next_n, lens, device):
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, next_n=next_n, lens_mode=lens,
                      scale_layout="page_blocked" if dtype == "fp8" else "none")
    fn = K.fp8_paged_mqa_logits if dtype == "fp8" else K.bf16_paged_mqa_logits
    batch, width = (3, 320) if INTERPRET else (64, 8192)
    x = make_decode_inputs(problem, batch, width, seed=next_n, device=device)
    a = x.args()
    assert K.paged_selection(*a).rung in ("exact", "nearest", "predicted", "default")
    want = fn(*a[:5], None, a[5], True)
    got = fn(*a[:5], None, a[5], True, logits_dtype=BF16)
    assert_rounded(got, want)
    assert torch.equal(torch.isneginf(got), ~x.valid_mask())


def test_decode_bf16_logits_into_an_out_buffer(device):
    x = make_decode_inputs(Problem(next_n=2, lens_mode="2d"), 2, 192, seed=5, device=device)
    a = x.args()
    want = K.fp8_paged_mqa_logits(*a[:5], None, a[5], False)
    buf = torch.full((4, 192 + 64), 7.0, dtype=BF16, device=device)
    got = K.fp8_fp4_paged_mqa_logits((a[0], None), *a[1:5], None, a[5], False, BF16, out=buf)
    assert got.data_ptr() == buf.data_ptr() and tuple(got.shape) == (4, 192)
    valid = x.valid_mask()
    assert_rounded(got.masked_fill(~valid, float("-inf")), want.masked_fill(~valid, float("-inf")))
    assert bool((buf[:, 192:] == 7.0).all())
    with pytest.raises(ValueError, match=r"^out: expected dtype torch.bfloat16"):
        K.fp8_paged_mqa_logits(*a[:5], None, a[5], False, out=torch.empty(4, 192, device=device),
                               logits_dtype=BF16)


@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
@pytest.mark.parametrize("compressed", [False, True], ids=["wide", "compressed"])
def test_prefill_bf16_logits_are_the_kernels_logits_rounded(dtype, compressed, device):
    problem = (Problem(family="prefill_ragged", page_size=0) if dtype == "fp8" else
               Problem(family="prefill_ragged", page_size=0, q_dtype="bf16", cache_dtype="bf16", scale_layout="none"))
    fn = K.fp8_fp4_mqa_logits if dtype == "fp8" else K.bf16_mqa_logits
    rows, keys = (8, 96) if INTERPRET else (512, 4096)
    x = make_prefill_inputs(problem, rows, keys, "random", seed=11, device=device)
    width = int((x.cu_seqlen_ke - x.cu_seqlen_ks).max()) if compressed else 0
    q = (x.q, None) if dtype == "fp8" else x.q
    assert K.ragged_selection(*x.args(), max_seqlen_k=width).rung in ("exact", "nearest", "predicted", "default")
    args = (q, x.kv, x.weights, x.cu_seqlen_ks, x.cu_seqlen_ke)
    want = fn(*args, clean_logits=True, max_seqlen_k=width)
    got = fn(*args, clean_logits=True, max_seqlen_k=width, logits_dtype=BF16)
    assert_rounded(got, want)


# ---------------------------------------------------------------------------------------------
# GPU: the cached launch keeps bf16 and float32 apart, and replays bf16 as the full path does.


@pytest.mark.gpu
def test_gpu_bf16_and_float32_are_two_cached_launches(monkeypatch):
    problem = Problem()
    x = make_decode_inputs(problem, 16, 4096, seed=21, device="cuda")
    a = x.args()
    f32 = K.fp8_paged_mqa_logits(*a[:5], None, a[5], True)
    b16 = K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, logits_dtype=BF16)
    assert f32.dtype == torch.float32 and b16.dtype == BF16 and len(_fastpath.replays()) == 2
    y = make_decode_inputs(problem, 16, 4096, seed=22, device="cuda")
    b = y.args()
    again = K.fp8_paged_mqa_logits(*b[:5], None, b[5], True, logits_dtype=BF16)
    assert again.dtype == BF16 and sum(r.calls for r in _fastpath.replays().values()) == 1
    monkeypatch.setenv(_fastpath.ENV_FAST_LAUNCH, "0")
    assert torch.equal(again, K.fp8_paged_mqa_logits(*b[:5], None, b[5], True, logits_dtype=BF16))
    assert_rounded(again, K.fp8_paged_mqa_logits(*b[:5], None, b[5], True))


@pytest.mark.gpu
def test_gpu_bf16_logits_in_a_cuda_graph_without_a_sync():
    problem = Problem(next_n=2, lens_mode="2d")
    x = make_decode_inputs(problem, 32, 8192, seed=23, device="cuda")
    a = x.args()
    out = torch.empty(64, 8192, dtype=BF16, device="cuda")
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], False, out=out, logits_dtype=BF16)  # records
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        K.fp8_paged_mqa_logits(*a[:5], None, a[5], False, out=out, logits_dtype=BF16)  # no host synchronisation
    finally:
        torch.cuda.set_sync_debug_mode(0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        K.fp8_paged_mqa_logits(*a[:5], None, a[5], False, out=out, logits_dtype=BF16)
    out.zero_()
    graph.replay()
    want = K.fp8_paged_mqa_logits(*a[:5], None, a[5], False)
    valid = x.valid_mask()
    assert torch.equal(out.masked_fill(~valid, 0), want.to(BF16).masked_fill(~valid, 0))
