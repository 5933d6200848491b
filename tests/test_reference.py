"""The torch reference against the independent loop oracle, hand-computed values, the -inf mask,
its memory behaviour at a real size, and its argument checks."""

from __future__ import annotations

import random
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import _loop_oracle as oracle
from tuner.inputs import make_decode_inputs, make_prefill_inputs, poison_block_table
from indexer_logits._identity import Problem
from tuner.reference import mqa_logits_ref, paged_mqa_logits_ref

REPO = Path(__file__).resolve().parent.parent
INF = float("inf")

LAYOUTS = (("fp8", "page_blocked"), ("fp8", "token_interleaved"), ("bf16", "none"))
DECODE_CASES = [
    (dtype, layout, page, n, lens_mode, seed)
    for dtype, layout in LAYOUTS
    for page in (1, 32, 64, 128)
    for n in (1, 2, 3, 4)
    for lens_mode in ("1d", "2d")
    for seed in (0, 1)
]
PREFILL_CASES = [(dtype, seed) for dtype in ("fp8", "bf16") for seed in range(12)]
assert len(DECODE_CASES) + len(PREFILL_CASES) >= 200


def assert_matches_oracle(ref: torch.Tensor, expect: torch.Tensor, tol: float = 1e-5) -> None:
    """-inf exactly where the oracle says invalid; relative error < tol over the valid region."""
    assert ref.dtype == torch.float32
    assert tuple(ref.shape) == tuple(expect.shape)
    valid = torch.isfinite(expect)
    assert torch.equal(torch.isneginf(ref), ~valid), "-inf mask differs from the valid rule"
    assert bool(torch.isfinite(ref[valid]).all())
    if bool(valid.any()):
        r, e = ref[valid].double(), expect[valid]
        err = float((r - e).norm()) / max(float(e.norm()), 1e-30)
        assert err < tol, f"relative error {err:.3g}"


# ---------------------------------------------------------------------------------------------
# Random agreement with the loop oracle: 192 decode cases + 24 prefill cases.


@pytest.mark.parametrize("dtype,layout,page,n,lens_mode,seed", DECODE_CASES)
def test_paged_reference_matches_loop_oracle(dtype, layout, page, n, lens_mode, seed):
    rng = random.Random(f"{layout}-{page}-{n}-{lens_mode}-{seed}")
    heads = rng.choice((8, 16))
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, scale_layout=layout, page_size=page,
                      heads=heads, head_dim=32, next_n=n, lens_mode=lens_mode)
    batch = rng.randint(1, 3)
    width = rng.randint(1, 60) if page == 1 else rng.randint(1, 190)
    if seed == 0:
        lens = "random"
    else:  # explicit lengths, including empty requests and ones shorter than next_n
        lens = [rng.choice((0, 1, min(n, width), width, rng.randint(0, width))) for _ in range(batch)]
    inp = make_decode_inputs(problem, batch, width, lens, seed=rng.randrange(10**6),
                             page_gap_bytes=rng.choice((0, 4, 64)), ue8m0=rng.random() < 0.3)
    if rng.random() < 0.5:
        inp = poison_block_table(inp)  # neither side may read past the valid pages
    expect = oracle.paged_logits(*inp.args(), scale_layout=inp.scale_layout)
    ref = paged_mqa_logits_ref(*inp.args(), scale_layout=inp.scale_layout)
    assert_matches_oracle(ref, expect)
    # The oracle's mask must agree with the inputs' own notion of validity as well.
    assert torch.equal(torch.isfinite(expect), inp.valid_mask())


@pytest.mark.parametrize("dtype,seed", PREFILL_CASES)
def test_ragged_reference_matches_loop_oracle(dtype, seed):
    rng = random.Random(f"prefill-{dtype}-{seed}")
    layout = "page_blocked" if dtype == "fp8" else "none"
    problem = Problem(family="prefill_ragged", q_dtype=dtype, cache_dtype=dtype, scale_layout=layout,
                      page_size=0, heads=rng.choice((8, 16)), head_dim=32)
    rows = rng.randint(1, 12)
    keys = rng.randint(rows, 150)
    windows = "causal" if seed % 2 else "random"
    inp = make_prefill_inputs(problem, rows, keys, windows, seed=seed, num_seqs=rng.randint(1, rows))
    expect = oracle.ragged_logits(*inp.args())
    ref = mqa_logits_ref(*inp.args(), row_chunk=rng.choice((1, 4, 64)))
    assert_matches_oracle(ref, expect)
    assert torch.equal(torch.isfinite(expect), inp.valid_mask())


