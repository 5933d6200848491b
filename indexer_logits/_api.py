"""The public entry points, with DeepGEMM's argument order. Imports only torch and this package.

    fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                         max_context_len, clean_logits=False, *, out=None, scale_layout="page_blocked",
                         enable_pdl=None)
    fp8_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits=True, *, out=None)
    bf16_paged_mqa_logits / bf16_mqa_logits: the same with bf16 q and cache (bf16 kv: K or (K,))
    get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms)
    fp8_paged_mqa_logits_chunked(q, kv_cache, weights, row_request, row_limit, block_table,
                                 max_context_len, clean_logits=True, *, out=None,
                                 scale_layout="page_blocked", check_values=None)
    bf16_paged_mqa_logits_chunked: the same with bf16 q and cache (chunked prefill over the
                                 paged cache: many query rows, each with its request and limit)

Semantics are SPEC.md's. Every call checks its arguments (shapes, dtypes, strides, devices;
ValueError naming the argument). Value checks (lengths within the block table, page ids in
range) read device memory, so they are skipped while a CUDA graph is being captured, and can be
turned off with check_values=False or INDEXER_LOGITS_CHECK_VALUES=0. With `out=` given, the call
allocates nothing on the device (the kernel path; the reference fallback allocates temporaries).
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from ._checks import check_decode, check_prefill, check_prefill_paged
from ._dispatch import Selection, device_compute_capability, select
from ._identity import DECODE_PAGED, PREFILL_PAGED, PREFILL_RAGGED, problem_dict
from ._reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref

ENV_CHECK_VALUES = "INDEXER_LOGITS_CHECK_VALUES"
ENV_PDL = "INDEXER_LOGITS_PDL"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _env_flag(name: str, default: str) -> tuple[bool, str]:
    """(value, the setting's text) of a boolean environment variable; a ValueError naming it for
    anything but the accepted spellings."""
    text = os.environ.get(name, default).strip().lower() or default
    if text not in _TRUE + _FALSE:
        raise ValueError(f"{name}: expected one of {list(_TRUE + _FALSE)}, got {text!r}")
    return text in _TRUE, text


def _want_value_checks(flag: Optional[bool], device: torch.device) -> bool:
    if flag is None:
        flag = _env_flag(ENV_CHECK_VALUES, "1")[0]
    if flag and device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return False  # reading lengths would synchronise the stream and break the capture
    return bool(flag)


def _want_pdl(flag: Optional[bool], device: torch.device, sel: Selection) -> bool:
    """Whether this decode call is a programmatic dependent launch. Off unless asked for (the
    argument, else INDEXER_LOGITS_PDL=1): it pays only when the kernel before it in the stream is
    launched the same way (about 1 us a call on the H200), and costs ~0.1 us after a plain one
    (docs/PERF.md, "Programmatic dependent launch")."""
    if flag is None:
        flag, text = _env_flag(ENV_PDL, "0")
        what = f"{ENV_PDL}={text}"
    elif not isinstance(flag, bool):
        raise ValueError(f"enable_pdl: expected True, False or None, got {flag!r}")
    else:
        what = f"enable_pdl={flag}"
    if not flag:
        return False
    cc = device_compute_capability(device) if device.type == "cuda" else None
    if cc is None or int(cc.split(".")[0]) < 9:
        raise ValueError(f"{what}: programmatic dependent launch needs a CUDA device of compute capability 9.0 or "
                         f"newer, got {device}" + (f" (sm_{cc.replace('.', '')})" if cc else ""))
    if sel.is_reference:
        return False  # the torch reference is several kernels and host reads: nothing to launch early
    if not sel.supports_pdl:
        raise ValueError(f"{what}: the module serving this call ({sel.variant}, from {sel.table}) predates PDL "
                         "support; re-emit the table (`python cli.py emit`) or leave PDL off")
    return True


def _expect_logits_dtype(logits_dtype) -> None:
    if logits_dtype not in (None, torch.float32):
        raise ValueError(f"logits_dtype: expected torch.float32 (the only output dtype served), got {logits_dtype}")


def _expect_q_dtype(q, dtype: torch.dtype, fn: str, other: str) -> None:
    if isinstance(q, torch.Tensor) and q.dtype != dtype:
        raise ValueError(f"q: {fn} expects dtype {dtype}, got {q.dtype} (use {other} for that dtype)")


def _output(out, rows: int, width: int, device: torch.device) -> torch.Tensor:
    """The caller's buffer (checked; a view of its first `width` columns) or a new one."""
    if out is None:
        return torch.empty((rows, width), dtype=torch.float32, device=device)
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"out: expected a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != torch.float32:
        raise ValueError(f"out: expected dtype torch.float32, got {out.dtype}")
    if out.dim() != 2 or out.shape[0] != rows or out.shape[1] < width:
        raise ValueError(f"out: expected shape [{rows}, >= {width}], got {list(out.shape)}")
    if out.stride(1) != 1:
        raise ValueError(f"out: expected contiguous rows (stride(1) == 1), got strides {list(out.stride())}")
    if rows > 1 and width > 0 and out.stride(0) < width:  # e.g. an expand()ed buffer: rows would overwrite each other
        raise ValueError(f"out: expected rows that do not overlap (stride(0) >= {width}), got strides {list(out.stride())}")
    if out.device != device:
        raise ValueError(f"out: expected device {device} (same as q), got {out.device}")
    return out if out.shape[1] == width else out[:, :width]


def _unit_stride(name: str, x: torch.Tensor) -> None:
    if x.numel() > 1 and x.stride(-1) != 1:
        raise ValueError(f"{name}: expected a contiguous last dim (stride(-1) == 1), got strides {list(x.stride())}")


def _no_reference_in_capture(device: torch.device, sel: Selection) -> None:
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"indexer logits: no kernel serves {sel.problem} at bucket {sel.bucket} on this GPU, and the torch "
            "reference fallback cannot be captured in a CUDA graph (it reads the lengths on the host); "
            "emit a table for this problem or capture without it")


