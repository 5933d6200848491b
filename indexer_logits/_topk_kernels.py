"""The exact top-k of each row of a logits block, on the device: an adaptive radix selection in four
kernels with grids fixed by shapes, no host read, no data-dependent launch.

1. range: each row's largest score M and smallest finite score m (atomic max of order-preserving
   int32 keys). Every later kernel maps a score x to y = (x - m) * BINS / (M - m), clamped to
   [0, BINS), computed the same way everywhere, so y never decreases as x grows; y's first two
   base-BINS digits (d1, d2) bin the row.
2. round 1 counts d1 into a BINS-bin histogram per row (tl.histogram per block, atomics across
   programs). The bin t1 holding the k-th largest score, and how many scores lie above it, are
   read off it by every later program that needs them.
3. round 2 counts d2 of the scores in bin t1 (a few percent of the row: one atomic each).
4. compaction: every score above (t1, t2) is in the answer (fewer than k), and goes to an
   atomically claimed output slot; scores in (t1, t2) are candidates (at most CAP kept). The
   row's last program (a per-row counter, acq_rel atomics) ranks the candidates by (score
   descending, index ascending), pairwise in tiles of RANK_TILE, and takes what is missing. More than CAP candidates (scores the two rounds cannot tell apart: ties, or a
   range stretched by an outlier) take the overflow path in that same program: an exact radix
   over the candidates' 32-bit keys, 8 bits a scan, then ties at the k-th score in index order.

Why these digits (measured on the H200, docs/PERF.md "Top-k"): tl.histogram costs about
log2(BINS) * BINS / 32 operations per key (a ballot per bit, then each lane tests the bins it
owns), so 2048 bins over the keys' raw bits cost ~60 us at 64 x 32K where 64 bins cost a few;
and raw float bits put a row's scores in a handful of bins (an octave is 2**(bits - 9) of them),
which per-key global atomics then serialise on. Bins over the row's own range spread them out.

Output per row: `k` int32 indices (relative to the row's window start), in no particular order,
then -1 where the window holds fewer than k keys; optionally the scores beside them (-inf pad).
Ties at the k-th score go to the smallest indices, so the selected set is exact and deterministic.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_digits import (_digits, _fit, _in_bin, _key, _key_range, _mapping, _publish_range, _range, _range_keys,
                           _rounds, _score, _start, _threshold, _window, _zero_state)
from ._topk_segments import _seg_slot

BINS = 64        # histogram bins per round (a power of two)
CAP = 1024       # candidates (scores in the final bin) kept per row; ranking costs what is there
# The final bin's candidates ranked RANK_TILE against RANK_TILE a step (_rank_in_tiles); 0: one at a time.
# Measured on the H200 (docs/PERF.md, "Top-k"): 32 takes 1.6-2.7 us off the decode selection against
# one at a time; 64 put the compaction kernel at 219 registers (48 at 32 and at 0) and lost 10-25%.
RANK_TILE = 32
# Per-row workspace, int32, zero before the first kernel and left zero by the last: 16 words of
# state (6 the resident path's barrier, _topk_resident; 7 the compaction programs done; 8, 9 the
# output and candidate slots claimed; 10 the
# largest key, 11 the complement of the smallest finite key, both as unsigned keys so that zero
# is the identity of the atomic max; 12, 13 the bound path's key mapping, _topk_bound), then round 1's
# and round 2's histograms.
STATE = 16


@triton.jit
def _count_d1(base, start, end, m_lo, scale, BLOCK: tl.constexpr, BINS_: tl.constexpr):
    """The BINS_-bin histogram of d1 (_digits) over the scores base[start:end]."""
    offs = tl.arange(0, BLOCK)
    counts = tl.zeros([BINS_], tl.int32)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        d1, d2 = _digits(tl.load(base + t, mask=m, other=0.0), m_lo, scale, BINS_)
        counts += tl.histogram(d1, BINS_, mask=m)
    return counts


@triton.jit
def topk_range_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, chunk_len,
                      WINDOW: tl.constexpr, BLOCK: tl.constexpr, BINS_: tl.constexpr, PDL: tl.constexpr,
                      TRIGGER_: tl.constexpr = False):
    """Kernel 1: the row's largest key and smallest finite key (module docstring)."""
    _start(PDL, TRIGGER_)
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    st = ws_ptr + row * (16 + 2 * BINS_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    if end > start:
        kmin, kmax = _key_range(base, start, end, BLOCK)
        _publish_range(st, kmin, kmax)


@triton.jit
def _thresholds(st, k, total, BINS_: tl.constexpr):
    """(t1, t2, scores above (t1, t2)) of the row, from its two histograms (_topk_digits._rounds)."""
    t1, above1, in1, t2, above2, in2 = _rounds(st, k, total, BINS_)
    return t1, t2, above1 + above2


@triton.jit
def topk_hist_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr, chunk_len,
                     ROUND: tl.constexpr, WINDOW: tl.constexpr, BLOCK: tl.constexpr, BINS_: tl.constexpr,
                     PDL: tl.constexpr, FIT_CAP_: tl.constexpr = 0, TRIGGER_: tl.constexpr = False,
                     EARLY_: tl.constexpr = False):
    """Kernels 2 and 3: count d1 of every score (round 1: tl.histogram, then one atomic per bin),
    or d2 of the scores in bin t1 (round 2: a few percent of them, one atomic each; none where
    FIT_CAP_ > 0 and round 1's bin fits it, _topk_digits._fit). With EARLY_ (the bound path's
    COUNT_EARLY), the row's range is loaded before the window's test, which it does not depend on."""
    _start(PDL, TRIGGER_)
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    st = ws_ptr + row * (16 + 2 * BINS_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    if EARLY_:  # (its L2 round trip beside the window's)
        m_lo, scale = _range(st, BINS_)
    if end > start:
        if not EARLY_:
            m_lo, scale = _range(st, BINS_)
        offs = tl.arange(0, BLOCK)
        if ROUND == 1:
            counts = _count_d1(base, start, end, m_lo, scale, BLOCK, BINS_)
            tl.atomic_add(st + 16 + tl.arange(0, BINS_), counts, mask=counts != 0, sem="relaxed")
        else:
            h1 = tl.load(st + 16 + tl.arange(0, BINS_))
            t1, above1 = _threshold(h1, k, BINS_)
            go = hi - lo > k
            if FIT_CAP_ > 0:  # round 1's bin already names few enough scores (_topk_digits._fit)
                go = go & (above1 + _in_bin(h1, t1, BINS_) > FIT_CAP_)
            if go:
                for b0 in range(start, end, BLOCK):
                    t = b0 + offs
                    m = t < end
                    d1, d2 = _digits(tl.load(base + t, mask=m, other=0.0), m_lo, scale, BINS_)
                    tl.atomic_add(st + 16 + BINS_ + d2, 1, mask=m & (d1 == t1), sem="relaxed")


@triton.jit
def topk_compact_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k,
                        ws_ptr, cand_ptr, idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                        WINDOW: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr,
                        CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr,
                        SCAN_SLOTS: tl.constexpr, PDL: tl.constexpr, RANK_TILE_: tl.constexpr = 0,
                        FIT_CAP_: tl.constexpr = 0):
    """Kernel 4: scores above (t1, t2) to the output, scores in it to the candidates; the row's
    last program finishes the row (module docstring) and zeroes its state. With FIT_CAP_ > 0 (the
    tiles path's selection over tile maxima): rows whose threshold bin fits it (_topk_digits._fit)
    are left as they are, and no row's state is zeroed (the path's gather does, after its pick
    has read the histograms)."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    _compact_rows(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr, cand_ptr, idx_ptr,
                  stride_idx, val_ptr, stride_val, chunk_len, idx_ptr, 0, ws_ptr, WINDOW, BLOCK, KP, CAP_,
                  WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_, FIT_CAP_, 0)


@triton.jit
def topk_compact_remap_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k,
                              ws_ptr, cand_ptr, idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                              list_ptr, list_stride, ws_first_ptr,
                              WINDOW: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr,
                              CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr,
                              SCAN_SLOTS: tl.constexpr, PDL: tl.constexpr, RANK_TILE_: tl.constexpr,
                              REMAP_: tl.constexpr):
    """Kernel 4 of the tiles path's second selection with its remap folded in (setting MERGE): a
    buffer position p goes out as the window's key list[p // REMAP_] * REMAP_ + p % REMAP_ (the
    remap kernel's step, indexer_logits._topk_tiles), and the row's last program zeroes the first
    selection's state (`ws_first_ptr`) beside its own."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    _compact_rows(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr, cand_ptr, idx_ptr,
                  stride_idx, val_ptr, stride_val, chunk_len, list_ptr, list_stride, ws_first_ptr, WINDOW, BLOCK,
                  KP, CAP_, WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_, 0, REMAP_)


