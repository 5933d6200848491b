"""The names and keywords engines call on DeepGEMM, as this runtime serves them (issue 26).

DeepGEMM's two indexer generations (read at 0f5f266 and 54e2261, csrc/apis/attention.hpp and
tests/test_attention.py), and the calls SGLang's nsa_indexer.py and vLLM's DeepGEMM wrapper and
sparse indexer make:

- get_num_sms() / set_num_sms(n);
- fp8_mqa_logits / bf16_mqa_logits with DeepGEMM's keywords cu_seq_len_k_start / cu_seq_len_k_end
  and max_seqlen_k > 0: the COMPRESSED output, checked the way DeepGEMM's own test does (rebuild
  the wide form with wide[i, ks[i]:ke[i]] = out[i, :ke[i]-ks[i]], compare with calc_diff < 1e-3
  and the exact -inf mask);
- fp8_fp4_paged_mqa_logits / fp8_fp4_mqa_logits with (q, None), and the refusal of fp4 inputs;
- get_paged_mqa_logits_metadata(..., indices=) and the paged calls' indices= (varlen decode);
- value checks: on by default for CPU tensors, off for CUDA ones (the decision function; CI has
  no GPU), honoured by the reference; a GPU test that a default call does not synchronise.

CPU tests run the kernels under TRITON_INTERPRET=1 (conftest); where a kernel is meant to serve a
call, the test asserts the rung and that the reference did not run.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import indexer_logits as K
from indexer_logits import _api, _checks, _chunked, _decode, _dispatch, _prefill, _reference

ENTRY_MODULES = (_decode, _prefill, _chunked)  # the modules whose entry points select a kernel
from indexer_logits._identity import Problem
from tuner.inputs import DecodeInputs, make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
from tuner.reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref, relative_error

from conftest import INTERPRET

REPO = Path(__file__).resolve().parents[1]
FP8_PREFILL = Problem(family="prefill_ragged", page_size=0)
BF16_PREFILL = Problem(family="prefill_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=0, scale_layout="none")
FP8_2D = Problem(lens_mode="2d")  # fp8, page 64, page_blocked, H=64, D=128, next_n=1, 2-D lens
FP8_N2_2D = Problem(next_n=2, lens_mode="2d")
FP8_CHUNKED = Problem(family="prefill_paged")
needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")


@pytest.fixture(autouse=True)
def _clean(clean_runtime, monkeypatch):
    """A clean runtime (conftest.clean_runtime), the SM count at its default before and after."""
    monkeypatch.delenv(_api.ENV_CHECK_VALUES, raising=False)
    K.set_num_sms(None)
    _api._device_num_sms.clear()
    yield
    K.set_num_sms(None)
    _api._device_num_sms.clear()


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if a call gets as far as choosing a kernel (or the reference)."""

    def boom(*args, **kwargs):
        raise AssertionError("a refused call reached kernel selection")

    for entry_points in ENTRY_MODULES:
        monkeypatch.setattr(entry_points, "select", boom)


@pytest.fixture
def no_reference(monkeypatch):
    """Fail the test if the runtime falls back to the torch reference (a kernel must serve)."""

    def boom(*args, **kwargs):
        raise AssertionError("the torch reference served a call a kernel should serve")

    for entry_points, name in ((_prefill, "mqa_logits_ref"), (_decode, "paged_mqa_logits_ref"),
                               (_chunked, "paged_mqa_logits_chunked_ref")):
        monkeypatch.setattr(entry_points, name, boom)


def refusal(call, name: str, *also: str) -> str:
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"{name}: "), f"message does not start with {name!r}: {msg}"
    for text in also:
        assert text in msg, f"{text!r} not in {msg!r}"
    return msg


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's test criterion: 1 - the cosine-style similarity 2<x, y> / (|x|^2 + |y|^2)."""
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


# ---------------------------------------------------------------------------------------------
# get_num_sms / set_num_sms.


def test_num_sms_default_set_and_reset():
    default = K.get_num_sms()
    if torch.cuda.is_available():
        assert default == torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    else:
        assert default == _api.CPU_NUM_SMS == 4
    K.set_num_sms(3)
    assert K.get_num_sms() == 3
    # SGLang builds the schedule metadata from it
    meta = K.get_paged_mqa_logits_metadata(torch.ones(2, dtype=torch.int32), 64, K.get_num_sms())
    assert tuple(meta.shape) == (4, 2) and meta.dtype == torch.int32
    K.set_num_sms(None)
    assert K.get_num_sms() == default


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "8", torch.tensor(8)])
def test_set_num_sms_refuses_non_positive_or_non_int(bad):
    K.set_num_sms(5)
    refusal(lambda: K.set_num_sms(bad), "num_sms", "expected a positive int")
    assert K.get_num_sms() == 5  # a refused value changes nothing