# ---------------------------------------------------------------------------------------------
# Decode over the paged cache.


def _decode_selection(q, a, max_context_len: int) -> Selection:
    problem = problem_dict(DECODE_PAGED.name, a.layout.cache_dtype, a.heads, a.head_dim, a.layout.page_size,
                           a.layout.scale_layout, a.next_n, a.lens_2d)
    return select(q.device, problem, (a.batch, max_context_len))


def _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
           out, scale_layout, check_values, enable_pdl) -> torch.Tensor:
    if schedule_meta is not None and not isinstance(schedule_meta, torch.Tensor):
        raise ValueError(f"schedule_meta: expected a tensor (get_paged_mqa_logits_metadata) or None, "
                         f"got {type(schedule_meta).__name__}")
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    values = _want_value_checks(check_values, device)
    a = check_decode(q, kv_cache, weights, context_lens, block_table, max_context_len, scale_layout,
                     check_values=values)
    _unit_stride("context_lens", context_lens)
    out = _output(out, a.batch * a.next_n, max_context_len, q.device)
    if a.batch == 0:
        return out
    sel = _decode_selection(q, a, max_context_len)
    pdl = _want_pdl(enable_pdl, q.device, sel)
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return paged_mqa_logits_ref(q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits,
                                    scale_layout=a.layout.scale_layout, out=out)
    if pdl:
        return sel.launch(q, kv_cache, weights, context_lens, block_table, out, max_context_len, bool(clean_logits),
                          pdl=True)
    return sel.launch(q, kv_cache, weights, context_lens, block_table, out, max_context_len, bool(clean_logits))


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits=False, *, out=None, scale_layout="page_blocked",
                         check_values: Optional[bool] = None, logits_dtype=torch.float32,
                         enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """Decode logits over an fp8 paged index cache (DeepGEMM's argument order).

    q [B, N, H, D] float8_e4m3fn; kv_cache [pages, PAGE, 1, D + 4] uint8 (scale_layout
    "page_blocked", SGLang's and vLLM's, or "token_interleaved"); weights [B*N, H] float32;
    context_lens [B] (causal within the N draft tokens) or [B, N] int32; block_table
    [B, max_pages] int32; schedule_meta is accepted and ignored (our kernels need no schedule);
    max_context_len: the output width. Returns float32 [B*N, max_context_len] (a view of `out`
    when given). Positions past a row's length are -inf with clean_logits, else unspecified.
    logits_dtype must be float32 (the only output dtype served). enable_pdl=True (sm_90+): a
    programmatic dependent launch, worth it when the kernel before this one in the stream is
    launched with PDL too (default: INDEXER_LOGITS_PDL, else off).
    """
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.float8_e4m3fn, "fp8_paged_mqa_logits", "bf16_paged_mqa_logits")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl)


def bf16_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                          clean_logits=False, *, out=None, scale_layout="none",
                          check_values: Optional[bool] = None, logits_dtype=torch.float32,
                          enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """fp8_paged_mqa_logits for a bf16 cache: q [B, N, H, D] and kv_cache [pages, PAGE, 1, D] bfloat16, no scales."""
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.bfloat16, "bf16_paged_mqa_logits", "fp8_paged_mqa_logits")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl)


