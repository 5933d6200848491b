"""The public entry points, with DeepGEMM's argument order, and what every one of them shares
(value-check and PDL switches, the SM count, output and argument checks). The entry points live
in _decode.py, _prefill.py and _chunked.py. Imports only torch and this package.

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

from . import _fastpath
from ._checks import positive_int
from ._dispatch import Selection, device_compute_capability

ENV_CHECK_VALUES = "INDEXER_LOGITS_CHECK_VALUES"
ENV_PDL = "INDEXER_LOGITS_PDL"
_fastpath.watch_env(ENV_CHECK_VALUES)
_fastpath.watch_env(ENV_PDL)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _env_flag(name: str, default: str) -> tuple[bool, str]:
    """(value, the setting's text) of a boolean environment variable; a ValueError naming it for
    anything but the accepted spellings."""
    text = os.environ.get(name, default).strip().lower() or default
    if text not in _TRUE + _FALSE:
        raise ValueError(f"{name}: expected one of {list(_TRUE + _FALSE)}, got {text!r}")
    return text in _TRUE, text


def value_checks_requested(check_values: Optional[bool], device) -> bool:
    """Whether value checks are asked for (steps 1-3 of value_checks_enabled), capture or not: a
    call that asks for them is never served by a cached launch (indexer_logits._fastpath)."""
    if check_values is None:
        if os.environ.get(ENV_CHECK_VALUES, "").strip():
            return _env_flag(ENV_CHECK_VALUES, "1")[0]
        return torch.device(device).type == "cpu"
    return check_values is True


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


def _device_sms(index: Optional[int] = None) -> int:
    """The SM count of CUDA device `index` (the current one when None), cached; CPU_NUM_SMS without CUDA."""
    if index is not None:  # a device counted before: no CUDA query (a top-k call asks several times)
        count = _device_num_sms.get(index)
        if count is not None:
            return count
    if not torch.cuda.is_available():
        return CPU_NUM_SMS
    index = torch.cuda.current_device() if index is None else index
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
    if not positive_int(num_sms):
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


# The output dtypes served: DeepGEMM 54e2261's two. A bf16 output is the same kernel with a bf16
# output pointer: Triton's tl.store converts the fp32 logits to the pointer's element type (round
# to nearest even, as torch's .to(torch.bfloat16)), so the kernel writes half the bytes and no
# second kernel or fp32 temporary is involved (the module compiles once more for that pointer type).
LOGITS_DTYPES = (torch.float32, torch.bfloat16)


def _logits_dtype(logits_dtype) -> torch.dtype:
    """The output dtype asked for (None: float32); anything but float32 or bfloat16 is refused."""
    if logits_dtype is None:
        return torch.float32
    if not isinstance(logits_dtype, torch.dtype) or logits_dtype not in LOGITS_DTYPES:
        raise ValueError(f"logits_dtype: expected torch.float32 or torch.bfloat16, got {logits_dtype}")
    return logits_dtype


def _expect_q_dtype(q, dtype: torch.dtype, fn: str, other: str) -> None:
    if isinstance(q, torch.Tensor) and q.dtype != dtype:
        raise ValueError(f"q: {fn} expects dtype {dtype}, got {q.dtype} (use {other} for that dtype)")


def _output(out, rows: int, width: int, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The caller's buffer (checked; a view of its first `width` columns) or a new one, of the
    call's logits dtype."""
    if out is None:
        return torch.empty((rows, width), dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"out: expected a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != dtype:
        raise ValueError(f"out: expected dtype {dtype} (the call's logits_dtype), got {out.dtype}")
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
