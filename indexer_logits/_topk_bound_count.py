"""The bound path's step 3, the keys' count (indexer_logits._topk_bound's module docstring): each key's
digit over the bound's mapping, the keys of bin 1 and up counted, and with SEGMENTS their positions
written for the compaction, in one of three forms (_topk_bound's settings say which): a block-wide
prefix sum a step (its atomics and stores by inline PTX or not: COUNT_INLINE), rows of 32 keys a
sub-segment each (COUNT_LANES), or slots claimed from a counter by a warp's ballot (COUNT_BALLOT,
which takes precedence over COUNT_LANES). (A fourth, columns by position in the step, lost and was
reverted: docs/perf_logs/topk_ballot, call 2.)"""

from __future__ import annotations

import triton
import triton.language as tl

from ._topk_bound import _bound_mapping, _program
from ._topk_digits import _digits
from ._topk_ptx import VOTE_PACKS, _claim_slots, _red_add_one, _store_warp_count, _store_where, _vote_step

__all__ = ["VOTE_PACKS", "topk_bound_count_kernel"]  # (VOTE_PACKS: the steps _topk_paths lets COUNT_VOTE read)


@triton.jit
def _step_digits(base, t, end, ahead, m_lo, scale, BLOCK: tl.constexpr, KB: tl.constexpr, PREFETCH_: tl.constexpr,
                 first=False, EARLY_: tl.constexpr = False):
    """A count step's keys at positions t (those below end): each one's digit over the bound's mapping, whether
    it is admitted (bin 1 and up), and with PREFETCH_ the next step's keys (the step's own are `ahead`, loaded a
    step before; without it `ahead` comes back as it came). With EARLY_ (and not PREFETCH_), the program's
    `first` step's keys are `ahead`, loaded before the mapping."""
    m = t < end
    if PREFETCH_:
        x = ahead
        ahead = tl.load(base + t + BLOCK, mask=t + BLOCK < end, other=0.0)
    elif EARLY_:
        x = tl.where(first, ahead, tl.load(base + t, mask=m & (first == 0), other=0.0))
    else:
        x = tl.load(base + t, mask=m, other=0.0)
    d1, d2 = _digits(x, m_lo, scale, KB)
    return d1, m & (d1 > 0), ahead


@triton.jit
def _count_claiming(base, start, end, m_lo, scale, hist, seg, seg_cap, counter, ahead, BLOCK: tl.constexpr,
                    KB: tl.constexpr, ASM_: tl.constexpr, PREFETCH_: tl.constexpr, EARLY_: tl.constexpr = False):
    """topk_bound_count_kernel's loop with BALLOT_: each admitted key counted and its position stored
    at a slot claimed from the program's `counter` (_claim_slots with ASM_, else an atomic a key), the
    first seg_cap of them; the counter ends at the keys the program admitted (more than seg_cap: its
    segment overflowed, and the compaction reads its chunk). With PREFETCH_ the next step's keys load
    before this step's claims wait for their atomic (`ahead`: the first step's, loaded by the caller; with
    EARLY_ likewise, the first step's only)."""
    offs = tl.arange(0, BLOCK)
    at = counter + offs * 0
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        d1, admitted, ahead = _step_digits(base, t, end, ahead, m_lo, scale, BLOCK, KB, PREFETCH_, b0 == start, EARLY_)
        if ASM_:
            slot = _claim_slots(at, admitted)
            slot += _red_add_one(hist + d1, admitted)  # (its dummy 0: keeps the op)
            at += _store_where(seg + slot, t, admitted & (slot < seg_cap))  # (likewise)
        else:
            slot = tl.atomic_add(at, 1, mask=admitted, sem="relaxed")
            tl.atomic_add(hist + d1, 1, mask=admitted, sem="relaxed")
            tl.store(seg + slot, t, mask=admitted & (slot < seg_cap))