def test_num_sms_is_the_devices_cached_and_bounded_by_it(monkeypatch):
    """With a CUDA device: its multiprocessor count, queried once (per device) on first use, and
    set_num_sms may not exceed it (DeepGEMM asserts the same)."""
    queries = []

    class Props:
        multi_processor_count = 132

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: queries.append(i) or Props())
    assert K.get_num_sms() == 132 and K.get_num_sms() == 132
    assert queries == [0]
    refusal(lambda: K.set_num_sms(133), "num_sms", "132")
    K.set_num_sms(66)
    assert K.get_num_sms() == 66


def test_import_queries_no_gpu():
    """Importing the package (and calling nothing) touches no CUDA API."""
    code = (
        "import torch\n"
        "def boom(*a, **k):\n    raise SystemExit('queried CUDA at import')\n"
        "for name in ('is_available', 'device_count', 'current_device', 'get_device_properties', 'get_device_name',\n"
        "             'get_device_capability', 'init'):\n    setattr(torch.cuda, name, boom)\n"
        "import indexer_logits, indexer_logits._api, indexer_logits._dispatch, indexer_logits._reference\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr


# ---------------------------------------------------------------------------------------------
# Ragged prefill: DeepGEMM's keyword names, the old ones, and the compressed output.

P8 = make_prefill_inputs(FP8_PREFILL, 6, 150, "random", seed=3)
P16 = make_prefill_inputs(BF16_PREFILL, 5, 130, "random", seed=4)


def _fn(x):
    return K.fp8_mqa_logits if x.q.dtype == torch.float8_e4m3fn else K.bf16_mqa_logits


def _kv(x):
    return x.kv if x.q.dtype == torch.float8_e4m3fn else x.kv[0]


@pytest.mark.parametrize("x", [P8, P16], ids=["fp8", "bf16"])
def test_prefill_keywords_deepgemm_and_old_names(x):
    fn, kv = _fn(x), _kv(x)
    ref = mqa_logits_ref(*x.args())
    positional = fn(x.q, kv, x.weights, x.cu_seqlen_ks, x.cu_seqlen_ke, True, 0)
    deepgemm = fn(q=x.q, kv=kv, weights=x.weights, cu_seq_len_k_start=x.cu_seqlen_ks, cu_seq_len_k_end=x.cu_seqlen_ke,
                  clean_logits=True, max_seqlen_k=0)
    old = fn(x.q, kv, x.weights, cu_seqlen_ks=x.cu_seqlen_ks, cu_seqlen_ke=x.cu_seqlen_ke, clean_logits=True)
    mixed = fn(x.q, kv, x.weights, x.cu_seqlen_ks, cu_seqlen_ke=x.cu_seqlen_ke)
    for out in (positional, deepgemm, old, mixed):
        assert out.shape == ref.shape
        assert torch.equal(out, positional)
    assert torch.equal(torch.isneginf(positional), ~x.valid_mask())
    assert relative_error(positional, ref, x.valid_mask()) < 1e-3


def test_prefill_window_arguments_missing_or_given_twice():
    x = P8
    with pytest.raises(TypeError, match="cu_seq_len_k_start.*cu_seqlen_ks"):
        K.fp8_mqa_logits(x.q, x.kv, x.weights, x.cu_seqlen_ks, x.cu_seqlen_ke, cu_seqlen_ks=x.cu_seqlen_ks)
    with pytest.raises(TypeError, match="missing required argument 'cu_seq_len_k_end'"):
        K.fp8_mqa_logits(x.q, x.kv, x.weights, x.cu_seqlen_ks)
    with pytest.raises(TypeError, match="missing required argument 'cu_seq_len_k_start'"):
        K.bf16_mqa_logits(P16.q, P16.kv, P16.weights, cu_seqlen_ke=P16.cu_seqlen_ke)


def test_prefill_errors_name_the_window_as_the_caller_spelled_it(no_kernel):
    x = P8
    bad = x.cu_seqlen_ks.clone()
    bad[0] = -1
    refusal(lambda: K.fp8_mqa_logits(x.q, x.kv, x.weights, bad, x.cu_seqlen_ke), "cu_seq_len_k_start")
    refusal(lambda: K.fp8_mqa_logits(x.q, x.kv, x.weights, cu_seq_len_k_start=bad, cu_seq_len_k_end=x.cu_seqlen_ke),
            "cu_seq_len_k_start")
    refusal(lambda: K.fp8_mqa_logits(x.q, x.kv, x.weights, cu_seqlen_ks=bad, cu_seqlen_ke=x.cu_seqlen_ke),
            "cu_seqlen_ks")
    refusal(lambda: K.fp8_mqa_logits(x.q, x.kv, x.weights, cu_seqlen_ks=x.cu_seqlen_ks,
                                     cu_seqlen_ke=x.cu_seqlen_ke.long()), "cu_seqlen_ke")


def _rebuild_wide(out, ks, ke, keys):
    """DeepGEMM's test: the wide form of a compressed output (-inf outside the windows)."""
    wide = torch.full((out.shape[0], keys), float("-inf"))
    for i in range(out.shape[0]):
        s, e = int(ks[i]), int(ke[i])
        wide[i, s:e] = out[i, : e - s]
    return wide


def _check_compressed(out, x, width: int, clean: bool) -> None:
    ks, ke = x.cu_seqlen_ks.long(), x.cu_seqlen_ke.long()
    rows, keys = x.q.shape[0], _kv_keys(x)
    assert tuple(out.shape) == (rows, width) and out.dtype == torch.float32
    ref = mqa_logits_ref(*x.args())
    wide = _rebuild_wide(out, ks, ke, keys)
    ref_inf = torch.isneginf(ref)
    assert torch.equal(torch.isneginf(wide), ref_inf)  # every position of every window was written, finite
    assert calc_diff(wide.masked_fill(ref_inf, 0), ref.masked_fill(ref_inf, 0)) < 1e-3
    assert relative_error(wide, ref, ~ref_inf) < 1e-3  # SPEC.md's criterion as well
    in_window = torch.arange(width)[None, :] < (ke - ks)[:, None]
    assert bool(torch.isfinite(out[in_window]).all())
    if clean:
        assert torch.equal(torch.isneginf(out), ~in_window)  # columns past each window: exactly -inf


def _kv_keys(x) -> int:
    return (x.kv[0]).shape[0]


COMPRESSED_CASES = [  # (inputs, clean, extra columns past the longest window)
    ("fp8-random", False, 0), ("fp8-random", True, 0), ("fp8-random", True, 17),
    ("bf16-random", False, 5), ("bf16-random", True, 0),
    ("fp8-causal", False, 0), ("bf16-causal", True, 3),
]
INPUTS = {
    "fp8-random": P8, "bf16-random": P16,
    "fp8-causal": make_prefill_inputs(FP8_PREFILL, 8, 200, "causal", seed=5, num_seqs=2),
    "bf16-causal": make_prefill_inputs(BF16_PREFILL, 6, 96, "causal", seed=6, num_seqs=3),
}


@needs_interpreter
@pytest.mark.parametrize("case", COMPRESSED_CASES, ids=lambda c: f"{c[0]}-clean{int(c[1])}-plus{c[2]}")
def test_compressed_output_matches_the_wide_reference(case, no_reference):
    name, clean, extra = case
    x = INPUTS[name]
    width = int((x.cu_seqlen_ke - x.cu_seqlen_ks).max()) + extra  # DeepGEMM's test: (ke - ks).max()
    fn, kv = _fn(x), _kv(x)
    out = fn(x.q, kv, x.weights, cu_seq_len_k_start=x.cu_seqlen_ks, cu_seq_len_k_end=x.cu_seqlen_ke,
             clean_logits=clean, max_seqlen_k=width)
    _check_compressed(out, x, width, clean)
    sel = K.ragged_selection(x.q, x.kv, x.weights, x.cu_seqlen_ks, x.cu_seqlen_ke, max_seqlen_k=width)
    assert sel.rung == "default", sel


@needs_interpreter
def test_compressed_output_in_blocks_of_rows_and_into_out(monkeypatch, no_reference):
    """Rows are gathered a block at a time (the temporary bounded by COMPRESSED_TEMP_BYTES): blocks
    of 2 rows give the same result; out= gets the result in its first columns, nothing past."""
    x = INPUTS["fp8-causal"]
    width = int((x.cu_seqlen_ke - x.cu_seqlen_ks).max())
    whole = K.fp8_mqa_logits(*x.args(), True, width)
    keys = _kv_keys(x)
    monkeypatch.setattr(_prefill, "COMPRESSED_TEMP_BYTES", 2 * (keys * 4 + width * 8))
    assert _prefill._compressed_rows(x.q.shape[0], keys, width) == 2
    blocks = K.fp8_mqa_logits(*x.args(), True, width)
    assert torch.equal(blocks, whole)
    buf = torch.full((x.q.shape[0], width + 9), float("nan"))
    res = K.fp8_mqa_logits(*x.args(), clean_logits=True, max_seqlen_k=width, out=buf)
    assert res.data_ptr() == buf.data_ptr() and tuple(res.shape) == (x.q.shape[0], width)
    assert bool(torch.isnan(buf[:, width:]).all()), "wrote past max_seqlen_k"
    assert torch.equal(res, whole)


def test_compressed_edge_shapes():
    x = P16
    empty_rows = K.bf16_mqa_logits(x.q[:0], x.kv, x.weights[:0], x.cu_seqlen_ks[:0], x.cu_seqlen_ke[:0],
                                   max_seqlen_k=7)
    assert tuple(empty_rows.shape) == (0, 7)
    zero = torch.zeros(5, dtype=torch.int32)
    no_keys = K.bf16_mqa_logits(x.q, x.kv[0][:0], x.weights, zero, zero, False, 7)
    assert tuple(no_keys.shape) == (5, 7) and bool(torch.isneginf(no_keys).all())


def test_compressed_width_checks(no_kernel):
    x = P8
    longest = int((x.cu_seqlen_ke - x.cu_seqlen_ks).max())
    for bad in (-1, 1.5, True, None, torch.tensor(4)):
        refusal(lambda: K.fp8_mqa_logits(*x.args(), True, bad), "max_seqlen_k", "expected an int >= 0")
    # a window longer than the compressed width: refused while value checks run (CPU default)
    refusal(lambda: K.fp8_mqa_logits(*x.args(), False, longest - 1), "max_seqlen_k", f"= {longest}")


@needs_interpreter
def test_compressed_width_without_value_checks_cuts_the_windows():
    x = P8
    longest = int((x.cu_seqlen_ke - x.cu_seqlen_ks).max())
    full = K.fp8_mqa_logits(*x.args(), True, longest)
    cut = K.fp8_mqa_logits(*x.args(), True, longest - 3, check_values=False)
    assert torch.equal(cut, full[:, : longest - 3])


# ---------------------------------------------------------------------------------------------
# fp8_fp4_paged_mqa_logits / fp8_fp4_mqa_logits: served for fp8 inputs, fp4 refused.

D2 = make_decode_inputs(FP8_N2_2D, 3, 192, seed=7)


@needs_interpreter
@pytest.mark.parametrize("clean", [False, True])
def test_fp8_fp4_paged_serves_fp8_q(clean, no_reference):
    """DeepGEMM 54e2261's test call, keyword for keyword, with (q, None): the same logits as
    fp8_paged_mqa_logits, served by the kernel."""
    x = D2
    kwargs = dict(q=(x.q, None), kv_cache=x.kv_cache, weights=x.weights, context_lens=x.context_lens,
                  block_table=x.block_table,
                  schedule_meta=K.get_paged_mqa_logits_metadata(x.context_lens, 64, K.get_num_sms(), indices=None),
                  max_context_len=x.max_context_len, clean_logits=clean, logits_dtype=torch.float, indices=None)
    out = K.fp8_fp4_paged_mqa_logits(**kwargs)
    bare = K.fp8_fp4_paged_mqa_logits(x.q, *x.args()[1:5], None, x.max_context_len, clean)  # q given directly
    legacy = K.fp8_paged_mqa_logits(*x.args()[:5], None, x.max_context_len, clean)
    valid = x.valid_mask()  # past it: -inf with clean_logits, else unspecified
    assert torch.equal(out[valid], legacy[valid]) and torch.equal(bare[valid], legacy[valid])
    ref = paged_mqa_logits_ref(*x.args())
    assert calc_diff(out.masked_fill(~valid, 0), ref.masked_fill(~valid, 0)) < 1e-3
    assert relative_error(out, ref, valid) < 1e-3
    if clean:
        assert torch.equal(torch.isneginf(out), ~valid)
    assert K.paged_selection(*x.args()).rung == "default"


@needs_interpreter
@pytest.mark.parametrize("compressed", [False, True])
def test_fp8_fp4_mqa_serves_fp8_q(compressed, no_reference):
    x = INPUTS["fp8-causal"]
    ks, ke = x.cu_seqlen_ks, x.cu_seqlen_ke
    width = int((ke - ks).max()) if compressed else 0
    kwargs = dict(q=(x.q, None), kv=x.kv, weights=x.weights, cu_seq_len_k_start=ks, cu_seq_len_k_end=ke,
                  clean_logits=not compressed, max_seqlen_k=width, logits_dtype=torch.float)
    out = K.fp8_fp4_mqa_logits(**kwargs)
    assert torch.equal(out, K.fp8_mqa_logits(x.q, x.kv, x.weights, ks, ke, not compressed, width))
    assert torch.equal(out, K.fp8_fp4_mqa_logits(x.q, x.kv, x.weights, ks, ke, not compressed, width))
    if compressed:
        _check_compressed(out, x, width, False)
    else:
        ref = mqa_logits_ref(*x.args())
        assert torch.equal(torch.isneginf(out), torch.isneginf(ref))
        assert calc_diff(out.masked_fill(torch.isneginf(ref), 0), ref.masked_fill(torch.isneginf(ref), 0)) < 1e-3


Q_SF = torch.ones(3, 2, 64, dtype=torch.int32)  # an fp4 q's scales [B, N, H]
Q_FP4 = torch.zeros(3, 2, 64, 64, dtype=torch.int8)  # packed fp4 values [B, N, H, D/2]
FP4_CACHE = torch.zeros(8, 64, 1, 64 + 4, dtype=torch.uint8)  # D/2 + 4 bytes per token
PAGED_FP4_BAD = {
    "q scale given": (dict(q=(D2.q, Q_SF)), "q", "fp4 inputs are not served"),
    "q scale a float tensor": (dict(q=(D2.q, torch.ones(3, 2, 64))), "q", "fp4 inputs are not served"),
    "packed fp4 q with its scale": (dict(q=(Q_FP4, Q_SF)), "q", "fp4 inputs are not served"),
    "packed fp4 q alone": (dict(q=(Q_FP4, None)), "q", "fp4 inputs are not served"),
    "packed fp4 q bare": (dict(q=Q_FP4), "q", "fp4 inputs are not served"),
    "fp4 cache": (dict(kv_cache=FP4_CACHE), "kv_cache", "fp4 inputs are not served"),
    "q a triple": (dict(q=(D2.q, None, None)), "q", "expected (q, None)"),
    "bf16 q": (dict(q=(D2.q.float().to(torch.bfloat16), None)), "q", "bf16_paged_mqa_logits"),
    "logits fp16": (dict(logits_dtype=torch.float16), "logits_dtype", "torch.float32 or torch.bfloat16"),
}


@pytest.mark.parametrize("case", list(PAGED_FP4_BAD))
def test_fp8_fp4_paged_refusals(case, no_kernel):
    change, name, text = PAGED_FP4_BAD[case]
    x = D2
    a = dict(q=(x.q, None), kv_cache=x.kv_cache, weights=x.weights, context_lens=x.context_lens,
             block_table=x.block_table, schedule_meta=None, max_context_len=x.max_context_len)
    a.update(change)
    refusal(lambda: K.fp8_fp4_paged_mqa_logits(**a), name, text)


K_FP4 = (torch.zeros(150, 64, dtype=torch.int8), torch.ones(150, dtype=torch.int32))
RAGGED_FP4_BAD = {
    "q scale given": (dict(q=(P8.q, torch.ones(6, 64, dtype=torch.int32))), "q", "fp4 inputs are not served"),
    "packed fp4 q": (dict(q=(torch.zeros(6, 64, 64, dtype=torch.int8), None)), "q", "fp4 inputs are not served"),
    "fp4 K": (dict(kv=K_FP4), "kv", "fp4 inputs are not served"),
    "int32 K scales": (dict(kv=(P8.kv[0], P8.kv[1].int())), "kv", "fp4 inputs are not served"),
    "bf16 q": (dict(q=(P16.q, None)), "q", "bf16_mqa_logits"),
    "logits fp16": (dict(logits_dtype=torch.float16), "logits_dtype", "torch.float32 or torch.bfloat16"),
    "max_seqlen_k negative": (dict(max_seqlen_k=-2), "max_seqlen_k", "int >= 0"),
}


@pytest.mark.parametrize("case", list(RAGGED_FP4_BAD))
def test_fp8_fp4_mqa_refusals(case, no_kernel):
    change, name, text = RAGGED_FP4_BAD[case]
    x = P8
    a = dict(q=(x.q, None), kv=x.kv, weights=x.weights, cu_seq_len_k_start=x.cu_seqlen_ks,
             cu_seq_len_k_end=x.cu_seqlen_ke)
    a.update(change)
    refusal(lambda: K.fp8_fp4_mqa_logits(**a), name, text)


# ---------------------------------------------------------------------------------------------
# indices= (DeepGEMM 54e2261's varlen decode).

TOKENS_PER_REQUEST = [2, 1, 3]


def varlen_inputs(seed: int = 9):
    """DeepGEMM's varlen layout, as its test builds it: one query token per row (next_n = 1), each
    request's block-table row repeated per token, token j of a request seeing one more key than
    token j-1, indices[t] the request of row t."""
    base = make_decode_inputs(FP8_2D, len(TOKENS_PER_REQUEST), 256, lens=[70, 129, 200], seed=seed)
    tps = torch.tensor(TOKENS_PER_REQUEST)
    rows = int(tps.sum())
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(rows, 1, 64, 128, generator=g) * 4).clamp(-448, 448).to(torch.float8_e4m3fn)
    weights = torch.randn(rows, 64, generator=g) / 64
    offsets = torch.cat([torch.arange(n) for n in TOKENS_PER_REQUEST])
    lens = (base.context_lens[:, 0].long().repeat_interleave(tps) + offsets).to(torch.int32)[:, None]
    table = base.block_table.repeat_interleave(tps, dim=0)
    indices = torch.arange(len(TOKENS_PER_REQUEST)).repeat_interleave(tps).to(torch.int32)
    return DecodeInputs(q, base.kv_cache, weights, lens, table, 256, "page_blocked"), indices