def test_reference_invalid_is_neg_inf_even_without_clean_logits():
    problem = Problem(heads=8, head_dim=32, page_size=32, next_n=2)
    inp = make_decode_inputs(problem, 3, 100, [0, 5, 77], seed=3)
    ref = paged_mqa_logits_ref(*inp.args(), clean_logits=False, scale_layout=inp.scale_layout)
    valid = inp.valid_mask()
    assert bool(torch.isneginf(ref[~valid]).all())
    assert bool(torch.isfinite(ref[valid]).all())
    # 1-D rule, by hand: request 1 (len 5, N=2): row 2 sees t <= 3, row 3 sees t <= 4.
    assert valid[2].nonzero().flatten().tolist() == [0, 1, 2, 3]
    assert valid[3].nonzero().flatten().tolist() == [0, 1, 2, 3, 4]
    assert not bool(valid[0].any()) and not bool(valid[1].any())


def test_reference_writes_into_out_and_ignores_stale_values():
    problem = Problem(heads=8, head_dim=32, page_size=32, next_n=1)
    inp = make_decode_inputs(problem, 2, 64, [10, 64], seed=4)
    buf = torch.full((2, 70), float("nan"))
    out = buf[:, :64]
    got = paged_mqa_logits_ref(*inp.args(), scale_layout=inp.scale_layout, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert not bool(torch.isnan(out).any())
    assert bool(torch.isnan(buf[:, 64:]).all())
    # What was written into `out` is the right answer, judged by the independent loop oracle
    # (not by a second call of the reference, which would share any bug of the out= path's code).
    expect = oracle.paged_logits(*inp.args(), scale_layout=inp.scale_layout)
    assert_matches_oracle(out, expect)
    assert bool(torch.isneginf(out[0, 10:]).all()) and bool(torch.isfinite(out[0, :10]).all())
    assert bool(torch.isfinite(out[1]).all())


# ---------------------------------------------------------------------------------------------
# Hand-computed values. fp8 e4m3fn bytes: 1.0=0x38 2.0=0x40 4.0=0x48 0.5=0x30 -1.0=0xB8 -2.0=0xC0.

FP8 = {0.0: 0x00, 0.5: 0x30, 1.0: 0x38, 2.0: 0x40, 4.0: 0x48, -1.0: 0xB8, -2.0: 0xC0}


def _fp8(values) -> bytes:
    return bytes(FP8[float(v)] for v in values)


def _fp8_tensor(values, shape) -> torch.Tensor:
    return torch.tensor(list(_fp8(values)), dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(shape)


def test_fp8_byte_table_is_right():
    for value, byte in FP8.items():
        assert torch.tensor([value]).to(torch.float8_e4m3fn).view(torch.uint8).item() == byte
        assert oracle.FP8_TABLE[byte] == value


def test_hand_token_interleaved_page1_relu_and_scale():
    # Two pages of one token each (D=4, H=2): page 0 is a decoy, the table points at page 1.
    decoy = _fp8([4.0, 4.0, 4.0, 4.0]) + struct.pack("<f", 100.0)
    token = _fp8([1.0, 2.0, 0.0, -1.0]) + struct.pack("<f", 0.5)
    kv_cache = torch.tensor(list(decoy + token), dtype=torch.uint8).view(2, 1, 1, 8)
    q = _fp8_tensor([1.0, 1.0, 1.0, 1.0, -1.0, 0.0, 0.0, 0.0], (1, 1, 2, 4))
    w = torch.tensor([[3.0, 100.0]])
    lens = torch.tensor([1], dtype=torch.int32)
    table = torch.tensor([[1, 0, 0]], dtype=torch.int32)
    # head 0: q.k = 1 + 2 + 0 - 1 = 2; head 1: q.k = -1 -> relu 0 (its weight 100 drops out);
    # logit = 0.5 * (3 * 2 + 100 * 0) = 3.0; positions 1 and 2 are past the length.
    got = paged_mqa_logits_ref(q, kv_cache, w, lens, table, 3, scale_layout="token_interleaved")
    assert got.tolist() == [[3.0, -INF, -INF]]
    assert oracle.paged_logits(q, kv_cache, w, lens, table, 3, "token_interleaved").tolist() == [[3.0, -INF, -INF]]


def _hand_page_blocked_cache() -> torch.Tensor:
    # One page of PAGE=2 tokens (D=4): values of both tokens, then both scales.
    # token 0: k=[1,0,0,0] scale 2.0; token 1: k=[0.5,0.5,0,0] scale 0.25.
    raw = _fp8([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0]) + struct.pack("<ff", 2.0, 0.25)
    return torch.tensor(list(raw), dtype=torch.uint8).view(1, 2, 1, 8)


def _hand_q_w():
    # draft token 0: h0=[2,4,0,0], h1=[-2,0,0,0], w=[1.5, 7]
    # draft token 1: h0=[1,0,0,0], h1=[0,1,0,0], w=[1, -3]
    q = _fp8_tensor([2.0, 4.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0,
                     1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0], (1, 2, 2, 4))
    w = torch.tensor([[1.5, 7.0], [1.0, -3.0]])
    return q, w


def test_hand_page_blocked_next_n2_1d_lens():
    kv_cache = _hand_page_blocked_cache()
    q, w = _hand_q_w()
    table = torch.tensor([[0]], dtype=torch.int32)
    lens = torch.tensor([2], dtype=torch.int32)  # 1-D, N=2: row 0 sees t <= 0, row 1 sees t <= 1
    # row 0, t=0: h0 q.k = 2 -> 1.5*2 = 3; h1 q.k = -2 -> 0; times scale 2.0 -> 6.0
    # row 1, t=0: h0 q.k = 1 -> 1; h1 q.k = 0 -> 0; times 2.0 -> 2.0
    # row 1, t=1: h0 q.k = 0.5 -> 0.5; h1 q.k = 0.5 -> -3*0.5 = -1.5; sum -1.0 times 0.25 -> -0.25
    expect = [[6.0, -INF], [2.0, -0.25]]
    got = paged_mqa_logits_ref(q, kv_cache, w, lens, table, 2, scale_layout="page_blocked")
    assert got.tolist() == expect
    assert oracle.paged_logits(q, kv_cache, w, lens, table, 2, "page_blocked").tolist() == expect
    # Row 0 of the [1, 2, 1, 8] view holds both tokens' values, not token 0 and its scale: a
    # reader that took the view literally would use token 1's values as token 0's scale.
    lens_full = torch.tensor([3], dtype=torch.int32)  # row 0 sees t <= 1, row 1 sees t <= 2
    table2 = torch.tensor([[0, 0]], dtype=torch.int32)
    got = paged_mqa_logits_ref(q, kv_cache, w, lens_full, table2, 3, scale_layout="page_blocked")
    # row 0, t=1: h0 q.k = 0.5*2 + 0.5*4 = 3 -> 4.5; h1 q.k = -1 -> 0; times 0.25 -> 1.125
    # row 1, t=2 is token 0 of the second table entry (page 0 again): 2.0 as at t=0.
    assert got.tolist() == [[6.0, 1.125, -INF], [2.0, -0.25, 2.0]]


def test_hand_page_blocked_2d_lens():
    kv_cache = _hand_page_blocked_cache()
    q, w = _hand_q_w()
    table = torch.tensor([[0]], dtype=torch.int32)
    lens = torch.tensor([[0, 2]], dtype=torch.int32)  # row 0 sees nothing, row 1 sees t < 2
    got = paged_mqa_logits_ref(q, kv_cache, w, lens, table, 2, scale_layout="page_blocked")
    assert got.tolist() == [[-INF, -INF], [2.0, -0.25]]


def test_hand_bf16_no_scale():
    k = torch.tensor([1.0, -2.0, 0.5, 3.0]).to(torch.bfloat16).view(1, 1, 1, 4)
    q = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]).to(torch.bfloat16).view(1, 1, 2, 4)
    w = torch.tensor([[2.0, 5.0]])
    # h0: 1 - 2 + 0.5 + 3 = 2.5 -> 2 * 2.5 = 5; h1: -2 -> relu 0. No scale: 5.0.
    got = paged_mqa_logits_ref(q, k, w, torch.tensor([1], dtype=torch.int32),
                               torch.tensor([[0]], dtype=torch.int32), 1, scale_layout="none")
    assert got.tolist() == [[5.0]]


