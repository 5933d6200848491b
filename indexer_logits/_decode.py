"""Decode over the paged cache: fp8_paged_mqa_logits, its bf16 and fp8_fp4 twins, the metadata."""

from __future__ import annotations

from typing import Optional

import torch

from ._checks import (check_decode, check_indices, check_indices_values, positive_int)
from ._dispatch import Selection, select
from ._identity import DECODE_PAGED, problem_dict
from ._reference import paged_mqa_logits_ref
from . import _fastpath
from ._api import (_append_doc, _expect_q_dtype, _logits_dtype, _fp8_q, _no_reference_in_capture, _output, _unit_stride, _want_pdl, value_checks_enabled, value_checks_requested)


def _decode_selection(q, a, max_context_len: int) -> Selection:
    problem = problem_dict(DECODE_PAGED.name, a.layout.cache_dtype, a.heads, a.head_dim, a.layout.page_size,
                           a.layout.scale_layout, a.next_n, a.lens_2d)
    return select(q.device, problem, (a.batch, max_context_len))


def _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
           out, scale_layout, check_values, enable_pdl, indices=None, logits_dtype=torch.float32) -> torch.Tensor:
    return _paged_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits, out, scale_layout, check_values, enable_pdl, indices, logits_dtype)[0]


def _paged_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl, indices=None, logits_dtype=torch.float32,
                  tile_max=None) -> tuple:
    """(logits, whether tile_max was written). tile_max (the top-k's, indexer_logits._topk):
    (maxima, ntiles, tile, ws, state_offset, state_stride) for the serving module's launch(), which
    writes them where it can (Selection.tile_max_block); else the logits alone."""
    extra, extra_scalars = (((tile_max[0], tile_max[1], tile_max[3]), (tile_max[2], *tile_max[4:]))
                            if tile_max else ((), ()))
    # A shape seen before: its recorded launch (indexer_logits._fastpath), no checks, no dispatch.
    # Only a launch that wrote tile_max is recorded under a key that holds it.
    served, key = _fastpath.serve_call("paged", (q, kv_cache, weights, context_lens, block_table, out, indices,
                                                 *extra),
                                       (max_context_len, clean_logits, scale_layout, check_values, enable_pdl,
                                        type(schedule_meta), logits_dtype, *extra_scalars),
                                       [q, kv_cache, weights, context_lens, block_table, out, *extra], 5)
    if served is not None:
        return served, bool(tile_max)
    if schedule_meta is not None and not isinstance(schedule_meta, torch.Tensor):
        raise ValueError(f"schedule_meta: expected a tensor (get_paged_mqa_logits_metadata) or None, "
                         f"got {type(schedule_meta).__name__}")
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    values = value_checks_enabled(check_values, device)
    a = check_decode(q, kv_cache, weights, context_lens, block_table, max_context_len, scale_layout,
                     check_values=values)
    _unit_stride("context_lens", context_lens)
    if indices is not None:
        check_indices(indices, a.batch, a.next_n, q.device)
        if values:
            check_indices_values(a, indices, context_lens, block_table)
    out = _output(out, a.batch * a.next_n, max_context_len, q.device, logits_dtype)
    if a.batch == 0:
        return out, False
    sel = _decode_selection(q, a, max_context_len)
    pdl = _want_pdl(enable_pdl, q.device, sel)
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return paged_mqa_logits_ref(q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits,
                                    scale_layout=a.layout.scale_layout, out=out, check_values=False), False
    if value_checks_requested(check_values, device):
        key = None  # a call that asks for value checks is never served without them
    kwargs = {"pdl": True} if pdl else {}
    written = bool(tile_max) and sel.tile_max_block > 0 and sel.tile_max_block % tile_max[2] == 0
    if written:
        kwargs["tile_max"] = tile_max
    elif tile_max:
        key = None  # this key holds tile_max, which this launch does not write: nothing recorded for it
    return _fastpath.record(key, sel.launch,
                            (q, kv_cache, weights, context_lens, block_table, out, max_context_len, bool(clean_logits)),
                            kwargs, [q, kv_cache, weights, context_lens, block_table, out, *extra], 5), written


# A top-k call's logits (indexer_logits._topk): its cache dtype -> the q dtype and the names an error gives.
_TOPK_Q = {"fp8": (torch.float8_e4m3fn, "fp8_paged_mqa_logits", "bf16_paged_mqa_logits"),
           "bf16": (torch.bfloat16, "bf16_paged_mqa_logits", "fp8_paged_mqa_logits")}


def topk_logits(cache: str, q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                scale_layout, check_values, enable_pdl, tile_max=None) -> tuple:
    """The logits a top-k call scores (fp8_ or bf16_paged_mqa_logits per `cache`: float32, no
    clean_logits). With tile_max the serving kernel also writes the tiles path's first pass where it
    can (_paged_logits). Returns (logits, whether tile_max was written)."""
    _expect_q_dtype(q, *_TOPK_Q[cache])
    return _paged_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, False,
                         None, scale_layout, check_values, enable_pdl, None, torch.float32, tile_max)