@needs_interpreter
@pytest.mark.parametrize("fn", ["fp8_fp4_paged_mqa_logits", "fp8_paged_mqa_logits"])
def test_indices_varlen_decode_is_served(fn, no_reference):
    x, indices = varlen_inputs()
    meta = K.get_paged_mqa_logits_metadata(x.context_lens, 64, K.get_num_sms(), indices=indices)
    assert tuple(meta.shape) == (K.get_num_sms() + 1, 2)
    q = (x.q, None) if fn == "fp8_fp4_paged_mqa_logits" else x.q
    out = getattr(K, fn)(q, x.kv_cache, x.weights, x.context_lens, x.block_table, meta, x.max_context_len,
                         clean_logits=True, indices=indices)
    plain = K.fp8_paged_mqa_logits(*x.args()[:5], meta, x.max_context_len, True)
    assert torch.equal(out, plain)
    ref = paged_mqa_logits_ref(*x.args())
    valid = x.valid_mask()
    assert relative_error(out, ref, valid) < 1e-3 and torch.equal(torch.isneginf(out), ~valid)
    if fn == "fp8_paged_mqa_logits":  # 54e2261's legacy name takes indices as its 9th argument
        pos = K.fp8_paged_mqa_logits(*x.args()[:5], meta, x.max_context_len, True, indices)
        assert torch.equal(pos, plain)
    assert K.paged_selection(*x.args()).rung == "default"


