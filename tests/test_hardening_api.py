"""Hardening of the runtime's public entry points against bad input.

Every refusal is a ValueError whose message starts with the argument's name and says what was
expected, raised before any kernel is selected (the tests replace the runtime's `select` with a
function that fails the test if a bad call ever reaches it). Legal but unusual inputs (padded
row strides, column slices of wider tables, stale or poisoned block-table ids past the valid
pages, empty pools, zero lengths, a width past the table's capacity) must give the reference's
answer, never a crash. Complements tests/test_runtime.py, test_reference.py and
test_prefill_paged.py, whose cases are not repeated here.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

import indexer_logits as K
from indexer_logits import _api, _chunked, _dispatch
from indexer_logits import _decode as decode_entry_points
from indexer_logits import _prefill as prefill_entry_points
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs, poison_block_table
from indexer_logits._identity import Problem
from tuner.reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref, relative_error

from conftest import INTERPRET

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
META = torch.device("meta")
FP8_N2 = Problem(next_n=2)  # fp8, page 64, page_blocked, H=64, D=128, 1-D lens
BF16_N2_2D = Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none", next_n=2, lens_mode="2d")
FP8_PREFILL = Problem(family="prefill_ragged", page_size=0)
BF16_PREFILL = Problem(family="prefill_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=0, scale_layout="none")
FP8_CHUNKED = Problem(family="prefill_paged")

D8 = make_decode_inputs(FP8_N2, 2, 128, lens=[40, 128], seed=1)  # request 0: pages 0 (limits 39, 40)
B16 = make_decode_inputs(BF16_N2_2D, 2, 128, lens=[70, 5], seed=2)
P8 = make_prefill_inputs(FP8_PREFILL, 4, 64, seed=3)
P16 = make_prefill_inputs(BF16_PREFILL, 4, 64, seed=4)
C8 = make_prefill_paged_inputs(FP8_CHUNKED, 5, 128, chunk_lens=[2, 3], seed=5)


@pytest.fixture(autouse=True)
def clean_runtime(monkeypatch):
    for name in (_dispatch.ENV_BACKEND, _dispatch.ENV_TABLE_DIR, _api.ENV_CHECK_VALUES):
        monkeypatch.delenv(name, raising=False)
    K.clear_cache()
    yield
    K.clear_cache()


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if a call gets as far as choosing a kernel (or the reference)."""

    def boom(*args, **kwargs):
        raise AssertionError("a bad call reached kernel selection")

    for entry_points in (decode_entry_points, prefill_entry_points, _chunked):
        monkeypatch.setattr(entry_points, "select", boom)


def expect_refusal(call, name: str) -> str:
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"{name}: "), f"message does not start with {name!r}: {msg}"
    assert re.search(r"expect|needs|exceeds|smaller than", msg), f"message does not say what was expected: {msg}"
    return msg


# ---------------------------------------------------------------------------------------------
# Decode: fp8_paged_mqa_logits / bf16_paged_mqa_logits.


def _decode(x, **change):
    """Call the decode function that fits q's dtype with x's arguments, some replaced."""
    a = dict(q=x.q, kv_cache=x.kv_cache, weights=x.weights, context_lens=x.context_lens, block_table=x.block_table,
             schedule_meta=None, max_context_len=x.max_context_len)
    kw = dict(scale_layout=x.scale_layout)
    for k, v in change.items():
        (a if k in a else kw)[k] = v
    fn = K.bf16_paged_mqa_logits if x.q.dtype == torch.bfloat16 else K.fp8_paged_mqa_logits
    return lambda: fn(*a.values(), True, **kw)


def _ids(x, request: int, col: int, value: int) -> torch.Tensor:
    bt = x.block_table.clone()
    bt[request, col] = value
    return bt


