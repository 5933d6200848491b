"""The exact top-k of long rows bounded by their tile maxima (path "bound"): one histogram of the
tile maxima names a score that at least k keys reach, and the keys below it are skipped by the one
histogram and the compaction that follow.

With a row of n keys cut into tiles of TILE (aligned to the window start, as _topk_tiles' are):
1. tile maxima and the row's tile count (_topk_tiles.topk_tile_max_kernel), or the decode logits
   kernel's epilogue (launch(tile_max=...)), which merges their range into the maxima's state too;
2. the maxima's range (_topk_kernels.topk_range_kernel over them; not where the epilogue wrote it)
   and round 1 over them (_topk_kernels.topk_hist_kernel, the maxima's state in the second half
   of the workspace): the bin t' holding the k-th largest maximum;
3. the keys' histogram (_topk_bound_count.topk_bound_count_kernel, 2 * BINS bins) over a mapping
   whose bin 0 lies below bin t''s lower edge and whose bins 1 .. 2 * BINS - 2 split the rest up to the top of the
   maxima's bin holding the ceil(k / TILE)-th largest maximum (_bound_mapping), counting
   the keys of bins 1 and up only (one relaxed atomic a key: a few percent of them); the mapping
   goes to the row's state words 12 and 13, which the compaction reads; with SEGMENTS the admitted
   keys' positions go to a segment a program (COUNT_LANES: by rows of 32 keys, _count_lanes);
4. the compaction of _topk_kernels with that one histogram (topk_bound_compact_kernel): the keys
   above the threshold bin to the output, the bin's keys to the candidates, ranked by the row's
   last program (or the exact overflow path), which zeroes both states; with COMPACT_GROUP, a
   compaction program reads a group of the count's programs' segments.

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

from ._topk_digits import _range, _start, _threshold, _window
from ._topk_kernels import _compact
from ._topk_segments import _voted_slots

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
# tuner axis (an H100, end to end: 1 x 1M 74.4 -> 71.9 us, where few warps claim; 2.6-9 us lost at 64 x
# 32K, 64 x 128K and 16 x 256K, where an answering atomic a step costs more than the barriers it spares:
# docs/perf_logs/topk_ballot, call 1); COUNT_LANES is then not read.
COUNT_BALLOT = False
# Whether the keys' count by a block-wide prefix sum a step (neither COUNT_LANES nor COUNT_BALLOT) makes its
# atomics and stores by inline PTX on CUDA (_red_add_one, _store_where), so that their operands keep the
# step's layout: tl.atomic_add and tl.store convert them through shared memory, two of the step's four
# barriers (cross-compiled for sm_90 at 512 keys and 4 warps: ~200 -> ~150 instructions a step). On: an
# H100, end to end, 64 x 32K 127.5 -> 126.1 us, 1 x 1M 74.3 -> 73.2, 32 x 16K 49.8 -> 49.4, level where it
# is not read (docs/perf_logs/topk_ballot, call 2).
COUNT_INLINE = True
# Whether the keys' count (with SEGMENTS) gives each of a program's warps a sub-segment of its own and slots in it
# by a vote a register and the warp's running count in registers (_topk_ptx._vote_step on CUDA: no atomic that
# answers, no barrier, no shared memory in the loop), each warp's count stored at the end; the compaction reads
# the sub-segments as one list (_topk_kernels._voted_slots). Over COUNT_BALLOT and COUNT_LANES. Why: cross-compiled
# for sm_90 (512 keys a step, 4 warps), the prefix-sum step as served is ~260 instructions a warp and five barriers
# (~65 a key), the claimed step's ~75 but an answering atomic a register where a warp admits a key (most, on a
# prefill block); the count is the prefill's largest selection kernel (33 us of a 164-row block's ~80, where its
# keys' load and digits alone take ~15: docs/perf_logs/topk_count_step_h100, call 5). Measured on an H100 (end to
# end, alternated, exact: docs/perf_logs/topk_vote, calls 1-3): the 4096 x 64K prefill 1.432 -> 1.376 of the logits
# (its count 33 -> 24.4 us a block), 64 x 128K -1.2 us, 16 x 256K -0.4, 2048 x 1M level; where the count's programs
# read a few steps it lost (64 x 32K, 4 steps: +1.0-1.3 us; 32 x 16K +0.5; 1 x 1M level). None: votes_for's model.
COUNT_VOTE = None
# votes_for: a call whose count programs read at least this many steps each (the prefill's blocks read ~18).
VOTE_MIN_STEPS = 8
# Whether the keys' count issues its mapping's loads and scans, and its first step's keys, before its window's
# test, and round 1 over the maxima its range (COUNT_EARLY), and whether the compaction (with SEGMENTS) loads its
# segment's count, first positions and their scores before the row's state and its threshold's scan
# (COMPACT_EARLY): the loads do not depend on what they now precede, so a program's dependent L2 round trips
# shrink by one (round 1, the count) and two (the compaction). Predicted 1-2.2 us less a decode call at 64 x 32K
# and 1 x 1M; measured on an H100 (end to end, both on against off, alternated: docs/perf_logs/topk_early, call
# 1): 64 x 32K -0.4 us, 1 x 1M +0.2 (the compaction's alone -0.4), 64 x 128K -1.7, 16 x 256K -0.9, 32 x 16K
# -0.9; the prefills +1.7% and +4.4% where the run's control moved +1.0% and +3.6%. None: on for decode calls,
# off for prefill blocks (resolved by _topk_select.plan_selection, as TRIGGER is).
COUNT_EARLY = None
COMPACT_EARLY = None
# The compaction's programs each read this many of the count's programs' segments (a power of two; where the
# count's programs a row are not a multiple of it, the largest power of two that divides them): a group's
# segments lie one after another, so the compaction reads them as one list with their counts, the voted
# count's reader (_topk_segments._voted_slots: one sub-segment a count program, or a count warp), and where
# any overflowed it reads the group's chunks. Why: at 1 x 1M the compaction's 1,056 programs (8 an SM) read
# ~3 admitted keys each, then each takes an output slot, a candidate slot and the row's ticket by atomics on
# the same three words, and Nsight Compute had its SMs idle half its time (docs/PERF.md, "Top-k: where the
# decode selections wait"); grouped, a program reads a few dozen keys and a row's same-word atomics fall by
# the group. Measured on an H100 (decode end to end, alternated, exact: docs/perf_logs/topk_compact_group,
# call 1): 1 x 1M 69.0 -> 67.7 us at 8 (~24 keys a program), 32 x 16K and 16 x 256K ~1 us less at 2-4, but 64 x 32K
# +1.2 and +4.4 us at 4 and 8 (~512 and ~1,024 keys), 64 x 128K +3.5 at 4: a program's keys are read in series,
# so a group pays while its keys stay few. The model against 1 (call 2): level within the runs' +-0.6 us where a
# count program's share is 32-128 keys, -0.6 at 32 x 16K. None: group_for's model; a tuner axis.
COMPACT_GROUP = None
# group_for: the admitted keys a grouped compaction program reads at most, by the model (k over the row's count
# programs, times the group): every group measured at <= ~260 was level or faster, every one at >= ~500 slower.
COMPACT_KEYS = 256
# group_for's largest group (16 was never timed).
COMPACT_GROUP_MAX = 8
# The sub-segments a grouped compaction program reads at most (the group times the voted count's warps): each is a
# count held in a register a key, and 32 (8 voted programs of 4 warps) took 128 registers on sm_90 and sm_120 and
# spilled 8 bytes for sm_120 under Triton 3.9, where 16 took 61-64, no spill (cross-compiled: bench.topk_xcompile).
COMPACT_SUBSEGMENTS = 16
# The count by rows packs its sub-segments through registers: at most this many slots in all (a
# sub-segment holds at most SUB_SLOTS // rows; a row that admits more overflows: its chunk is read).
SUB_SLOTS = 4096


def compact_group(group: int, programs: int, warps: int = 1) -> int:
    """The count programs a compaction program reads the segments of: `group` (COMPACT_GROUP), halved until it
    divides the count's `programs` a row (so that no group runs past a row's segments) and its sub-segments (a
    count program's, or each of its `warps`' where the count votes) are at most COMPACT_SUBSEGMENTS."""
    g = max(1, int(group))
    while g > 1 and (programs % g or g * max(1, warps) > COMPACT_SUBSEGMENTS):
        g //= 2
    return g


def group_for(k: int, programs: int) -> int:
    """COMPACT_GROUP where a call leaves it to the model (None): the largest power of two up to COMPACT_GROUP_MAX
    whose group reads at most COMPACT_KEYS admitted keys, a count program's share of the row's k being k over its
    `programs` (compact_group then fits it to the programs and the sub-segments)."""
    share = -(-int(k) // max(1, int(programs)))
    g = 1
    while g < COMPACT_GROUP_MAX and 2 * g * share <= COMPACT_KEYS:
        g *= 2
    return g


def votes_for(kind, steps: int) -> bool:
    """COUNT_VOTE where a call leaves it to the model (None): on for decode calls and prefill blocks (`kind`) whose
    count programs read at least VOTE_MIN_STEPS steps (its lean loop pays where a program's steps are many), off
    else (and for a call of no kind: the selection alone)."""
    return kind in ("decode", "prefill") and steps >= VOTE_MIN_STEPS


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
def topk_bound_compact_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr,
                              ws_first_ptr, cand_ptr, idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                              seg_ptr, seg_cap, counts_ptr,
                              WINDOW: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr,
                              WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr, SCAN_SLOTS: tl.constexpr,
                              RANK_TILE_: tl.constexpr, PDL: tl.constexpr,
                              SEG_: tl.constexpr = False, EARLY_: tl.constexpr = False, VOTE_: tl.constexpr = 0):
    """Step 4: the four kernels' compaction (_topk_kernels._compact) with the one histogram: bin 0
    read as holding k keys, so the threshold is bin 0 only where bins 1 and up hold fewer than k.
    With SEG_, a program reads its segment in place of its chunk where the segment holds every key
    the chunk admitted and the threshold is above bin 0 (so every key taken or a candidate is there).
    With SEG_ and EARLY_ (COMPACT_EARLY), the segment's count, its first block of positions and their
    scores are loaded first, before the row's state and thresholds, which they do not depend on. With SEG_ and
    VOTE_ (the count's warps, COUNT_VOTE), the segment is VOTE_ sub-segments of seg_cap // VOTE_ slots, each
    with its count (counts[row, chunk, warp]), read as one list (_voted_slots); the chunk is read where any
    overflowed. A program a group of G count programs (COMPACT_GROUP: the grid's chunks a G-th of the count's,
    chunk_len G times its) launches with seg_cap G times the count's and VOTE_ G times its warps (or G): the
    group's segments lie one after another, as do their counts, so they are that one list."""
    row, chunk, lo, hi, st, st_first = _program(lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, ws_first_ptr, WINDOW,
                                                BINS_, PDL)
    t_early = None
    x_early = None
    VOTING: tl.constexpr = SEG_ and VOTE_ > 0
    voted = counts_ptr  # the warps' counts (read with VOTING only)
    sub_cap = seg_cap
    if VOTING:  # the segment holds every admitted key where no warp's sub-segment overflowed
        voted = counts_ptr + (row * tl.num_programs(1) + chunk) * VOTE_
        sub_cap = seg_cap // VOTE_
        n_voted = chunk * 0
        fits = n_voted == 0
        for w in tl.static_range(VOTE_):
            n = tl.load(voted + w)
            n_voted += n
            fits = fits & (n <= sub_cap)
    if SEG_ and EARLY_:  # (three dependent loads, in flight while the thresholds are found)
        at = row * tl.num_programs(1) + chunk
        if VOTING:
            first = tl.arange(0, BLOCK)
            n_early = n_voted
            held = (first < n_early) & fits
            t_early = tl.load(seg_ptr + at.to(tl.int64) * seg_cap + _voted_slots(first, voted, sub_cap, VOTE_),
                              mask=held, other=0)
        else:
            n_early = tl.load(counts_ptr + at)
            first = tl.arange(0, BLOCK)
            # the loop's mask for its first block of the segment, where the segment is read (a segment that
            # overflowed may hold unwritten slots: the count by rows leaves its sub-segments unpacked)
            held = (first < n_early) & (n_early <= seg_cap)
            t_early = tl.load(seg_ptr + at.to(tl.int64) * seg_cap + first, mask=held, other=0)
        x_early = tl.load(logits_ptr + row.to(tl.int64) * stride_row + t_early, mask=held, other=0.0)
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
    if VOTING:
        n_seg = n_voted
    elif SEG_:
        if EARLY_:
            n_seg = n_early
        else:
            n_seg = tl.load(counts_ptr + at)
    from_seg = (t1 > 0) & (n_seg <= seg_cap)
    if VOTING:
        from_seg = (t1 > 0) & fits
    _compact(logits_ptr + row.to(tl.int64) * stride_row, lo, hi, k, st, cand_ptr + row.to(tl.int64) * CAP_,
             out_idx, val_ptr + row.to(tl.int64) * stride_val, chunk, chunk_len, m_lo, scale, t1, -1, above,
             BLOCK, KP, CAP_, WRITE_VALUES, KB, SCAN_SLOTS, RANK_TILE_, True, out_idx, 0, st_first,
             ONE_ROUND_=True, seg=seg_ptr + at.to(tl.int64) * seg_cap, n_seg=n_seg,
             from_seg=from_seg, SEG_=SEG_, EARLY_=EARLY_, t_early=t_early, x_early=x_early,
             voted=voted, sub_cap=sub_cap, VOTE_=VOTE_)