def test_indices_runs_that_deepgemm_would_compute_differently_are_refused(no_kernel):
    """DeepGEMM reads a run's pages through its first row and bounds it by its last row's length:
    a run whose rows differ in the valid pages, or a row longer than its run's last, is refused
    while value checks run (CPU default), not served with other logits."""
    x, indices = varlen_inputs()
    call = lambda y, **kw: K.fp8_fp4_paged_mqa_logits((y.q, None), y.kv_cache, y.weights, y.context_lens,  # noqa: E731
                                                      y.block_table, None, y.max_context_len, False, indices=indices,
                                                      **kw)
    table = x.block_table.clone()
    table[1, 0] = table[1, 0] + 1  # row 1 (request 0's second token) points elsewhere in a valid page
    refusal(lambda: call(replace(x, block_table=table)), "block_table", "row 1 column 0")
    lens = x.context_lens.clone()
    lens[3, 0] = lens[5, 0] + 1  # request 2's first token longer than its last
    refusal(lambda: call(replace(x, context_lens=lens)), "context_lens", "row 3")
    # a table that differs past the valid pages is fine (and never read)
    stale = x.block_table.clone()
    stale[1, 3:] = -(2**31)
    assert K.value_checks_enabled(None, "cpu")
    _checks.check_indices_values(_checks.check_decode(x.q, x.kv_cache, x.weights, x.context_lens, stale, 256),
                                 indices, x.context_lens, stale)


