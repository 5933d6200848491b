"""Several kernel launches made by hand-written launch code, recorded on a key's first call and
then replayed through their CompiledKernels: Triton's binder skipped, as a generated module's one
launch is in indexer_logits._fastpath.

Why: the top-k selection (indexer_logits._topk_select) launches one to four @triton.jit kernels a
block of rows through JITFunction.run (binding, specialisation, its cache key). Measured on the
H200 (docs/PERF.md, "Top-k: the host's time"), an eager top-k call took ~330 us of host time
where its logits call alone took ~21 us; a prefill top-k of 40 blocks of rows was host-bound.

A caller hands `run` a tag, its tensors (`inputs`, None allowed), its scalars, and
`launches(launch)`, the code that makes its launches through `launch(jit, grid, *args, **kw)`.
The key is indexer_logits._call_key's over the tensors and scalars (every tensor's shape,
strides, dtype, device and address mod 16, the scalars and their types, the watched
environment), found through its guard index first: the scalars must hold everything else the
launch code reads (settings, the SM count), so that equal keys make equal launches. Each launch's
tensor arguments must be inputs, at their addresses (a view at an offset, an allocation inside
the launch code, two inputs at one address: not cached; the launches then always run as they
are). A key's replay launches nothing and its call takes the launch code when a Triton launch
hook is installed (a profiler's), when the first input is not a CUDA tensor (the interpreter, the
CPU) and under INDEXER_LOGITS_FAST_LAUNCH=0.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Sequence

import torch

from . import _call_key, _fastpath

_SEQUENCES: dict[tuple, "Sequence_"] = {}
_UNCACHEABLE: dict[tuple, str] = {}  # key -> why its launches are not replayed (not retried)
MAX_KEYS = 4096
_LOCK = threading.Lock()


def plain(jit, grid, *args, **kwargs):
    """A launch as the launch code would make it without a recorder."""
    return jit[grid](*args, **kwargs)


class Recorder:
    """Launches as `plain` does and keeps every launch it made."""

    def __init__(self):
        self.calls: list = []

    def __call__(self, jit, grid, *args, **kwargs):
        kernel = jit.run(*args, grid=grid, warmup=False, **kwargs)
        self.calls.append((jit, grid, args, kwargs, kernel))
        return kernel


class Sequence_:
    """A key's recorded launches (each a _fastpath.Replay over the call's inputs), in their order."""

    def __init__(self, replays: list, out_index: int):
        self.replays = replays
        self.out_index = out_index
        self.runtime = _fastpath._runtime_hooks()
        # Triton 3.6.0's C launcher for every launch (indexer_logits._direct_launch), the stream
        # read once for all of them; else each replay through its CompiledKernel's launcher
        self.direct = [r.direct for r in replays] if all(r.direct is not None for r in replays) else None
        self.calls = 0

    def __call__(self, inputs: list) -> bool:
        """Launch them all over `inputs`; False, launching none, when a launch hook is installed."""
        if not _fastpath._hooks_idle(self.runtime):
            return False
        direct = self.direct
        if direct is None:
            for replay in self.replays:
                replay(inputs, self.out_index)
        else:
            read = direct[0].stream
            stream = None if read is None else read()
            if stream is None:
                stream = _fastpath._driver_stream()
            for plan in direct:
                plan(inputs, stream)
        self.calls += 1
        return True


def run(tag: str, inputs: list, scalars: Sequence[Any], launches: Callable, out_index: int) -> None:
    """launches(launch): the recorded launches of this key when there are, else the launch code
    (recorded where it can be). inputs[out_index]: a tensor the launches write (never None)."""
    first = inputs[0]
    if type(first) is not torch.Tensor or not first.is_cuda:
        launches(plain)
        return
    run_any(tag, inputs, scalars, launches, out_index)


def run_any(tag: str, inputs: list, scalars: Sequence[Any], launches: Callable, out_index: int) -> None:
    """run without its CUDA gate (the CPU tests run it over fake kernels and CPU tensors)."""
    if not _fastpath.enabled():
        launches(plain)
        return
    skeleton, flat = _call_key.skeleton_of(tag, inputs, scalars)
    if skeleton is None:
        launches(plain)
        return
    seq = _call_key.find(skeleton, flat) if _call_key.GUARDS is not None else None
    if seq is not None and seq(inputs):
        return
    exact = _call_key.exact_of(skeleton, flat)
    try:
        seq = _SEQUENCES.get(exact)
        skip = exact in _UNCACHEABLE or len(_SEQUENCES) >= MAX_KEYS
    except TypeError:  # an unhashable scalar: never cached
        launches(plain)
        return
    if seq is not None:
        if seq(inputs):
            _call_key.file(skeleton, flat, seq, recorded=False)
            return
        launches(plain)  # a launch hook: Triton's own launches
        return
    if skip or not _fastpath._hooks_idle(_fastpath._runtime_hooks()):
        launches(plain)
        return
    recorder = Recorder()
    launches(recorder)
    out = inputs[out_index]
    try:
        replays = [_fastpath.Replay.build(jit, [(grid, args, kwargs, kernel)], inputs, (tuple(out.shape), out.dtype))
                   for jit, grid, args, kwargs, kernel in recorder.calls]
    except _fastpath._NotReplayable as exc:
        with _LOCK:
            _UNCACHEABLE[exact] = str(exc)
        return
    seq = Sequence_(replays, out_index)
    with _LOCK:
        _SEQUENCES[exact] = seq
    _call_key.file(skeleton, flat, seq)


def sequences() -> dict:
    """The recorded sequences (tests and benches read their `calls` counters)."""
    return dict(_SEQUENCES)


def why_not_cached(tag: str, inputs: list, scalars: Sequence[Any]) -> Optional[str]:
    key = _call_key.key_of(tag, inputs, scalars)
    return None if key is None else _UNCACHEABLE.get(key)


def clear() -> None:
    with _LOCK:
        _SEQUENCES.clear()
        _UNCACHEABLE.clear()
    _call_key.clear()
