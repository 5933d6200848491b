"""The exact top-k of long rows bounded by their tile maxima (path "bound"): one histogram of the
tile maxima names a score that at least k keys reach, and the keys below it are skipped by the one
histogram and the compaction that follow.

With a row of n keys cut into tiles of TILE (aligned to the window start, as _topk_tiles' are):
1. tile maxima and the row's tile count (_topk_tiles.topk_tile_max_kernel), or the decode logits
   kernel's epilogue (launch(tile_max=...)), which merges their range into the maxima's state too;
2. the maxima's range (_topk_kernels.topk_range_kernel over them; not where the epilogue wrote it)
   and round 1 over them (_topk_kernels.topk_hist_kernel, the maxima's state in the second half
   of the workspace): the bin t' holding the k-th largest maximum;
3. the keys' histogram (topk_bound_count_kernel, 2 * BINS bins) over a mapping whose bin 0 lies
   below bin t''s lower edge and whose bins 1 .. 2 * BINS - 2 split the rest up to the top of the
   maxima's bin holding the ceil(k / TILE)-th largest maximum (_bound_mapping), counting
   the keys of bins 1 and up only (one relaxed atomic a key: a few percent of them); the mapping
   goes to the row's state words 12 and 13, which the compaction reads; with SEGMENTS the admitted
   keys' positions go to a segment a program (COUNT_LANES: by rows of 32 keys, _count_lanes);
4. the compaction of _topk_kernels with that one histogram (topk_bound_compact_kernel): the keys
   above the threshold bin to the output, the bin's keys to the candidates, ranked by the row's
   last program (or the exact overflow path), which zeroes both states.

Why it is exact whatever the scores: the mapping is monotone in the score (a clamped affine map),
computed once (by the count's programs, all alike) and read by the compaction as stored. At least k maxima lie in bins >= t'
(where the row has at least k tiles), so at least k keys reach bin t''s lower edge, and (with a
margin of a sixteenth of a maxima bin for rounding) lie in bins >= 1; a key of bin 0 is then below
k others and never selected. Bin 0 is not counted: the compaction reads its count as k, so the
threshold is bin 0 only where bins 1 and up hold fewer than k keys (fewer than k tiles, or ties),
and then bin 0's keys are the candidates, ranked exactly (or by the overflow path's radix), as in
the four kernels.

Why (docs/PERF.md, "Top-k: bounded by the tile maxima"): the four kernels read every key four
times (range, two rounds, compaction: 141 us on a 204 x 64K prefill block, the rounds' histogram
of every key 63 of it); the tiles path reads a fifth of them twice but in twelve launches. Here
the range and round 1 run over the maxima (a TILE-th of the keys), the keys' histogram does one
compare a key and an atomic for the few above the bound, and no round 2 runs: with at least 2k
tiles a row the bound admits about 1.4k keys (2.5k-3k on the bench's decode logits), and 126 bins
over the range the k-th score can be in leave 30-60 candidates for the row's last program to rank
(measured on an H100: 63 bins up to the row's largest score left ~200, and the compaction took
33 us at 64 x 32K where the rounds' takes 14; with these bins 14.6).
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from ._topk_digits import _digits, _range, _start, _threshold, _window
from ._topk_kernels import _compact

TILE = 0  # keys a tile (a power of two); 0: tile_for(width, k)
# Whether the keys' count also writes the positions of the keys it admits to a segment per program
# (at most seg_cap of them), so that the compaction reads those in place of its chunk (a few percent
# of it; a program whose segment overflowed, or a row whose threshold is bin 0, reads its chunk): a
# tuner axis, on by default since every bucket's best setting had it (an H100, 4 buckets, 48 bound
# settings each: docs/PERF.md, "Top-k: bounded by the tile maxima", measured).
SEGMENTS = True
# Keys the keys' count (topk_bound_count_kernel) reads a step, apart from the path's BLOCK (the
# compaction's step and the chunks' unit): 0 reads BLOCK a step. A tuner axis: the count's step is
# its one load, digit and prefix sum a step, and its programs' chunks are a few blocks long.
COUNT_STEP = 0
# Whether the keys' count loads each step's keys one step ahead (a tuner axis): its steps' block-wide
# prefix sums (SEGMENTS) hold every warp at a barrier, so without it no warp's next load is in flight
# there (an H100 at 64 x 32K: the count 9.4 us with its segments, 7.9 without, 3.9 for the keys' read
# and digits alone; docs/perf_logs/topk_count_step_h100/call3_count_parts.log).
COUNT_PREFETCH = False
# Whether the keys' count reads a step as rows of 32 keys, each row's admitted keys to a sub-segment
# of its own (a tuner axis, with SEGMENTS): a row's prefix sum and count are its warp's shuffles,
# where the one-dimensional step's are two passes through shared memory behind barriers, and its
# atomics and stores are inline PTX on CUDA (tl.atomic_add's and tl.store's coalescing would convert
# the rows' layout through shared memory again); the program then packs its sub-segments into one
# segment in place (a compaction reading sub-segments where they lie ran 8.4 -> 12.1 us at 64 x 32K:
# call 6; packed beside them, in a segment of twice the slots, a prefill's blocks shrank: PERF.md,
# "Top-k: the prefill's blocks").
# Probed on an H100 (call 5, count_parts.py): a 164-row block of 64K keys 36.6 -> 23.8 us; 64 x 32K
# level (its atomics, not its barriers, cost there). None: lanes_for's model.
COUNT_LANES = None
# lanes_for: a call whose count programs read at least this many steps each. End to end with it (decode:
# docs/perf_logs/topk_count_step_h100, calls 6-8; prefill: topk_prefill_blocks, call 2, an H100): 16 steps
# (64 x 128K) 10-18 us saved, 8 (16 x 256K) 6 us, 4 (64 x 32K) and 2 (1 x 1M) level to 1.6 us lost; the
# 4096 x 64K prefill's blocks of 164 rows (11 steps) 89 us of 6.5 ms (the count 34.4 -> 29.8 us a block,
# the compaction 16.0 -> 16.9). (Its sub-segments packed beside the segment, in twice the slots, it had
# lost 10-17% there: the blocks shrank to 142 rows within the scratch budget; PERF.md, "Top-k: the
# prefill's blocks".)
LANES_MIN_STEPS = 8
# Whether the keys' count (with SEGMENTS) claims its admitted keys' segment slots from a counter a
# program (its count word, zeroed at its start): on CUDA a warp's admitted keys of one register take
# one atomic (a ballot, its popcount, the leader's atom.add, a shuffle: inline PTX, _claim_slots), so a
# step has no prefix sum, no barrier and no layout conversion for the atomics; elsewhere an atomic a
# key. The segment's order is the claims' (the compaction reads a segment in any order). Cross-compiled
# for sm_90 at 512 keys a step and 4 warps, the step without it is ~200 instructions a warp and four
# barriers (the prefix sum, and the atomics' addresses and masks converted through shared memory). A
# tuner axis; COUNT_LANES is then not read.
COUNT_BALLOT = False
# The count by rows packs its sub-segments through registers: at most this many slots in all (a
# sub-segment holds at most SUB_SLOTS // rows; a row that admits more overflows: its chunk is read).
SUB_SLOTS = 4096


def lanes_for(kind, steps: int) -> bool:
    """COUNT_LANES where a call leaves it to the model (None): on for decode calls and prefill blocks
    (`kind`) whose count programs read at least LANES_MIN_STEPS steps (more steps, more barriers the
    rows save), off else (and for a call of no kind: the selection alone, never measured with it)."""
    return kind in ("decode", "prefill") and steps >= LANES_MIN_STEPS
# The bound's margin below bin t''s lower edge, in maxima bins: scores that round across the edge
# still land in bins >= 1 (a key of bin 0 must be below k others).
MARGIN = 1.0 / 16


def seg_cap(k: int, width: int, chunk: int) -> int:
    """Positions a program's segment holds: 4x the keys a chunk of `chunk` of a `width`-key row
    admits where the bound is the median tile maximum (1.4k a row), in blocks of 64, at most the chunk."""
    want = math.ceil(4 * 1.4 * k * chunk / max(width, 1))
    return max(1, min(chunk, 64 * math.ceil(want / 64)))


def tile_for(width: int, k: int) -> int:
    """At least 2k tiles a row where the row is long enough: the k-th largest maximum is then about
    the median tile maximum, which about n * ln(2) / TILE = 1.4k keys reach (1.15k at 4k tiles), so
    a longer tile list buys little and costs round 1 over the maxima. A power of two from 4 to 64
    (the decode epilogue's tiles divide its 64-key block)."""
    t = max(width // max(2 * k, 1), 1)
    return min(64, max(4, 1 << (t.bit_length() - 1)))


@triton.jit
def _bound_mapping(st_first, k, k_tiles, MARGIN_: tl.constexpr, BINS_: tl.constexpr, KBINS_: tl.constexpr):
    """(m, scale) of the keys' KBINS_-bin digits (_digits): bin 0 below the maxima's bin t' (less
    MARGIN_ of a bin), bins 1 .. KBINS_-2 from there to the top of the maxima's bin holding the
    k_tiles-th largest maximum (k_tiles = ceil(k / TILE): the k-th largest score is at most that
    maximum, since its k keys fill at least k_tiles tiles), the last bin above; a scale of 0 (every
    key in bin 0, the exact overflow path) where the maxima's range is empty or a single value."""
    m1, s1 = _range(st_first, BINS_)
    counts = tl.load(st_first + 16 + tl.arange(0, BINS_))
    t1, _ = _threshold(counts, k, BINS_)
    tu, _ = _threshold(counts, k_tiles, BINS_)
    ok = s1 > 0
    w = 1.0 / tl.where(ok, s1, 1.0)  # a maxima bin's width
    a = m1 + (tl.maximum(t1, 0).to(tl.float32) - MARGIN_) * w
    span = m1 + (tl.maximum(tu, t1) + 1).to(tl.float32) * w - a
    ok = ok & (span > 0)
    s2 = (KBINS_ - 2) / tl.where(ok, span, 1.0)
    ok = ok & (s2 < float("inf"))
    return tl.where(ok, a - 1.0 / tl.where(ok, s2, 1.0), 0.0), tl.where(ok, s2, 0.0)


@triton.jit
def _program(lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, ws_first_ptr, WINDOW: tl.constexpr,
             BINS_: tl.constexpr, PDL: tl.constexpr, TRIGGER_: tl.constexpr = False):
    """(row, chunk, window start and end, the keys' state, the maxima's state) of this program, after
    waiting for the kernel before where launched as a programmatic dependent launch (and with TRIGGER_,
    letting the kernel after launch)."""
    _start(PDL, TRIGGER_)
    row = tl.program_id(0)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    return (row, tl.program_id(1), lo, hi, ws_ptr + row * (16 + 2 * BINS_), ws_first_ptr + row * (16 + 2 * BINS_))


@triton.jit
def _red_add_one(addr, pred):
    """A relaxed atomic add of 1 at each int32 address where pred: inline PTX, an elementwise op, so
    the operands keep their layout (a dummy 0 out: the caller folds it into a store, so that nothing
    drops the op)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p red.relaxed.gpu.global.add.u32 [$1], 1; mov.u32 $0, 0; }",
        "=r,l,r", [addr.to(tl.int64), pred.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _store_where(addr, value, pred):
    """int32 value to each address where pred (inline PTX, as _red_add_one; a dummy 0 out)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$1], $3; mov.u32 $0, 0; }",
        "=r,l,r,r", [addr.to(tl.int64), pred.to(tl.int32), value], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _claim_slots(counter, pred):
    """Distinct slots, claimed from the int32 at each `counter` address, for the elements where pred: a
    warp's admitted lanes of this register take one atomic between them (a ballot; the highest admitted
    lane adds their popcount, the others read the old count by a shuffle and add their rank). Inline PTX,
    an elementwise op, one register at a time: the slots are distinct whatever the layout puts in a
    thread. Every lane of the warp must run it (vote.sync and shfl.sync with a full mask): the caller's
    loop is uniform in the program."""
    return tl.inline_asm_elementwise(
        """{
        .reg .pred p, lead;
        .reg .b32 bal, below, n, old, last, first;
        setp.ne.b32 p, $2, 0;
        vote.sync.ballot.b32 bal, p, 0xffffffff;
        mov.u32 below, %lanemask_lt;
        and.b32 below, below, bal;
        popc.b32 below, below;
        popc.b32 n, bal;
        add.u32 last, below, 1;
        setp.eq.and.u32 lead, last, n, p;
        mov.u32 old, 0;
        @lead atom.relaxed.gpu.global.add.u32 old, [$1], n;
        bfind.u32 last, bal;
        shfl.sync.idx.b32 first, old, last, 0x1f, 0xffffffff;
        add.u32 $0, first, below;
        }""",
        "=r,l,r", [counter.to(tl.int64), pred.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _count_claiming(base, start, end, m_lo, scale, hist, seg, seg_cap, counter, ahead, BLOCK: tl.constexpr,
                    KB: tl.constexpr, ASM_: tl.constexpr, PREFETCH_: tl.constexpr):
    """topk_bound_count_kernel's loop with BALLOT_: each admitted key counted and its position stored
    at a slot claimed from the program's `counter` (_claim_slots with ASM_, else an atomic a key), the
    first seg_cap of them; the counter ends at the keys the program admitted (more than seg_cap: its
    segment overflowed, and the compaction reads its chunk). With PREFETCH_ the next step's keys load
    before this step's claims wait for their atomic (`ahead`: the first step's, loaded by the caller)."""
    offs = tl.arange(0, BLOCK)
    at = counter + offs * 0
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        if PREFETCH_:
            x = ahead
            ahead = tl.load(base + t + BLOCK, mask=t + BLOCK < end, other=0.0)
        else:
            x = tl.load(base + t, mask=m, other=0.0)
        d1, d2 = _digits(x, m_lo, scale, KB)
        admitted = m & (d1 > 0)
        if ASM_:
            slot = _claim_slots(at, admitted)
            slot += _red_add_one(hist + d1, admitted)  # (its dummy 0: keeps the op)
            at += _store_where(seg + slot, t, admitted & (slot < seg_cap))  # (likewise)
        else:
            slot = tl.atomic_add(at, 1, mask=admitted, sem="relaxed")
            tl.atomic_add(hist + d1, 1, mask=admitted, sem="relaxed")
            tl.store(seg + slot, t, mask=admitted & (slot < seg_cap))


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
                            TRIGGER_: tl.constexpr = False, BALLOT_: tl.constexpr = False):
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
    first (_count_claiming, COUNT_BALLOT; ASM_: a warp's claims one atomic)."""
    row, chunk, lo, hi, st, st_first = _program(lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, ws_first_ptr, WINDOW,
                                                BINS_, PDL, TRIGGER_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    at = row * tl.num_programs(1) + chunk  # this program's segment and count
    seg = seg_ptr + at.to(tl.int64) * seg_cap
    n_seg = chunk * 0
    KB: tl.constexpr = 2 * BINS_
    if SEG_ and BALLOT_:  # the program's slot counter, zero before any thread claims from it
        tl.store(counts_ptr + at, n_seg)
        tl.debug_barrier()
    if (end > start) & (hi - lo > k):
        ahead = tl.zeros([BLOCK], tl.float32)  # (read only with PREFETCH_)
        if PREFETCH_:
            first = start + tl.arange(0, BLOCK)
            ahead = tl.load(base + first, mask=first < end, other=0.0)
        m_lo, scale = _bound_mapping(st_first, k, k_tiles, MARGIN_, BINS_, KB)
        # for the compaction, which reads these bits rather than computing them again: a compiler that
        # fused the mapping's multiply-adds differently there could move a key across a bin edge
        # between the count and the compaction (every program of the row stores the same bits)
        tl.store(st + 12, m_lo.to(tl.int32, bitcast=True))
        tl.store(st + 13, scale.to(tl.int32, bitcast=True))
        if SEG_ and BALLOT_:
            _count_claiming(base, start, end, m_lo, scale, st + 16, seg, seg_cap, counts_ptr + at, ahead, BLOCK, KB,
                            ASM_, PREFETCH_)
        elif SEG_ and LANES_:
            n_seg = _count_lanes(base, start, end, m_lo, scale, st + 16, seg, seg_cap, BLOCK, KB, ASM_, SUB_P2)
        else:
            offs = tl.arange(0, BLOCK)
            for b0 in range(start, end, BLOCK):
                t = b0 + offs
                m = t < end
                if PREFETCH_:
                    x = ahead
                    ahead = tl.load(base + t + BLOCK, mask=t + BLOCK < end, other=0.0)
                else:
                    x = tl.load(base + t, mask=m, other=0.0)
                d1, d2 = _digits(x, m_lo, scale, KB)
                admitted = m & (d1 > 0)
                tl.atomic_add(st + 16 + d1, 1, mask=admitted, sem="relaxed")
                if SEG_:
                    slot = n_seg + tl.cumsum(admitted.to(tl.int32), 0) - 1
                    tl.store(seg + slot, t, mask=admitted & (slot < seg_cap))
                    n_seg += tl.sum(admitted.to(tl.int32), 0)
    if SEG_ and not BALLOT_:
        tl.store(counts_ptr + at, n_seg)


@triton.jit
def topk_bound_compact_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr,
                              ws_first_ptr, cand_ptr, idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                              seg_ptr, seg_cap, counts_ptr,
                              WINDOW: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr,
                              WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr, SCAN_SLOTS: tl.constexpr,
                              RANK_TILE_: tl.constexpr, PDL: tl.constexpr,
                              SEG_: tl.constexpr = False):
    """Step 4: the four kernels' compaction (_topk_kernels._compact) with the one histogram: bin 0
    read as holding k keys, so the threshold is bin 0 only where bins 1 and up hold fewer than k.
    With SEG_, a program reads its segment in place of its chunk where the segment holds every key
    the chunk admitted and the threshold is above bin 0 (so every key taken or a candidate is there)."""
    row, chunk, lo, hi, st, st_first = _program(lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, ws_first_ptr, WINDOW,
                                                BINS_, PDL)
    # the count's mapping, bit for bit (zero where the row holds at most k keys: all of them taken then)
    m_lo = tl.load(st + 12).to(tl.float32, bitcast=True)
    scale = tl.load(st + 13).to(tl.float32, bitcast=True)
    KB: tl.constexpr = 2 * BINS_  # the keys' bins (topk_bound_count_kernel)
    bins = tl.arange(0, KB)
    t1, above = _threshold(tl.where(bins == 0, k, tl.load(st + 16 + bins)), k, KB)
    total = hi - lo
    whole = total <= k  # the whole window is the answer
    t1 = tl.where(whole, -1, t1)
    above = tl.where(whole, total, above)
    out_idx = idx_ptr + row.to(tl.int64) * stride_idx
    at = row * tl.num_programs(1) + chunk
    n_seg = at * 0
    if SEG_:
        n_seg = tl.load(counts_ptr + at)
    _compact(logits_ptr + row.to(tl.int64) * stride_row, lo, hi, k, st, cand_ptr + row.to(tl.int64) * CAP_,
             out_idx, val_ptr + row.to(tl.int64) * stride_val, chunk, chunk_len, m_lo, scale, t1, -1, above,
             BLOCK, KP, CAP_, WRITE_VALUES, KB, SCAN_SLOTS, RANK_TILE_, True, out_idx, 0, st_first,
             ONE_ROUND_=True, seg=seg_ptr + at.to(tl.int64) * seg_cap, n_seg=n_seg,
             from_seg=(t1 > 0) & (n_seg <= seg_cap), SEG_=SEG_)
