"""A shape's second call: one cached launch instead of the checks, the dispatch and Triton's binder.

Measured on the H200 (docs/PERF.md, "Host time of one eager call"), an eager decode call spent
7-18 us in the shape checks, 4-10 us in the dispatch and 46-106 us in the module's launch(),
most of it Triton's JITFunction.run (binding, specialisation, cache key, hooks); launching the
same CompiledKernel directly took 9.4-10.5 us. Engines run prefill eagerly, 61 layers a step.

So the first call of a key runs the whole path and, while its module's launch() runs, watches
the one kernel launch it makes: the grid, every argument, the CompiledKernel that ran. A call
whose key matches is then that launch again with the call's own tensors in the recorded slots.

The key (indexer_logits._call_key) holds everything the checks, the dispatch and a module's
launch() read: each tensor's shape, strides, dtype, device and address modulo 16, the scalar
arguments with their types, and the environment settings of this package and of Triton's
interpreter. A call finds its launch through the guard index first (torch's C++ tensor guards:
a served decode call 4.9 us of Python on the CPU host against 6.3 by the exact key), then by its
exact key. A module's launch() must
derive its non-tensor arguments from those alone (the generated ones do: shapes, strides and
flags); its tensor arguments must be its inputs or views of them at offset 0 (the same address),
or a TensorDescriptor over one. A launch that breaks this (an allocation, an offset view, two
inputs at one address, a callable grid, two kernel launches) is simply not cached.

Not cached: value checks on (they read device memory), the torch reference, empty shapes,
tensor subclasses (torch.compile's fake tensors have no address), launch hooks installed in
Triton (a profiler's: those calls take Triton's own path), INDEXER_LOGITS_FAST_LAUNCH=0.
Imports only torch; Triton's objects are reached through what a launch hands over. Under Triton
3.6.0 a replay calls its C launcher directly with cached tensor maps (indexer_logits._direct_launch).
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from typing import Any, Optional, Sequence

import torch

from . import _call_key, _direct_launch
# watch_env and key_of: re-exported (the modules register their variables here; tests and benches key calls)
from ._call_key import ENV_FAST_LAUNCH, exact_of, key_of, skeleton_of, watch_env  # noqa: F401

_OFF = ("0", "false", "no", "off")

_REPLAYS: dict[tuple, "Replay"] = {}
_UNCACHEABLE: dict[tuple, str] = {}  # key -> why its launch is not replayed (not retried)
_RECORD_LOCK = threading.RLock()
MAX_KEYS = 4096  # a bound on the cache: engines call a few hundred shapes; a sweep may call more
_Tensor = torch.Tensor


def enabled() -> bool:
    return os.environ.get(ENV_FAST_LAUNCH, "1").strip().lower() not in _OFF


def call_key(tag: str, tensors: Sequence[Any], scalars: Sequence[Any]) -> Optional[tuple]:
    """The exact key of a call whose first tensor is a CUDA tensor, else None (nothing is cached)."""
    first = tensors[0]
    if type(first) is not _Tensor or not first.is_cuda:
        return None
    return key_of(tag, tensors, scalars)


class CallKey:
    """A call's exact key (`exact`, as key_of gives it) and where the guard index files the call."""

    __slots__ = ("exact", "skeleton", "flat")

    def __init__(self, exact: tuple, skeleton: Optional[tuple], flat: Optional[list]):
        self.exact, self.skeleton, self.flat = exact, skeleton, flat


def serve_call(tag: str, tensors: Sequence[Any], scalars: Sequence[Any], inputs: list, out_index: int):
    """(output, key): the output of the launch recorded for this call run over `inputs` (see
    Replay.__call__), or None with the CallKey record() takes (None: nothing may be cached).

    The guard index first (indexer_logits._call_key); where it misses, the exact key."""
    first = tensors[0]
    if type(first) is not _Tensor or not first.is_cuda:
        return None, None
    return serve_any(tag, tensors, scalars, inputs, out_index)


def serve_any(tag: str, tensors: Sequence[Any], scalars: Sequence[Any], inputs: list, out_index: int):
    """serve_call without its CUDA gate (the CPU tests and bench.fastpath run it on CPU tensors)."""
    skeleton, flat = skeleton_of(tag, tensors, scalars)
    if skeleton is None:  # an argument no key holds: nothing is cached
        return None, None
    if _call_key.GUARDS is not None:
        replay = _call_key.find(skeleton, flat)
        if replay is not None:
            out = replay(inputs, out_index)
            if out is not None:
                return out, None
    exact = exact_of(skeleton, flat)
    key = CallKey(exact, skeleton, flat)
    replay = get(exact)
    if replay is not None:
        out = replay(inputs, out_index)
        if out is not None:
            _call_key.file(skeleton, flat, replay, recorded=False)  # a guard for these tensors (other dispatch keys)
            return out, None
    return None, key


def _exact(key) -> Optional[tuple]:
    return key.exact if type(key) is CallKey else key


