"""The public entry points, with DeepGEMM's argument order. Imports only torch and this package.

    fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                         max_context_len, clean_logits=False, indices=None, *, out=None,
                         scale_layout="page_blocked", check_values=None, logits_dtype=torch.float32,
                         enable_pdl=None)
    fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True,
                   max_seqlen_k=0, *, out=None, check_values=None, logits_dtype=torch.float32)
                   (the window arguments also answer to their old keywords cu_seqlen_ks / cu_seqlen_ke)
    bf16_paged_mqa_logits / bf16_mqa_logits: the same with bf16 q and cache (bf16 kv: K or (K,))
    fp8_fp4_paged_mqa_logits((q, None), ...) / fp8_fp4_mqa_logits((q, None), ...): DeepGEMM
                         54e2261's names, served for fp8 inputs (fp4 inputs are refused)
    get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms, indices=None)
    get_num_sms() / set_num_sms(n)
    fp8_paged_mqa_logits_chunked(q, kv_cache, weights, row_request, row_limit, block_table,
                                 max_context_len, clean_logits=True, *, out=None,
                                 scale_layout="page_blocked", check_values=None)
    bf16_paged_mqa_logits_chunked: the same with bf16 q and cache (chunked prefill over the
                                 paged cache: many query rows, each with its request and limit)

Semantics are SPEC.md's. Every call checks its arguments (shapes, dtypes, strides, devices;
ValueError naming the argument): host metadata only, no device work. Value checks (lengths
within the block table, page ids in range, windows) read device memory, a host synchronisation,
so they run by default only on CPU tensors; on CUDA tensors only with check_values=True or
INDEXER_LOGITS_CHECK_VALUES=1, and never while a CUDA graph is being captured
(value_checks_enabled). A default call on CUDA tensors does not synchronise with the host. With
`out=` given, the call allocates nothing on the device (the kernel path; the reference fallback
and the compressed prefill output allocate temporaries).
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from ._checks import (DEEPGEMM_WINDOW_NAMES, LEGACY_WINDOW_NAMES, check_compressed_values, check_compressed_width,
                      check_decode, check_indices, check_indices_values, check_prefill, check_prefill_paged)
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


def value_checks_enabled(check_values: Optional[bool], device) -> bool:
    """Whether a call on `device` runs the value checks (lengths, page ids, windows: they read
    device memory, so on a GPU they synchronise with the host).

    1. check_values=True / False decides;
    2. else INDEXER_LOGITS_CHECK_VALUES=1 / 0 (set and not empty) decides;
    3. else the device does: on for CPU tensors (reading them costs no synchronisation), off for
       CUDA (and any other accelerator), so that a default call on the GPU never waits for it.
    Whatever those say, they are off while a CUDA graph is being captured on the current stream
    (reading the lengths would break the capture)."""
    device = torch.device(device)
    if check_values is None:
        if os.environ.get(ENV_CHECK_VALUES, "").strip():
            check_values = _env_flag(ENV_CHECK_VALUES, "1")[0]
        else:
            check_values = device.type == "cpu"
    elif not isinstance(check_values, bool):
        raise ValueError(f"check_values: expected True, False or None, got {check_values!r}")
    if check_values and device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return False  # reading lengths would synchronise the stream and break the capture
    return check_values


# ---------------------------------------------------------------------------------------------
# The SM count (DeepGEMM's get_num_sms / set_num_sms).

CPU_NUM_SMS = 4  # no GPU: the number of programs per "SM" the interpreter's persistent grids use
_num_sms_override: Optional[int] = None
_device_num_sms: dict[int, int] = {}


def get_num_sms() -> int:
    """The SM count engines size DeepGEMM's schedule metadata with (SGLang's indexer reads it when
    it is built, vLLM's DeepGEMM wrapper too): the value given to set_num_sms, else the current
    CUDA device's multiprocessor count (queried on the first call, never at import, and cached per
    device), else, with no CUDA device, CPU_NUM_SMS (4).

    Our kernels take no schedule: the metadata is ignored, and the persistent decode modules
    size their grid from the device's multiprocessor count (a shape, fixed per device), so this
    value does not change which programs run."""
    if _num_sms_override is not None:
        return _num_sms_override
    return _device_sms()


def _device_sms() -> int:
    if not torch.cuda.is_available():
        return CPU_NUM_SMS
    index = torch.cuda.current_device()
    count = _device_num_sms.get(index)
    if count is None:
        count = _device_num_sms[index] = int(torch.cuda.get_device_properties(index).multi_processor_count)
    return count


def set_num_sms(num_sms: Optional[int]) -> None:
    """Set what get_num_sms returns (DeepGEMM's set_num_sms, with which engines give DeepGEMM's
    kernels part of the GPU; here it changes only what get_num_sms reports, see there). A
    positive int, at most the current CUDA device's multiprocessor count when there is one; None
    goes back to the default (DeepGEMM's 0, refused here)."""
    global _num_sms_override
    if num_sms is None:
        _num_sms_override = None
        return
    if isinstance(num_sms, bool) or not isinstance(num_sms, int) or num_sms < 1:
        raise ValueError(f"num_sms: expected a positive int (or None for the device's count), got {num_sms!r}")
    if torch.cuda.is_available() and num_sms > _device_sms():
        raise ValueError(f"num_sms: expected at most the current CUDA device's {_device_sms()} SMs, got {num_sms}")
    _num_sms_override = num_sms


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
# fp4 inputs (DeepGEMM 54e2261's fp8_fp4_* names take fp8 or fp4 q): only fp8 is served.

# DeepGEMM packs fp4 values two to a byte in an int8 tensor (kPackedFP4), with int32 scales.
_FP4_DTYPES = tuple(d for d in (torch.int8, getattr(torch, "float4_e2m1fn_x2", None)) if d is not None)


def _append_doc(fn, text: str) -> None:
    if fn.__doc__:  # None under python -OO
        fn.__doc__ += "\n    " + text + "\n"


def _fp8_q(q, fn: str, other: str):
    """The fp8 q of a fp8_fp4_* call: q as (values, scale_or_None), or the values alone; a q scale
    (DeepGEMM's fp4 path) or packed fp4 values are refused."""
    if isinstance(q, (tuple, list)):
        if len(q) != 2:
            raise ValueError(f"q: expected (q, None) or the float8_e4m3fn q tensor, got a {type(q).__name__} of "
                             f"{len(q)} items")
        q, q_scale = q
        if q_scale is not None:
            raise ValueError(f"q: fp4 inputs are not served: expected q[1] (the q scale of an fp4 q) to be None, got "
                             f"{type(q_scale).__name__}"
                             + (f" {q_scale.dtype} {list(q_scale.shape)}" if isinstance(q_scale, torch.Tensor) else "")
                             + f"; {fn} serves float8_e4m3fn q as (q, None)")
    if isinstance(q, torch.Tensor) and q.dtype in _FP4_DTYPES:
        raise ValueError(f"q: fp4 inputs are not served: expected float8_e4m3fn q, got {q.dtype} (DeepGEMM's packed "
                         f"fp4); {fn} serves float8_e4m3fn q as (q, None)")
    _expect_q_dtype(q, torch.float8_e4m3fn, fn, other)
    return q


# ---------------------------------------------------------------------------------------------
# Decode over the paged cache.


def _decode_selection(q, a, max_context_len: int) -> Selection:
    problem = problem_dict(DECODE_PAGED.name, a.layout.cache_dtype, a.heads, a.head_dim, a.layout.page_size,
                           a.layout.scale_layout, a.next_n, a.lens_2d)
    return select(q.device, problem, (a.batch, max_context_len))


def _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
           out, scale_layout, check_values, enable_pdl, indices=None) -> torch.Tensor:
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
    out = _output(out, a.batch * a.next_n, max_context_len, q.device)
    if a.batch == 0:
        return out
    sel = _decode_selection(q, a, max_context_len)
    pdl = _want_pdl(enable_pdl, q.device, sel)
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return paged_mqa_logits_ref(q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits,
                                    scale_layout=a.layout.scale_layout, out=out, check_values=False)
    if pdl:
        return sel.launch(q, kv_cache, weights, context_lens, block_table, out, max_context_len, bool(clean_logits),
                          pdl=True)
    return sel.launch(q, kv_cache, weights, context_lens, block_table, out, max_context_len, bool(clean_logits))


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
    max_context_len: the output width. Returns float32 [B*N, max_context_len] (a view of `out`
    when given). Positions past a row's length are -inf with clean_logits, else unspecified.
    logits_dtype must be float32 (the only output dtype served). enable_pdl=True (sm_90+): a
    programmatic dependent launch, worth it when the kernel before this one in the stream is
    launched with PDL too (default: INDEXER_LOGITS_PDL, else off). check_values: see
    value_checks_enabled (default: on for CPU tensors, off for CUDA ones).
    """
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.float8_e4m3fn, "fp8_paged_mqa_logits", "bf16_paged_mqa_logits")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl, indices)


_append_doc(fp8_paged_mqa_logits, _INDICES_DOC)


def fp8_fp4_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                             clean_logits=False, logits_dtype=torch.float32, indices=None, *, out=None,
                             scale_layout="page_blocked", check_values: Optional[bool] = None,
                             enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """DeepGEMM 54e2261's name for the paged decode call, served for fp8 inputs: q is (q, None)
    (or the float8_e4m3fn q alone), the rest as for fp8_paged_mqa_logits. fp4 inputs (a q scale
    in q[1], packed fp4 q, an fp4 cache of D/2 + 4 bytes per token) are refused with ValueError.
    DeepGEMM 54e2261 requires 2-D context_lens [B, next_n] here; 1-D lens are served too, with
    their causal meaning (SPEC.md). logits_dtype must be float32.
    """
    _expect_logits_dtype(logits_dtype)
    q = _fp8_q(q, "fp8_fp4_paged_mqa_logits", "bf16_paged_mqa_logits")
    if (isinstance(q, torch.Tensor) and q.dim() == 4 and isinstance(kv_cache, torch.Tensor) and kv_cache.dim() == 4
            and kv_cache.dtype == torch.uint8 and kv_cache.shape[3] == q.shape[3] // 2 + 4):
        raise ValueError(f"kv_cache: fp4 inputs are not served: expected {q.shape[3] + 4} bytes per token (fp8 values "
                         f"and an fp32 scale) for D={q.shape[3]}, got {kv_cache.shape[3]} (D/2 + 4: the fp4 layout)")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl, indices)


_append_doc(fp8_fp4_paged_mqa_logits, _INDICES_DOC)


def bf16_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                          clean_logits=False, *, out=None, scale_layout="none",
                          check_values: Optional[bool] = None, logits_dtype=torch.float32,
                          enable_pdl: Optional[bool] = None) -> torch.Tensor:
    """fp8_paged_mqa_logits for a bf16 cache: q [B, N, H, D] and kv_cache [pages, PAGE, 1, D] bfloat16, no scales."""
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.bfloat16, "bf16_paged_mqa_logits", "fp8_paged_mqa_logits")
    return _paged(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                  out, scale_layout, check_values, enable_pdl)


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
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if indices is not None:
        next_n = context_lens.shape[1] if context_lens.dim() == 2 else 1
        check_indices(indices, context_lens.shape[0], next_n, context_lens.device, ref_name="context_lens")
    return torch.zeros((num_sms + 1, 2), dtype=torch.int32, device=context_lens.device)


# ---------------------------------------------------------------------------------------------
# Prefill over ragged K.

# The compressed output (max_seqlen_k > 0) is gathered from the wide logits of a block of rows at
# a time; this bounds that block's temporaries (its wide fp32 rows and int64 gather indices).
# Measured on the H200 (fp8, 8192 rows x 131072 keys, causal windows of 4096, 20 calls): the
# compressed call took 1.25 ms (1.46 ms with clean_logits) at a peak of 670 MiB, the wide one
# 0.76 ms (1.54 ms) with its 4 GiB output; a 256 MiB bound doubled the blocks and their launches.
COMPRESSED_TEMP_BYTES = 512 << 20


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


def _compressed_rows(rows: int, keys: int, width: int) -> int:
    """Query rows per block of the compressed path (shapes only: the same for every call of a shape)."""
    per_row = keys * 4 + width * 8
    return max(1, min(rows, COMPRESSED_TEMP_BYTES // max(per_row, 1)))


def _ragged_selection(q, a, rows: Optional[int] = None) -> Selection:
    problem = problem_dict(PREFILL_RAGGED.name, a.cache_dtype, a.heads, a.head_dim)
    return select(q.device, problem, (a.rows if rows is None else rows, a.keys))


def _ragged_wide(q, kv, k, k_scale, weights, ks, ke, clean_logits, out, a) -> torch.Tensor:
    """The [rows, Nk] logits of these rows into `out` (kernel, else the reference)."""
    sel = _ragged_selection(q, a, q.shape[0])
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return mqa_logits_ref(q, kv, weights, ks, ke, clean_logits, out=out, check_values=False)
    return sel.launch(q, k, k_scale, weights, ks, ke, out, bool(clean_logits))


def _compressed(q, kv, k, k_scale, weights, ks, ke, clean_logits, out, a, width: int) -> torch.Tensor:
    """DeepGEMM's compressed layout: out[i, c] = logits(i, ks[i] + c) for c < ke[i] - ks[i].

    No kernel writes it directly yet: each block of rows is scored into a wide [rows, Nk] buffer
    (the kernel skips the tiles outside the windows) and gathered on the device by index
    arithmetic; nothing reads the windows on the host."""
    block = _compressed_rows(a.rows, a.keys, width)
    wide = torch.empty((block, a.keys), dtype=torch.float32, device=q.device)
    cols = torch.arange(width, device=q.device)
    for r0 in range(0, a.rows, block):
        r1 = min(a.rows, r0 + block)
        part = _ragged_wide(q[r0:r1], kv, k, k_scale, weights[r0:r1], ks[r0:r1], ke[r0:r1], False, wide[: r1 - r0], a)
        key = ks[r0:r1, None].long() + cols[None, :]  # the key of column c of row i
        dst = out[r0:r1]
        if clean_logits:
            past = key >= ke[r0:r1, None].long()
        torch.gather(part, 1, key.clamp_(0, a.keys - 1), out=dst)
        if clean_logits:
            dst.masked_fill_(past, float("-inf"))
    return out


def _ragged(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, max_seqlen_k, out, check_values,
            names=LEGACY_WINDOW_NAMES) -> torch.Tensor:
    if isinstance(q, torch.Tensor) and q.dtype == torch.bfloat16 and isinstance(kv, (tuple, list)) and len(kv) != 1:
        raise ValueError(f"kv: expected the K tensor [Nk, D] bfloat16 or a 1-tuple (k,) for bf16 q, got {len(kv)} items")
    width = check_compressed_width(max_seqlen_k)
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    values = value_checks_enabled(check_values, device)
    a = check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values=values, names=names)
    k, k_scale = _split_kv(q, kv)
    _unit_stride(names[0], cu_seqlen_ks)
    _unit_stride(names[1], cu_seqlen_ke)
    if width == 0:
        out = _output(out, a.rows, a.keys, q.device)
        if a.rows == 0 or a.keys == 0:
            return out
        return _ragged_wide(q, kv, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, a)
    if values:
        check_compressed_values(cu_seqlen_ks, cu_seqlen_ke, width)
    out = _output(out, a.rows, width, q.device)
    if a.rows == 0:
        return out
    if a.keys == 0:  # every window is empty
        return out.fill_(float("-inf"))
    return _compressed(q, kv, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, a, width)


def _windows(fn: str, start, end, old_start, old_end):
    """(ks, ke, their names in messages) from DeepGEMM's cu_seq_len_k_start / cu_seq_len_k_end
    (positional or keyword) or this runtime's older keywords cu_seqlen_ks / cu_seqlen_ke."""
    got, names = [], []
    for new, old, new_name, old_name in zip((start, end), (old_start, old_end), DEEPGEMM_WINDOW_NAMES,
                                            LEGACY_WINDOW_NAMES):
        if new is not None and old is not None:
            raise TypeError(f"{fn}() got both {new_name!r} and its older name {old_name!r}; pass one")
        if new is None and old is None:
            raise TypeError(f"{fn}() missing required argument {new_name!r} (or {old_name!r})")
        got.append(new if new is not None else old)
        names.append(new_name if new is not None else old_name)
    return got[0], got[1], tuple(names)


