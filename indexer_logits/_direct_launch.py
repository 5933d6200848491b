"""A recorded launch handed straight to Triton 3.6.0's C launcher, each cache pool's tensor map encoded once.

A replayed call (indexer_logits._fastpath.Replay) used to go through the CompiledKernel's
launcher, Triton's CudaLauncher: its __call__ (two scratch allocations, none for our kernels),
then, for a kernel with a TensorDescriptor argument, wrap_handle_tensordesc's `inner`, which walks
every argument, expands each descriptor with make_tensordesc_arg (a CUtensorMap filled by
fill_tma_descriptor, then its shape and strides) and calls the compiled C `launch`. Measured on
the H200: 13.9 us of a 20.7 us decode call, 8.5 us of it the C launch.

Here the same C `launch` is called with the argument list that `inner` would build, laid out once
when the launch is recorded: the 13 leading arguments, every constant, the descriptors' shapes and
strides; per call only the stream, the call's tensors and each descriptor's tensor map are set.
A tensor map is a function of the base address and what the recording fixed (the descriptor's
shape, strides, block shape and padding, the kernel's swizzle, element size and type): maps are
kept per such constant part (`maps_for`), keyed by the base address, so an engine that passes the
same pool every call encodes it once, and a pool at another address (another layer, a
reallocation) gets its own encoding. The C launcher copies the map into the kernel's parameters
at launch (and a CUDA graph at capture), so reusing one is what Triton does with a fresh one.
Tensors go over as their addresses (ADDRESSES, below) and the stream is read by torch's own C
functions where Triton's driver would call them (stream_reader).

Version safety: this reads Triton's launcher internals (CudaLauncher's attributes, the closure of
`inner`, make_tensordesc_arg's result), so it is used only under the Triton versions whose code
was read (SUPPORTED), and only when every one of those pieces has the shape that code has; else
`plan` returns None and the replay calls the CompiledKernel's launcher as before.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

SUPPORTED = ("3.6.0",)  # Triton versions whose nvidia launcher (driver.py) this was written against
_DRIVER = "triton.backends.nvidia.driver"
MAX_MAPS = 1024  # tensor maps kept per constant part (engines: one pool per layer); then forgotten
# Tensor arguments handed over as their addresses (ints), which the C launcher takes as they are,
# instead of tensors, for each of which it calls data_ptr() and then cuPointerGetAttribute(
# CU_POINTER_ATTRIBUTE_DEVICE_POINTER) to check the memory is the GPU's and translate the address.
# Exact here: a replay's key holds every tensor's device, so each is a CUDA tensor on the device
# the full path accepted when it recorded, and the recorded launch passed it as a pointer; for CUDA
# memory under unified addressing (every 64-bit platform Triton runs on) the device pointer is the
# address itself. Set it False to hand over tensors as Triton's own launch does.
ADDRESSES = True

_MAPS: dict[tuple, dict] = {}


def triton_version() -> Optional[str]:
    return getattr(sys.modules.get("triton"), "__version__", None)


def maps_for(const: tuple) -> dict:
    """The encoded tensor maps, by base address, of descriptors with this constant part."""
    return _MAPS.setdefault(const, {})


def rebased(desc, base):
    """A copy of a recorded host TensorDescriptor over another tensor (same shape, strides, block)."""
    d = object.__new__(type(desc))
    d.__dict__.update(desc.__dict__)
    d.base = base
    return d


def clear() -> None:
    _MAPS.clear()


def _unwrap(launch) -> Optional[tuple]:
    """(C launch, descriptor indices, their metadata) of a CudaLauncher's `launch`: the compiled
    function itself (no descriptor argument) or wrap_handle_tensordesc's `inner` around it."""
    if type(launch).__name__ == "builtin_function_or_method":
        return launch, set(), []
    code, cells = getattr(launch, "__code__", None), getattr(launch, "__closure__", None)
    if code is None or cells is None or launch.__name__ != "inner" or launch.__module__ != _DRIVER:
        return None
    free = dict(zip(code.co_freevars, cells))
    if not {"launcher", "tensordesc_indices", "tensordesc_meta"} <= free.keys():
        return None
    return (free["launcher"].cell_contents, set(free["tensordesc_indices"].cell_contents),
            list(free["tensordesc_meta"].cell_contents))


def _const_of(desc, meta) -> tuple:
    """What a tensor map depends on besides the base address (hashable)."""
    meta_items = None if meta is None else tuple(sorted((k, repr(v)) for k, v in meta.items()))
    return (tuple(desc.shape), tuple(desc.strides), tuple(desc.block_shape), desc.padding, meta_items)