def get(key: Optional[tuple]) -> Optional["Replay"]:
    if key is None:
        return None
    try:
        return _REPLAYS.get(key)
    except TypeError:  # an unhashable scalar: never cached
        return None


def serve(key: Optional[tuple], inputs: list, out_index: int) -> Optional[torch.Tensor]:
    """The output of the launch recorded for `key`, run over `inputs` (see Replay.__call__); None
    when nothing is recorded for it or a launch hook wants Triton's own launch: the caller's full
    path then serves the call."""
    replay = get(key)
    return None if replay is None else replay(inputs, out_index)


# Other memories of what serves a call shape, emptied with these: indexer_logits._topk's shapes whose
# logits module cannot write the top-k's tile maxima (another table may serve them by one that can).
ALSO_CLEARED: list = []


def clear() -> None:
    """Forget every recorded launch (with the dispatch's cache: tables may have changed)."""
    with _RECORD_LOCK:
        _REPLAYS.clear()
        _UNCACHEABLE.clear()
        _call_key.clear()
        _direct_launch.clear()
        for memory in ALSO_CLEARED:
            memory.clear()


def replays() -> dict[tuple, "Replay"]:
    """The recorded launches (tests and benchmarks read their `calls` counters)."""
    return dict(_REPLAYS)


def why_not_cached(key) -> Optional[str]:
    return _UNCACHEABLE.get(_exact(key))


# ---------------------------------------------------------------------------------------------
# Recording a launch.


class _Watch:
    """Stands in for a module's @triton.jit kernel while its launch() runs once: launches as the
    kernel does and keeps what it launched (on the recording thread only)."""

    def __init__(self, jit):
        self.jit = jit
        self.owner = threading.get_ident()
        self.calls: list = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            kernel = self.jit.run(*args, grid=grid, warmup=False, **kwargs)
            if threading.get_ident() == self.owner:
                self.calls.append((grid, args, kwargs, kernel))
            return kernel
        return launch

    def __getattr__(self, name):
        return getattr(self.jit, name)


def _kernels_of(module_globals: dict) -> list[str]:
    """The names of the @triton.jit kernels a generated module launches (`_<family>_kernel`)."""
    return [n for n, v in module_globals.items()
            if n.endswith("_kernel") and type(v).__name__ == "JITFunction" and hasattr(v, "run")]


def record(key, launch, args: tuple, kwargs: dict, inputs: list, out_index: int):
    """launch(*args, **kwargs), a module's launch(), and return what it returns. With a key and
    the fast path enabled, its kernel launch is watched and kept for the key as a Replay over
    `inputs`: the call's tensors as the caller will hand them to the replay (the launch's tensor
    arguments must be at their addresses), inputs[out_index] the output it writes. `key`: the
    CallKey serve_call gave (the launch is filed in the guard index too) or an exact key (a tuple)."""
    call = key if type(key) is CallKey else None
    key = _exact(key)
    try:
        skip = key is None or key in _UNCACHEABLE or len(_REPLAYS) >= MAX_KEYS or not enabled()
    except TypeError:  # an unhashable scalar in the key
        skip = True
    if skip:
        return launch(*args, **kwargs)
    module_globals = getattr(launch, "__globals__", None)
    with _RECORD_LOCK:  # one recording at a time: each swaps a module global for the call
        names = _kernels_of(module_globals) if isinstance(module_globals, dict) else []
        if len(names) != 1:
            _UNCACHEABLE[key] = f"the module launches {len(names)} @triton.jit kernels"
            return launch(*args, **kwargs)
        name = names[0]
        jit = module_globals[name]
        watch = _Watch(jit)
        module_globals[name] = watch
        try:
            result = launch(*args, **kwargs)
        finally:
            module_globals[name] = jit
    out = inputs[out_index]
    try:
        replay = Replay.build(jit, watch.calls, inputs, (tuple(out.shape), out.dtype))
        _REPLAYS[key] = replay
        if call is not None:
            _call_key.file(call.skeleton, call.flat, replay)
    except _NotReplayable as exc:
        _UNCACHEABLE[key] = str(exc)
    return result


class _NotReplayable(Exception):
    pass


def active_driver():
    """Triton's active driver (its current device and stream functions): the one JITFunction.run uses."""
    return sys.modules["triton"].runtime.driver.active


def _driver_stream():
    """The current stream of the current device, as Triton's active driver gives it to a launch."""
    drv = active_driver()
    return drv.get_current_stream(drv.get_current_device())


def _runtime_hooks():
    """Triton's launch hooks, or None when the triton in use has none reachable."""
    triton = sys.modules.get("triton")
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    return runtime


def _hooks_idle(runtime) -> bool:
    """True when no launch hook is installed (a HookChain with no calls, or None)."""
    if runtime is None:
        return False
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