@triton.jit
def _compact_rows(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr, cand_ptr, idx_ptr,
                  stride_idx, val_ptr, stride_val, chunk_len, list_ptr, list_stride, ws_first_ptr,
                  WINDOW: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr,
                  WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr, SCAN_SLOTS: tl.constexpr,
                  RANK_TILE_: tl.constexpr, FIT_CAP_: tl.constexpr, REMAP_: tl.constexpr):
    """The compaction kernels' work for one program (topk_compact_kernel's docstring)."""
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    st = ws_ptr + row * (16 + 2 * BINS_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    out_idx = idx_ptr + row.to(tl.int64) * stride_idx
    out_val = val_ptr + row.to(tl.int64) * stride_val
    cands = cand_ptr + row.to(tl.int64) * CAP_
    lrow = list_ptr + row.to(tl.int64) * list_stride
    if FIT_CAP_ > 0:
        level, t1, t2, above = _fit(st, k, hi - lo, FIT_CAP_, BINS_)
        if level == 0:
            m_lo, scale = _range(st, BINS_)
            _compact(base, lo, hi, k, st, cands, out_idx, out_val, chunk, chunk_len, m_lo, scale, t1, t2, above,
                     BLOCK, KP, CAP_, WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_, False, lrow, REMAP_)
    else:  # (the range read first, then the thresholds: the PTX every table was timed with)
        m_lo, scale = _range(st, BINS_)
        t1, t2, above = _thresholds(st, k, hi - lo, BINS_)
        _compact(base, lo, hi, k, st, cands, out_idx, out_val, chunk, chunk_len, m_lo, scale, t1, t2, above,
                 BLOCK, KP, CAP_, WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_, True, lrow, REMAP_,
                 ws_first_ptr + row * (16 + 2 * BINS_))


@triton.jit
def _out_key(p, lrow, mask, REMAP_: tl.constexpr):
    """The index a selected position goes out as: p, or where the compaction remaps (REMAP_, the
    tiles path's tile) the window's key of buffer position p: list[p // REMAP_] * REMAP_ + p % REMAP_."""
    if REMAP_ > 0:
        tile = tl.load(lrow + p // REMAP_, mask=mask, other=0)
        p = tile * REMAP_ + p % REMAP_
    return p


@triton.jit
def _compact(base, lo, hi, k, st, cands, out_idx, out_val, chunk, chunk_len, m_lo, scale, t1, t2, above,
             BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr,
             BINS_: tl.constexpr, SCAN_SLOTS: tl.constexpr, RANK_TILE_: tl.constexpr, ZERO_STATE: tl.constexpr,
             lrow, REMAP_: tl.constexpr, st_first=None, ONE_ROUND_: tl.constexpr = False, seg=None, n_seg=0,
             from_seg=False, SEG_: tl.constexpr = False, EARLY_: tl.constexpr = False, t_early=None, x_early=None,
             voted=None, sub_cap=0, VOTE_: tl.constexpr = 0):
    """topk_compact_kernel's work for its chunk of a row: the row's mapping (m_lo, scale), its
    thresholds (t1, t2) and the count of scores above them are given. With REMAP_, indices go out
    as keys (_out_key) and the row's last program zeroes `st_first` too. With ONE_ROUND_ (the bound
    path, indexer_logits._topk_bound: one histogram) the thresholds are t1 alone: the scores above
    bin t1 are taken, bin t1's are the candidates (t2 is -1), and `st_first` is zeroed too. With
    SEG_ and `from_seg`, the chunk's keys that can be taken or be candidates are the n_seg positions
    at `seg` (the bound path's segments), read in place of the chunk. With ONE_ROUND_, the digits'
    BINS_ are twice the states' (the bound path's keys' one histogram spans both of the state's
    histograms), so both states are zeroed as laid out for BINS_ // 2. With SEG_ and EARLY_, the segment's
    first block (its positions t_early and their scores x_early, masked as the loop masks them) was loaded by
    the caller before the thresholds, and the loop's first step over the segment takes it from there. With SEG_
    and VOTE_, the segment is the count's warps' sub-segments (sub_cap slots apart, their counts at `voted`),
    read in order as one list (_voted_slots)."""
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    if SEG_:  # (the loop then runs over the segment's slots, each read for its key)
        start = tl.where(from_seg, 0, start)
        end = tl.where(from_seg, n_seg, end)
    offs = tl.arange(0, BLOCK)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        if SEG_ and EARLY_:  # (the segment's first block is in t_early and x_early already)
            early = from_seg & (b0 == 0)
            later = m & (early == 0)
            t = tl.where(early, t_early, tl.where(from_seg, tl.load(seg + _seg_slot(t, voted, sub_cap, VOTE_),
                                                                        mask=later & from_seg, other=0), t))
            x = tl.where(early, x_early, tl.load(base + t, mask=later, other=0.0))
        else:
            if SEG_:
                t = tl.where(from_seg, tl.load(seg + _seg_slot(t, voted, sub_cap, VOTE_), mask=m & from_seg, other=0),
                             t)
            x = tl.load(base + t, mask=m, other=0.0)
        d1, d2 = _digits(x, m_lo, scale, BINS_)
        if ONE_ROUND_:
            take = m & (d1 > t1)
            tie = m & (d1 == t1)
        else:
            take = m & ((d1 > t1) | ((d1 == t1) & (d2 > t2)))
            tie = m & (d1 == t1) & (d2 == t2)
        if SCAN_SLOTS:  # one atomic per block, slots by a prefix sum over the block
            n_take = tl.sum(take.to(tl.int32), 0)
            if n_take > 0:
                slot = tl.atomic_add(st + 8, n_take, sem="relaxed") + tl.cumsum(take.to(tl.int32), 0) - 1
                tl.store(out_idx + slot, _out_key(t - lo, lrow, take, REMAP_), mask=take)
                if WRITE_VALUES:
                    tl.store(out_val + slot, x, mask=take)
            n_tie = tl.sum(tie.to(tl.int32), 0)
            if n_tie > 0:
                slot = tl.atomic_add(st + 9, n_tie, sem="relaxed") + tl.cumsum(tie.to(tl.int32), 0) - 1
                packed = (_key(x).to(tl.int64) << 32) | (0x7FFFFFFF - t).to(tl.int64)
                tl.store(cands + slot, packed, mask=tie & (slot < CAP_))
        else:  # one atomic per selected score: no block-wide scan for the few that are
            slot = tl.atomic_add(st + 8 + tl.zeros_like(t), 1, mask=take, sem="relaxed")
            tl.store(out_idx + slot, _out_key(t - lo, lrow, take, REMAP_), mask=take)
            if WRITE_VALUES:
                tl.store(out_val + slot, x, mask=take)
            slot = tl.atomic_add(st + 9 + tl.zeros_like(t), 1, mask=tie, sem="relaxed")
            packed = (_key(x).to(tl.int64) << 32) | (0x7FFFFFFF - t).to(tl.int64)
            tl.store(cands + slot, packed, mask=tie & (slot < CAP_))
    done = tl.atomic_add(st + 7, 1)
    if done == tl.num_programs(1) - 1:
        _finish(base, lo, hi, k, st, cands, out_idx, out_val, m_lo, scale, t1, t2, above,
                BLOCK, KP, CAP_, WRITE_VALUES, BINS_, RANK_TILE_, lrow, REMAP_)
        if ZERO_STATE:  # every program of the row is done with its state and histograms: zero them
            if ONE_ROUND_:  # and the maxima's, which every program of the row read at its start
                _zero_state(st, BINS_ // 2)
                _zero_state(st_first, BINS_ // 2)
            else:
                _zero_state(st, BINS_)
                if REMAP_ > 0:  # and the first selection's, which every pick program read before this kernel
                    _zero_state(st_first, BINS_)


@triton.jit
def _finish(base, lo, hi, k, st, cands, out_idx, out_val, m_lo, scale, t1, t2, above,
            BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr,
            BINS_: tl.constexpr, RANK_TILE_: tl.constexpr = 0, lrow=None, REMAP_: tl.constexpr = 0):
    n_tie = tl.load(st + 9, cache_modifier=".cg")
    written = tl.minimum(hi - lo, k)
    need = written - above  # candidates still to take
    if need > 0:
        if n_tie <= CAP_:
            if RANK_TILE_ > 0:
                _rank_in_tiles(cands, n_tie, need, above, lo, out_idx, out_val, WRITE_VALUES, RANK_TILE_, lrow, REMAP_)
            else:
                # each candidate's rank by pairwise comparison, one candidate against all at a time
                # (n_tie * CAP_ compares, n_tie being a handful: far cheaper than tl.sort's bitonic
                # stages over CAP_, each a trip through shared memory); packed values are distinct
                # (the index is in them), so the ranks are 0 .. n_tie - 1
                r = tl.arange(0, CAP_)
                packed = tl.load(cands + r, mask=r < n_tie, other=-9223372036854775807 - 1, cache_modifier=".cg")
                rank = tl.zeros([CAP_], tl.int32)
                for j in range(0, n_tie):
                    rank += (tl.load(cands + j, cache_modifier=".cg") > packed).to(tl.int32)
                t = 0x7FFFFFFF - (packed & 0x7FFFFFFF).to(tl.int32)
                keep = (r < n_tie) & (rank < need)
                tl.store(out_idx + above + rank, _out_key(t - lo, lrow, keep, REMAP_), mask=keep)
                if WRITE_VALUES:
                    tl.store(out_val + above + rank, _score((packed >> 32).to(tl.int32)), mask=keep)
        else:
            _overflow(base, lo, hi, m_lo, scale, t1, t2, need, above, out_idx, out_val, BLOCK, WRITE_VALUES,
                      BINS_, lrow, REMAP_)
    r = tl.arange(0, KP)
    pad = (r >= written) & (r < k)
    tl.store(out_idx + r, tl.full([KP], -1, tl.int32), mask=pad)
    if WRITE_VALUES:
        tl.store(out_val + r, tl.full([KP], float("-inf"), tl.float32), mask=pad)


@triton.jit
def _rank_in_tiles(cands, n_tie, need, above, lo, out_idx, out_val, WRITE_VALUES: tl.constexpr, RT: tl.constexpr,
                   lrow=None, REMAP_: tl.constexpr = 0):
    """The candidates' ranks by (score descending, index ascending), RT of them against RT others a
    step ([RT, RT] compares in registers), and the first `need` written after `above`: for the
    usual handful (n_tie <= RT) one step and two loads, where one candidate at a time costs an
    L2 round trip each on the row's last program, the selection's serial tail. RT sets the
    kernel's registers for all its programs (the compaction's: 48 at 32, 219 at 64 on sm_90)."""
    r = tl.arange(0, RT)
    for i0 in range(0, n_tie, RT):
        a = tl.load(cands + i0 + r, mask=i0 + r < n_tie, other=-9223372036854775807 - 1, cache_modifier=".cg")
        rank = tl.zeros([RT], tl.int32)
        for j0 in range(0, n_tie, RT):
            b = tl.load(cands + j0 + r, mask=j0 + r < n_tie, other=-9223372036854775807 - 1, cache_modifier=".cg")
            rank += tl.sum((b[None, :] > a[:, None]).to(tl.int32), 1)
        t = 0x7FFFFFFF - (a & 0x7FFFFFFF).to(tl.int32)
        keep = (i0 + r < n_tie) & (rank < need)
        tl.store(out_idx + above + rank, _out_key(t - lo, lrow, keep, REMAP_), mask=keep)
        if WRITE_VALUES:
            tl.store(out_val + above + rank, _score((a >> 32).to(tl.int32)), mask=keep)


@triton.jit
def _overflow(base, lo, hi, m_lo, scale, t1, t2, need, above, out_idx, out_val, BLOCK: tl.constexpr,
              WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr, lrow=None, REMAP_: tl.constexpr = 0):
    """More candidates than the buffer holds: find the k-th candidate's 32-bit key exactly, 8 bits
    a scan of the row (keys with the sign bit flipped: unsigned order), then take the candidates
    above it and the first of those equal to it, in index order. Candidates: the scores in
    (t1, t2), or the whole bin t1 where t2 < 0 (the two-kernel path, _topk_fused)."""
    offs = tl.arange(0, BLOCK)
    prefix = 0
    left = need
    for r in tl.static_range(4):
        counts = tl.zeros([256], tl.int32)
        for b0 in range(lo, hi, BLOCK):
            t = b0 + offs
            x = tl.load(base + t, mask=t < hi, other=0.0, cache_modifier=".cg")
            d1, d2 = _digits(x, m_lo, scale, BINS_)
            ukey = _key(x) ^ (-2147483647 - 1)
            sel = (t < hi) & (d1 == t1) & ((d2 == t2) | (t2 < 0))
            if r > 0:
                sel = sel & (((ukey >> (32 - 8 * r)) & ((1 << (8 * r)) - 1)) == prefix)
            counts += tl.histogram((ukey >> (24 - 8 * r)) & 0xFF, 256, mask=sel)
        digit, above_r = _threshold(counts, left, 256)
        prefix = (prefix << 8) | digit
        left = left - above_r
    kth = prefix ^ (-2147483647 - 1)  # the k-th candidate's key, signed again
    n_hi = 0
    n_at = 0
    for b0 in range(lo, hi, BLOCK):
        t = b0 + offs
        x = tl.load(base + t, mask=t < hi, other=0.0, cache_modifier=".cg")
        d1, d2 = _digits(x, m_lo, scale, BINS_)
        key = _key(x)
        sel = (t < hi) & (d1 == t1) & ((d2 == t2) | (t2 < 0))
        hi_m = sel & (key > kth)
        at_m = sel & (key == kth)
        at_rank = n_at + tl.cumsum(at_m.to(tl.int32), 0) - 1
        at_m = at_m & (at_rank < left)
        slot_hi = above + n_hi + tl.cumsum(hi_m.to(tl.int32), 0) - 1
        slot = tl.where(hi_m, slot_hi, above + (need - left) + at_rank)
        keep = hi_m | at_m
        tl.store(out_idx + slot, _out_key(t - lo, lrow, keep, REMAP_), mask=keep)
        if WRITE_VALUES:
            tl.store(out_val + slot, x, mask=keep)
        n_hi += tl.sum(hi_m.to(tl.int32), 0)
        n_at += tl.sum(at_m.to(tl.int32), 0)