@triton.jit
def _count_voting(base, start, end, m_lo, scale, hist, seg, sub_cap, counts, ahead, BLOCK: tl.constexpr,
                  KB: tl.constexpr, ASM_: tl.constexpr, PREFETCH_: tl.constexpr, EARLY_: tl.constexpr,
                  WARPS_: tl.constexpr, PACK_: tl.constexpr):
    """topk_bound_count_kernel's loop with VOTE_: each warp's admitted keys to a sub-segment of its own (sub_cap
    slots: warp w's at seg + w * sub_cap), slots by a vote a register and the warp's running count
    (_topk_ptx._vote_step: no atomic answers, no barrier, no layout conversion), and each warp's count to
    counts[w] at the end (past sub_cap where its sub-segment overflowed: the compaction then reads the chunk).
    Without ASM_ (the interpreter) a "warp" is a WARPS_-th of the step's positions, slots by prefix sums: the
    same sub-segments and counts, filled by another split of the keys. Each warp's count in every element it
    holds (ASM_), or a warp a row (not)."""
    if ASM_:
        tl.static_assert(BLOCK == PACK_ * 32 * WARPS_, "_count_voting: a step is PACK_ keys a thread")
        offs = tl.arange(0, BLOCK)
        n = tl.zeros([BLOCK], tl.int32)
        for b0 in range(start, end, BLOCK):
            t = b0 + offs
            d1, admitted, ahead = _step_digits(base, t, end, ahead, m_lo, scale, BLOCK, KB, PREFETCH_, b0 == start,
                                               EARLY_)
            n = _vote_step(n, t, admitted, hist + d1, seg, sub_cap, PACK_)
        _store_warp_count(counts, n, PACK_)
    else:
        G: tl.constexpr = BLOCK // WARPS_
        warp = tl.arange(0, WARPS_)
        offs = warp[:, None] * G + tl.arange(0, G)[None, :]
        n = tl.zeros([WARPS_], tl.int32)
        for b0 in range(start, end, BLOCK):
            t = b0 + offs
            m = t < end
            d1, d2 = _digits(tl.load(base + t, mask=m, other=0.0), m_lo, scale, KB)
            admitted = m & (d1 > 0)
            slot = n[:, None] + tl.cumsum(admitted.to(tl.int32), 1) - 1
            tl.atomic_add(hist + d1, 1, mask=admitted, sem="relaxed")
            tl.store(seg + warp[:, None] * sub_cap + slot, t, mask=admitted & (slot < sub_cap))
            n += tl.sum(admitted.to(tl.int32), 1)
        tl.store(counts + warp, n)