def test_hand_prefill_fp8():
    k = _fp8_tensor([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], (3, 4))
    k_scale = torch.tensor([2.0, 0.25, 4.0])
    q = _fp8_tensor([2.0, 4.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0,
                     0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0], (2, 2, 4))
    w = torch.tensor([[1.5, 7.0], [0.5, 2.0]])
    ks = torch.tensor([0, 1], dtype=torch.int32)
    ke = torch.tensor([2, 3], dtype=torch.int32)
    # row 0 (window [0, 2)): t0 = 2 * 1.5*2 = 6.0; t1 = 0.25 * 1.5*3 = 1.125
    # row 1 (window [1, 3)): t1: q.k = 0 for both heads -> 0.0; t2: h0 = 1 -> 0.5, h1 = -1 -> 0;
    #   times 4.0 -> 2.0
    expect = [[6.0, 1.125, -INF], [-INF, 0.0, 2.0]]
    assert mqa_logits_ref(q, (k, k_scale), w, ks, ke).tolist() == expect
    assert oracle.ragged_logits(q, (k, k_scale), w, ks, ke).tolist() == expect


# ---------------------------------------------------------------------------------------------
# Memory at a real size: B=64 requests, 8K context, H=64, D=128 (Problem()'s shapes).

_MEMORY_SCRIPT = textwrap.dedent(
    """
    import resource, sys, time
    import torch
    from indexer_logits._reference import paged_mqa_logits_ref
    from tuner.layouts import layout_for, pack_pages
    from indexer_logits._identity import Problem

    p = Problem()
    B, W, H, D, PAGE = 64, 8192, p.heads, p.head_dim, p.page_size
    g = torch.Generator().manual_seed(0)
    # A small pool of pages shared by every request keeps the inputs themselves tiny.
    kv = pack_pages(torch.randn(16, PAGE, D, generator=g), layout_for(p))
    table = torch.randint(0, 16, (B, W // PAGE), generator=g, dtype=torch.int32)
    q = (torch.randn(B, 1, H, D, generator=g) * 4).to(torch.float8_e4m3fn)
    w = torch.randn(B, H, generator=g) / H
    lens = torch.full((B,), W, dtype=torch.int32)
    # Warm up (one-time allocations) at a small size, then measure the high-water mark.
    paged_mqa_logits_ref(q[:1], kv, w[:1], lens[:1] // 64, table[:1], W)
    out = torch.empty(B, W)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    paged_mqa_logits_ref(q, kv, w, lens, table, W, out=out)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert bool(torch.isfinite(out).all())
    print((after - before) * 1024, dt)
    """
)


