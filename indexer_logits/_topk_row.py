"""The exact top-k of each row of a logits block in one kernel and one program per row: no atomics,
no chain of dependent launches (what the four- and two-kernel paths pay: ~35 us of selection at
64 x 32K whatever the split; docs/PERF.md, "Top-k"). A program reads its row three times:

1. the row's largest score M and smallest finite score m;
2. one histogram of y = (x - m) * BINS_ / (M - m) (the digit of _topk_kernels._digits, monotone
   in x): the bin t holding the k-th largest score, `above` (scores in higher bins, fewer than k,
   all in the answer) and the count of bin t;
3. the scores above bin t to the output and bin t's scores (at most CAP_) to a per-row candidate
   buffer, each as key << 32 | (0x7FFFFFFF - position) so that one descending sort orders them by
   score, ties by the smallest position; slots by one prefix sum a block (both counts packed in an
   int32), no atomics. The program then sorts its candidates and writes the first k - above.

Why one round (measured on the H200, docs/PERF.md "Top-k", "One program a row"): in Triton 3.6 a
tl.histogram costs ~54 instructions a key and a prefix-sum pass ~73, where a load-and-compare pass
costs ~12, so a program that narrowed the threshold by histogram rounds over its whole row (4-5
of them) ran 2-3x slower than the four kernels; after one round the threshold bin holds a few
hundred scores, which a sort of the candidates finishes cheaply (cheaper than a second histogram of
them and a pairwise rank of its last sub-bin's few: 1.9-2.2 us slower at 64 and 128 x 8K on an H100,
commit 4074031, docs/perf_logs/topk_row_sub).

A bin t of more than CAP_ scores (ties, or a range stretched by an outlier) takes the exact path in
the same program: rounds over the row's order-preserving 32-bit keys (_exact_rounds). Rows of at
most k keys are copied. Output as the other paths: `k` int32 indices relative to the window start
(in no particular order), then -1; optionally the scores (-inf pad).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_ptx import _store64_where, _store_where
from ._topk_kernels import _count_d1, _digits, _key, _key_range, _mapping, _range_keys, _score, _threshold, _window

# Launch settings, from bench.topk --sweep on the H200 (docs/perf_logs/topk_row_h200/call2_*): the
# sort of the candidates costs what they are (128 x 8K, selection alone: 16 us at 512, 20 at
# 1,024, 36 at 2,048), and bin t holds about width / BINS of them, so 512 candidates and bins
# growing with the width (64 x 32K with 64 bins overflowed 512 into the exact path: 111 us;
# with 128 bins, 46).
BINS = None        # bins of the one histogram round: None = bins_for(width)
CAP = 512          # candidates (bin t's scores) a row sorts; more take the exact path
# Keys a program reads a step: 4,096, whose step holds 8 keys a thread at 16 warps (16 at 8). A
# step of 8,192 spills 36-76 bytes a thread under Triton 3.8 and 3.9 (the engines' Tritons), 16
# warps for sm_90 and sm_120, 8 warps for sm_90; 4,096 spills under none of 3.6, 3.8, 3.9
# (cross-compiled, docs/PERF.md "One program a row"). Under 3.6 on the H200 8,192 timed 1%
# faster at 128 x 8K (15.08 against 15.26 us), within two timings' drift.
BLOCK = 4096
NUM_WARPS = 16
PDL = False        # launch as a programmatic dependent launch of the logits kernel (CUDA sm_90+)
# Whether a program whose row fits two steps (width <= 2 * BLOCK) reads it once, into registers (two
# steps' keys: 16 a thread at 16 warps and 4,096 a step), and finds its range, its histogram and its
# output from there, where it otherwise reads the row from L2 three times, each pass a round trip and a
# block-wide reduction behind it (128 x 8K: two steps a pass, one program an SM). Read where a step is at
# most 8 keys a thread (holds). Predicted 1.5-3 us less at 128 x 8K; measured on an H100 (end to end, in
# graphs, alternated: docs/perf_logs/topk_early, call 1) 128 x 8K 70.2 -> 69.3 us, 64 x 8K 48.6 -> 46.8.
HOLD = True
# Keys a thread a step up to which HOLD holds a row: cross-compiled (Triton 3.6, sm_90 and sm_120), the held
# kernel takes 114-128 registers and spills nothing at 8 (4,096 keys at 16 warps, 2,048 at 8), and spills
# 108-288 bytes at 16 or more (4,096 at 8 warps, 8,192 at 16, 2,048 at 4).
HOLD_KEYS_A_THREAD = 8
# Whether the write pass stores its slots (the output's positions and scores, the candidates) by inline PTX on
# CUDA (_topk_ptx._store_where, _store64_where), so that addresses, values and masks keep the step's layout:
# tl.store converts them through shared memory behind barriers. Measured on an H100 (docs/perf_logs/topk_drain,
# call 3, the kernel with its stores cut out as a diagnostic): the write pass's stores cost 4.7 of 15.6 us at
# 128 x 8K (the candidates' 2.0, the output's 1.25). Inline (call 4, alternated, exact): the kernel 14.79 -> 13.10
# us at 128 x 8K and 14.63 -> 13.02 at 64 x 8K; logits + top-k 1.277 -> 1.247 and 1.439 -> 1.389 of the logits;
# cross-compiled for sm_90 at 16 warps, 127 -> 102 registers held, no spill.
INLINE = True


def holds(hold, width: int, block: int, num_warps: int) -> bool:
    """Whether a launch of rows `width` keys wide with these settings holds its rows in registers (HOLD_):
    HOLD set, the row at most two steps, a step at most HOLD_KEYS_A_THREAD keys a thread."""
    return bool(hold) and width <= 2 * block and block <= HOLD_KEYS_A_THREAD * 32 * num_warps


def bins_for(width: int) -> int:
    """The histogram's bins for rows of `width` keys (BINS when set): 64 up to 8,192 keys, then 128."""
    return BINS if BINS else (64 if width <= 8192 else 128)