@triton.jit
def _count_lanes(base, start, end, m_lo, scale, hist, seg, seg_cap, BLOCK: tl.constexpr, KB: tl.constexpr,
                 ASM_: tl.constexpr, SUB_P2: tl.constexpr):
    """topk_bound_count_kernel's loop with LANES_, returning the program's segment count: a step as
    BLOCK // 32 rows of 32 keys, row r's admitted keys to sub-segment r of the segment (sub_cap slots
    each: seg_cap // rows, at most SUB_P2), then every sub-segment read into registers at once and
    stored back one after another from the segment's start, which the compaction reads as it reads
    any segment (so the segment is no larger than without lanes); a count of seg_cap + 1 where a
    sub-segment overflowed (the compaction then reads its chunk). With ASM_ the loop's atomics and
    stores are inline PTX."""
    R: tl.constexpr = BLOCK // 32
    sub_cap = tl.minimum(seg_cap // R, SUB_P2)
    lane_rows = tl.arange(0, R)
    sub = seg + lane_rows[:, None] * sub_cap
    offs = lane_rows[:, None] * 32 + tl.arange(0, 32)[None, :]
    n_lane = tl.zeros([R], tl.int32)
    dummy = tl.zeros([R, 32], tl.int32)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        d1, d2 = _digits(tl.load(base + t, mask=m, other=0.0), m_lo, scale, KB)
        admitted = m & (d1 > 0)
        slot = n_lane[:, None] + tl.cumsum(admitted.to(tl.int32), 1) - 1
        if ASM_:
            dummy += _red_add_one(hist + d1, admitted)
            dummy += _store_where(sub + slot, t, admitted & (slot < sub_cap))
        else:
            tl.atomic_add(hist + d1, 1, mask=admitted, sem="relaxed")
            tl.store(sub + slot, t, mask=admitted & (slot < sub_cap))
        n_lane += tl.sum(admitted.to(tl.int32), 1)
    n_lane += tl.sum(dummy, 1)  # (zero)
    fill = tl.max(n_lane, 0)
    first = tl.cumsum(n_lane, 0) - n_lane  # each sub-segment's first slot once packed
    tl.debug_barrier()  # every thread's sub-segment stores, visible to the threads that read them
    if fill <= sub_cap:
        c = tl.arange(0, SUB_P2)[None, :]
        held = c < n_lane[:, None]
        pos = tl.load(sub + c, mask=held, other=0, cache_modifier=".cg")
        tl.debug_barrier()  # every slot read before any is overwritten (a row moves to a lower slot)
        tl.store(seg + first[:, None] + c, pos, mask=held)
    return tl.where(fill <= sub_cap, tl.sum(n_lane, 0), seg_cap + 1)


@triton.jit
def topk_bound_count_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, k_tiles, ws_ptr,
                            ws_first_ptr, chunk_len, seg_ptr, seg_cap, counts_ptr, WINDOW: tl.constexpr,
                            BLOCK: tl.constexpr, BINS_: tl.constexpr, MARGIN_: tl.constexpr, PDL: tl.constexpr,
                            SEG_: tl.constexpr = False, PREFETCH_: tl.constexpr = False,
                            LANES_: tl.constexpr = False, ASM_: tl.constexpr = False, SUB_P2: tl.constexpr = 64,
                            TRIGGER_: tl.constexpr = False, BALLOT_: tl.constexpr = False,
                            INLINE_: tl.constexpr = False, EARLY_: tl.constexpr = False,
                            VOTE_: tl.constexpr = 0, PACK_: tl.constexpr = 1):
    """Step 3: each key's digit over the bound's mapping (2 * BINS_ bins: the histogram spans both of
    the state's, this path having no round 2), counted where it is 1 or more (one relaxed atomic a
    key: the few above the bound). Rows of at most k keys are skipped (all of them the answer).
    With SEG_, the admitted keys' positions also go to the program's segment (its first seg_cap of
    them, slots by a prefix sum a block) and their count to counts[row, chunk]. With PREFETCH_, a
    step's keys are loaded one step ahead (the first before the mapping), so that the load is in
    flight while the warps meet at the step's prefix sum (COUNT_PREFETCH). With SEG_ and LANES_,
    the step's rows of 32 keys each fill a sub-segment of at most SUB_P2 slots, packed into one
    segment at the end (_count_lanes, COUNT_LANES; ASM_: its atomics and stores as inline PTX). With
    SEG_ and BALLOT_, each admitted key's slot is claimed from the program's count word, zeroed here
    first (_count_claiming, COUNT_BALLOT; ASM_: a warp's claims one atomic). With INLINE_ (neither LANES_
    nor BALLOT_), the prefix sum's step makes its atomics and stores by inline PTX (COUNT_INLINE). With
    EARLY_ (COUNT_EARLY), the mapping's loads and scans and (but with LANES_) the first step's keys come
    before the window's test, which they do not depend on, so that their L2 round trips overlap the
    window's and each other's. With SEG_ and VOTE_ (the program's warps: COUNT_VOTE, over BALLOT_ and LANES_),
    each warp's admitted keys go to a sub-segment of seg_cap // VOTE_ slots of its own, by votes, and its count
    to counts[row, chunk, warp] (_count_voting; PACK_: the keys a thread a step)."""
    row, chunk, lo, hi, st, st_first = _program(lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, ws_first_ptr, WINDOW,
                                                BINS_, PDL, TRIGGER_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    at = row * tl.num_programs(1) + chunk  # this program's segment and count
    seg = seg_ptr + at.to(tl.int64) * seg_cap
    n_seg = chunk * 0
    KB: tl.constexpr = 2 * BINS_
    VOTING: tl.constexpr = SEG_ and VOTE_ > 0
    if VOTING:  # (every warp's count is stored, a program that reads nothing included)
        sub_cap = seg_cap // VOTE_
        counts = counts_ptr + at * VOTE_
        if not ASM_:
            tl.store(counts + tl.arange(0, VOTE_), tl.zeros([VOTE_], tl.int32))
        elif (end <= start) | (hi - lo <= k):
            _store_warp_count(counts, tl.zeros([BLOCK], tl.int32), PACK_)
    if SEG_ and BALLOT_ and not VOTING:  # the program's slot counter, zero before any thread claims from it
        tl.store(counts_ptr + at, n_seg)
        tl.debug_barrier()
    ahead = tl.zeros([BLOCK], tl.float32)  # (read only with PREFETCH_ or EARLY_)
    if EARLY_:  # (a row of at most k keys computes a mapping it never stores: its state's loads are harmless)
        if not PREFETCH_ and not LANES_:
            first = start + tl.arange(0, BLOCK)
            ahead = tl.load(base + first, mask=(first < end) & (hi - lo > k), other=0.0)
        m_lo, scale = _bound_mapping(st_first, k, k_tiles, MARGIN_, BINS_, KB)
    if (end > start) & (hi - lo > k):
        if PREFETCH_:
            first = start + tl.arange(0, BLOCK)
            ahead = tl.load(base + first, mask=first < end, other=0.0)
        if not EARLY_:
            m_lo, scale = _bound_mapping(st_first, k, k_tiles, MARGIN_, BINS_, KB)
        # for the compaction, which reads these bits rather than computing them again: a compiler that
        # fused the mapping's multiply-adds differently there could move a key across a bin edge
        # between the count and the compaction (every program of the row stores the same bits)
        tl.store(st + 12, m_lo.to(tl.int32, bitcast=True))
        tl.store(st + 13, scale.to(tl.int32, bitcast=True))
        if VOTING:
            _count_voting(base, start, end, m_lo, scale, st + 16, seg, sub_cap, counts, ahead, BLOCK, KB, ASM_,
                          PREFETCH_, EARLY_, VOTE_, PACK_)
        elif SEG_ and BALLOT_:
            _count_claiming(base, start, end, m_lo, scale, st + 16, seg, seg_cap, counts_ptr + at, ahead, BLOCK, KB,
                            ASM_, PREFETCH_, EARLY_)
        elif SEG_ and LANES_:
            n_seg = _count_lanes(base, start, end, m_lo, scale, st + 16, seg, seg_cap, BLOCK, KB, ASM_, SUB_P2)
        else:
            offs = tl.arange(0, BLOCK)
            for b0 in range(start, end, BLOCK):
                t = b0 + offs
                d1, admitted, ahead = _step_digits(base, t, end, ahead, m_lo, scale, BLOCK, KB, PREFETCH_, b0 == start,
                                                   EARLY_)
                if INLINE_:  # (inline PTX: the operands keep the step's layout, no trip through shared memory)
                    _red_add_one(st + 16 + d1, admitted)
                else:
                    tl.atomic_add(st + 16 + d1, 1, mask=admitted, sem="relaxed")
                if SEG_:
                    slot = n_seg + tl.cumsum(admitted.to(tl.int32), 0) - 1
                    if INLINE_:
                        _store_where(seg + slot, t, admitted & (slot < seg_cap))
                    else:
                        tl.store(seg + slot, t, mask=admitted & (slot < seg_cap))
                    n_seg += tl.sum(admitted.to(tl.int32), 0)
    if SEG_ and not BALLOT_ and not VOTING:
        tl.store(counts_ptr + at, n_seg)
