"""The peers' own indexer tests, run against this runtime through `import indexer_logits as
deep_gemm` (issue 26's 'Done when'): their generators, their calls (names, keywords, positional
order) and their pass criteria, re-written from reading them:

- DeepGEMM tests/test_attention.py at 0f5f266 (2026-01-16): test_mqa_logits (H=64, D=128, the
  causal and context-parallel windows, plain and compressed output) and test_paged_mqa_logits
  (page 64, 1-D lens with clean_logits=True and the exact -inf mask, 2-D lens with
  clean_logits=False); the stored version 00b1d2d adds page 32 (1-D and 2-D lens here);
- DeepGEMM tests/test_attention.py at 54e2261 (2026-06-23), its SM90 cases: fp8_fp4_mqa_logits
  and fp8_fp4_paged_mqa_logits with (q, None), H in {32, 64}, D in {32, 64, 128} (prefill) and
  128 (paged), logits_dtype float32 and bf16, 2-D lens, the 'simulated' criterion (calc_diff
  against the reference on the dequantized inputs < 5e-6, 3e-5 with bf16 logits) and the
  self-consistency check (repeated calls bitwise equal, 20 times on the GPU, once on CPU);
- vLLM tests/kernels/attention/test_deepgemm_attention.py at 00a817a: H=32, D=128, prefill
  512 x 1024 (exact -inf mask), paged (4, 1) and (2, 2) at max_model_len 4096 (calc_diff only);
- SGLang python/sglang/srt/layers/attention/nsa/nsa_indexer.py at 005e8bf, the calls of
  _get_topk_paged (2-D index-K pool viewed [pages, 64, 1, 132], q viewed [B, 1, H, D], weights
  [T, H, 1] squeezed, clean_logits=False, max_seq_len = table width * 64, the SM count from
  get_num_sms()) and _get_topk_ragged (K gathered per request, ks/ke per token,
  clean_logits=False, row-chunked calls on views); SGLang has no test of its own for these, so
  DeepGEMM's criterion (calc_diff < 1e-3) and SGLang's own shape assertions apply.

Every passing peer criterion is DeepGEMM's: calc_diff < 1e-3 against the reference computed from
the unquantized bf16 inputs, and the -inf mask exactly equal where the peer checks it. Every call
must be served by a kernel: the torch reference is patched to fail, and the dispatch rung is
asserted: D=32 and page 32 by their family defaults, bf16 logits (54e2261's logits_dtype) by
the float32 kernels storing into a bf16 output.

CPU: the kernels run under TRITON_INTERPRET=1 (conftest) at scaled-down shapes (test_cpu_*).
GPU: the same tests at the peers' own shapes (test_gpu_*, marker gpu), in two runs of a few
minutes each (54e2261's prefill enumeration is 120 cases):
    .venv/bin/python -m pytest -q -m gpu tests/test_peer_suites.py -k "not 54e2261_mqa" -rfEX
    .venv/bin/python -m pytest -q -m gpu tests/test_peer_suites.py -k "54e2261_mqa" -rfEX
"""

from __future__ import annotations

from typing import Optional

import pytest
import torch

import indexer_logits as deep_gemm
from indexer_logits import _chunked, _decode, _prefill

from _peer_inputs import (calc_diff, deepgemm_paged_0f5f266, deepgemm_paged_54e2261, deepgemm_prefill, sglang_decode,
                          sglang_prefill, widen)
from conftest import INTERPRET

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
KERNEL_RUNGS = ("exact", "nearest", "predicted", "default")  # every rung but the reference (_dispatch.Selection)
REPEATS = 1 if INTERPRET else 20  # 54e2261's self-consistency loop runs 20 times
cpu_only = pytest.mark.skipif(not INTERPRET, reason="scaled-down shapes for the interpreter; the GPU runs test_gpu_*")
gpu = pytest.mark.gpu


@pytest.fixture(autouse=True)
def kernel_only(clean_runtime, monkeypatch):
    """A clean runtime whose torch reference fails the test if a call reaches it."""

    def boom(*args, **kwargs):
        raise AssertionError("the torch reference served a call a kernel should serve")

    for module, name in ((_prefill, "mqa_logits_ref"), (_decode, "paged_mqa_logits_ref"),
                         (_chunked, "paged_mqa_logits_chunked_ref")):
        monkeypatch.setattr(module, name, boom)
    deep_gemm.set_num_sms(None)
    yield
    deep_gemm.set_num_sms(None)


