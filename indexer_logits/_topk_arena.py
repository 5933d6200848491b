"""One allocation for the buffers a top-k call uses inside itself (its workspace, the logits or
their scratch, the tile maxima, the selection's buffers), handed out as views.

Why (docs/PERF.md, "Top-k: one allocation a call"): on an H100 host each torch.empty of a CUDA
tensor cost 5-8 us of host time and the workspace's torch.zeros 15-21, together 25-40 us of a
one-block eager top-k call's 85-147 (docs/perf_logs/topk_eager_host, call 1). A view costs the
host one op, not the caching allocator's round trip.

A caller reserves each buffer (`arena(shape, dtype)` returns a Reserved, a placeholder that code
sizing buffers can hold as it would a tensor), then `carve()` allocates once and returns the
views in reservation order. Each view starts at a multiple of ALIGN bytes and owns at least ALIGN
of them, so that no two buffers share an address (the recorded launches refuse two inputs at one
address) and every address is 16-byte aligned as a fresh allocation's is (the launches' keys hold
addresses mod 16). The views keep the one allocation alive: a call hands none of them back to
its caller (its indices and values are allocations of their own).
"""

from __future__ import annotations

import math

import torch

ALIGN = 256  # bytes: every view's offset and least extent


class Reserved:
    """A buffer reserved in an Arena: its place in the reservation order, its shape and dtype."""

    __slots__ = ("at", "shape", "dtype")

    def __init__(self, at: int, shape: tuple, dtype: torch.dtype):
        self.at, self.shape, self.dtype = at, shape, dtype


class Arena:
    """Buffers reserved one by one, then allocated together (carve)."""

    __slots__ = ("device", "specs")

    def __init__(self, device):
        self.device = torch.device(device)
        self.specs: list = []

    def __call__(self, shape, dtype: torch.dtype) -> Reserved:
        shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"shape: expected sizes >= 0, got {list(shape)}")
        self.specs.append(Reserved(len(self.specs), shape, dtype))
        return self.specs[-1]

    def carve(self) -> list:
        """One allocation, then a contiguous view of each reserved buffer (reservation order)."""
        offsets, total = [], 0
        for r in self.specs:
            offsets.append(total)
            nbytes = math.prod(r.shape) * r.dtype.itemsize
            total += -(-max(nbytes, 1) // ALIGN) * ALIGN
        whole = torch.empty(max(total, ALIGN), dtype=torch.uint8, device=self.device)
        typed: dict = {}
        views = []
        for r, offset in zip(self.specs, offsets):
            base = typed.get(r.dtype)
            if base is None:
                base = typed[r.dtype] = whole.view(r.dtype)
            views.append(base.as_strided(r.shape, _contiguous_strides(r.shape), offset // r.dtype.itemsize))
        return views


def _contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def bind(buffers, views: list):
    """`buffers` (a tensor, None, a Reserved or a tuple of them) with each Reserved as its view."""
    if isinstance(buffers, Reserved):
        return views[buffers.at]
    if isinstance(buffers, tuple):
        return tuple(views[b.at] if isinstance(b, Reserved) else b for b in buffers)
    return buffers