_COMPRESSED_DOC = """max_seqlen_k (DeepGEMM's): 0 gives the [M, Nk] output; > 0 gives DeepGEMM's COMPRESSED
    output [M, max_seqlen_k]: row i holds the logits of keys ks[i] .. ke[i]-1 in columns
    0 .. ke[i]-ks[i]-1 (every window must fit: ke - ks <= max_seqlen_k, checked with value
    checks; without them a longer window is cut at max_seqlen_k columns). Columns past a row's
    window are -inf with clean_logits, else unspecified (DeepGEMM refuses clean_logits there; it
    is served here). It is computed without a host synchronisation: blocks of rows are scored
    into a wide [rows, Nk] temporary (at most COMPRESSED_TEMP_BYTES with its gather indices) and
    gathered on the device; no kernel writes the compressed layout directly yet, so this path
    allocates those temporaries even with out=."""


def fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start=None, cu_seq_len_k_end=None, clean_logits=True,
                   max_seqlen_k: int = 0, *, cu_seqlen_ks=None, cu_seqlen_ke=None, out=None,
                   check_values: Optional[bool] = None, logits_dtype=torch.float32) -> torch.Tensor:
    """Prefill logits over ragged fp8 K (DeepGEMM's argument order and keyword names).

    q [M, H, D] float8_e4m3fn; kv = (k [Nk, D] float8_e4m3fn, k_scale [Nk] float32); weights
    [M, H] float32; row i is valid for cu_seq_len_k_start[i] <= t < cu_seq_len_k_end[i] (int32
    [M] each; the keywords cu_seqlen_ks / cu_seqlen_ke, this runtime's older names, work too).
    Returns float32 [M, Nk] (a view of `out` when given), -inf outside the windows with
    clean_logits. logits_dtype must be float32. check_values: see value_checks_enabled.
    """
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.float8_e4m3fn, "fp8_mqa_logits", "bf16_mqa_logits")
    ks, ke, names = _windows("fp8_mqa_logits", cu_seq_len_k_start, cu_seq_len_k_end, cu_seqlen_ks, cu_seqlen_ke)
    return _ragged(q, kv, weights, ks, ke, clean_logits, max_seqlen_k, out, check_values, names)