def dev() -> str:
    return "cpu" if INTERPRET else "cuda"


def assert_kernel(sel) -> None:
    assert sel.rung in KERNEL_RUNGS, f"served by rung {sel.rung!r}, not a kernel: {sel}"


def assert_mask_and_diff(logits, ref, invalid, *, exact_mask: bool, limit: float = 1e-3, simulated=None,
                         simulated_limit: float = 5e-6) -> None:
    """The peers' criterion: the -inf mask (where they check it), then calc_diff with the
    masked positions zeroed in both."""
    logits = logits.float()
    if exact_mask:
        assert torch.equal(torch.isneginf(logits), invalid), "-inf mask differs from the peer's"
    got = logits.masked_fill(invalid, 0)
    diff = calc_diff(got, ref.masked_fill(invalid, 0))
    assert diff < limit, f"calc_diff {diff:.3g} >= {limit}"
    if simulated is not None:
        sdiff = calc_diff(got, simulated.masked_fill(invalid, 0))
        assert sdiff < simulated_limit, f"simulated calc_diff {sdiff:.3g} >= {simulated_limit}"


# ---------------------------------------------------------------------------------------------
# Ragged prefill: DeepGEMM 0f5f266 and vLLM (fp8_mqa_logits), DeepGEMM 54e2261 (fp8_fp4_mqa_logits).


def run_prefill_0f5f266(seq_len, seq_len_kv, compressed, disable_cp, heads=64, head_dim=128, seed=0):
    x = deepgemm_prefill(seq_len, seq_len_kv, heads, head_dim, disable_cp, dev(), seed)
    if compressed:
        width = int((x.ke - x.ks).max())
        logits = deep_gemm.fp8_mqa_logits(x.q, x.kv, x.weights, x.ks, x.ke, max_seqlen_k=width, clean_logits=False)
        assert tuple(logits.size()) == (seq_len, width)
        logits = widen(logits, x.ks, x.ke, seq_len_kv)
    else:
        width = 0
        logits = deep_gemm.fp8_mqa_logits(x.q, x.kv, x.weights, x.ks, x.ke)
    assert_kernel(deep_gemm.ragged_selection(x.q, x.kv, x.weights, x.ks, x.ke, max_seqlen_k=width))
    ref_inf = torch.isneginf(x.ref)
    # the peer: the -inf masks equal, then each masked by its own mask
    assert torch.equal(torch.isneginf(logits), ref_inf)
    assert calc_diff(logits.masked_fill(ref_inf, 0), x.ref.masked_fill(ref_inf, 0)) < 1e-3


def run_prefill_54e2261(logits_dtype, compressed, seq_len, seq_len_kv, heads, head_dim, disable_cp, seed=0):
    x = deepgemm_prefill(seq_len, seq_len_kv, heads, head_dim, disable_cp, dev(), seed)
    width = int((x.ke - x.ks).max()) if compressed else 0
    kwargs = dict(q=(x.q, None), kv=x.kv, weights=x.weights, cu_seq_len_k_start=x.ks, cu_seq_len_k_end=x.ke,
                  clean_logits=not compressed, max_seqlen_k=width, logits_dtype=logits_dtype)
    logits = deep_gemm.fp8_fp4_mqa_logits(**kwargs)
    assert_kernel(deep_gemm.ragged_selection(x.q, x.kv, x.weights, x.ks, x.ke, max_seqlen_k=width))
    if compressed:
        inside = torch.arange(logits.size(1), device=logits.device)[None, :] < (x.ke - x.ks)[:, None]
        first = logits.masked_fill(~inside, 0)
    else:
        first = logits
    for _ in range(REPEATS):
        again = deep_gemm.fp8_fp4_mqa_logits(**kwargs)
        if compressed:
            again = again.masked_fill(~inside, 0)
        assert torch.equal(again, first), "a repeated call gave other bits"
    if compressed:
        assert tuple(logits.size()) == (seq_len, width)
        logits = widen(logits, x.ks, x.ke, seq_len_kv)
    bf16 = logits_dtype == torch.bfloat16
    assert_mask_and_diff(logits, x.ref, torch.isneginf(x.ref), exact_mask=True, simulated=x.simulated,
                         simulated_limit=3e-5 if bf16 else 5e-6)


