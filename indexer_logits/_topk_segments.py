"""Where the bound path's compaction finds a segment's i-th admitted key (indexer_logits._topk_bound): a segment is
one list of positions, or with COUNT_VOTE a sub-segment a count warp, read through as one list."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _voted_slots(i, voted, sub_cap, VOTE_: tl.constexpr):
    """The slot of the i-th key of a segment the count filled by warps (COUNT_VOTE): warp w's counts[w] keys
    (`voted` points at the program's VOTE_ counts) lie at w * sub_cap onwards and the list runs through the
    warps in order, so for each warp whose keys end at or before the i-th, the slot skips that warp's unused
    slots (sub_cap - its count). (Scalars and one compare a warp an element: a [keys, warps] form took the
    compaction from 56 to 96 registers.)"""
    slot = i
    end = 0
    for w in tl.static_range(VOTE_ - 1):
        n = tl.load(voted + w)
        end += n
        slot += tl.where(i >= end, sub_cap - n, 0)
    return slot


@triton.jit
def _seg_slot(i, voted, sub_cap, VOTE_: tl.constexpr):
    """The slot of a segment's i-th key: i, or where the count filled it by warps (VOTE_), _voted_slots'."""
    if VOTE_ > 0:
        i = _voted_slots(i, voted, sub_cap, VOTE_)
    return i