@needs_interpreter
def test_indices_unchecked_runs_are_served_per_row():
    x, indices = varlen_inputs()
    table = x.block_table.clone()
    table[1, 0] = table[1, 0] + 1
    y = replace(x, block_table=table)
    out = K.fp8_paged_mqa_logits(*y.args()[:5], None, 256, True, indices, check_values=False)
    assert torch.equal(out, K.fp8_paged_mqa_logits(*y.args()[:5], None, 256, True, check_values=False))


META = torch.device("meta")
LENS3 = torch.ones(3, dtype=torch.int32)
IDX3 = torch.tensor([0, 0, 1], dtype=torch.int32)
METADATA_INDICES_BAD = {
    "int64": ((LENS3, 64, 8), dict(indices=IDX3.long())),
    "one short": ((LENS3, 64, 8), dict(indices=IDX3[:2])),
    "2 dims": ((LENS3, 64, 8), dict(indices=IDX3[:, None])),
    "next_n 2": ((torch.ones(3, 2, dtype=torch.int32), 64, 8), dict(indices=IDX3)),
    "strided": ((LENS3, 64, 8), dict(indices=torch.stack([IDX3, IDX3], 1)[:, 0])),
    "another device": ((LENS3, 64, 8), dict(indices=IDX3.to(META))),
    "a list": ((LENS3, 64, 8), dict(indices=[0, 0, 1])),
}


