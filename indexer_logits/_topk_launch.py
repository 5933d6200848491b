"""What launching any top-k selection path takes (indexer_logits._topk_select): its kernel modules,
each imported on first use and kept, so that `import indexer_logits` imports torch only (and
TRITON_INTERPRET may still be set after it) and a call pays one dict read for a module
(importlib.import_module costs ~1-2 us a call); the grid and chunking (shapes and the SM count
only); the window arguments every kernel takes first; programmatic dependent launch."""

from __future__ import annotations

import importlib

import torch

from ._api import get_num_sms

# Window modes: how a row's valid keys [lo, hi) are found (_topk_digits._window, the WINDOW constexpr)
WINDOW_RAGGED = 0    # lo = ks[row], hi = ke[row] (prefill over ragged K)
WINDOW_CAUSAL = 1    # lo = 0, hi = lens[row // next_n] - next_n + row % next_n + 1 (1-D decode lengths)
WINDOW_LIMIT = 2     # lo = 0, hi = lens[row] (2-D decode lengths; chunked prefill's row limit)
_MODULES: dict = {}


def _module(name: str):
    mod = _MODULES.get(name)
    if mod is None:
        mod = _MODULES[name] = importlib.import_module(name, __package__)
    return mod


def kernels():
    """The four kernels' module (path "rounds"; every path reuses some of its kernels)."""
    return _module("._topk_kernels")


def fused_kernels():
    """The two-kernel path's module."""
    return _module("._topk_fused")


def row_kernels():
    """The one-program-a-row path's module."""
    return _module("._topk_row")


def tiles_kernels():
    """The two-pass path's module."""
    return _module("._topk_tiles")


def bound_kernels():
    """The path bounded by the tile maxima's module."""
    return _module("._topk_bound")


def bound_count_kernels():
    """The bound path's keys' count's module (its three forms)."""
    return _module("._topk_bound_count")


def resident_kernels():
    """The one-launch path's module (its programs resident, the row in registers)."""
    return _module("._topk_resident")


def chunk_size(rows: int, width: int, block: int, programs_per_sm: int) -> int:
    """Keys per program: enough programs per row to fill the GPU about `programs_per_sm` times, at
    least one block of `block` keys each."""
    blocks = max(1, -(-width // block))
    per_row = max(1, min(blocks, -(-programs_per_sm * get_num_sms() // max(rows, 1))))
    return block * -(-blocks // per_row)


def _launch_setup(logits, indices, lo, hi, lens, next_n: int, s: dict):
    """What the four- and two-kernel paths launch with: the grid (a program per row and chunk),
    the chunk length, the window arguments every kernel takes first, whether to launch with PDL,
    and the launch options."""
    rows, width = logits.shape
    chunk = chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"])
    grid = (rows, max(1, -(-width // chunk)))
    pdl = _pdl(logits.device, s["PDL"])
    return grid, chunk, _window_args(logits, indices, lo, hi, lens, next_n), pdl, _launch_options(pdl, s["NUM_WARPS"])


def _window_args(logits, indices, lo, hi, lens, next_n: int) -> tuple:
    """The arguments every selection kernel takes first (_topk_kernels._window reads the ones its
    WINDOW needs; an absent lo / hi / lens stands in as `indices`: never read then)."""
    lo = indices if lo is None else lo
    hi = indices if hi is None else hi
    lens = indices if lens is None else lens
    return (logits, logits.stride(0), lo, hi, lens, next_n, logits.shape[1])


def _launch_options(pdl: bool, num_warps: int) -> dict:
    return {"num_warps": num_warps, "launch_pdl": True} if pdl else {"num_warps": num_warps}


def _pdl(device, setting=None) -> bool:
    """Whether kernels 2-4 overlap their launch with the kernel before (each waits for it with
    gdc_wait before its first read): `setting` (PDL's value) where not None, else on CUDA devices
    of compute capability 9.0 and newer."""
    if setting is not None:
        return bool(setting) and device.type == "cuda"
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9
