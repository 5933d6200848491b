"""The exact top-k of each row of a logits block in one kernel and one program per row: a radix
selection over the row's order-preserving 32-bit keys that never leaves the program, so no
atomics, no workspace and no chain of dependent launches (the cost the four- and two-kernel paths
measured on the H200: ~35 us of selection at 64 x 32K whatever the split; docs/PERF.md, "Top-k").

The program keeps an interval [c_lo, c_hi] of unsigned keys that holds the k-th largest key,
`above` (how many keys lie above c_hi: all of them in the answer) and `need` (how many to take
from inside the interval). It starts at the row's smallest and largest keys (one pass) and
narrows by rounds: a pass counts the keys inside it in BINS_ bins of 2**shift keys each
(tl.histogram; shift the least that fits the interval in BINS_ bins), the bin that holds the
need-th largest becomes the interval. A round divides the interval's width by BINS_ at least, so
there are at most ceil(32 / log2(BINS_)) of them; the rounds stop as soon as the interval's count
is exactly `need` (take it all) or it is one key (ties: the smallest indices win). The last pass
writes the keys above c_hi and the first `need` inside the interval, in index order: slots by one
prefix sum per block (both counts packed in one int32), no atomics.

Rows short enough to sit in the L1 cache cost one read from L2 and the rounds' passes from L1;
a long row costs a read per pass (the rounds of a few long rows are the other paths' case: they
spread one row over many programs). Output as the other paths: `k` int32 indices relative to the
window start, then -1; optionally the scores (-inf pad).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_kernels import _key, _threshold, _window

BINS = 64          # bins a round (tl.histogram costs ~log2(BINS) * BINS / 32 operations a key)
BLOCK = 4096       # keys a program reads a step
NUM_WARPS = 16
PDL = False        # launch as a programmatic dependent launch of the logits kernel (CUDA sm_90+)


@triton.jit
def _ukey(x):
    """float32 -> uint32 in the same order (NaN aside): _key with the sign bit flipped."""
    return (_key(x) ^ (-2147483647 - 1)).to(tl.uint32, bitcast=True)


@triton.jit
def topk_row_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k,
                    idx_ptr, stride_idx, val_ptr, stride_val,
                    WINDOW: tl.constexpr, BLOCK_: tl.constexpr, BINS_: tl.constexpr,
                    WRITE_VALUES: tl.constexpr, PDL: tl.constexpr):
    tl.static_assert(BLOCK_ < 65536, "the final pass packs two block counts in 16 bits each")
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    base = logits_ptr + row.to(tl.int64) * stride_row
    out_idx = idx_ptr + row.to(tl.int64) * stride_idx
    out_val = val_ptr + row.to(tl.int64) * stride_val
    offs = tl.arange(0, BLOCK_)
    n = hi - lo
    need = tl.minimum(n, k)
    above = need * 0
    c_lo = tl.full([], 0, tl.uint32)
    c_hi = tl.full([], 0xFFFFFFFF, tl.uint32)
    if n > k:
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
        count = n
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
    # the answer: every key above c_hi, and the first `need` inside [c_lo, c_hi] in index order
    # (all of them, or ties of one key); slots by one prefix sum of both counts packed in an int32
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
    written = tl.minimum(tl.maximum(n, 0), k)
    for p0 in range(written, k, BLOCK_):
        p = p0 + offs
        tl.store(out_idx + p, tl.full([BLOCK_], -1, tl.int32), mask=p < k)
        if WRITE_VALUES:
            tl.store(out_val + p, tl.full([BLOCK_], float("-inf"), tl.float32), mask=p < k)