def stream_reader():
    """A cheaper equal of what the replay asks Triton's active driver, get_current_stream(
    get_current_device()): torch's current raw stream of torch's current device, read by the C
    functions Triton 3.6's GPUDriver and torch.cuda.current_device call, less the Python between.
    The reader returns None (the caller then asks the driver) when the active driver is no longer
    the one seen here, or CUDA is not initialised or is in a forked child (where current_device
    would initialise or refuse). None when this driver and torch are not those."""
    torch, triton = sys.modules.get("torch"), sys.modules.get("triton")
    config = getattr(getattr(triton, "runtime", None), "driver", None)
    c = getattr(torch, "_C", None)
    raw, device = getattr(c, "_cuda_getCurrentRawStream", None), getattr(c, "_cuda_getDevice", None)
    bad_fork, cuda = getattr(c, "_cuda_isInBadFork", None), getattr(torch, "cuda", None)
    drv = getattr(config, "_active", None)
    if None in (raw, device, bad_fork, drv) or getattr(drv, "get_current_stream", None) is not raw \
            or getattr(drv, "get_current_device", None) is not getattr(cuda, "current_device", None):
        return None

    def read():
        if config._active is drv and cuda._initialized and not bad_fork():
            return raw(device())
        return None
    return read


class Plan:
    """The C launch and its argument list; __call__(inputs, stream) launches over the call's tensors.
    `stream`: stream_reader()'s reader or None."""

    def __init__(self, launch, flat: list, ptr_slots: list, map_slots: list):
        self.launch = launch
        self.stream = stream_reader()
        self.addresses = ADDRESSES
        self.flat = flat
        self.ptr_slots = ptr_slots  # (position, input index): a tensor argument
        self.map_slots = map_slots  # (position, input index, maps, encode): a descriptor's tensor map

    def __call__(self, inputs: list, stream) -> None:
        args = self.flat.copy()
        args[3] = stream
        if self.addresses:
            for i, j in self.ptr_slots:
                args[i] = inputs[j].data_ptr()
        else:
            for i, j in self.ptr_slots:
                args[i] = inputs[j]
        for i, j, maps, encode in self.map_slots:
            t = inputs[j]
            m = maps.get(t.data_ptr())
            args[i] = encode(t) if m is None else m
        self.launch(*args)


def _encoder(make, desc, meta, maps: dict, tail: list):
    """encode(t): the tensor map of `desc` over t's address (Triton's make_tensordesc_arg), kept in maps."""
    def encode(t):
        expanded = make(rebased(desc, t), meta)
        if list(expanded[1:]) != tail:  # the shape and strides the plan holds: never otherwise
            raise RuntimeError("indexer_logits: a descriptor expanded to other shapes than recorded")
        if len(maps) >= MAX_MAPS:
            maps.clear()
        maps[t.data_ptr()] = expanded[0]
        return expanded[0]
    return encode


def plan(run, function, metadata, grid: tuple, template: list, slots: list, desc_slots: list) -> Optional[Plan]:
    """The direct launch of a recorded one (Replay's parts: `run` the CompiledKernel's launcher,
    `template` every argument in signature order with None at the tensors in `slots` (position,
    input) and the descriptors in `desc_slots` (position, input, recorded descriptor)), or None
    when this Triton or this launcher is not the one this module was written for."""
    if triton_version() not in SUPPORTED:
        return None
    driver = sys.modules.get(_DRIVER)
    if driver is None or type(run).__name__ != "CudaLauncher" or type(run).__module__ != _DRIVER:
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None  # scratch buffers are allocated per launch by CudaLauncher.__call__
    unwrapped = _unwrap(getattr(run, "launch", None))
    make = getattr(driver, "make_tensordesc_arg", None)
    if unwrapped is None or make is None:
        return None
    launch, desc_indices, metas = unwrapped
    descs = {i: (j, d) for i, j, d in desc_slots}
    if set(descs) != desc_indices or len(metas) != len(desc_indices):
        return None
    tensors = dict(slots)
    # the 13 leading arguments: grid, stream (per call), function, cooperative, pdl, two scratches (none),
    # the packed metadata, launch metadata and two hooks (none: a replay with hooks takes the full path)
    flat = [grid[0], grid[1], grid[2], None, function, run.launch_cooperative_grid, run.launch_pdl,
            None, None, metadata, None, None, None]
    ptr_slots, map_slots = [], []
    for i, value in enumerate(template):
        if i in tensors:
            ptr_slots.append((len(flat), tensors[i]))
            flat.append(None)
        elif i in descs:
            j, desc = descs[i]
            meta = metas[sorted(desc_indices).index(i)]
            expanded = list(make(desc, meta))  # over the recorded base: a valid address now
            if meta is None:  # no tensor map: the base pointer, then constants
                ptr_slots.append((len(flat), j))
                flat.append(None)
                flat.extend(expanded[1:])
                continue
            maps = maps_for(_const_of(desc, meta))
            maps.setdefault(desc.base.data_ptr(), expanded[0])
            map_slots.append((len(flat), j, maps, _encoder(make, desc, meta, maps, expanded[1:])))
            flat.append(None)
            flat.extend(expanded[1:])
        else:
            flat.append(value)
    return Plan(launch, flat, ptr_slots, map_slots)