_append_doc(fp8_mqa_logits, _COMPRESSED_DOC)


def fp8_fp4_mqa_logits(q, kv, weights, cu_seq_len_k_start=None, cu_seq_len_k_end=None, clean_logits=True,
                       max_seqlen_k: int = 0, logits_dtype=torch.float32, *, cu_seqlen_ks=None, cu_seqlen_ke=None,
                       out=None, check_values: Optional[bool] = None) -> torch.Tensor:
    """DeepGEMM 54e2261's name for the ragged prefill call, served for fp8 inputs: q is (q, None)
    (or the float8_e4m3fn q alone), kv = (k float8_e4m3fn [Nk, D], k_scale float32 [Nk]), the rest
    as for fp8_mqa_logits. fp4 inputs (a q scale in q[1], packed fp4 q or K, int32 K scales) are
    refused with ValueError. logits_dtype must be float32.
    """
    _expect_logits_dtype(logits_dtype)
    q = _fp8_q(q, "fp8_fp4_mqa_logits", "bf16_mqa_logits")
    if isinstance(kv, (tuple, list)) and len(kv) == 2 and all(isinstance(x, torch.Tensor) for x in kv):
        if kv[0].dtype in _FP4_DTYPES or kv[1].dtype == torch.int32:
            raise ValueError(f"kv: fp4 inputs are not served: expected (k float8_e4m3fn, k_scale float32), got "
                             f"({kv[0].dtype}, {kv[1].dtype}) (DeepGEMM's packed fp4 K and its int32 scales)")
    ks, ke, names = _windows("fp8_fp4_mqa_logits", cu_seq_len_k_start, cu_seq_len_k_end, cu_seqlen_ks, cu_seqlen_ke)
    return _ragged(q, kv, weights, ks, ke, clean_logits, max_seqlen_k, out, check_values, names)


