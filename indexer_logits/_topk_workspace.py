"""The top-k's zeroed workspace kept from one eager call to the next on the same stream, in place of a
torch.zeros a call: the selection's last kernel leaves every state and histogram it used zero again (what lets
one workspace serve a call's blocks of rows), so a workspace a call used is zero again, in stream order, for the
next call on that stream.

Why: on an H100 host a torch.zeros cost 11-15 us of a top-k call's 70-150 us of host time (docs/perf_logs/
topk_arena, calls 2 and 6). Measured there with it (call 7, alternated): 9-10 us less host time a call (decode 1x4K
95.6 -> 86.6 us, 64x32K 149.4 -> 139.0, 1x1M 149.5 -> 139.5; prefill 1024x4K 119.8 -> 109.9), the same indices
(docs/PERF.md, "Top-k: the workspace"). In a CUDA graph, one workspace a capture and stream in place of one a
captured call (one fill node a graph, not one a call): 0.9-1.6 us less a call in graphs of 4 decode calls on an H100
(docs/perf_logs/topk_nofill, call 1: 1 x 1M 69.8 -> 68.8 us, 64 x 32K 120.4 -> 119.5).

The rules that keep it exact:
- a call takes the workspace out of the store (`take`) and puts it back (`give_back`) only once every one of its
  launches is enqueued; a call that raises never puts it back (its kernels may have left it dirty), and two calls
  at once (threads) never hold one workspace;
- the store is keyed by the device, torch's current raw stream on it and the rows in a power of two (a workspace
  of more rows serves: a call of r rows reads its first 2r state rows, two states of r rows, and leaves the rest
  as it found it, zero), so a workspace is reused only in that stream's order;
- a captured call never takes an eager call's workspace (the graph's replays would share it with eager calls on
  other streams). Within one capture (the driver's capture id) the calls on one stream share one (KEEP_CAPTURED):
  the capture's first call of a size makes it, zeroed by a fill node in the graph, so every replay starts from
  zero, and the capture's later calls take it without a node. A capture's workspaces are dropped once another
  capture on the same stream gives one back (a stream captures one graph at a time); the memory stays the graph
  pool's, which torch hands only to allocations ordered after the graph's own (or to another graph sharing the
  pool, replayed in turn), and each graph's first call fills its own. Where the driver does not say the capture's
  id (no libcuda, no cuStreamGetCaptureInfo), every captured call makes its own, as before;
- at most MAX_KEPT are kept (a few KiB a row each); _fastpath.clear_cache() empties the store.
A stream that torch destroys and whose handle a new one reuses while the old one's kernels run could share a
workspace; torch's streams come from pools that it never destroys.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Callable, Optional

import torch

from . import _fastpath

KEEP = True    # off: a new zeroed workspace a call, as before
# off: a new zeroed workspace every captured call, a fill node each in the graph. On: one a capture, stream and size
KEEP_CAPTURED = True
MAX_KEPT = 64
_KEPT: dict = {}
_fastpath.ALSO_CLEARED.append(_KEPT)
_CAPTURE_ACTIVE = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE


@functools.lru_cache(maxsize=None)
def _capture_info() -> Optional[Callable]:
    """The driver's cuStreamGetCaptureInfo as fn(stream, status*, id*) -> CUresult, or None without libcuda. Every
    version of it (v1: those three; _v2: then the graph, the dependencies and their count; _v3: their edges too)
    begins with those three and takes NULL for the rest, so the call passes four NULLs after them whichever symbol
    the driver has (a C callee ignores arguments past its own)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    for name in ("cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v3", "cuStreamGetCaptureInfo"):
        fn = getattr(lib, name, None)
        if fn is not None:
            return lambda stream, status, cid, fn=fn: fn(stream, status, cid, None, None, None, None)
    return None


def _capture_id(stream: int) -> Optional[int]:
    """The id of the capture the raw CUDA stream `stream` is in (unique in the process), or None where it is not
    capturing or the driver does not say."""
    fn = _capture_info()
    if fn is None:
        return None
    status, cid = ctypes.c_int(0), ctypes.c_ulonglong(0)
    if fn(ctypes.c_void_p(stream), ctypes.byref(status), ctypes.byref(cid)) != 0 or status.value != _CAPTURE_ACTIVE:
        return None
    return cid.value


def _stream_key(device: torch.device) -> Optional[tuple]:
    """Where a workspace may be kept, else None: (device, its current raw stream) for a CUDA stream on the current
    device (where the launches go) that is not capturing a graph; (device, stream, capture id) for one that is
    (KEEP_CAPTURED, the driver saying the id); the interpreter's CPU tensors (calls run one after another)."""
    if device.type != "cuda":
        return ("cpu",) if device.type == "cpu" else None
    c = torch._C
    raw, current = getattr(c, "_cuda_getCurrentRawStream", None), getattr(c, "_cuda_getDevice", None)
    if raw is None or current is None or current() != device.index:
        return None
    stream = raw(device.index)
    if not torch.cuda.is_current_stream_capturing():
        return (device.index, stream)
    capture = _capture_id(stream) if KEEP_CAPTURED else None
    return None if capture is None else (device.index, stream, capture)


def take(rows: int, device: torch.device, make: Callable[[int], torch.Tensor]) -> tuple:
    """(a zeroed workspace of at least `rows` rows, its key for give_back or None): a kept one where the store
    holds one for this stream and size, else make(rows in a power of two) (make(rows) where none may be kept)."""
    stream = _stream_key(device) if KEEP and rows > 0 else None
    if stream is None:
        return make(rows), None
    key = (*stream, 1 << (rows - 1).bit_length())
    ws = _KEPT.pop(key, None)
    return (make(key[-1]) if ws is None else ws), key


def give_back(key: Optional[tuple], ws: torch.Tensor) -> None:
    """Keep `ws` for the next call on its stream (take's key; None: not kept): once every launch of the call
    that used it is enqueued, so that its last kernel zeroes it again before the next call's first reads it."""
    if key is None:
        return
    if len(key) == 4:  # a capture's (device, stream, capture, rows): the stream's earlier captures have ended
        for old in [k for k in list(_KEPT) if len(k) == 4 and k[:2] == key[:2] and k[2] != key[2]]:
            _KEPT.pop(old, None)  # (another thread's call may have taken it meanwhile)
    if len(_KEPT) < MAX_KEPT:
        _KEPT[key] = ws
