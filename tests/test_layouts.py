"""Quantising and packing K into the cache layouts, reading it back, and the input generators."""

from __future__ import annotations

import math
import struct

import pytest
import torch

import _loop_oracle as oracle
from tuner.inputs import POISON_IDS, make_decode_inputs, make_lens, make_prefill_inputs, poison_block_table
from tuner.layouts import CacheLayout, FP8_MAX, layout_for, pack_pages, quantize_tokens, unpack_pages
from indexer_logits._identity import Problem

LAYOUTS = [
    CacheLayout("fp8", 64, "page_blocked", 32),
    CacheLayout("fp8", 32, "token_interleaved", 64),
    CacheLayout("fp8", 1, "token_interleaved", 32),
    CacheLayout("fp8", 128, "page_blocked", 32),
    CacheLayout("bf16", 32, "none", 32),
    CacheLayout("bf16", 1, "none", 64),
]
LAYOUT_IDS = [f"{l.cache_dtype}-{l.scale_layout}-pg{l.page_size}-d{l.head_dim}" for l in LAYOUTS]


def _k(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(*shape, generator=g)
    # Vary the magnitude per token so scales differ, and include an all-zero token.
    k = k * torch.exp2(torch.randint(-6, 6, shape[:-1], generator=g).float())[..., None]
    k.view(-1, shape[-1])[0] = 0.0
    return k


def _raw(x: torch.Tensor) -> tuple[bytes, int]:
    return oracle.storage_bytes(x)


# ---------------------------------------------------------------------------------------------
# quantize_tokens


def test_quantize_scale_formula():
    k = _k((40, 64))
    k[1] = 1e-6  # amax below the 1e-4 floor
    _, scale = quantize_tokens(k)
    assert scale.dtype == torch.float32 and scale.shape == (40,)
    for i in range(40):
        expect = max(float(k[i].abs().max()), 1e-4) / 448.0
        assert math.isclose(float(scale[i]), expect, rel_tol=1e-6), i
    assert math.isclose(float(scale[0]), 1e-4 / 448, rel_tol=1e-6)
    assert math.isclose(float(scale[1]), 1e-4 / 448, rel_tol=1e-6)


def test_quantize_ue8m0_is_smallest_power_of_two_at_or_above():
    k = _k((40, 64), seed=1)
    _, plain = quantize_tokens(k)
    _, pow2 = quantize_tokens(k, ue8m0=True)
    for p, s in zip(plain.tolist(), pow2.tolist()):
        mantissa, _ = math.frexp(s)
        assert mantissa == 0.5, f"{s} is not a power of two"
        assert p <= s < 2 * p


def test_quantize_values_dequantise_within_fp8_error():
    k = _k((50, 128), seed=2)
    for ue8m0 in (False, True):
        k_fp8, scale = quantize_tokens(k, ue8m0)
        assert k_fp8.dtype == torch.float8_e4m3fn and k_fp8.shape == k.shape
        v = k_fp8.float()
        assert float(v.abs().max()) <= FP8_MAX
        back = v * scale[:, None]
        # e4m3 keeps 3 mantissa bits: half an ulp is 1/16 relative; subnormals 2^-10 absolute.
        bound = k.abs() / 16 + scale[:, None] * 2.0**-10
        assert bool(((back - k).abs() <= bound * 1.0001).all())
    k_fp8, scale = quantize_tokens(k)
    # Without ue8m0 the largest element of each (non-zero) token lands on +-448.
    assert torch.equal(k_fp8.float()[1:].abs().amax(dim=1), torch.full((49,), 448.0))


def test_quantize_accepts_bf16_and_batched_shapes():
    k = _k((3, 5, 32), seed=3)
    k_fp8, scale = quantize_tokens(k.to(torch.bfloat16))
    assert k_fp8.shape == (3, 5, 32) and scale.shape == (3, 5)


@pytest.mark.parametrize(
    "bad",
    [torch.zeros(4, 8, dtype=torch.int32), torch.zeros(4, 8, dtype=torch.float64), torch.zeros(4, 0),
     torch.tensor(1.0), [[1.0, 2.0]]],
    ids=["int32", "float64", "D=0", "0-d", "list"],
)
def test_quantize_bad_input_raises_naming_k(bad):
    with pytest.raises(ValueError, match="^k:"):
        quantize_tokens(bad)


# ---------------------------------------------------------------------------------------------
# pack_pages: the bytes are where SPEC.md says, and unpack_pages reads them back


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("gap", [0, 4, 100])
def test_pack_pages_bytes_follow_the_spec(layout, gap):
    num_pages, page, d = 3, layout.page_size, layout.head_dim
    k = _k((num_pages, page, d), seed=4)
    stride = layout.page_bytes + gap
    cache = pack_pages(k, layout, stride)
    assert cache.shape == (num_pages, page, 1, layout.view_last_dim)
    assert cache.stride(0) * cache.element_size() == stride
    raw, base = _raw(cache)
    if layout.cache_dtype == "bf16":
        assert cache.dtype == torch.bfloat16
        expect_vals = k.to(torch.bfloat16)
        for p in range(num_pages):
            for t in range(page):
                off = base + p * stride + 2 * d * t
                got = oracle.bf16_bytes_to_floats(raw[off : off + 2 * d])
                assert got == expect_vals[p, t].float().tolist()
        return
    assert cache.dtype == torch.uint8
    k_fp8, scale = quantize_tokens(k)
    for p in range(num_pages):
        for t in range(page):
            if layout.scale_layout == "page_blocked":
                v_off, s_off = p * stride + d * t, p * stride + page * d + 4 * t
            else:
                v_off = p * stride + (d + 4) * t
                s_off = v_off + d
            values = raw[base + v_off : base + v_off + d]
            assert values == k_fp8[p, t].view(torch.uint8).numpy().tobytes()
            assert struct.unpack("<f", raw[base + s_off : base + s_off + 4])[0] == float(scale[p, t])


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("gap", [0, 4, 64])
def test_pack_unpack_round_trip(layout, gap):
    k = _k((5, layout.page_size, layout.head_dim), seed=5)
    cache = pack_pages(k, layout, layout.page_bytes + gap)
    values, scales = unpack_pages(cache, layout)
    assert values.shape == k.shape and scales.shape == k.shape[:2]
    assert values.dtype == torch.float32 and scales.dtype == torch.float32
    if layout.cache_dtype == "bf16":
        assert torch.equal(values, k.to(torch.bfloat16).float())
        assert torch.equal(scales, torch.ones_like(scales))
    else:
        k_fp8, scale = quantize_tokens(k)
        assert torch.equal(values, k_fp8.float())
        assert torch.equal(scales, scale)
        back = values * scales[..., None]
        assert bool(((back - k).abs() <= k.abs() / 16 + scales[..., None] * 2.0**-9).all())
    # Page selection follows the ids, in their order, repeats included.
    ids = torch.tensor([4, 0, 4, 2], dtype=torch.int32)
    sel_v, sel_s = unpack_pages(cache, layout, ids)
    assert torch.equal(sel_v, values[ids.long()]) and torch.equal(sel_s, scales[ids.long()])


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
def test_gap_bytes_are_not_read(layout):
    k = _k((4, layout.page_size, layout.head_dim), seed=6)
    gap = 64
    cache = pack_pages(k, layout, layout.page_bytes + gap)
    raw = cache.as_strided((cache.untyped_storage().nbytes() // cache.element_size(),), (1,), 0)
    raw_bytes = raw.view(torch.uint8).view(4, -1)
    # The writer fills the gap with 0xFF (NaN as fp8, NaN as bf16 0xFFFF).
    assert bool((raw_bytes[:, layout.page_bytes :] == 0xFF).all())
    before = unpack_pages(cache, layout)
    assert not any(bool(torch.isnan(x).any()) for x in before)
    raw_bytes[:, layout.page_bytes :] = torch.randint(0, 256, (4, gap), dtype=torch.uint8)
    after = unpack_pages(cache, layout)
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
    tight = unpack_pages(pack_pages(k, layout), layout)
    assert torch.equal(before[0], tight[0]) and torch.equal(before[1], tight[1])


def test_pack_pages_ue8m0_scales_are_powers_of_two():
    layout = CacheLayout("fp8", 32, "page_blocked", 32)
    _, scales = unpack_pages(pack_pages(_k((2, 32, 32), seed=7), layout, ue8m0=True), layout)
    for s in scales.flatten().tolist():
        assert math.frexp(s)[0] == 0.5


def test_pack_pages_bad_inputs_raise_naming_the_argument():
    layout = CacheLayout("fp8", 32, "page_blocked", 32)
    k = torch.randn(2, 32, 32)
    with pytest.raises(ValueError, match="^k:"):
        pack_pages(torch.randn(2, 33, 32), layout)
    with pytest.raises(ValueError, match="^k:"):
        pack_pages(torch.randn(2, 32, 64), layout)
    with pytest.raises(ValueError, match="^k:"):
        pack_pages(torch.randn(64, 32), layout)
    with pytest.raises(ValueError, match="^page_stride_bytes:"):
        pack_pages(k, layout, layout.page_bytes - 4)
    with pytest.raises(ValueError, match="^page_stride_bytes:"):
        pack_pages(k, layout, layout.page_bytes + 2)
    with pytest.raises(ValueError, match="^k:"):
        pack_pages(k.to(torch.int32), layout)


def test_cache_layout_rejects_bad_combinations():
    with pytest.raises(ValueError, match="^scale_layout:"):
        CacheLayout("fp8", 64, "blocked", 128)
    with pytest.raises(ValueError, match="^scale_layout:"):
        CacheLayout("bf16", 64, "page_blocked", 128)
    with pytest.raises(ValueError, match="^scale_layout:"):
        CacheLayout("fp8", 64, "none", 128)


def test_layout_geometry_matches_spec():
    assert CacheLayout("fp8", 64, "page_blocked", 128).page_bytes == 8448  # SPEC.md's number
    assert CacheLayout("fp8", 1, "token_interleaved", 128).page_bytes == 132
    assert CacheLayout("bf16", 64, "none", 128).page_bytes == 64 * 256
    p = Problem()
    assert layout_for(p) == CacheLayout("fp8", 64, "page_blocked", 128)
    assert p.token_bytes == 132
    assert Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none").token_bytes == 256


def test_unpack_rejects_non_contiguous_pages():
    layout = CacheLayout("fp8", 32, "page_blocked", 32)
    cache = pack_pages(torch.randn(4, 32, 32), layout)
    with pytest.raises(ValueError, match="^kv_cache:"):
        unpack_pages(cache[:, ::2], CacheLayout("fp8", 16, "page_blocked", 32))


# ---------------------------------------------------------------------------------------------
# The input generators


@pytest.mark.parametrize("page,n,lens_mode", [(1, 1, "1d"), (32, 2, "1d"), (64, 4, "2d"), (128, 2, "2d")])
def test_make_decode_inputs_realism(page, n, lens_mode):
    problem = Problem(heads=8, head_dim=32, page_size=page, next_n=n, lens_mode=lens_mode)
    width = 300 if page > 1 else 70
    batch = 6
    inp = make_decode_inputs(problem, batch, width, seed=11)
    max_pages = -(-width // page)
    assert inp.q.shape == (batch, n, 8, 32) and inp.q.dtype == torch.float8_e4m3fn
    assert inp.weights.shape == (batch * n, 8) and inp.weights.dtype == torch.float32
    assert inp.block_table.shape == (batch, max_pages) and inp.block_table.dtype == torch.int32
    num_pages = inp.kv_cache.shape[0]
    ids = inp.block_table.flatten()
    # Scattered through a larger pool: distinct, in range, not the identity and not contiguous runs.
    assert num_pages > batch * max_pages
    assert ids.unique().numel() == ids.numel()
    assert int(ids.min()) >= 0 and int(ids.max()) < num_pages
    steps = inp.block_table[:, 1:] - inp.block_table[:, :-1]
    assert float((steps == 1).float().mean()) < 0.5
    # A page stride larger than one page.
    assert inp.kv_cache.stride(0) * inp.kv_cache.element_size() > layout_for(problem).page_bytes
    # Lengths: 1, a non-multiple of the page, and the full width are all present.
    lens = inp.context_lens
    assert lens.dtype == torch.int32
    if lens_mode == "2d":
        assert lens.shape == (batch, n)
        total = lens[:, -1]  # the last draft token sees the whole request
    else:
        assert lens.shape == (batch,)
        total = lens
    totals = set(total.tolist())
    assert 1 in totals and width in totals
    if page > 1:
        assert any(v % page for v in totals if 1 < v < width)
    assert all(1 <= v <= width for v in totals)
    # The valid mask follows the rule the lens mode names.
    assert torch.equal(inp.valid_mask().sum(dim=1), inp.limits().clamp(max=width))


def test_make_lens_2d_has_a_limit_per_draft_token():
    problem = Problem(heads=8, head_dim=32, page_size=32, next_n=4, lens_mode="2d")
    lens = make_lens(problem, 5, 100, [1, 2, 50, 100, 64], seed=1)
    assert lens.shape == (5, 4)
    # The last draft token sees the whole request; earlier ones see no more than the 1-D rule.
    assert lens[:, 3].tolist() == [1, 2, 50, 100, 64]
    one_d = torch.tensor([1, 2, 50, 100, 64])[:, None] - 4 + 1 + torch.arange(4)[None, :]
    assert bool((lens <= one_d.clamp(min=0)).all()) and bool((lens >= 0).all())


def test_make_lens_rejects_lengths_out_of_range():
    problem = Problem(heads=8, head_dim=32, page_size=32)
    with pytest.raises(ValueError, match="^mode:"):
        make_lens(problem, 2, 100, [5, 101])
    with pytest.raises(ValueError, match="^mode:"):
        make_lens(problem, 2, 100, "sometimes")


def test_make_decode_inputs_bf16_and_refusals():
    problem = Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none", heads=8, head_dim=32, page_size=32)
    inp = make_decode_inputs(problem, 2, 64, seed=1)
    assert inp.q.dtype == torch.bfloat16 and inp.kv_cache.dtype == torch.bfloat16
    prefill = Problem(family="prefill_ragged", page_size=0, heads=8, head_dim=32)
    with pytest.raises(ValueError, match="^problem:"):
        make_decode_inputs(prefill, 2, 64)
    with pytest.raises(ValueError, match="^problem:"):
        make_prefill_inputs(problem, 2, 64)


@pytest.mark.parametrize("lens_mode,n", [("1d", 1), ("1d", 3), ("2d", 2)])
def test_poison_block_table_only_touches_entries_past_the_valid_pages(lens_mode, n):
    problem = Problem(heads=8, head_dim=32, page_size=32, next_n=n, lens_mode=lens_mode)
    inp = make_decode_inputs(problem, 5, 200, [0, 1, 33, 64, 200], seed=2)
    poisoned = poison_block_table(inp)
    before, after = inp.block_table, poisoned.block_table
    assert after.shape == before.shape and after.dtype == torch.int32
    num_pages = inp.kv_cache.shape[0]
    # Pages needed per request: ceil(max row limit / PAGE), from the lengths by hand.
    lens = inp.context_lens.tolist()
    for b in range(5):
        if lens_mode == "2d":
            top = max(lens[b])
        else:
            top = max(0, lens[b])  # the last draft token's limit is the full length
        needed = -(-top // 32)
        assert after[b, :needed].tolist() == before[b, :needed].tolist()
        for v in after[b, needed:].tolist():
            assert v < 0 or v >= num_pages, "poison must be out of range"
            assert v in POISON_IDS
    assert (after != before).any()
    # Everything else is the same object data.
    assert poisoned.q is inp.q and poisoned.kv_cache is inp.kv_cache and poisoned.context_lens is inp.context_lens


def test_make_prefill_inputs_windows():
    problem = Problem(family="prefill_ragged", page_size=0, heads=8, head_dim=32)
    for windows, num_seqs in (("causal", 1), ("causal", 3), ("random", 1)):
        inp = make_prefill_inputs(problem, 10, 50, windows, seed=3, num_seqs=num_seqs)
        ks, ke = inp.cu_seqlen_ks.tolist(), inp.cu_seqlen_ke.tolist()
        assert all(0 <= a <= b <= 50 for a, b in zip(ks, ke))
        assert inp.kv[0].dtype == torch.float8_e4m3fn and inp.kv[1].shape == (50,)
        if windows == "causal":
            # Each row sees one more key than the previous row of its sequence.
            assert all(b - a >= 1 for a, b in zip(ks, ke))
    one = make_prefill_inputs(problem, 4, 10, "causal", seed=0)
    assert one.cu_seqlen_ks.tolist() == [0, 0, 0, 0]
    assert one.cu_seqlen_ke.tolist() == [7, 8, 9, 10]