def test_reference_memory_does_not_scale_with_batch_times_context_times_heads():
    from indexer_logits import _reference

    # The chunk is what bounds the per-request intermediate ([N, H, CHUNK] fp32).
    assert 0 < _reference.CHUNK_TOKENS <= 8192
    proc = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    grown, seconds = proc.stdout.split()
    grown = int(grown)
    naive = 64 * 8192 * 64 * 4  # one fp32 [B, H, max_context_len] intermediate: 128 MiB
    assert grown < naive // 2, f"peak RSS grew by {grown / 2**20:.1f} MiB"
    assert float(seconds) < 60


# ---------------------------------------------------------------------------------------------
# Argument checks: every failure is a ValueError naming the argument.


def _decode_inputs(**overrides):
    problem = Problem(heads=8, head_dim=32, page_size=32, next_n=2)
    inp = make_decode_inputs(problem, 2, 96, [40, 96], seed=5)
    args = dict(q=inp.q, kv_cache=inp.kv_cache, weights=inp.weights, context_lens=inp.context_lens,
                block_table=inp.block_table, max_context_len=inp.max_context_len)
    args.update(overrides)
    return args


def _call_decode(**overrides):
    a = _decode_inputs(**overrides)
    return paged_mqa_logits_ref(a["q"], a["kv_cache"], a["weights"], a["context_lens"], a["block_table"],
                                a["max_context_len"], scale_layout="page_blocked")


