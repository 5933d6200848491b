"""What every top-k selection kernel shares (indexer_logits._topk_kernels, _topk_fused, _topk_row,
_topk_tiles): a row's window, the order-preserving int32 keys of scores, a row's range in its
workspace state, the base-BINS digits of a score over that range, and a histogram's threshold.

A row's workspace (int32, _topk_kernels.STATE words of state, then two BINS-bin histograms):
words 10 and 11 hold the largest key and the complement of the smallest finite key as unsigned
keys (zero is the atomic max's identity), so a zeroed workspace is an empty range.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda


@triton.jit
def _start(PDL: tl.constexpr, TRIGGER_: tl.constexpr):
    """A selection kernel's first step: with PDL (a programmatic dependent launch), wait for the kernel
    before (its writes); with TRIGGER_, then let the kernel after launch, so that its programs wait
    resident at their own wait (_topk_paths._trigger, _topk_select.TRIGGER)."""
    if PDL:
        tl_cuda.gdc_wait()
    if TRIGGER_:
        tl_cuda.gdc_launch_dependents()


@triton.jit
def _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW: tl.constexpr):
    if WINDOW == 0:
        lo = tl.load(lo_ptr + row)
        hi = tl.load(hi_ptr + row)
    elif WINDOW == 1:
        hi = tl.load(len_ptr + row // next_n) - next_n + row % next_n + 1
        lo = hi * 0
    else:
        hi = tl.load(len_ptr + row)
        lo = hi * 0
    # never a key outside the logits block, whatever the lengths say
    lo = tl.minimum(tl.maximum(lo, 0), width)
    hi = tl.maximum(tl.minimum(hi, width), lo)
    return lo, hi


@triton.jit
def _key(x):
    """float32 -> int32 in the same order (NaN aside)."""
    s = x.to(tl.int32, bitcast=True)
    return tl.where(s < 0, s ^ 0x7FFFFFFF, s)


@triton.jit
def _score(key):
    """The inverse of _key."""
    return tl.where(key < 0, key ^ 0x7FFFFFFF, key).to(tl.float32, bitcast=True)


@triton.jit
def _key_range(base, start, end, BLOCK: tl.constexpr):
    """(smallest finite key, largest key) of the scores base[start:end] (end > start)."""
    offs = tl.arange(0, BLOCK)
    kmax = tl.full([BLOCK], -2147483647 - 1, tl.int32)
    kmin = tl.full([BLOCK], 2147483647, tl.int32)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        x = tl.load(base + t, mask=m, other=float("-inf"))
        lo_key, hi_key = _range_keys(x, m)
        kmax = tl.maximum(kmax, hi_key)
        kmin = tl.minimum(kmin, lo_key)
    return tl.min(kmin, 0), tl.max(kmax, 0)


@triton.jit
def _range_keys(x, m):
    """Each score's key as it counts toward a range's (smallest finite, largest) keys: the key, or
    the identity of the min / the max where the score is masked off (or, for the min, not finite)."""
    key = _key(x)
    return tl.where(m & (x > float("-inf")), key, 2147483647), tl.where(m, key, -2147483647 - 1)


@triton.jit
def _mapping(kmin, kmax, BINS_: tl.constexpr):
    """(m, BINS / (M - m)) for scores of keys kmin..kmax: a scale of 0 (every score in bin 0, hence
    the exact overflow path) where the range is empty, a single value, or not finite."""
    lo_score = _score(kmin)
    span = _score(kmax) - lo_score
    ok = (span > 0) & (span < float("inf"))
    scale = tl.where(ok, BINS_ / tl.where(ok, span, 1.0), 0.0)
    return tl.where(ok, lo_score, 0.0), scale


@triton.jit
def _range(st, BINS_: tl.constexpr):
    """(m, BINS / (M - m)) of the row; a scale of 0 (every score in bin 0, hence the exact
    overflow path) where the range is empty, a single value, or not finite."""
    kmax = (tl.load(st + 10).to(tl.uint32, bitcast=True) ^ 0x80000000).to(tl.int32, bitcast=True)
    kmin = ((~tl.load(st + 11)).to(tl.uint32, bitcast=True) ^ 0x80000000).to(tl.int32, bitcast=True)
    return _mapping(kmin, kmax, BINS_)


@triton.jit
def _digits(x, m, scale, BINS_: tl.constexpr):
    """(d1, d2): the first two base-BINS digits of y = (x - m) * scale clamped to [0, BINS)."""
    y = tl.minimum(tl.maximum((x - m) * scale, 0.0), BINS_ * (1.0 - 2.0 ** -24))
    y = tl.where(y == y, y, 0.0)  # NaN scores (none in practice) count as the lowest
    d1 = y.to(tl.int32)  # y >= 0: truncation is floor
    f = (y - d1.to(tl.float32)) * BINS_  # exact: the fraction of y, shifted by a power of two
    d2 = tl.minimum(f.to(tl.int32), BINS_ - 1)
    return d1, d2


@triton.jit
def _threshold(counts, need, NB: tl.constexpr):
    """(bin, scores above it): the highest bin whose suffix count reaches `need`."""
    bins = tl.arange(0, NB)
    suffix = tl.cumsum(counts, 0, reverse=True)
    t = tl.max(tl.where(suffix >= need, bins, -1), 0)
    above = tl.sum(tl.where(bins > t, counts, 0), 0)
    return t, above


@triton.jit
def _zero_state(st, BINS_: tl.constexpr):
    """Zero a row's workspace (its 16 state words and two BINS_-bin histograms) once every program
    that reads it is done, so that the next row block or call finds it zero."""
    tl.store(st + tl.arange(0, 16), tl.zeros([16], tl.int32))
    tl.store(st + 16 + tl.arange(0, 2 * BINS_), tl.zeros([2 * BINS_], tl.int32))


@triton.jit
def _publish_range(st, kmin, kmax):
    """Merge a program's (smallest finite key, largest key) into its row's state words 10 and 11
    (unsigned, so that the zeroed workspace is the atomic max's identity). The range kernel's step,
    and that of kernels that see every score of a row anyway (indexer_logits._topk_tiles)."""
    ukmax = (kmax ^ (-2147483647 - 1)).to(tl.uint32, bitcast=True)
    not_ukmin = (~(kmin ^ (-2147483647 - 1))).to(tl.uint32, bitcast=True)
    ust = st.to(tl.pointer_type(tl.uint32))
    tl.atomic_max(ust + 10, ukmax, sem="relaxed")
    tl.atomic_max(ust + 11, not_ukmin, sem="relaxed")


@triton.jit
def _in_bin(counts, t, NB: tl.constexpr):
    """The count of bin t (0 where t is -1)."""
    return tl.sum(tl.where(tl.arange(0, NB) == t, counts, 0), 0)


@triton.jit
def _rounds(st, k, total, BINS_: tl.constexpr):
    """(t1, above1, in1, t2, above2, in2) of a row from its two histograms: round 1's threshold bin
    t1 (the bin holding the k-th largest score; -1 where the window holds at most k scores, all of
    them the answer), the scores above it and in it, then round 2's over bin t1's scores, for the
    k - above1 still needed. Every program that needs them computes them (BINS_ counts from L2)
    rather than one program per row storing them, which would put a serial step after each round."""
    bins = tl.arange(0, BINS_)
    h1 = tl.load(st + 16 + bins)
    t1, above1 = _threshold(h1, k, BINS_)
    in1 = _in_bin(h1, t1, BINS_)
    if total <= k:  # the whole window is the answer
        t1 = -1
        above1 = total
        in1 = 0
    h2 = tl.load(st + 16 + BINS_ + bins)
    t2, above2 = _threshold(h2, k - above1, BINS_)
    return t1, above1, in1, t2, above2, _in_bin(h2, t2, BINS_)


@triton.jit
def _fit(st, k, total, FIT_CAP_: tl.constexpr, BINS_: tl.constexpr):
    """(level, t1, t2, above) of a selection whose threshold bin need not be resolved to one score: the
    tiles path's first selection, over tile maxima, only has to name a set of at most FIT_CAP_
    maxima that holds every maximum at or above the k-th largest (_topk_tiles' pick). Level 1:
    the maxima in bins >= t1 (round 1) are few enough; level 2: those at or above (t1, t2) are;
    0: neither (the compaction then finds the k-th largest exactly). A window of at most k is
    level 1 with t1 = -1 (all of it). Every kernel that asks computes the same answer from the
    row's histograms (round 2's is zero where round 1 fitted: that round skipped its counts).
    `above`: the scores above (t1, t2), as _topk_kernels._thresholds gives them (level 0's)."""
    t1, above1, in1, t2, above2, in2 = _rounds(st, k, total, BINS_)
    level = tl.where(above1 + in1 <= FIT_CAP_, 1, tl.where(above1 + above2 + in2 <= FIT_CAP_, 2, 0))
    return level, t1, t2, above1 + above2


@triton.jit
def _digit_take(x, m_lo, scale, level, t1, t2, BINS_: tl.constexpr):
    """Whether scores x lie at or above _fit's threshold bin of `level` (1: d1 >= t1; 2: (d1, d2)
    >= (t1, t2)); the digits are monotone in x, so every score at or above the bin's is taken."""
    d1, d2 = _digits(x, m_lo, scale, BINS_)
    return (d1 > t1) | ((d1 == t1) & ((level == 1) | (d2 >= t2)))
