"""What identifies a call for its recorded launch (indexer_logits._fastpath): the exact key, and
the guard index that finds a recorded launch without building that key.

The exact key (key_of: the call's skeleton, then exact_of's five items a tensor) holds everything
the checks, the dispatch and a module's launch() read: each tensor's shape, strides, dtype,
device and address modulo 16, the scalars with their types, and the watched environment. Built
in Python it is five attribute reads a tensor, 3.8 us for a decode call on the 2-core CPU host
and about twice that on the H200's (docs/PERF.md, "Host time").

The guard index holds the same facts in another form: the call's skeleton (tag, environment,
where the tensors, Nones and tuples are, the first two tensors' shapes, the scalars and their
types) as a dict key, and for each launch recorded under it one torch TensorGuards (torch's C++ check
of every tensor's Python type, dispatch keys (so device type), dtype, device index,
requires_grad, sizes and strides: the checks torch.compile's guards were built on) with the
addresses' residues mod 16. A call whose skeleton is filed and whose tensors pass one guard and
have its residues has the exact key of that launch, whatever else it may differ in (a guard is
stricter: requires_grad and dispatch keys too; a call that misses on those is found by its exact
key, and its guard is filed too). A served decode call's Python took 4.9 us through it against
6.3 by the exact key on the CPU host (`python3 -m bench.fastpath`: `guarded` and `served`).

TensorGuards lives in torch._C._dynamo, not a public API: it is used only when a self-test at
import shows it refusing what the key tells apart (GUARDS is None otherwise, and every call is
found by its exact key as before).
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import torch

ENV_FAST_LAUNCH = "INDEXER_LOGITS_FAST_LAUNCH"

# The environment settings a key holds (a change of any makes other keys). Read through
# os.environ's own dict where CPython exposes it: four os.environ.get calls cost ~3 us a call.
_WATCHED: list[str] = [ENV_FAST_LAUNCH, "TRITON_INTERPRET"]
_ENV_DATA = getattr(os.environ, "_data", None)
_ENCODE = getattr(os.environ, "encodekey", None)
_WATCHED_KEYS: tuple = ()
_Tensor = torch.Tensor


def watch_env(name: str) -> None:
    """Make `name` part of every key (the modules that read an environment variable register it)."""
    global _WATCHED_KEYS
    if name not in _WATCHED:
        _WATCHED.append(name)
    _WATCHED_KEYS = tuple(_ENCODE(n) for n in _WATCHED) if isinstance(_ENV_DATA, dict) and _ENCODE else ()


watch_env(ENV_FAST_LAUNCH)


def env_state() -> tuple:
    if _WATCHED_KEYS:
        return tuple(map(_ENV_DATA.get, _WATCHED_KEYS))
    return tuple([os.environ.get(n) for n in _WATCHED])


def skeleton_of(tag: str, tensors: Sequence[Any], scalars: Sequence[Any]) -> tuple:
    """(skeleton, flat tensors) of a call, or (None, None) where an argument is not a tensor, None,
    or a tuple or list of those (nothing is cached for such a call).

    The skeleton is one flat tuple: the tag, the watched environment's values (a tuple), per
    argument a 1 for a tensor, None, or a tuple or list as its (type, length) and then its items
    the same way; then the shapes of the first two tensors (what the guard index's dict spreads
    calls over: q's rows and the cache pool or K's keys, the shapes an engine's calls vary in),
    and the scalars' values and their types (1, True and 1.0 are equal values of three types). It
    reads back one way only (a 1, None or a (type, length) pair opens each item, and the count of
    tensors it names fixes what follows), so two argument lists never share a skeleton unless
    they differ only in their tensors' properties: what a guard checks, and exact_of adds."""
    flat: list = []
    parts: list = [tag, env_state()]
    for t in tensors:
        if type(t) is _Tensor:
            flat.append(t)
            parts.append(1)
        elif t is None:
            parts.append(None)
        elif type(t) is tuple or type(t) is list:
            parts.append((type(t), len(t)))
            for x in t:
                if type(x) is _Tensor:
                    flat.append(x)
                    parts.append(1)
                elif x is None:
                    parts.append(None)
                else:
                    return None, None
        else:
            return None, None
    parts += [t.shape for t in flat[:2]]
    parts += scalars
    parts += map(type, scalars)
    return tuple(parts), flat


def exact_of(skeleton: tuple, flat: list) -> tuple:
    """The exact key: the skeleton, then each tensor's shape, strides, dtype, device and address
    mod 16 (Triton specialises pointers on 16-byte alignment, and the cache descriptor needs it),
    in the skeleton's order."""
    parts = list(skeleton)
    for t in flat:
        parts += (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() & 15)
    return tuple(parts)


def key_of(tag: str, tensors: Sequence[Any], scalars: Sequence[Any]) -> Optional[tuple]:
    """The exact key of a call (no CUDA gate: bench.fastpath times it on CPU tensors), or None
    (skeleton_of: an argument that is not a tensor, None, or a tuple or list of those)."""
    skeleton, flat = skeleton_of(tag, tensors, scalars)
    return None if skeleton is None else exact_of(skeleton, flat)


# ---------------------------------------------------------------------------------------------
# The guard index.

def _guard_of(flat: list):
    """A TensorGuards over these tensors with every size and stride fixed (None would leave one free)."""
    return GUARDS(*flat, dynamic_dims_sizes=[list(t.shape) for t in flat],
                  dynamic_dims_strides=[list(t.stride()) for t in flat])


def _self_test(cls) -> bool:
    """Does this torch's TensorGuards refuse what the exact key tells apart (on CPU and meta tensors)?"""
    global GUARDS
    GUARDS = cls
    base = torch.zeros(64)
    a, b = base[:32].view(4, 8), torch.zeros(4, dtype=torch.int32)
    guard = _guard_of([a, b])
    others = ([base[:32].view(8, 4), b], [base.view(4, 16)[:, :8], b], [a, b.to(torch.int64)], [a.to(torch.float16), b],
              [a, torch.zeros(4, dtype=torch.int32, device="meta")], [a, b[None]], [a, torch.zeros(5, dtype=torch.int32)])
    return guard.check(base[32:].view(4, 8), b.clone()) is True and not any(guard.check(*o) for o in others)


GUARDS = None
try:
    from torch._C._dynamo.guards import TensorGuards as _candidate
    GUARDS = _candidate if _self_test(_candidate) else None
except Exception:  # absent, renamed or another signature: the exact key alone
    GUARDS = None

MAX_PER_SKELETON = 8  # launches filed under one skeleton (shapes of the other tensors); the oldest goes
_INDEX: dict[tuple, list] = {}


def find(skeleton: tuple, flat: list):
    """The launch filed for a call whose flat tensors pass its guard and have its residues, or None."""
    try:
        entries = _INDEX.get(skeleton)
    except TypeError:  # an unhashable scalar: never filed
        return None
    if entries:
        residues = None
        for guard, want, replay in entries:
            if guard.check(*flat):
                if residues is None:
                    residues = [t.data_ptr() & 15 for t in flat]
                if residues == want:
                    return replay
    return None


def file(skeleton: Optional[tuple], flat: Optional[list], replay, recorded: bool = True) -> None:
    """File `replay` for calls with these tensors' guard: a launch just `recorded` goes first (the
    oldest of a full list goes), one found by its exact key only where the list has room, so that
    more shapes than MAX_PER_SKELETON under one skeleton never build a guard a call (they are found
    by their exact keys, as before the index)."""
    if GUARDS is None or skeleton is None:
        return
    try:
        old = _INDEX.get(skeleton, [])
        if not recorded and len(old) >= MAX_PER_SKELETON:
            return
        entry = (_guard_of(flat), [t.data_ptr() & 15 for t in flat], replay)
    except Exception:  # an unhashable scalar, or a guard refused: that call keeps its exact key
        return
    _INDEX[skeleton] = [entry] + old[:MAX_PER_SKELETON - 1]  # a new list: a reader may be iterating the old


def clear() -> None:
    _INDEX.clear()