@pytest.mark.parametrize("case", list(METADATA_INDICES_BAD))
def test_metadata_indices_refusals(case):
    args, kw = METADATA_INDICES_BAD[case]
    refusal(lambda: K.get_paged_mqa_logits_metadata(*args, **kw), "indices", "expected")


def test_metadata_accepts_indices():
    for lens in (LENS3, LENS3[:, None]):
        meta = K.get_paged_mqa_logits_metadata(lens, 64, 8, indices=IDX3)
        assert tuple(meta.shape) == (9, 2) and not bool(meta.any())
    assert torch.equal(K.get_paged_mqa_logits_metadata(LENS3, 64, 8, None), torch.zeros(9, 2, dtype=torch.int32))


def test_paged_indices_refusals(no_kernel):
    x = D2  # next_n = 2
    refusal(lambda: K.fp8_paged_mqa_logits(*x.args()[:5], None, x.max_context_len, False,
                                           torch.zeros(3, dtype=torch.int32)), "indices", "next_n == 1")
    y, indices = varlen_inputs()
    refusal(lambda: K.fp8_paged_mqa_logits(*y.args()[:5], None, 256, False, indices[:-1]), "indices", "[6]")
    refusal(lambda: K.fp8_paged_mqa_logits(*y.args()[:5], None, 256, False, indices.float()), "indices", "int32")