def get_paged_mqa_logits_metadata(context_lens, block_kv: int, num_sms: int) -> torch.Tensor:
    """DeepGEMM's schedule call, for call-site compatibility: an int32 [num_sms + 1, 2] tensor of zeros
    on context_lens' device. Our kernels take no schedule (their grid depends only on shapes), so
    the paged functions accept and ignore it; this does no host synchronisation and is graph-safe."""
    if not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.int32 or context_lens.dim() not in (1, 2):
        raise ValueError(f"context_lens: expected an int32 tensor [B] or [B, N], got "
                         f"{getattr(context_lens, 'dtype', type(context_lens).__name__)} "
                         f"{list(getattr(context_lens, 'shape', []))}")
    for name, value in (("block_kv", block_kv), ("num_sms", num_sms)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return torch.zeros((num_sms + 1, 2), dtype=torch.int32, device=context_lens.device)


# ---------------------------------------------------------------------------------------------
# Prefill over ragged K.


def _split_kv(q, kv):
    """(k, k_scale or None) as the kernels take them."""
    if q.dtype == torch.float8_e4m3fn:
        k, k_scale = kv
        if k_scale.dim() == 2:
            k_scale = k_scale[:, 0]
        _unit_stride("kv[1] (k_scale)", k_scale)
        return k, k_scale
    if isinstance(kv, (tuple, list)):
        if len(kv) != 1:
            raise ValueError(f"kv: expected the K tensor [Nk, D] bfloat16 or a 1-tuple (k,) for bf16 q, got {len(kv)} items")
        return kv[0], None
    return kv, None


def _ragged_selection(q, a) -> Selection:
    return select(q.device, problem_dict(PREFILL_RAGGED.name, a.cache_dtype, a.heads, a.head_dim), (a.rows, a.keys))


def _ragged(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, check_values) -> torch.Tensor:
    if isinstance(q, torch.Tensor) and q.dtype == torch.bfloat16 and isinstance(kv, (tuple, list)) and len(kv) != 1:
        raise ValueError(f"kv: expected the K tensor [Nk, D] bfloat16 or a 1-tuple (k,) for bf16 q, got {len(kv)} items")
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    values = _want_value_checks(check_values, device)
    a = check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values=values)
    k, k_scale = _split_kv(q, kv)
    _unit_stride("cu_seqlen_ks", cu_seqlen_ks)
    _unit_stride("cu_seqlen_ke", cu_seqlen_ke)
    out = _output(out, a.rows, a.keys, q.device)
    if a.rows == 0 or a.keys == 0:
        return out
    sel = _ragged_selection(q, a)
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return mqa_logits_ref(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out=out)
    return sel.launch(q, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, bool(clean_logits))


def fp8_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits=True, max_seqlen_k: int = 0, *,
                   out=None, check_values: Optional[bool] = None, logits_dtype=torch.float32) -> torch.Tensor:
    """Prefill logits over ragged fp8 K (DeepGEMM's argument order).

    q [M, H, D] float8_e4m3fn; kv = (k [Nk, D] float8_e4m3fn, k_scale [Nk] float32); weights
    [M, H] float32; row i is valid for cu_seqlen_ks[i] <= t < cu_seqlen_ke[i]. Returns float32
    [M, Nk] (a view of `out` when given), -inf outside the windows with clean_logits.
    max_seqlen_k (DeepGEMM's hint) is accepted and ignored; logits_dtype must be float32.
    """
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.float8_e4m3fn, "fp8_mqa_logits", "bf16_mqa_logits")
    return _ragged(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, check_values)


def bf16_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits=True, max_seqlen_k: int = 0, *,
                    out=None, check_values: Optional[bool] = None, logits_dtype=torch.float32) -> torch.Tensor:
    """fp8_mqa_logits for bf16: q [M, H, D] bfloat16, kv the K tensor [Nk, D] bfloat16 or (K,)."""
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.bfloat16, "bf16_mqa_logits", "fp8_mqa_logits")
    return _ragged(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, check_values)


# ---------------------------------------------------------------------------------------------
# Chunked prefill over the paged cache.


def _chunked_selection(q, a) -> Selection:
    problem = problem_dict(PREFILL_PAGED.name, a.layout.cache_dtype, a.heads, a.head_dim, a.layout.page_size,
                           a.layout.scale_layout)
    return select(q.device, problem, (a.rows, a.max_context_len))


def _chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, clean_logits, out,
             scale_layout, check_values) -> torch.Tensor:
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    values = _want_value_checks(check_values, device)
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
                                            out=out)
    return sel.launch(q, kv_cache, weights, row_request, row_limit, block_table, out, max_context_len,
                      bool(clean_logits))


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


# ---------------------------------------------------------------------------------------------
# What would serve a call (diagnostics, tests): the same selection the call makes, without running.


def paged_selection(q, kv_cache, weights, context_lens, block_table, max_context_len, *,
                    scale_layout: str = "page_blocked") -> Selection:
    a = check_decode(q, kv_cache, weights, context_lens, block_table, max_context_len, scale_layout,
                     check_values=False)
    return _decode_selection(q, a, max_context_len)


def ragged_selection(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke) -> Selection:
    a = check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values=False)
    return _ragged_selection(q, a)


def chunked_selection(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, *,
                      scale_layout: str = "page_blocked") -> Selection:
    a = check_prefill_paged(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                            scale_layout, check_values=False)
    return _chunked_selection(q, a)