@triton.jit
def _ukey(x):
    """float32 -> uint32 in the same order (NaN aside): _key with the sign bit flipped."""
    return (_key(x) ^ (-2147483647 - 1)).to(tl.uint32, bitcast=True)


@triton.jit
def topk_row_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k,
                    idx_ptr, stride_idx, val_ptr, stride_val, cand_ptr,
                    WINDOW: tl.constexpr, BLOCK_: tl.constexpr, BINS_: tl.constexpr, CAP_: tl.constexpr,
                    WRITE_VALUES: tl.constexpr, PDL: tl.constexpr, HOLD_: tl.constexpr = False,
                    INLINE_: tl.constexpr = False):
    """With HOLD_ (HOLD, where the block's width is at most 2 * BLOCK_), the window's two steps are read
    once, into registers, and the range, the histogram and the write pass work from there."""
    tl.static_assert(BLOCK_ < 65536, "the write pass packs two block counts in 16 bits each")
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    base = logits_ptr + row.to(tl.int64) * stride_row
    out_idx = idx_ptr + row.to(tl.int64) * stride_idx
    out_val = val_ptr + row.to(tl.int64) * stride_val
    cands = cand_ptr + row.to(tl.int64) * CAP_
    offs = tl.arange(0, BLOCK_)
    n = hi - lo
    if n <= k:  # the whole window is the answer, in order
        for b0 in range(lo, hi, BLOCK_):
            t = b0 + offs
            m = t < hi
            tl.store(out_idx + (t - lo), t - lo, mask=m)
            if WRITE_VALUES:
                tl.store(out_val + (t - lo), tl.load(base + t, mask=m, other=0.0), mask=m)
    else:
        if HOLD_:  # the window's two steps, read once
            t0 = lo + offs
            t1 = t0 + BLOCK_
            m0 = t0 < hi
            m1 = t1 < hi
            x0 = tl.load(base + t0, mask=m0, other=0.0)
            x1 = tl.load(base + t1, mask=m1, other=0.0)
            min0, max0 = _range_keys(x0, m0)
            min1, max1 = _range_keys(x1, m1)
            kmin = tl.min(tl.minimum(min0, min1), 0)
            kmax = tl.max(tl.maximum(max0, max1), 0)
        else:
            kmin, kmax = _key_range(base, lo, hi, BLOCK_)
        m_lo, scale = _mapping(kmin, kmax, BINS_)  # a scale of 0: every score in bin 0
        if HOLD_:
            counts = (tl.histogram(_digits(x0, m_lo, scale, BINS_)[0], BINS_, mask=m0)
                      + tl.histogram(_digits(x1, m_lo, scale, BINS_)[0], BINS_, mask=m1))
        else:
            counts = _count_d1(base, lo, hi, m_lo, scale, BLOCK_, BINS_)
        bt, above = _threshold(counts, k, BINS_)
        in_bin = tl.sum(tl.where(tl.arange(0, BINS_) == bt, counts, 0), 0)
        if in_bin <= CAP_:
            n_gt = above * 0
            n_in = above * 0
            if HOLD_:
                n_gt, n_in = _write_step(x0, t0, m0, lo, bt, m_lo, scale, n_gt, n_in, out_idx, out_val, cands, BINS_,
                                         WRITE_VALUES, INLINE_)
                n_gt, n_in = _write_step(x1, t1, m1, lo, bt, m_lo, scale, n_gt, n_in, out_idx, out_val, cands, BINS_,
                                         WRITE_VALUES, INLINE_)
            else:
                for b0 in range(lo, hi, BLOCK_):
                    t = b0 + offs
                    m = t < hi
                    n_gt, n_in = _write_step(tl.load(base + t, mask=m, other=0.0), t, m, lo, bt, m_lo, scale, n_gt,
                                             n_in, out_idx, out_val, cands, BINS_, WRITE_VALUES,
                                             INLINE_)
            tl.debug_barrier()  # the candidates this program's threads wrote, visible to all of them
            r = tl.arange(0, CAP_)
            best = tl.sort(tl.load(cands + r, mask=r < in_bin, other=-9223372036854775807 - 1, cache_modifier=".cg"),
                           descending=True)
            keep = r < k - above
            t = 0x7FFFFFFF - (best & 0x7FFFFFFF).to(tl.int32)
            tl.store(out_idx + above + r, t - lo, mask=keep)
            if WRITE_VALUES:
                tl.store(out_val + above + r, _score((best >> 32).to(tl.int32)), mask=keep)
        else:
            _exact_rounds(base, lo, hi, k, out_idx, out_val, BLOCK_, BINS_, WRITE_VALUES)
    written = tl.minimum(tl.maximum(n, 0), k)
    for p0 in range(written, k, BLOCK_):
        p = p0 + offs
        tl.store(out_idx + p, tl.full([BLOCK_], -1, tl.int32), mask=p < k)
        if WRITE_VALUES:
            tl.store(out_val + p, tl.full([BLOCK_], float("-inf"), tl.float32), mask=p < k)