def test_decode_inputs_are_valid_as_built():
    out = _call_decode()
    assert out.shape == (4, 96)


def _bad_decode_cases():
    base = _decode_inputs()
    q, kv, w, lens, bt = base["q"], base["kv_cache"], base["weights"], base["context_lens"], base["block_table"]
    return {
        "q dtype": ("q", dict(q=q.float())),
        "q dims": ("q", dict(q=q[0])),
        "q other D": ("kv_cache", dict(q=torch.zeros(2, 2, 8, 64, dtype=torch.float8_e4m3fn))),
        "q bf16 on fp8 cache": ("q", dict(q=q.float().to(torch.bfloat16))),
        "kv dtype": ("kv_cache", dict(kv_cache=kv.float())),
        "kv dims": ("kv_cache", dict(kv_cache=kv[:, :, 0])),
        "kv not contiguous": ("kv_cache", dict(kv_cache=kv[:, ::2])),
        "kv not a tensor": ("kv_cache", dict(kv_cache=[1, 2, 3])),
        "weights dtype": ("weights", dict(weights=w.double())),
        "weights shape": ("weights", dict(weights=w[:3])),
        "weights dims": ("weights", dict(weights=w.reshape(-1))),
        "lens dtype": ("context_lens", dict(context_lens=lens.long())),
        "lens shape": ("context_lens", dict(context_lens=torch.tensor([40, 96, 1], dtype=torch.int32))),
        "lens 2d shape": ("context_lens", dict(context_lens=torch.ones(2, 3, dtype=torch.int32))),
        "lens 3d": ("context_lens", dict(context_lens=torch.ones(2, 2, 1, dtype=torch.int32))),
        "table dtype": ("block_table", dict(block_table=bt.long())),
        "table rows": ("block_table", dict(block_table=bt[:1])),
        "table dims": ("block_table", dict(block_table=bt.reshape(-1))),
        "max_context_len type": ("max_context_len", dict(max_context_len=96.0)),
        "max_context_len zero": ("max_context_len", dict(max_context_len=0)),
    }


@pytest.mark.parametrize("case", sorted(_bad_decode_cases()))
def test_decode_bad_argument_raises_naming_it(case):
    name, overrides = _bad_decode_cases()[case]
    with pytest.raises(ValueError, match=f"^{re.escape(name)}:"):
        _call_decode(**overrides)


@pytest.mark.parametrize("bad", [-1, "num_pages"])
def test_block_table_entry_out_of_range_inside_valid_pages_raises(bad):
    base = _decode_inputs()
    num_pages = base["kv_cache"].shape[0]
    bad_id = num_pages if bad == "num_pages" else bad
    # Request 0 has length 40 (N=2 -> limits 39, 40): pages 0 and 1 are valid, page 2 is not.
    inside = base["block_table"].clone()
    inside[0, 1] = bad_id
    with pytest.raises(ValueError, match="^block_table:"):
        _call_decode(block_table=inside)
    past = base["block_table"].clone()
    past[0, 2] = bad_id
    _call_decode(block_table=past)  # past the valid pages: never read, never checked


def test_length_beyond_table_capacity_raises():
    base = _decode_inputs()
    narrow = base["block_table"][:, :2].contiguous()  # capacity 2 * 32 = 64 tokens < 96
    with pytest.raises(ValueError, match="^context_lens:"):
        _call_decode(block_table=narrow)


