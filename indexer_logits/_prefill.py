"""Prefill over ragged K: fp8_mqa_logits, its bf16 and fp8_fp4 twins, DeepGEMM's compressed output."""

from __future__ import annotations

from typing import Optional

import torch

from ._checks import (DEEPGEMM_WINDOW_NAMES, LEGACY_WINDOW_NAMES, check_compressed_values, check_compressed_width,
                      check_prefill)
from ._dispatch import Selection, select
from ._identity import PREFILL_RAGGED, problem_dict
from ._reference import mqa_logits_ref
from . import _fastpath
from ._api import (_FP4_DTYPES, _append_doc, _expect_q_dtype, _logits_dtype, _fp8_q, _no_reference_in_capture, _output, _unit_stride, value_checks_enabled, value_checks_requested)


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


def _ragged_wide(q, kv, k, k_scale, weights, ks, ke, clean_logits, out, a, key=None, tile_max=None) -> tuple:
    """(the [rows, Nk] logits of these rows into `out` (kernel, else the reference), whether
    tile_max was written); with a fast-path key, the launch is recorded for it (inputs as
    _replay_inputs gives them, then tile_max's tensors)."""
    sel = _ragged_selection(q, a, q.shape[0])
    if sel.is_reference:
        _no_reference_in_capture(q.device, sel)
        return mqa_logits_ref(q, kv, weights, ks, ke, clean_logits, out=out, check_values=False), False
    written = bool(tile_max) and sel.tile_max_block > 0 and sel.tile_max_block % tile_max[2] == 0
    kwargs = {"tile_max": tile_max} if written else {}
    if tile_max and not written:
        key = None  # this key holds tile_max, which this launch does not write: nothing recorded for it
    if key is None:
        return sel.launch(q, k, k_scale, weights, ks, ke, out, bool(clean_logits), **kwargs), written
    return _fastpath.record(key, sel.launch, (q, k, k_scale, weights, ks, ke, out, bool(clean_logits)), kwargs,
                            _replay_inputs(q, kv, weights, ks, ke, out) + _tile_max_inputs(tile_max), 6), written


def _tile_max_inputs(tile_max) -> list:
    """tile_max's tensors (maxima, ntiles, state) as a recorded launch takes them, after the call's."""
    return [tile_max[0], tile_max[1], tile_max[3]] if tile_max else []


# The ragged logits calls' q dtype per cache dtype, and the names an error gives (_expect_q_dtype).
_Q_DTYPE = {"fp8": (torch.float8_e4m3fn, "fp8_mqa_logits", "bf16_mqa_logits"),
            "bf16": (torch.bfloat16, "bf16_mqa_logits", "fp8_mqa_logits")}


def topk_ragged_logits(cache: str, q, kv, weights, ks, ke, out, check_values, tile_max=None) -> tuple:
    """The logits a ragged prefill top-k block scores (fp8_ or bf16_mqa_logits per `cache`: float32,
    no clean_logits, into `out`); with tile_max (the top-k's: (maxima, ntiles, tile, ws, state_offset,
    state_stride)) the serving kernel also writes the bound path's first pass where it can
    (Selection.tile_max_block). Returns (logits, whether tile_max was written)."""
    _expect_q_dtype(q, *_Q_DTYPE[cache])
    return _ragged(q, kv, weights, ks, ke, False, 0, out, check_values, DEEPGEMM_WINDOW_NAMES, torch.float32, tile_max)


def _replay_inputs(q, kv, weights, ks, ke, out) -> list:
    """The call's tensors as a recorded launch takes them: kv's parts as given (a 2-D k_scale
    [Nk, 1] is at the address of the [Nk] view the kernel gets)."""
    if type(kv) is tuple or type(kv) is list:  # anything else as it is: the full path's checks name it
        return [q, kv[0] if kv else None, kv[1] if len(kv) > 1 else None, weights, ks, ke, out]
    return [q, kv, None, weights, ks, ke, out]


def _compressed(q, kv, k, k_scale, weights, ks, ke, clean_logits, out, a, width: int) -> torch.Tensor:
    """DeepGEMM's compressed layout: out[i, c] = logits(i, ks[i] + c) for c < ke[i] - ks[i].

    No kernel writes it directly yet: each block of rows is scored into a wide [rows, Nk] buffer
    (the kernel skips the tiles outside the windows) and gathered on the device by index
    arithmetic; nothing reads the windows on the host. The wide buffer has the output's dtype
    (a bf16 output: the kernel rounds as it stores, and the gather copies bits)."""
    block = _compressed_rows(a.rows, a.keys, width)
    wide = torch.empty((block, a.keys), dtype=out.dtype, device=q.device)
    cols = torch.arange(width, device=q.device)
    for r0 in range(0, a.rows, block):
        r1 = min(a.rows, r0 + block)
        part = _ragged_wide(q[r0:r1], kv, k, k_scale, weights[r0:r1], ks[r0:r1], ke[r0:r1], False, wide[: r1 - r0],
                            a)[0]
        key = ks[r0:r1, None].long() + cols[None, :]  # the key of column c of row i
        dst = out[r0:r1]
        if clean_logits:
            past = key >= ke[r0:r1, None].long()
        torch.gather(part, 1, key.clamp_(0, a.keys - 1), out=dst)
        if clean_logits:
            dst.masked_fill_(past, float("-inf"))
    return out