def run_prefill_vllm(disable_cp, seq_len=512, seq_len_kv=1024, seed=0):
    x = deepgemm_prefill(seq_len, seq_len_kv, 32, 128, disable_cp, dev(), seed)
    logits = deep_gemm.fp8_mqa_logits(x.q, x.kv, x.weights, x.ks, x.ke)
    assert_kernel(deep_gemm.ragged_selection(x.q, x.kv, x.weights, x.ks, x.ke))
    ref_inf = torch.isneginf(x.ref)
    assert torch.equal(torch.isneginf(logits), ref_inf)
    assert calc_diff(logits.masked_fill(ref_inf, 0), x.ref.masked_fill(ref_inf, 0)) < 1e-3


def run_prefill_sglang(prefix_lens, extend_lens, chunk_rows: Optional[int], heads=64, head_dim=128, seed=0):
    x = sglang_prefill(prefix_lens, extend_lens, heads, head_dim, dev(), seed)
    weights = x.weights.unsqueeze(-1).squeeze(-1)  # SGLang's [T, H, 1] weights, squeezed
    q_offset, k_offset = x.ks.shape[0], x.keys
    inside = ~torch.isneginf(x.ref)
    if chunk_rows is None:
        logits = deep_gemm.fp8_mqa_logits(x.q[:q_offset], x.kv, weights[:q_offset], x.ks, x.ke, clean_logits=False)
        assert logits.shape[0] == q_offset and logits.shape[1] == k_offset
        assert_kernel(deep_gemm.ragged_selection(x.q, x.kv, weights, x.ks, x.ke))
        assert calc_diff(logits.masked_fill(~inside, 0), x.ref.masked_fill(~inside, 0)) < 1e-3
        return
    parts = []
    for start in range(0, q_offset, chunk_rows):  # row blocks of views, as SGLang's chunk path
        end = min(start + chunk_rows, q_offset)
        part = deep_gemm.fp8_mqa_logits(x.q[start:end], x.kv, weights[start:end], x.ks[start:end], x.ke[start:end],
                                        clean_logits=False)
        assert tuple(part.shape) == (end - start, k_offset)
        assert_kernel(deep_gemm.ragged_selection(x.q[start:end], x.kv, weights[start:end], x.ks[start:end],
                                                 x.ke[start:end]))
        parts.append(part)
    logits = torch.cat(parts)  # the criterion is over the whole output (a block of few keys is noise)
    assert calc_diff(logits.masked_fill(~inside, 0), x.ref.masked_fill(~inside, 0)) < 1e-3


# ---------------------------------------------------------------------------------------------
# Paged decode.


def run_paged_0f5f266(two_d, batch, next_n, avg_kv, max_model_len, page=64, heads=64, head_dim=128,
                      pool_pages=None, seed=0):
    x = deepgemm_paged_0f5f266(batch, next_n, heads, head_dim, avg_kv, two_d, max_model_len, dev(), seed, page,
                               pool_pages)
    meta = deep_gemm.get_paged_mqa_logits_metadata(x.context_lens, page, deep_gemm.get_num_sms())
    logits = deep_gemm.fp8_paged_mqa_logits(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, meta,
                                            max_model_len, clean_logits=not two_d)
    assert tuple(logits.shape) == (batch * next_n, max_model_len)
    assert_kernel(deep_gemm.paged_selection(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, max_model_len))
    assert_mask_and_diff(logits, x.ref, x.invalid, exact_mask=not two_d)