# ---------------------------------------------------------------------------------------------
# Value checks: when they run.


def test_value_checks_default_on_for_cpu_off_for_cuda(monkeypatch):
    capturing = []
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: bool(capturing))
    on = K.value_checks_enabled
    assert on(None, "cpu") is True
    assert on(None, torch.device("cuda")) is False
    assert on(None, "cuda:1") is False
    assert on(None, "meta") is False  # any device but the CPU: reading it would mean a transfer
    assert on(True, "cuda") is True and on(False, "cpu") is False
    monkeypatch.setenv(_api.ENV_CHECK_VALUES, "1")
    assert on(None, "cuda") is True and on(False, "cuda") is False  # the argument beats the environment
    monkeypatch.setenv(_api.ENV_CHECK_VALUES, "0")
    assert on(None, "cpu") is False and on(True, "cpu") is True
    monkeypatch.setenv(_api.ENV_CHECK_VALUES, "  ")
    assert on(None, "cpu") is True and on(None, "cuda") is False
    monkeypatch.setenv(_api.ENV_CHECK_VALUES, "maybe")
    with pytest.raises(ValueError, match="INDEXER_LOGITS_CHECK_VALUES"):
        on(None, "cpu")
    monkeypatch.delenv(_api.ENV_CHECK_VALUES)
    with pytest.raises(ValueError, match="^check_values: expected True, False or None"):
        on("yes", "cpu")
    capturing.append(1)  # inside a CUDA graph capture: never, whatever is asked
    assert on(True, "cuda") is False
    assert on(True, "cpu") is True