@triton.jit
def _write_step(x, t, m, lo, bt, m_lo, scale, n_gt, n_in, out_idx, out_val, cands, BINS_: tl.constexpr,
                WRITE_VALUES: tl.constexpr, INLINE_: tl.constexpr = False):
    """The write pass over one step's scores x at positions t (those under m): the scores above bin bt to
    the output, bin bt's to the candidates, slots by one prefix sum (both counts packed in an int32);
    returns the two counts so far."""
    d1, d2 = _digits(x, m_lo, scale, BINS_)
    gt = m & (d1 > bt)
    inside = m & (d1 == bt)
    both = tl.cumsum(gt.to(tl.int32) + (inside.to(tl.int32) << 16), 0)
    slot_gt = n_gt + (both & 0xFFFF) - 1
    packed = (_key(x).to(tl.int64) << 32) | (0x7FFFFFFF - t).to(tl.int64)
    if INLINE_:  # (inline PTX: the operands keep the step's layout, no trip through shared memory)
        _store_where(out_idx + slot_gt, t - lo, gt)
        if WRITE_VALUES:
            _store_where(out_val.to(tl.pointer_type(tl.int32)) + slot_gt, x.to(tl.int32, bitcast=True), gt)
        _store64_where(cands + n_in + (both >> 16) - 1, packed, inside)
    else:
        tl.store(out_idx + slot_gt, t - lo, mask=gt)
        if WRITE_VALUES:
            tl.store(out_val + slot_gt, x, mask=gt)
        tl.store(cands + n_in + (both >> 16) - 1, packed, mask=inside)
    return n_gt + tl.sum(gt.to(tl.int32), 0), n_in + tl.sum(inside.to(tl.int32), 0)