def run_paged_54e2261(logits_dtype, batch, next_n, heads, avg_kv, head_dim=128, seed=0):
    x = deepgemm_paged_54e2261(batch, next_n, heads, head_dim, avg_kv, dev(), seed)
    assert int(x.block_table.min()) >= 0 and int(x.block_table.max()) < x.kv_cache.shape[0]
    assert int(x.context_lens.max()) <= x.max_model_len
    kwargs = dict(q=(x.q, None), kv_cache=x.kv_cache, weights=x.weights, context_lens=x.context_lens,
                  block_table=x.block_table,
                  schedule_meta=deep_gemm.get_paged_mqa_logits_metadata(x.context_lens, x.page, deep_gemm.get_num_sms(),
                                                                        indices=None),
                  max_context_len=x.max_model_len, clean_logits=False, logits_dtype=logits_dtype, indices=None)
    logits = deep_gemm.fp8_fp4_paged_mqa_logits(**kwargs)
    assert_kernel(deep_gemm.paged_selection(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table,
                                            x.max_model_len))
    first = logits.masked_fill(x.invalid, 0)
    for _ in range(REPEATS):
        assert torch.equal(deep_gemm.fp8_fp4_paged_mqa_logits(**kwargs).masked_fill(x.invalid, 0), first), \
            "a repeated call gave other bits"
    assert logits.dtype == logits_dtype
    bf16 = logits_dtype == torch.bfloat16
    assert_mask_and_diff(logits, x.ref, x.invalid, exact_mask=False, simulated=x.simulated,
                         simulated_limit=3e-5 if bf16 else 5e-6)


def run_paged_vllm(batch, next_n, max_model_len=4096, avg_kv=2048, seed=0):
    """vLLM: lens in [0.8, 1.2) * avg_kv (DeepGEMM's generator otherwise), a pool of
    max_model_len * 2 pages, the default clean_logits, calc_diff on the 1-D mask only."""
    x = deepgemm_paged_0f5f266(batch, next_n, 32, 128, avg_kv, False, max_model_len, dev(), seed,
                               pool_pages=max_model_len * 2, spread=(0.8, 1.2))
    meta = deep_gemm.get_paged_mqa_logits_metadata(x.context_lens, 64, deep_gemm.get_num_sms())
    logits = deep_gemm.fp8_paged_mqa_logits(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, meta,
                                            max_model_len)
    assert_kernel(deep_gemm.paged_selection(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, max_model_len))
    assert_mask_and_diff(logits, x.ref, x.invalid, exact_mask=False)


def run_decode_sglang(seq_lens, pool_pages, table_pages, heads=64, head_dim=128, seed=0):
    sm_count = deep_gemm.get_num_sms()  # SGLang's Indexer.__init__
    x = sglang_decode(seq_lens, heads, head_dim, pool_pages, table_pages, dev(), seed)
    block_tables, page = x.block_table, 64
    max_seq_len = block_tables.shape[1] * page
    kv_cache_fp8 = x.kv_cache
    assert len(kv_cache_fp8.shape) == 2
    kv_cache_fp8 = kv_cache_fp8.view(kv_cache_fp8.shape[0], page, 1, head_dim + 4)
    weights = x.weights.squeeze(2)
    q_fp8 = x.q.view(-1, heads, head_dim)  # SGLang holds q as [T, H, D] ...
    q_fp8 = q_fp8.view(block_tables.shape[0], -1, heads, head_dim)  # ... and views it per request
    meta = deep_gemm.get_paged_mqa_logits_metadata(x.context_lens, page, sm_count)
    logits = deep_gemm.fp8_paged_mqa_logits(q_fp8, kv_cache_fp8, weights, x.context_lens, block_tables, meta,
                                            max_seq_len, clean_logits=False)
    assert tuple(logits.shape) == (len(seq_lens), max_seq_len)
    assert_kernel(deep_gemm.paged_selection(q_fp8, kv_cache_fp8, weights, x.context_lens, block_tables, max_seq_len))
    assert_mask_and_diff(logits, x.ref, x.invalid, exact_mask=False)


# ---------------------------------------------------------------------------------------------
# The peers' enumerations.


def cases_54e2261_prefill(shapes, logits_dtypes=(torch.float32,), heads=(32, 64), dims=(32, 64, 128)):
    """54e2261's SM90 enumeration over the given (seq_len, seq_len_kv) shapes."""
    out = []
    for dtype in logits_dtypes:
        for compressed in (False, True):
            for seq_len, seq_len_kv in shapes:
                for h in heads:
                    for d in dims:
                        for disable_cp in (False, True):
                            if not disable_cp and (seq_len_kv % seq_len or seq_len % 2):
                                continue
                            out.append((dtype, compressed, seq_len, seq_len_kv, h, d, disable_cp))
    return out