def _raw_cache(x, stride_bytes: int, offset_bytes: int = 0) -> torch.Tensor:
    """The cache's pages re-laid in a new buffer with another page stride / byte offset."""
    kv = x.kv_cache
    pages, page, _, last = kv.shape
    page_bytes = page * last * kv.element_size()
    buf = torch.zeros(offset_bytes + pages * max(stride_bytes, page_bytes) + page_bytes, dtype=torch.uint8)
    return buf[offset_bytes:].as_strided(kv.shape, (stride_bytes,) + kv.stride()[1:])


NUM_PAGES = D8.kv_cache.shape[0]
DECODE_BAD = {
    # q
    "q e5m2": (D8, dict(q=D8.q.to(torch.float8_e5m2)), "q"),
    "q float32": (D8, dict(q=D8.q.float()), "q"),
    "q 3 dims": (D8, dict(q=D8.q[0]), "q"),
    "q not a tensor": (D8, dict(q=D8.q.tolist()), "q"),
    "q heads x dim transposed": (D8, dict(q=D8.q.transpose(2, 3).contiguous().transpose(2, 3)), "q"),
    "q head dim != cache": (D8, dict(q=torch.zeros(2, 2, 64, 64).to(torch.float8_e4m3fn)), "kv_cache"),
    "q bf16 into the fp8 function": (D8, dict(q=D8.q.float().to(torch.bfloat16)), "q"),
    # kv_cache
    "kv float32": (D8, dict(kv_cache=D8.kv_cache.float()), "kv_cache"),
    "kv 3 dims": (D8, dict(kv_cache=D8.kv_cache[:, :, 0]), "kv_cache"),
    "kv second dim != 1": (D8, dict(kv_cache=D8.kv_cache.expand(-1, -1, 2, -1)), "kv_cache"),
    "kv tokens strided": (D8, dict(kv_cache=D8.kv_cache[:, ::2]), "kv_cache"),
    "kv page stride < a page": (D8, dict(kv_cache=_raw_cache(D8, 4096)), "kv_cache"),
    "kv page stride not a multiple of 4": (D8, dict(kv_cache=_raw_cache(D8, 8448 + 2)), "kv_cache"),
    "kv offset not a multiple of 4": (D8, dict(kv_cache=_raw_cache(D8, 8448 + 64, offset_bytes=2)), "kv_cache"),
    "kv list": (D8, dict(kv_cache=[0]), "kv_cache"),
    "scale_layout unknown": (D8, dict(scale_layout="blocked"), "scale_layout"),
    "scale_layout none for fp8": (D8, dict(scale_layout="none"), "scale_layout"),
    "scale_layout interleaved for bf16": (B16, dict(scale_layout="token_interleaved"), "scale_layout"),
    # weights: dtype, shape, next_n inconsistent with q, layout, device
    "weights float64": (D8, dict(weights=D8.weights.double()), "weights"),
    "weights bf16": (D8, dict(weights=D8.weights.to(torch.bfloat16)), "weights"),
    "weights [B, H] for next_n=2": (D8, dict(weights=D8.weights[::2].contiguous()), "weights"),
    "weights half the heads": (D8, dict(weights=D8.weights[:, :32].contiguous()), "weights"),
    "weights column-major": (D8, dict(weights=D8.weights.t().contiguous().t()), "weights"),
    "weights 1 dim": (D8, dict(weights=D8.weights.reshape(-1)), "weights"),
    "weights list": (D8, dict(weights=D8.weights.tolist()), "weights"),
    "weights on another device": (D8, dict(weights=D8.weights.to(META)), "weights"),
    # context_lens: dtype, next_n inconsistent, rows, dims, strides, device, values
    "lens int64": (D8, dict(context_lens=D8.context_lens.long()), "context_lens"),
    "lens float": (D8, dict(context_lens=D8.context_lens.float()), "context_lens"),
    "lens [B, 3] for next_n=2": (D8, dict(context_lens=torch.ones(2, 3, dtype=torch.int32)), "context_lens"),
    "lens [B, 1] for next_n=2": (B16, dict(context_lens=B16.context_lens[:, :1].contiguous()), "context_lens"),
    "lens B+1 rows": (D8, dict(context_lens=torch.ones(3, dtype=torch.int32)), "context_lens"),
    "lens 3 dims": (D8, dict(context_lens=torch.ones(2, 2, 1, dtype=torch.int32)), "context_lens"),
    "lens strided": (D8, dict(context_lens=torch.stack([D8.context_lens] * 2, 1)[:, 0]), "context_lens"),
    "lens 2d column-major": (B16, dict(context_lens=B16.context_lens.t().contiguous().t()), "context_lens"),
    "lens on another device": (D8, dict(context_lens=D8.context_lens.to(META)), "context_lens"),
    "lens negative": (D8, dict(context_lens=torch.tensor([-1, 5], dtype=torch.int32)), "context_lens"),
    "lens past the table": (D8, dict(context_lens=torch.tensor([5, 129], dtype=torch.int32),
                                     max_context_len=256), "context_lens"),
    "2d lens past the table": (B16, dict(context_lens=torch.tensor([[1, 2], [3, 129]], dtype=torch.int32),
                                         max_context_len=256), "context_lens"),
    "2d lens negative": (B16, dict(context_lens=torch.tensor([[1, -2], [3, 4]], dtype=torch.int32)), "context_lens"),
    # block_table: dtype, shape, layout, device, ids inside the valid pages
    "table int64": (D8, dict(block_table=D8.block_table.long()), "block_table"),
    "table 1 dim": (D8, dict(block_table=D8.block_table.reshape(-1)), "block_table"),
    "table B-1 rows": (D8, dict(block_table=D8.block_table[:1]), "block_table"),
    "table column-major": (D8, dict(block_table=D8.block_table.t().contiguous().t()), "block_table"),
    "table on another device": (D8, dict(block_table=D8.block_table.to(META)), "block_table"),
    "id -1 in a valid page": (D8, dict(block_table=_ids(D8, 0, 0, -1)), "block_table"),
    "id = num_pages in a valid page": (D8, dict(block_table=_ids(D8, 1, 1, NUM_PAGES)), "block_table"),
    "id 2**31-1 in a valid page": (D8, dict(block_table=_ids(D8, 1, 0, 2**31 - 1)), "block_table"),
    "id -2**31 in a valid page": (B16, dict(block_table=_ids(B16, 0, 1, -(2**31))), "block_table"),
    # max_context_len
    "width 0": (D8, dict(max_context_len=0), "max_context_len"),
    "width negative": (D8, dict(max_context_len=-128), "max_context_len"),
    "width float": (D8, dict(max_context_len=128.0), "max_context_len"),
    "width bool": (D8, dict(max_context_len=True), "max_context_len"),
    "width numpy int": (D8, dict(max_context_len=np.int64(128)), "max_context_len"),
    "width None": (D8, dict(max_context_len=None), "max_context_len"),
    "width tensor": (D8, dict(max_context_len=torch.tensor(128)), "max_context_len"),
    "width below a length": (D8, dict(max_context_len=100), "max_context_len"),
    "width below a 2d length": (B16, dict(max_context_len=64), "max_context_len"),
    # out=
    "out float64": (D8, dict(out=torch.empty(4, 128, dtype=torch.float64)), "out"),
    "out float16": (D8, dict(out=torch.empty(4, 128, dtype=torch.float16)), "out"),
    "out rows != B*next_n": (D8, dict(out=torch.empty(2, 128)), "out"),
    "out too narrow": (D8, dict(out=torch.empty(4, 127)), "out"),
    "out 1 dim": (D8, dict(out=torch.empty(4 * 128)), "out"),
    "out transposed": (D8, dict(out=torch.empty(128, 4).t()), "out"),
    "out rows overlap (expand)": (D8, dict(out=torch.empty(1, 128).expand(4, 128)), "out"),
    "out rows overlap (stride < width)": (D8, dict(out=torch.empty(4 * 128).as_strided((4, 128), (64, 1))), "out"),
    "out on another device": (D8, dict(out=torch.empty(4, 128, device=META)), "out"),
    "out list": (D8, dict(out=[[0.0] * 128] * 4), "out"),
    # the rest
    "schedule_meta a list": (D8, dict(schedule_meta=[0, 0]), "schedule_meta"),
    "logits_dtype fp16": (D8, dict(logits_dtype=torch.float16), "logits_dtype"),
    "logits_dtype a string": (D8, dict(logits_dtype="bfloat16"), "logits_dtype"),
    "out fp32 for bf16 logits": (D8, dict(logits_dtype=torch.bfloat16, out=torch.empty(4, 128)), "out"),
}