_append_doc(fp8_fp4_mqa_logits, _COMPRESSED_DOC)


def bf16_mqa_logits(q, kv, weights, cu_seq_len_k_start=None, cu_seq_len_k_end=None, clean_logits=True,
                    max_seqlen_k: int = 0, *, cu_seqlen_ks=None, cu_seqlen_ke=None, out=None,
                    check_values: Optional[bool] = None, logits_dtype=torch.float32) -> torch.Tensor:
    """fp8_mqa_logits for bf16: q [M, H, D] bfloat16, kv the K tensor [Nk, D] bfloat16 or (K,)."""
    _expect_logits_dtype(logits_dtype)
    _expect_q_dtype(q, torch.bfloat16, "bf16_mqa_logits", "fp8_mqa_logits")
    ks, ke, names = _windows("bf16_mqa_logits", cu_seq_len_k_start, cu_seq_len_k_end, cu_seqlen_ks, cu_seqlen_ke)
    return _ragged(q, kv, weights, ks, ke, clean_logits, max_seqlen_k, out, check_values, names)


_append_doc(bf16_mqa_logits, _COMPRESSED_DOC)


# ---------------------------------------------------------------------------------------------
# Chunked prefill over the paged cache.


def _chunked_selection(q, a) -> Selection:
    problem = problem_dict(PREFILL_PAGED.name, a.layout.cache_dtype, a.heads, a.head_dim, a.layout.page_size,
                           a.layout.scale_layout)
    return select(q.device, problem, (a.rows, a.max_context_len))


def _chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, clean_logits, out,
             scale_layout, check_values) -> torch.Tensor:
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


def ragged_selection(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, *, max_seqlen_k: int = 0) -> Selection:
    """What serves a ragged prefill call; with max_seqlen_k > 0 (the compressed output), what
    serves its first block of rows."""
    a = check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values=False)
    width = check_compressed_width(max_seqlen_k)
    return _ragged_selection(q, a, _compressed_rows(a.rows, a.keys, width) if width else None)


def chunked_selection(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, *,
                      scale_layout: str = "page_blocked") -> Selection:
    a = check_prefill_paged(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                            scale_layout, check_values=False)
    return _chunked_selection(q, a)