class Replay:
    """One recorded kernel launch: the CompiledKernel, its grid, its arguments in signature order
    with the call's tensors in `slots`. Calling it launches on the current stream."""

    def __init__(self, kernel, grid, template, slots, desc_slots, out_spec):
        # out_spec: the output's (shape, dtype) as the full path returned it (a view of the first
        # columns of a wider buffer given as out=, at that buffer's address)
        self.run = kernel.run  # Triton's launcher (CompiledKernel.run loads the module once)
        self.function = kernel.function
        self.metadata = kernel.packed_metadata
        self.grid = grid
        self.template = template
        self.slots = slots
        self.desc_slots = desc_slots
        self.out_spec = out_spec
        self._out_like = None  # an empty tensor of the output's dtype on q's device, made by the first call
        self.calls = 0
        self._runtime = _runtime_hooks()
        # Triton 3.6.0's C launcher called directly, tensor maps cached per pool (_direct_launch);
        # None under any other Triton or launcher: then self.run, Triton's own launcher
        try:
            self.direct = _direct_launch.plan(self.run, self.function, self.metadata, grid, template, slots, desc_slots)
        except Exception:  # anything unforeseen in Triton's parts: its own launcher, as before
            self.direct = None

    @classmethod
    def build(cls, jit, calls: list, inputs: list, out_spec) -> "Replay":
        if len(calls) != 1:
            raise _NotReplayable(f"launch() made {len(calls)} kernel launches")
        grid, args, kwargs, kernel = calls[0]
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        if kernel is None or not all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata")):
            raise _NotReplayable("the launch returned no CompiledKernel")
        if callable(grid) or not all(isinstance(g, int) for g in grid) or not 1 <= len(grid) <= 3:
            raise _NotReplayable(f"grid {grid!r} is not 1-3 ints")
        grid = tuple(grid) + (1,) * (3 - len(grid))
        params = list(jit.params)
        if len(args) > len(params):
            raise _NotReplayable("more positional arguments than the kernel has parameters")
        values = list(args)
        for p in params[len(args):]:
            if p.name in kwargs:
                values.append(kwargs[p.name])
            elif p.default is not inspect.Parameter.empty:
                values.append(p.default)
            else:
                raise _NotReplayable(f"parameter {p.name} has no value")
        addresses = {}
        for j, t in enumerate(inputs):
            if type(t) is torch.Tensor:
                addresses.setdefault(t.data_ptr(), []).append(j)
        slots, desc_slots, template = [], [], []
        for i, v in enumerate(values):
            if type(v) is torch.Tensor:
                slots.append((i, _input_at(addresses, v, f"argument {params[i].name}")))
                template.append(None)
            elif hasattr(v, "base") and hasattr(v, "block_shape"):  # a host TensorDescriptor
                if type(v.base) is not torch.Tensor:
                    raise _NotReplayable(f"descriptor {params[i].name} is not over a tensor")
                desc_slots.append((i, _input_at(addresses, v.base, f"descriptor {params[i].name}"), v))
                template.append(None)
            elif v is None or isinstance(v, (bool, int, float, str)) or type(v).__name__ in ("constexpr", "dtype"):
                template.append(v)
            else:
                raise _NotReplayable(f"argument {params[i].name} is a {type(v).__name__}")
        return cls(kernel, grid, template, slots, desc_slots, out_spec)

    def __call__(self, inputs: list, out_index: int) -> Optional[torch.Tensor]:
        """Launch over `inputs` (inputs[out_index] None when the call allocates its output: done
        here) and return the output; None, launching nothing, when a launch hook is installed."""
        if not _hooks_idle(self._runtime):
            return None  # a launch hook (a profiler's) wants Triton's own launch: the caller's full path
        out = inputs[out_index]
        if out is None:
            # on q's device (every call of this replay's key or guard has it there), as the full path
            # allocates it: new_empty of an empty tensor of that dtype and device, the sizes as ints
            # (a tuple of sizes and a dtype cost the argument parser ~0.7 us more a call on the CPU host)
            like = self._out_like
            if like is None:
                like = self._out_like = inputs[0].new_empty(0, dtype=self.out_spec[1])
            out = inputs[out_index] = like.new_empty(*self.out_spec[0])
        elif out.shape[1] != self.out_spec[0][1]:
            out = out[:, :self.out_spec[0][1]]  # the caller's wider buffer: its first columns, as the full path
        direct = self.direct
        if direct is not None:
            stream = None if direct.stream is None else direct.stream()
            direct(inputs, _driver_stream() if stream is None else stream)
            self.calls += 1
            return out
        args = self.template.copy()
        for i, j in self.slots:
            args[i] = inputs[j]
        for i, j, desc in self.desc_slots:
            args[i] = _direct_launch.rebased(desc, inputs[j])
        g = self.grid
        self.run(g[0], g[1], g[2], _driver_stream(), self.function, self.metadata, None, None, None, *args)
        self.calls += 1
        return out


def _input_at(addresses: dict, t: torch.Tensor, what: str) -> int:
    at = addresses.get(t.data_ptr(), [])
    if len(at) != 1:
        raise _NotReplayable(f"{what} is at an address {'shared by several inputs' if at else 'of no input'}")
    return at[0]