@pytest.mark.parametrize("case", list(DECODE_BAD))
def test_decode_bad_input_is_refused_before_any_kernel(case, no_kernel):
    x, change, name = DECODE_BAD[case]
    expect_refusal(_decode(x, **change), name)


def test_the_wrong_dtype_function_names_the_right_one(no_kernel):
    msg = expect_refusal(lambda: K.bf16_paged_mqa_logits(*D8.args()[:5], None, 128), "q")
    assert "fp8_paged_mqa_logits" in msg
    msg = expect_refusal(lambda: K.fp8_paged_mqa_logits(*B16.args()[:5], None, 128), "q")
    assert "bf16_paged_mqa_logits" in msg


def _assert_decode_ok(x, out) -> None:
    if INTERPRET:  # the shipped family default served it (a kernel, not the reference fallback)
        assert K.paged_selection(*x.args(), scale_layout=x.scale_layout).rung == "default"
    ref = paged_mqa_logits_ref(*x.args(), scale_layout=x.scale_layout)
    valid = x.valid_mask()
    assert out.shape == ref.shape
    assert relative_error(out, ref, valid) < 1e-3
    assert torch.equal(torch.isneginf(out), ~valid)


def test_ids_past_the_valid_pages_are_never_checked_nor_read():
    """Every entry at or past a request's valid pages holds a wild id (huge, negative): accepted,
    and the answer is the reference's on the clean table."""
    for x in (D8, B16, make_decode_inputs(Problem(next_n=4), 3, 256, lens=[0, 1, 65], seed=7)):
        bad = poison_block_table(x)
        assert bool((bad.block_table < 0).any() or (bad.block_table >= x.kv_cache.shape[0]).any())
        out = _decode(bad)()
        _assert_decode_ok(x, out)