def _cases_54e2261_paged(batches=(256, 4096), avg_kvs=(8192, 65536), bf16_at=(256, 8192),
                         pool_cap: Optional[int] = 32 * 1024 * 1024):
    """54e2261's SM90 paged enumeration (fp8, page 64, D=128, 2-D lens, clean_logits=False); bf16
    logits at one (batch, avg_kv) only (the same kernels as float32, whose store rounds to bf16:
    the other shapes would time the same code twice)."""
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for batch in batches:
            for next_n in (1, 2):
                for heads in (32, 64):
                    for avg_kv in avg_kvs:
                        if pool_cap is not None and batch * avg_kv > pool_cap:
                            continue
                        if dtype == torch.float32 or (batch, avg_kv) == bf16_at:
                            out.append((dtype, batch, next_n, heads, avg_kv))
    return out


def _id(v):
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    return str(v)


# ---------------------------------------------------------------------------------------------
# CPU: the interpreter, at scaled-down shapes.


@pytest.mark.parametrize("ue8m0", [False, True])
def test_packing_a_cache_a_block_of_pages_at_a_time_changes_no_byte(ue8m0, monkeypatch):
    """pack_paged_cache quantizes PACK_PAGES pages at a time (the 4096 x 8K case's peak memory): the bytes
    and the dequantized copy are those of packing the cache whole."""
    import _peer_inputs as P
    cache = torch.randn(7, 64, 1, 32, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    whole = P.pack_paged_cache(cache, ue8m0)
    monkeypatch.setattr(P, "PACK_PAGES", 3)
    blocks = P.pack_paged_cache(cache, ue8m0)
    assert torch.equal(whole[0], blocks[0]) and torch.equal(whole[1], blocks[1])
    values, scale = P.quantize_rows(cache, ue8m0)
    assert torch.equal(whole[1], P.dequantize_rows(values, scale))


def test_the_criteria_can_fail():
    """The pass criteria reject a wrong mask, a wrong value and a drift past the simulated bound."""
    x = deepgemm_prefill(32, 128, 64, 128, False, "cpu", seed=1)
    ref, invalid = x.ref, torch.isneginf(x.ref)
    assert_mask_and_diff(ref.clone(), ref, invalid, exact_mask=True, simulated=x.simulated, simulated_limit=1e-2)
    shifted = ref.clone()
    row = int((x.ke - x.ks).argmax())
    shifted[row, int(x.ke[row]) - 1] = float("-inf")  # one key of one window dropped
    with pytest.raises(AssertionError, match="-inf mask"):
        assert_mask_and_diff(shifted, ref, invalid, exact_mask=True)
    with pytest.raises(AssertionError, match="^calc_diff"):
        assert_mask_and_diff(ref * 0.9, ref, invalid, exact_mask=False, limit=1e-3)  # 10% off: diff ~5.5e-3
    with pytest.raises(AssertionError, match="^simulated calc_diff"):
        assert_mask_and_diff(ref, ref, invalid, exact_mask=False, simulated=ref * 0.99)


@cpu_only
@pytest.mark.parametrize("compressed", [False, True], ids=["wide", "compressed"])
@pytest.mark.parametrize("disable_cp", [False, True], ids=["cp", "causal"])
def test_cpu_deepgemm_0f5f266_mqa_logits(compressed, disable_cp):
    run_prefill_0f5f266(64, 256, compressed, disable_cp)


@cpu_only
@pytest.mark.parametrize(
    "case",
    # 54e2261's whole SM90 enumeration at two scaled-down shapes, bf16 logits at one
    cases_54e2261_prefill([(32, 128), (64, 96)]) + cases_54e2261_prefill([(32, 128)], logits_dtypes=(torch.bfloat16,)),
    ids=lambda c: "-".join(map(_id, c)))
def test_cpu_deepgemm_54e2261_mqa_logits(case):
    run_prefill_54e2261(*case)


@cpu_only
@pytest.mark.parametrize("disable_cp", [False, True], ids=["cp", "causal"])
def test_cpu_vllm_mqa_logits(disable_cp):
    run_prefill_vllm(disable_cp, seq_len=64, seq_len_kv=128)


@cpu_only
@pytest.mark.parametrize("chunk_rows", [None, 17], ids=["whole", "row-chunks"])
def test_cpu_sglang_ragged(chunk_rows):
    run_prefill_sglang([0, 137, 5, 60], [40, 9, 1, 30], chunk_rows)


@cpu_only
@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("batch,next_n", [(3, 1), (2, 2)])
def test_cpu_deepgemm_0f5f266_paged(two_d, batch, next_n):
    run_paged_0f5f266(two_d, batch, next_n, avg_kv=160, max_model_len=320)


@cpu_only
@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
def test_cpu_deepgemm_00b1d2d_paged_page32(two_d):
    run_paged_0f5f266(two_d, 2, 1, avg_kv=100, max_model_len=192, page=32)


@cpu_only
@pytest.mark.parametrize("case", _cases_54e2261_paged(batches=(3,), avg_kvs=(100, 300), bf16_at=(3, 100), pool_cap=None),
                         ids=lambda c: "-".join(map(_id, c)))
def test_cpu_deepgemm_54e2261_paged(case):
    run_paged_54e2261(*case)


@cpu_only
@pytest.mark.parametrize("batch,next_n", [(2, 1), (2, 2)])
def test_cpu_vllm_paged(batch, next_n):
    run_paged_vllm(batch, next_n, max_model_len=256, avg_kv=160)


@cpu_only
def test_cpu_sglang_decode():
    run_decode_sglang([1, 200, 64, 130], pool_pages=24, table_pages=5)


# ---------------------------------------------------------------------------------------------
# GPU: the peers' own shapes.


@gpu
@pytest.mark.parametrize("seq_len", [2048, 4096])
@pytest.mark.parametrize("compressed", [False, True], ids=["wide", "compressed"])
@pytest.mark.parametrize("seq_len_kv", [4096, 8192])
@pytest.mark.parametrize("disable_cp", [False, True], ids=["cp", "causal"])
def test_gpu_deepgemm_0f5f266_mqa_logits(seq_len, compressed, seq_len_kv, disable_cp):
    run_prefill_0f5f266(seq_len, seq_len_kv, compressed, disable_cp)


@gpu
@pytest.mark.parametrize(
    "case",
    cases_54e2261_prefill([(2048, 8192), (2048, 65536), (8192, 8192), (8192, 65536)])
    # bf16 logits (the float32 kernels, rounding as they store) at the smallest shape only
    + cases_54e2261_prefill([(2048, 8192)], logits_dtypes=(torch.bfloat16,)),
    ids=lambda c: "-".join(map(_id, c)))
def test_gpu_deepgemm_54e2261_mqa_logits(case):
    run_prefill_54e2261(*case)


@gpu
@pytest.mark.parametrize("disable_cp", [False, True], ids=["cp", "causal"])
def test_gpu_vllm_mqa_logits(disable_cp):
    run_prefill_vllm(disable_cp)


@gpu
@pytest.mark.parametrize("chunk_rows", [None, 3000], ids=["whole", "row-chunks"])
def test_gpu_sglang_ragged(chunk_rows):
    run_prefill_sglang([0, 6000, 1500, 30000], [4096, 2048, 1, 1800], chunk_rows)


@gpu
@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("batch,next_n", [(64, 1), (64, 2), (128, 1)])
@pytest.mark.parametrize("avg_kv", [8192, 32768])
def test_gpu_deepgemm_0f5f266_paged(two_d, batch, next_n, avg_kv):
    run_paged_0f5f266(two_d, batch, next_n, avg_kv, max_model_len=111 * 1000)


@gpu
@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
def test_gpu_deepgemm_00b1d2d_paged_page32(two_d):
    run_paged_0f5f266(two_d, 64, 1, 8192, max_model_len=111 * 1000, page=32)


@gpu
@pytest.mark.parametrize("case", _cases_54e2261_paged(), ids=lambda c: "-".join(map(_id, c)))
def test_gpu_deepgemm_54e2261_paged(case):
    run_paged_54e2261(*case)


@gpu
@pytest.mark.parametrize("batch,next_n", [(4, 1), (2, 2)])
def test_gpu_vllm_paged(batch, next_n):
    run_paged_vllm(batch, next_n)


@gpu
@pytest.mark.parametrize("batch", [1, 64, 128])
def test_gpu_sglang_decode(batch):
    g = torch.Generator().manual_seed(batch)
    lens = torch.randint(1, 32768, (batch,), generator=g).tolist()
    lens[0] = 1 if batch > 1 else lens[0]
    run_decode_sglang(lens, pool_pages=sum(-(-n // 64) for n in lens) + 1000, table_pages=32768 // 64 + 8)