def _ragged(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, max_seqlen_k, out, check_values,
            names=LEGACY_WINDOW_NAMES, logits_dtype=torch.float32, tile_max=None) -> tuple:
    """(the ragged logits, whether tile_max was written: the wide layout only, topk_ragged_logits)."""
    # A shape seen before: its recorded launch (indexer_logits._fastpath), no checks, no dispatch. A key
    # with tile_max is recorded only where the launch wrote it (_ragged_wide).
    tensors, scalars = (q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, out), (clean_logits, max_seqlen_k, check_values,
                                                                          names, logits_dtype)
    inputs = _replay_inputs(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, out)
    if tile_max:
        extra = _tile_max_inputs(tile_max)
        tensors, scalars, inputs = tensors + tuple(extra), scalars + (tile_max[2], *tile_max[4:]), inputs + extra
    served, key = _fastpath.serve_call("ragged", tensors, scalars, inputs, 6)
    if served is not None:
        return served, bool(tile_max)
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
        out = _output(out, a.rows, a.keys, q.device, logits_dtype)
        if a.rows == 0 or a.keys == 0:
            return out, False
        if value_checks_requested(check_values, device):
            key = None  # a call that asks for value checks is never served without them
        return _ragged_wide(q, kv, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, a, key,
                            tile_max)
    if values:
        check_compressed_values(cu_seqlen_ks, cu_seqlen_ke, width)
    out = _output(out, a.rows, width, q.device, logits_dtype)
    if a.rows == 0:
        return out, False
    if a.keys == 0:  # every window is empty
        return out.fill_(float("-inf")), False
    return _compressed(q, kv, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, a, width), False


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
    Returns [M, Nk] of logits_dtype (float32, or bfloat16: the same kernel rounding its fp32 sums
    as it stores them; a view of `out` when given, which must be of that dtype), -inf outside
    the windows with clean_logits. check_values: see value_checks_enabled.
    """
    dtype = _logits_dtype(logits_dtype)
    _expect_q_dtype(q, *_Q_DTYPE["fp8"])
    ks, ke, names = _windows("fp8_mqa_logits", cu_seq_len_k_start, cu_seq_len_k_end, cu_seqlen_ks, cu_seqlen_ke)
    return _ragged(q, kv, weights, ks, ke, clean_logits, max_seqlen_k, out, check_values, names, dtype)[0]


_append_doc(fp8_mqa_logits, _COMPRESSED_DOC)


def fp8_fp4_mqa_logits(q, kv, weights, cu_seq_len_k_start=None, cu_seq_len_k_end=None, clean_logits=True,
                       max_seqlen_k: int = 0, logits_dtype=torch.float32, *, cu_seqlen_ks=None, cu_seqlen_ke=None,
                       out=None, check_values: Optional[bool] = None) -> torch.Tensor:
    """DeepGEMM 54e2261's name for the ragged prefill call, served for fp8 inputs: q is (q, None)
    (or the float8_e4m3fn q alone), kv = (k float8_e4m3fn [Nk, D], k_scale float32 [Nk]), the rest
    as for fp8_mqa_logits. fp4 inputs (a q scale in q[1], packed fp4 q or K, int32 K scales) are
    refused with ValueError. logits_dtype: float32 or bfloat16, as for fp8_mqa_logits.
    """
    dtype = _logits_dtype(logits_dtype)
    q = _fp8_q(q, "fp8_fp4_mqa_logits", "bf16_mqa_logits")
    if isinstance(kv, (tuple, list)) and len(kv) == 2 and all(isinstance(x, torch.Tensor) for x in kv):
        if kv[0].dtype in _FP4_DTYPES or kv[1].dtype == torch.int32:
            raise ValueError(f"kv: fp4 inputs are not served: expected (k float8_e4m3fn, k_scale float32), got "
                             f"({kv[0].dtype}, {kv[1].dtype}) (DeepGEMM's packed fp4 K and its int32 scales)")
    ks, ke, names = _windows("fp8_fp4_mqa_logits", cu_seq_len_k_start, cu_seq_len_k_end, cu_seqlen_ks, cu_seqlen_ke)
    return _ragged(q, kv, weights, ks, ke, clean_logits, max_seqlen_k, out, check_values, names, dtype)[0]


_append_doc(fp8_fp4_mqa_logits, _COMPRESSED_DOC)


def bf16_mqa_logits(q, kv, weights, cu_seq_len_k_start=None, cu_seq_len_k_end=None, clean_logits=True,
                    max_seqlen_k: int = 0, *, cu_seqlen_ks=None, cu_seqlen_ke=None, out=None,
                    check_values: Optional[bool] = None, logits_dtype=torch.float32) -> torch.Tensor:
    """fp8_mqa_logits for bf16: q [M, H, D] bfloat16, kv the K tensor [Nk, D] bfloat16 or (K,)."""
    dtype = _logits_dtype(logits_dtype)
    _expect_q_dtype(q, *_Q_DTYPE["bf16"])
    ks, ke, names = _windows("bf16_mqa_logits", cu_seq_len_k_start, cu_seq_len_k_end, cu_seqlen_ks, cu_seqlen_ke)
    return _ragged(q, kv, weights, ks, ke, clean_logits, max_seqlen_k, out, check_values, names, dtype)[0]


_append_doc(bf16_mqa_logits, _COMPRESSED_DOC)


def ragged_selection(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, *, max_seqlen_k: int = 0) -> Selection:
    """What serves a ragged prefill call; with max_seqlen_k > 0 (the compressed output), what
    serves its first block of rows."""
    a = check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values=False)
    width = check_compressed_width(max_seqlen_k)
    return _ragged_selection(q, a, _compressed_rows(a.rows, a.keys, width) if width else None)
