"""An SGLang / vLLM decode call site, switched from DeepGEMM to this runtime by one import line.

The call below is DeepGEMM's, argument for argument and type for type:

    logits = deep_gemm.fp8_paged_mqa_logits(q_fp8, kv_cache_fp8, weights, seq_lens, block_tables,
                                            schedule_metadata, max_seq_len, clean_logits=False)

with `schedule_metadata` from `get_paged_mqa_logits_metadata(seq_lens, block_kv, num_sms)`. The
cache is the engines' fp8 index cache: [num_pages, 64, 1, 132] uint8, each page 64 * 128 fp8
values then 64 fp32 scales, pages scattered in a larger pool.
"""

from __future__ import annotations

import torch

# The one-line change at the call site:
#   - import deep_gemm
#   + import indexer_logits as deep_gemm
import indexer_logits as deep_gemm
from tuner.layouts import CacheLayout, pack_pages
from tuner.reference import paged_mqa_logits_ref, relative_error

from conftest import INTERPRET

PAGE, HEADS, HEAD_DIM = 64, 64, 128


def _engine_state(batch: int, next_n: int, max_seq_len: int, device: str, seed: int = 0):
    """What an engine holds at a decode step: the index-cache pool, block tables, seq lens."""
    g = torch.Generator().manual_seed(seed)
    max_pages = max_seq_len // PAGE
    pool_pages = batch * max_pages * 2
    layout = CacheLayout("fp8", PAGE, "page_blocked", HEAD_DIM)
    kv_cache_fp8 = pack_pages(torch.randn(pool_pages, PAGE, HEAD_DIM, generator=g), layout).to(device)
    block_tables = torch.randperm(pool_pages, generator=g)[: batch * max_pages].reshape(batch, max_pages)
    block_tables = block_tables.to(device=device, dtype=torch.int32)
    seq_lens = torch.randint(next_n, max_seq_len + 1, (batch,), generator=g, dtype=torch.int32).to(device)
    q_fp8 = (torch.randn(batch, next_n, HEADS, HEAD_DIM, generator=g) * 3).to(torch.float8_e4m3fn).to(device)
    weights = (torch.randn(batch * next_n, HEADS, generator=g) * HEADS ** -0.5 * HEAD_DIM ** -0.5).to(device)
    return q_fp8, kv_cache_fp8, weights, seq_lens, block_tables


def test_deepgemm_call_site(device):
    batch, next_n, max_seq_len = 2, 2, 256
    q_fp8, kv_cache_fp8, weights, seq_lens, block_tables = _engine_state(batch, next_n, max_seq_len, device)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else 8

    # --- the call site, unchanged ---
    schedule_metadata = deep_gemm.get_paged_mqa_logits_metadata(seq_lens, 64, num_sms)
    logits = deep_gemm.fp8_paged_mqa_logits(q_fp8, kv_cache_fp8, weights, seq_lens, block_tables,
                                            schedule_metadata, max_seq_len, clean_logits=False)
    # ---

    assert logits.dtype == torch.float32 and tuple(logits.shape) == (batch * next_n, max_seq_len)
    ref = paged_mqa_logits_ref(q_fp8, kv_cache_fp8, weights, seq_lens, block_tables, max_seq_len)
    valid = torch.isfinite(ref)  # the reference puts -inf past each row's length
    assert relative_error(logits.cpu(), ref.cpu(), valid.cpu()) < 1e-3
    if INTERPRET:  # served by a kernel (the family default), not the reference fallback
        sel = deep_gemm.paged_selection(q_fp8, kv_cache_fp8, weights, seq_lens, block_tables, max_seq_len)
        assert sel.rung in ("exact", "nearest", "predicted", "default"), sel


def test_deepgemm_call_site_keywords_and_clean_logits(device):
    """DeepGEMM's keyword names work too, and clean_logits=True gives -inf past the lengths."""
    q_fp8, kv_cache_fp8, weights, seq_lens, block_tables = _engine_state(2, 1, 128, device, seed=1)
    meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens=seq_lens, block_kv=64, num_sms=4)
    logits = deep_gemm.fp8_paged_mqa_logits(q=q_fp8, kv_cache=kv_cache_fp8, weights=weights, context_lens=seq_lens,
                                            block_table=block_tables, schedule_meta=meta, max_context_len=128,
                                            clean_logits=True)
    ref = paged_mqa_logits_ref(q_fp8, kv_cache_fp8, weights, seq_lens, block_tables, 128)
    valid = torch.isfinite(ref)
    assert relative_error(logits.cpu(), ref.cpu(), valid.cpu()) < 1e-3
    assert torch.equal(torch.isneginf(logits.cpu()), ~valid.cpu())
