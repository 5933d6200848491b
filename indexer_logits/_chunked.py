"""Chunked prefill over the paged cache: fp8_paged_mqa_logits_chunked and its bf16 twin."""

from __future__ import annotations

from typing import Optional

import torch

from ._checks import (check_prefill_paged)
from ._dispatch import Selection, select
from ._identity import PREFILL_PAGED, problem_dict
from ._reference import paged_mqa_logits_chunked_ref
from . import _fastpath
from ._api import (_expect_q_dtype, _no_reference_in_capture, _output, value_checks_enabled, value_checks_requested)


def _chunked_selection(q, a) -> Selection:
    problem = problem_dict(PREFILL_PAGED.name, a.layout.cache_dtype, a.heads, a.head_dim, a.layout.page_size,
                           a.layout.scale_layout)
    return select(q.device, problem, (a.rows, a.max_context_len))


def _chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, clean_logits, out,
             scale_layout, check_values) -> torch.Tensor:
    # A shape seen before: its recorded launch (indexer_logits._fastpath), no checks, no dispatch.
    served, key = _fastpath.serve_call("chunked", (q, kv_cache, weights, row_request, row_limit, block_table, out),
                                       (max_context_len, clean_logits, scale_layout, check_values),
                                       [q, kv_cache, weights, row_request, row_limit, block_table, out], 6)
    if served is not None:
        return served
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    values = value_checks_enabled(check_values, device)
    a = check_prefill_paged(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                            scale_layout, check_values=values)
    out = _output(out, a.rows, max_context_len, q.device)
    if a.rows == 0:
        return out
    sel = _chunked_selection(q, a)
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return paged_mqa_logits_chunked_ref(q, kv_cache, weights, row_request, row_limit, block_table,
                                            max_context_len, clean_logits, scale_layout=a.layout.scale_layout,
                                            out=out, check_values=False)
    if value_checks_requested(check_values, device):
        key = None  # a call that asks for value checks is never served without them
    return _fastpath.record(key, sel.launch, (q, kv_cache, weights, row_request, row_limit, block_table, out,
                                              max_context_len, bool(clean_logits)),
                            {}, [q, kv_cache, weights, row_request, row_limit, block_table, out], 6)


def fp8_paged_mqa_logits_chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                                 clean_logits=True, *, out=None, scale_layout="page_blocked",
                                 check_values: Optional[bool] = None) -> torch.Tensor:
    """Chunked prefill over an fp8 paged index cache: many query rows read straight from the pages.

    q [M, H, D] float8_e4m3fn; kv_cache as for fp8_paged_mqa_logits ([pages, PAGE, 1, D + 4]
    uint8, scale_layout "page_blocked" or "token_interleaved"); weights [M, H] float32;
    row_request [M] int32: the request (block_table row) of each query row, rows grouped by
    request in request order (non-decreasing); row_limit [M] int32: row r sees positions
    t < row_limit[r] of its request (a chunk starting at p0: row_limit = p0 + r + 1, see
    chunked_prefill_rows); block_table [B, max_pages] int32; max_context_len: the output width.
    Returns float32 [M, max_context_len] (a view of `out` when given); positions past a row's
    limit are -inf with clean_logits (the default), else unspecified. Only block-table entries
    below a request's largest row limit are read. Memory: the output, nothing per row.
    """
    _expect_q_dtype(q, torch.float8_e4m3fn, "fp8_paged_mqa_logits_chunked", "bf16_paged_mqa_logits_chunked")
    return _chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, clean_logits, out,
                    scale_layout, check_values)


def bf16_paged_mqa_logits_chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                                  clean_logits=True, *, out=None, scale_layout="none",
                                  check_values: Optional[bool] = None) -> torch.Tensor:
    """fp8_paged_mqa_logits_chunked for a bf16 cache: q [M, H, D] and kv_cache [pages, PAGE, 1, D] bfloat16."""
    _expect_q_dtype(q, torch.bfloat16, "bf16_paged_mqa_logits_chunked", "fp8_paged_mqa_logits_chunked")
    return _chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, clean_logits, out,
                    scale_layout, check_values)


def chunked_selection(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, *,
                      scale_layout: str = "page_blocked") -> Selection:
    a = check_prefill_paged(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                            scale_layout, check_values=False)
    return _chunked_selection(q, a)