@triton.jit
def _exact_rounds(base, lo, hi, k, out_idx, out_val, BLOCK_: tl.constexpr, BINS_: tl.constexpr,
                  WRITE_VALUES: tl.constexpr):
    """The k largest of a window of more than k keys, exactly, whatever the scores: an interval
    [c_lo, c_hi] of unsigned keys that holds the k-th largest, `above` (keys above c_hi, all in the
    answer) and `need` (how many to take inside it), narrowed by rounds from the row's smallest and
    largest keys. A round counts the keys inside in BINS_ bins of 2**shift keys (shift the least
    that fits the interval) and keeps the bin of the need-th largest: the width falls by BINS_ at
    least, so at most ceil(32 / log2(BINS_)) rounds, stopping once the interval's count is `need`
    or it is one key (ties: the smallest positions win). Then the keys above c_hi and the first
    `need` inside, in position order (slots by a prefix sum a block)."""
    offs = tl.arange(0, BLOCK_)
    need = k + 0
    above = k * 0
    kmax = tl.zeros([BLOCK_], tl.uint32)
    kmin = tl.full([BLOCK_], 0xFFFFFFFF, tl.uint32)
    for b0 in range(lo, hi, BLOCK_):
        t = b0 + offs
        m = t < hi
        u = _ukey(tl.load(base + t, mask=m, other=0.0))
        kmax = tl.maximum(kmax, tl.where(m, u, 0))
        kmin = tl.minimum(kmin, tl.where(m, u, 0xFFFFFFFF))
    c_lo = tl.min(kmin, 0)
    c_hi = tl.max(kmax, 0)
    count = hi - lo
    bins = tl.arange(0, BINS_)
    while (count != need) & (c_hi != c_lo):
        span = c_hi - c_lo
        shift = tl.full([], 0, tl.uint32)
        while (span >> shift) >= BINS_:
            shift += 1
        width_m1 = (tl.full([], 1, tl.uint32) << shift) - 1  # a bin's keys, less one
        counts = tl.zeros([BINS_], tl.int32)
        for b0 in range(lo, hi, BLOCK_):
            t = b0 + offs
            u = _ukey(tl.load(base + t, mask=t < hi, other=0.0))
            inside = (t < hi) & (u >= c_lo) & (u <= c_hi)
            counts += tl.histogram(((u - c_lo) >> shift).to(tl.int32, bitcast=True), BINS_, mask=inside)
        b, n_above = _threshold(counts, need, BINS_)
        above += n_above
        need -= n_above
        count = tl.sum(tl.where(bins == b, counts, 0), 0)
        new_lo = c_lo + (b.to(tl.uint32) << shift)
        # bins below the interval's last one end inside it; the last one ends at c_hi
        c_hi = tl.where(b.to(tl.uint32) < (span >> shift), new_lo + width_m1, c_hi)
        c_lo = new_lo
    n_gt = above * 0
    n_in = above * 0
    for b0 in range(lo, hi, BLOCK_):
        t = b0 + offs
        m = t < hi
        x = tl.load(base + t, mask=m, other=0.0)
        u = _ukey(x)
        gt = m & (u > c_hi)
        inside = m & (u >= c_lo) & (u <= c_hi)
        both = tl.cumsum(gt.to(tl.int32) + (inside.to(tl.int32) << 16), 0)
        rank_in = n_in + (both >> 16) - 1
        slot = tl.where(gt, n_gt + (both & 0xFFFF) - 1, above + rank_in)
        keep = gt | (inside & (rank_in < need))
        tl.store(out_idx + slot, t - lo, mask=keep)
        if WRITE_VALUES:
            tl.store(out_val + slot, x, mask=keep)
        n_gt += tl.sum(gt.to(tl.int32), 0)
        n_in += tl.sum(inside.to(tl.int32), 0)