def test_the_entry_points_ask_the_decision_function(monkeypatch):
    """A default call decides by its tensors' device: the decode, chunked and compressed-prefill
    calls on CPU tensors run their value checks; told the tensors were on a GPU (the decision
    function patched), they run none."""
    calls = []
    for name in ("check_decode_values", "check_prefill_paged_values", "check_compressed_values"):
        real = getattr(_checks, name)
        monkeypatch.setattr(_checks, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    monkeypatch.setattr(_prefill, "check_compressed_values", _checks.check_compressed_values)
    monkeypatch.setenv(_dispatch.ENV_BACKEND, "reference")  # quick: no kernel needed to count checks
    d = make_decode_inputs(Problem(), 1, 64, seed=1)
    c = make_prefill_paged_inputs(FP8_CHUNKED, 3, 128, chunk_lens=[1, 2], seed=2)
    p = make_prefill_inputs(FP8_PREFILL, 3, 40, "random", seed=3)

    def run():
        K.fp8_paged_mqa_logits(*d.args()[:5], None, d.max_context_len)
        K.fp8_paged_mqa_logits_chunked(*c.args())
        K.fp8_mqa_logits(*p.args(), False, 40)

    run()
    assert calls == ["check_decode_values", "check_prefill_paged_values", "check_compressed_values"]
    calls.clear()
    real_decide = _api.value_checks_enabled
    for entry_points in ENTRY_MODULES:
        monkeypatch.setattr(entry_points, "value_checks_enabled",
                            lambda flag, device: real_decide(flag, torch.device("cuda") if device.type == "cpu" else device))
    run()
    assert calls == [], calls


def test_reference_honours_check_values_false(monkeypatch):
    """The reference runs the value checks unless told not to, and the runtime's fallback tells it
    not to (it has decided on them already: one check per call, not two)."""
    calls = []
    for name in ("check_decode_values", "check_prefill_paged_values"):
        real = getattr(_checks, name)
        monkeypatch.setattr(_checks, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    d = make_decode_inputs(Problem(), 2, 128, seed=4)
    c = make_prefill_paged_inputs(FP8_CHUNKED, 3, 128, chunk_lens=[1, 2], seed=5)
    _reference.paged_mqa_logits_ref(*d.args())
    _reference.paged_mqa_logits_chunked_ref(*c.args())
    assert calls == ["check_decode_values", "check_prefill_paged_values"]
    calls.clear()
    a = _reference.paged_mqa_logits_ref(*d.args(), check_values=False)
    b = _reference.paged_mqa_logits_chunked_ref(*c.args(), check_values=False)
    assert calls == []
    assert torch.equal(a, paged_mqa_logits_ref(*d.args())) and torch.equal(b, paged_mqa_logits_chunked_ref(*c.args()))
    # prefill: windows out of range raise with the checks, and are clamped without them
    p = make_prefill_inputs(FP8_PREFILL, 3, 40, "random", seed=6)
    bad_ks = p.cu_seqlen_ks.clone()
    bad_ks[0] = -1
    with pytest.raises(ValueError, match="^cu_seqlen_ks"):
        _reference.mqa_logits_ref(p.q, p.kv, p.weights, bad_ks, p.cu_seqlen_ke)
    _reference.mqa_logits_ref(p.q, p.kv, p.weights, bad_ks, p.cu_seqlen_ke, check_values=False)
    # the runtime's reference fallback: the runtime's own check, once
    calls.clear()
    monkeypatch.setenv(_dispatch.ENV_BACKEND, "reference")
    K.fp8_paged_mqa_logits(*d.args()[:5], None, d.max_context_len)
    K.fp8_paged_mqa_logits_chunked(*c.args())
    assert calls == ["check_decode_values", "check_prefill_paged_values"]


# ---------------------------------------------------------------------------------------------
# On a GPU: a default call does not synchronise with the host, and a kernel serves it.


@pytest.mark.gpu
def test_gpu_default_calls_do_not_synchronise():
    dev = "cuda"
    d = make_decode_inputs(Problem(), 4, 2048, seed=10, device=dev)
    d2 = make_decode_inputs(FP8_N2_2D, 4, 1024, seed=11, device=dev)
    p = make_prefill_inputs(FP8_PREFILL, 256, 2048, "causal", seed=12, device=dev, num_seqs=2)
    c = make_prefill_paged_inputs(FP8_CHUNKED, 300, 2048, seed=13, device=dev)
    width = int((p.cu_seqlen_ke - p.cu_seqlen_ks).max())
    num_sms = K.get_num_sms()
    assert num_sms == torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def calls():
        meta = K.get_paged_mqa_logits_metadata(d.context_lens, 64, num_sms)
        return [
            K.fp8_paged_mqa_logits(*d.args()[:5], meta, d.max_context_len, clean_logits=False),
            K.fp8_fp4_paged_mqa_logits((d2.q, None), *d2.args()[1:5], meta, d2.max_context_len, clean_logits=True),
            K.fp8_mqa_logits(p.q, p.kv, p.weights, p.cu_seqlen_ks, p.cu_seqlen_ke, clean_logits=True),
            K.fp8_mqa_logits(p.q, p.kv, p.weights, cu_seq_len_k_start=p.cu_seqlen_ks, cu_seq_len_k_end=p.cu_seqlen_ke,
                             clean_logits=False, max_seqlen_k=width),
            K.fp8_paged_mqa_logits_chunked(*c.args()),
        ]

    calls()  # warm-up: selection, module load, compilation (as an engine's warm-up does)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outs = calls()  # any host synchronisation raises here
        # the mode is a prototype that "does not yet detect all synchronizing operations": it does
        # catch the value checks' reads, the synchronisation a default call used to make
        with pytest.raises(RuntimeError, match="synchroniz"):
            K.fp8_paged_mqa_logits(*d.args()[:5], None, d.max_context_len, check_values=True)
        with pytest.raises(RuntimeError, match="synchroniz"):
            K.fp8_mqa_logits(*p.args(), False, width, check_values=True)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    for sel in (K.paged_selection(*d.args()), K.paged_selection(*d2.args()),
                K.ragged_selection(*p.args()), K.ragged_selection(*p.args(), max_seqlen_k=width),
                K.chunked_selection(*c.args(), scale_layout=c.scale_layout)):
        assert sel.rung != "reference", sel
    dec, dec2, pre, comp, chk = (o.cpu() for o in outs)
    for out, x in ((dec, d), (dec2, d2)):
        valid = x.valid_mask().cpu()
        assert relative_error(out, paged_mqa_logits_ref(*x.args()).cpu(), valid) < 1e-3
    ref = mqa_logits_ref(*p.args()).cpu()
    inf = torch.isneginf(ref)
    assert torch.equal(torch.isneginf(pre), inf) and calc_diff(pre.masked_fill(inf, 0), ref.masked_fill(inf, 0)) < 1e-3
    wide = _rebuild_wide(comp, p.cu_seqlen_ks.cpu(), p.cu_seqlen_ke.cpu(), ref.shape[1])
    assert torch.equal(torch.isneginf(wide), inf) and calc_diff(wide.masked_fill(inf, 0), ref.masked_fill(inf, 0)) < 1e-3
    cref = paged_mqa_logits_chunked_ref(*c.args(), scale_layout=c.scale_layout).cpu()
    assert relative_error(chk, cref, c.valid_mask().cpu()) < 1e-3