def test_legal_strided_views_are_served_correctly():
    """q padded along next_n, weights / block table / 2-D lens as column slices of wider tensors:
    legal (the last dim is contiguous) and must be honoured, not assumed dense."""
    x = make_decode_inputs(BF16_N2_2D, 3, 192, lens=[1, 100, 192], seed=8)
    b, n, h, d = x.q.shape
    q_big = torch.zeros(b, n + 1, h, d, dtype=x.q.dtype)
    q_big[:, :n] = x.q
    w_big = torch.full((b * n, 2 * h), float("nan"))
    w_big[:, :h] = x.weights
    bt_big = torch.full((b, x.block_table.shape[1] + 2), -(2**31), dtype=torch.int32)
    bt_big[:, : x.block_table.shape[1]] = x.block_table
    lens_big = torch.full((b, n + 3), 10**6, dtype=torch.int32)
    lens_big[:, :n] = x.context_lens
    out = _decode(x, q=q_big[:, :n], weights=w_big[:, :h], block_table=bt_big[:, : x.block_table.shape[1]],
                  context_lens=lens_big[:, :n])()
    _assert_decode_ok(x, out)


def test_zero_lengths_empty_pool_and_empty_batch():
    zero = make_decode_inputs(FP8_N2, 2, 128, lens=[0, 0], seed=9)
    out = _decode(zero)()
    assert bool(torch.isneginf(out).all())
    out = _decode(zero, kv_cache=zero.kv_cache[:0])()  # no pages at all: nothing may be read
    assert bool(torch.isneginf(out).all())
    out = _decode(zero, block_table=zero.block_table[:, :0])()  # a table with no columns
    assert bool(torch.isneginf(out).all())
    x = D8
    empty = K.fp8_paged_mqa_logits(x.q[:0], x.kv_cache, x.weights[:0], x.context_lens[:0], x.block_table[:0], None, 128)
    assert tuple(empty.shape) == (0, 128)