_INDICES_DOC = """indices (DeepGEMM 54e2261's varlen decode): None, or int32 [B] with next_n == 1, indices[t]
    the request of query row t (rows grouped by request). DeepGEMM schedules each run of equal
    consecutive ids as one request: it reads the run's pages through the block-table row of the
    run's first row and bounds its work by the length of its last row. The kernels here compute
    every row from its own block-table row and length, which are the same logits whenever the
    rows of a run hold the same page ids in their valid pages and none is longer than the run's
    last (DeepGEMM's layout: the request's table row repeated per token); value checks verify
    both (refusing the call otherwise), so a call that DeepGEMM would compute differently is
    never served silently while they run."""


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits=False, indices=None, *, out=None, scale_layout="page_blocked",
                         check_values: Optional[bool] = None, logits_dtype=torch.float32,
                         enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """Decode logits over an fp8 paged index cache (DeepGEMM's argument order, both generations).

    q [B, N, H, D] float8_e4m3fn; kv_cache [pages, PAGE, 1, D + 4] uint8 (scale_layout
    "page_blocked", SGLang's and vLLM's, or "token_interleaved"); weights [B*N, H] float32;
    context_lens [B] (causal within the N draft tokens) or [B, N] int32; block_table
    [B, max_pages] int32; schedule_meta is accepted and ignored (our kernels need no schedule);
    max_context_len: the output width. Returns [B*N, max_context_len] of logits_dtype (float32,
    or bfloat16: the same kernel rounding its fp32 sums as it stores them; a view of `out` when
    given, which must be of that dtype). Positions past a row's length are -inf with
    clean_logits, else unspecified. enable_pdl=True (sm_90+): a
    programmatic dependent launch, worth it when the kernel before this one in the stream is
    launched with PDL too (default: INDEXER_LOGITS_PDL, else off). check_values: see
    value_checks_enabled (default: on for CPU tensors, off for CUDA ones).
    """
    dtype = _logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.float8_e4m3fn, "fp8_paged_mqa_logits", "bf16_paged_mqa_logits")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl, indices, dtype)


_append_doc(fp8_paged_mqa_logits, _INDICES_DOC)


def fp8_fp4_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                             clean_logits=False, logits_dtype=torch.float32, indices=None, *, out=None,
                             scale_layout="page_blocked", check_values: Optional[bool] = None,
                             enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """DeepGEMM 54e2261's name for the paged decode call, served for fp8 inputs: q is (q, None)
    (or the float8_e4m3fn q alone), the rest as for fp8_paged_mqa_logits. fp4 inputs (a q scale
    in q[1], packed fp4 q, an fp4 cache of D/2 + 4 bytes per token) are refused with ValueError.
    DeepGEMM 54e2261 requires 2-D context_lens [B, next_n] here; 1-D lens are served too, with
    their causal meaning (SPEC.md). logits_dtype: float32 or bfloat16, as for fp8_paged_mqa_logits.
    """
    dtype = _logits_dtype(logits_dtype)
    q = _fp8_q(q, "fp8_fp4_paged_mqa_logits", "bf16_paged_mqa_logits")
    if (isinstance(q, torch.Tensor) and q.dim() == 4 and isinstance(kv_cache, torch.Tensor) and kv_cache.dim() == 4
            and kv_cache.dtype == torch.uint8 and kv_cache.shape[3] == q.shape[3] // 2 + 4):
        raise ValueError(f"kv_cache: fp4 inputs are not served: expected {q.shape[3] + 4} bytes per token (fp8 values "
                         f"and an fp32 scale) for D={q.shape[3]}, got {kv_cache.shape[3]} (D/2 + 4: the fp4 layout)")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl, indices, dtype)


_append_doc(fp8_fp4_paged_mqa_logits, _INDICES_DOC)


def bf16_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                          clean_logits=False, *, out=None, scale_layout="none",
                          check_values: Optional[bool] = None, logits_dtype=torch.float32,
                          enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """fp8_paged_mqa_logits for a bf16 cache: q [B, N, H, D] and kv_cache [pages, PAGE, 1, D] bfloat16, no scales."""
    dtype = _logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.bfloat16, "bf16_paged_mqa_logits", "fp8_paged_mqa_logits")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl, None, dtype)


def get_paged_mqa_logits_metadata(context_lens, block_kv: int, num_sms: int, indices=None) -> torch.Tensor:
    """DeepGEMM's schedule call, for call-site compatibility: an int32 [num_sms + 1, 2] tensor of zeros
    on context_lens' device. Our kernels take no schedule (their grid depends only on shapes), so
    the paged functions accept and ignore it; this does no host synchronisation and is graph-safe.

    indices (DeepGEMM 54e2261): None, or int32 [B] with context_lens [B] or [B, 1], the request of
    each query row (see fp8_paged_mqa_logits). It is checked (dtype, shape, device) and changes
    nothing in the result: the schedule it would shape is not used, and the paged call that takes
    the same indices= computes the same logits with or without it."""
    if not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.int32 or context_lens.dim() not in (1, 2):
        raise ValueError(f"context_lens: expected an int32 tensor [B] or [B, N], got "
                         f"{getattr(context_lens, 'dtype', type(context_lens).__name__)} "
                         f"{list(getattr(context_lens, 'shape', []))}")
    for name, value in (("block_kv", block_kv), ("num_sms", num_sms)):
        if not positive_int(value):
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if indices is not None:
        next_n = context_lens.shape[1] if context_lens.dim() == 2 else 1
        check_indices(indices, context_lens.shape[0], next_n, context_lens.device, ref_name="context_lens")
    return torch.zeros((num_sms + 1, 2), dtype=torch.int32, device=context_lens.device)


def paged_selection(q, kv_cache, weights, context_lens, block_table, max_context_len, *,
                    scale_layout: str = "page_blocked") -> Selection:
    a = check_decode(q, kv_cache, weights, context_lens, block_table, max_context_len, scale_layout,
                     check_values=False)
    return _decode_selection(q, a, max_context_len)