def test_negative_length_raises():
    with pytest.raises(ValueError, match="^context_lens:"):
        _call_decode(context_lens=torch.tensor([-1, 10], dtype=torch.int32))


def test_max_context_len_smaller_than_a_length_raises():
    with pytest.raises(ValueError, match="^max_context_len:"):
        _call_decode(max_context_len=64)  # request 1 has length 96


def test_2d_lens_beyond_capacity_raise():
    lens = torch.tensor([[1, 2], [3, 200]], dtype=torch.int32)
    with pytest.raises(ValueError, match="^context_lens:"):
        _call_decode(context_lens=lens)


def _prefill_args(dtype="fp8"):
    layout = "page_blocked" if dtype == "fp8" else "none"
    problem = Problem(family="prefill_ragged", q_dtype=dtype, cache_dtype=dtype, scale_layout=layout,
                      page_size=0, heads=8, head_dim=32)
    inp = make_prefill_inputs(problem, 6, 40, "causal", seed=2)
    return dict(q=inp.q, kv=inp.kv, weights=inp.weights, cu_seqlen_ks=inp.cu_seqlen_ks,
                cu_seqlen_ke=inp.cu_seqlen_ke)


def _call_prefill(dtype="fp8", **overrides):
    a = _prefill_args(dtype)
    a.update(overrides)
    return mqa_logits_ref(a["q"], a["kv"], a["weights"], a["cu_seqlen_ks"], a["cu_seqlen_ke"])


def test_prefill_inputs_are_valid_as_built():
    assert _call_prefill("fp8").shape == (6, 40)
    assert _call_prefill("bf16").shape == (6, 40)


def _bad_prefill_cases():
    a = _prefill_args("fp8")
    q, (k, s), w, ks, ke = a["q"], a["kv"], a["weights"], a["cu_seqlen_ks"], a["cu_seqlen_ke"]
    ks_gt_ke = ks.clone()
    ks_gt_ke[2] = ke[2] + 1
    ke_big = ke.clone()
    ke_big[0] = k.shape[0] + 1
    return {
        "ks > ke": ("cu_seqlen_ke", dict(cu_seqlen_ks=ks_gt_ke)),
        "ke > Nk": ("cu_seqlen_ke", dict(cu_seqlen_ke=ke_big)),
        "ks negative": ("cu_seqlen_ks", dict(cu_seqlen_ks=ks - 1)),
        "ks dtype": ("cu_seqlen_ks", dict(cu_seqlen_ks=ks.long())),
        "ks shape": ("cu_seqlen_ks", dict(cu_seqlen_ks=ks[:3])),
        "ke shape": ("cu_seqlen_ke", dict(cu_seqlen_ke=ke[:, None])),
        "q dtype": ("q", dict(q=q.float())),
        "q dims": ("q", dict(q=q[None])),
        "kv not a pair": ("kv", dict(kv=k)),
        "k dtype": ("kv[0] (k)", dict(kv=(k.float(), s))),
        "k head dim": ("kv", dict(kv=(k[:, :16], s))),
        "k_scale dtype": ("kv[1] (k_scale)", dict(kv=(k, s.double()))),
        "k_scale length": ("kv[1] (k_scale)", dict(kv=(k, s[:-1]))),
        "weights dtype": ("weights", dict(weights=w.half())),
        "weights shape": ("weights", dict(weights=w[:, :4])),
    }


@pytest.mark.parametrize("case", sorted(_bad_prefill_cases()))
def test_prefill_bad_argument_raises_naming_it(case):
    name, overrides = _bad_prefill_cases()[case]
    with pytest.raises(ValueError, match=f"^{re.escape(name)}:"):
        _call_prefill("fp8", **overrides)


def test_prefill_bf16_bad_k_raises():
    a = _prefill_args("bf16")
    (k,) = a["kv"]
    with pytest.raises(ValueError, match="^kv"):
        _call_prefill("bf16", kv=(k.float(),))
    with pytest.raises(ValueError, match="^kv"):
        _call_prefill("bf16", kv=(k[:, :8].contiguous(),))