def test_width_past_the_tables_capacity_reads_no_column_past_the_table():
    """max_context_len may exceed max_pages * PAGE (lengths may not): the positions past the
    table are -inf with clean_logits and no column past the table is read (the columns after
    it in memory hold wild ids)."""
    x = make_decode_inputs(FP8_N2, 2, 128, lens=[128, 65], seed=10)
    bt_big = torch.full((2, 6), 2**31 - 1, dtype=torch.int32)
    bt_big[:, :2] = x.block_table
    out = _decode(x, block_table=bt_big[:, :2], max_context_len=300)()
    assert out.shape == (4, 300)
    _assert_decode_ok(x, out[:, :128])
    assert bool(torch.isneginf(out[:, 128:]).all())


# ---------------------------------------------------------------------------------------------
# get_paged_mqa_logits_metadata.

LENS = torch.ones(3, dtype=torch.int32)
METADATA_BAD = {
    "lens int64": ((LENS.long(), 64, 8), "context_lens"),
    "lens 3 dims": ((LENS[None, None], 64, 8), "context_lens"),
    "lens 0 dims": ((LENS[0], 64, 8), "context_lens"),
    "lens a list": (([1, 2], 64, 8), "context_lens"),
    "block_kv 0": ((LENS, 0, 8), "block_kv"),
    "block_kv negative": ((LENS, -64, 8), "block_kv"),
    "block_kv bool": ((LENS, True, 8), "block_kv"),
    "block_kv float": ((LENS, 64.0, 8), "block_kv"),
    "num_sms 0": ((LENS, 64, 0), "num_sms"),
    "num_sms str": ((LENS, 64, "132"), "num_sms"),
    "num_sms None": ((LENS, 64, None), "num_sms"),
}


@pytest.mark.parametrize("case", list(METADATA_BAD))
def test_metadata_bad_input(case):
    args, name = METADATA_BAD[case]
    expect_refusal(lambda: K.get_paged_mqa_logits_metadata(*args), name)


def test_metadata_accepts_2d_lens_and_stays_on_the_lens_device():
    meta = K.get_paged_mqa_logits_metadata(torch.ones(3, 2, dtype=torch.int32, device=META), 64, 4)
    assert meta.device == META and tuple(meta.shape) == (5, 2) and meta.dtype == torch.int32


# ---------------------------------------------------------------------------------------------
# Prefill: fp8_mqa_logits / bf16_mqa_logits.


def _prefill(x, **change):
    a = dict(q=x.q, kv=x.kv if x.q.dtype == torch.float8_e4m3fn else x.kv[0], weights=x.weights,
             cu_seqlen_ks=x.cu_seqlen_ks, cu_seqlen_ke=x.cu_seqlen_ke)
    kw = {}
    for k, v in change.items():
        (a if k in a else kw)[k] = v
    fn = K.bf16_mqa_logits if x.q.dtype == torch.bfloat16 else K.fp8_mqa_logits
    return lambda: fn(*a.values(), **kw)


K8, S8 = P8.kv
(K16,) = P16.kv
PREFILL_BAD = {
    "q float32": (P8, dict(q=P8.q.float()), "q"),
    "q 4 dims": (P8, dict(q=P8.q[None]), "q"),
    "q heads x dim transposed": (P8, dict(q=P8.q.transpose(1, 2).contiguous().transpose(1, 2)), "q"),
    "kv a bare K for fp8": (P8, dict(kv=K8), "kv"),
    "kv a triple": (P8, dict(kv=(K8, S8, S8)), "kv"),
    "k bf16 for fp8 q": (P8, dict(kv=(K8.float().to(torch.bfloat16), S8)), "kv[0] (k)"),
    "k head dim": (P8, dict(kv=(K8[:, :64].contiguous(), S8)), "kv"),
    "k column-major": (P8, dict(kv=(K8.t().contiguous().t(), S8)), "kv"),
    "k on another device": (P8, dict(kv=(K8.to(META), S8)), "k"),
    "k_scale float64": (P8, dict(kv=(K8, S8.double())), "kv[1] (k_scale)"),
    "k_scale short": (P8, dict(kv=(K8, S8[:-1])), "kv[1] (k_scale)"),
    "k_scale [Nk, 2]": (P8, dict(kv=(K8, torch.stack([S8, S8], 1))), "kv[1] (k_scale)"),
    "k_scale strided": (P8, dict(kv=(K8, torch.stack([S8, S8], 1)[:, 0])), "kv[1] (k_scale)"),
    "k_scale a list": (P8, dict(kv=(K8, S8.tolist())), "kv[1] (k_scale)"),
    "bf16 kv a pair": (P16, dict(kv=(K16, K16)), "kv"),
    "bf16 kv fp8": (P16, dict(kv=K8), "kv (k)"),
    "bf16 kv float32": (P16, dict(kv=(K16.float(),)), "kv (k)"),
    "weights float16": (P8, dict(weights=P8.weights.half()), "weights"),
    "weights M-1 rows": (P8, dict(weights=P8.weights[:-1]), "weights"),
    "weights column-major": (P8, dict(weights=P8.weights.t().contiguous().t()), "weights"),
    "weights on another device": (P8, dict(weights=P8.weights.to(META)), "weights"),
    "ks int64": (P8, dict(cu_seqlen_ks=P8.cu_seqlen_ks.long()), "cu_seq_len_k_start"),
    "ke M+1": (P8, dict(cu_seqlen_ke=torch.cat([P8.cu_seqlen_ke, P8.cu_seqlen_ke[:1]])), "cu_seq_len_k_end"),
    "ks 2 dims": (P8, dict(cu_seqlen_ks=P8.cu_seqlen_ks[:, None]), "cu_seq_len_k_start"),
    "ke strided": (P8, dict(cu_seqlen_ke=torch.stack([P8.cu_seqlen_ke] * 2, 1)[:, 0]), "cu_seq_len_k_end"),
    "ke on another device": (P8, dict(cu_seqlen_ke=P8.cu_seqlen_ke.to(META)), "cu_seq_len_k_end"),
    "ks negative": (P8, dict(cu_seqlen_ks=P8.cu_seqlen_ks - 1), "cu_seq_len_k_start"),
    "ke past Nk": (P8, dict(cu_seqlen_ke=P8.cu_seqlen_ke + 1), "cu_seq_len_k_end"),
    "ke < ks": (P16, dict(cu_seqlen_ks=P16.cu_seqlen_ke, cu_seqlen_ke=P16.cu_seqlen_ks), "cu_seq_len_k_end"),
    "out too narrow": (P8, dict(out=torch.empty(4, 63)), "out"),
    "out rows overlap": (P8, dict(out=torch.empty(1, 64).expand(4, 64)), "out"),
    "out float64": (P16, dict(out=torch.empty(4, 64, dtype=torch.float64)), "out"),
    "out on another device": (P16, dict(out=torch.empty(4, 64, device=META)), "out"),
    "logits_dtype fp16": (P16, dict(logits_dtype=torch.float16), "logits_dtype"),
    "out fp32 for bf16 logits": (P8, dict(logits_dtype=torch.bfloat16, out=torch.empty(4, 64)), "out"),
}


@pytest.mark.parametrize("case", list(PREFILL_BAD))
def test_prefill_bad_input_is_refused_before_any_kernel(case, no_kernel):
    x, change, name = PREFILL_BAD[case]
    expect_refusal(_prefill(x, **change), name)


def test_prefill_legal_padded_k_rows_and_empty_shapes():
    """K rows padded in memory (stride(0) > D) are honoured; zero rows or zero keys give an empty
    result without a launch."""
    k_big = torch.zeros(K8.shape[0], 2 * K8.shape[1], dtype=K8.dtype)
    k_big[:, : K8.shape[1]] = K8
    out = _prefill(P8, kv=(k_big[:, : K8.shape[1]], S8))()
    assert relative_error(out, mqa_logits_ref(*P8.args()), P8.valid_mask()) < 1e-3
    empty_keys = K.fp8_mqa_logits(P8.q, (K8[:0], S8[:0]), P8.weights, torch.zeros(4, dtype=torch.int32),
                                  torch.zeros(4, dtype=torch.int32))
    assert tuple(empty_keys.shape) == (4, 0)
    empty_rows = K.bf16_mqa_logits(P16.q[:0], K16, P16.weights[:0], P16.cu_seqlen_ks[:0], P16.cu_seqlen_ke[:0])
    assert tuple(empty_rows.shape) == (0, 64)


# ---------------------------------------------------------------------------------------------
# Chunked prefill over the paged cache (argument cases tests/test_prefill_paged.py does not cover).

CHUNKED_BAD = {
    "q fp8 into the bf16 function": (dict(), "q", K.bf16_paged_mqa_logits_chunked),
    "q float32": (dict(q=C8.q.float()), "q", None),
    "kv bf16 with fp8 q": (dict(kv_cache=torch.zeros(4, 64, 1, 128, dtype=torch.bfloat16), scale_layout="none"),
                           "q", None),
    "scale_layout none for fp8": (dict(scale_layout="none"), "scale_layout", None),
    "weights column-major": (dict(weights=C8.weights.t().contiguous().t()), "weights", None),
    "row_limit strided": (dict(row_limit=torch.stack([C8.row_limit] * 2, 1)[:, 0]), "row_limit", None),
    "row_request on another device": (dict(row_request=C8.row_request.to(META)), "row_request", None),
    "table column-major": (dict(block_table=C8.block_table.t().contiguous().t()), "block_table", None),
    "width 0": (dict(max_context_len=0), "max_context_len", None),
    "out rows overlap": (dict(out=torch.empty(1, 128).expand(5, 128)), "out", None),
    "out float16": (dict(out=torch.empty(5, 128, dtype=torch.float16)), "out", None),
    "out M-1 rows": (dict(out=torch.empty(4, 128)), "out", None),
}


@pytest.mark.parametrize("case", list(CHUNKED_BAD))
def test_chunked_bad_input_is_refused_before_any_kernel(case, no_kernel):
    change, name, fn = CHUNKED_BAD[case]
    a = dict(zip(("q", "kv_cache", "weights", "row_request", "row_limit", "block_table", "max_context_len"),
                 C8.args()))
    kw = dict(scale_layout=C8.scale_layout)
    for k, v in change.items():
        (a if k in a else kw)[k] = v
    fn = fn or K.fp8_paged_mqa_logits_chunked
    expect_refusal(lambda: fn(*a.values(), **kw), name)


def test_chunked_zero_rows_and_zero_limits(device):
    # on the test's device: CPU tensors on a GPU host (no interpreter there) would get the reference
    x = make_prefill_paged_inputs(FP8_CHUNKED, 5, 128, chunk_lens=[2, 3], seed=5, device=device)
    out = K.fp8_paged_mqa_logits_chunked(x.q[:0], x.kv_cache, x.weights[:0], x.row_request[:0],
                                         x.row_limit[:0], x.block_table, 128)
    assert tuple(out.shape) == (0, 128)
    zero = x.with_limits(torch.zeros(5, dtype=torch.int32, device=device))
    with warnings.catch_warnings():
        warnings.simplefilter("error", K.DispatchWarning)  # served by a kernel, not the reference
        out = K.fp8_paged_mqa_logits_chunked(*poison_block_table_chunked(zero).args())
    assert bool(torch.isneginf(out).all())
    ref = paged_mqa_logits_chunked_ref(*zero.args())
    assert bool(torch.isneginf(ref).all())


def poison_block_table_chunked(x):
    """Every block-table entry of a chunked input replaced by a wild id (all limits are 0, so no
    page is valid and none may be read)."""
    from dataclasses import replace

    return replace(x, block_table=torch.full_like(x.block_table, -(2**31)))
