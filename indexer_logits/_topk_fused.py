"""The exact top-k of each row of a logits block in two kernels (the four-kernel selection of
indexer_logits._topk_kernels with its range kernel and its round 2 folded away; docs/PERF.md,
"Top-k", "Two kernels instead of four"):

1. round 1: every program of a row first reads the same sample of the row (SAMPLE scores in
   runs of 32 spread over it; the whole row when it is shorter) and maps scores to y = (x - m) * BINS / (M - m)
   over the sample's range [m, M], clamped to [0, BINS): all programs compute the same mapping
   from the same scores, so no kernel has to find the row's range first. Scores outside the
   sample's range fall into the end bins; the mapping is still monotone, so the selection stays
   exact. Each program counts its chunk's d1 = floor(y) (tl.histogram, one atomic per bin);
   the row's chunk-0 program stores (m, scale) for kernel 2.
2. compaction + selection: every program reads the 64 counts, finds the bin t1 holding the k-th
   score and writes the scores above it to the output (fewer than k); the scores in bin t1 (a
   few hundred on the bench inputs) go to a per-row candidate buffer, one atomic per block. The
   row's last program reads the candidates (CB at a time) and takes the `need` best by a 4-bit
   radix over their 32-bit keys (ties at the need-th key: a second radix over their indices, so
   the smallest indices win), then pads with -1 and zeroes the row's state. A bin t1 holding
   more than CAP scores (ties, or a sample that missed the row's spread) takes the exact
   overflow path of _topk_kernels in that same program.

Output and workspace as in _topk_kernels (one workspace serves either path): state words 7 (the
programs done), 8 and 9 (output and candidate slots), 10 and 11 (the candidates' largest key and
the complement of their smallest, unsigned), 12 and 13 (the mapping's m and scale as float32
bits), then the round-1 histogram.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_digits import _zero_state
from ._topk_kernels import _count_d1, _digits, _key, _mapping, _overflow, _score, _threshold, _window

CAP = 4096       # candidates (the scores of bin t1) a row keeps (300-1,000 on the bench inputs)
CB = 512         # candidates the last program reads at a time: 64 registers for the kernel on sm_90, 8
                 # programs of 4 warps per SM (1,024: +24; all 4,096 in registers: 255 and spills;
                 # bench.topk_xcompile)
SAMPLE = 2048    # scores of the row every round-1 program reads for the mapping (64 runs of 32)


@triton.jit
def _sample_mapping(base, lo, hi, SAMPLE_: tl.constexpr, BINS_: tl.constexpr):
    """(m, BINS / (M - m)) over a sample of the window [lo, hi): SAMPLE_ / RUN runs of RUN
    consecutive scores spread evenly over it (the whole window when it is short). Runs, not single
    strided scores: one 128-byte line a run, so the row's hundreds of programs reading the same
    sample cost the L2 8 KB each instead of a 32-byte sector per score (64 KB). A scale of 0 (every
    score in bin 0, hence the exact overflow path) where the sample's range is empty, a single
    value, or not finite: the same rule as _topk_kernels._range."""
    RUN: tl.constexpr = 32
    run_stride = tl.maximum((hi - lo + SAMPLE_ // RUN - 1) // (SAMPLE_ // RUN), RUN)
    j = tl.arange(0, SAMPLE_)
    t = lo + (j // RUN) * run_stride + j % RUN
    ok_t = t < hi
    x = tl.load(base + t, mask=ok_t, other=float("-inf"))
    key = _key(x)
    kmax = tl.max(tl.where(ok_t, key, -2147483647 - 1), 0)
    kmin = tl.min(tl.where(ok_t & (x > float("-inf")), key, 2147483647), 0)
    return _mapping(kmin, kmax, BINS_)


@triton.jit
def topk_round1_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, chunk_len,
                       WINDOW: tl.constexpr, BLOCK: tl.constexpr, BINS_: tl.constexpr, SAMPLE_: tl.constexpr,
                       PDL: tl.constexpr):
    """Kernel 1: the sample's mapping, then d1's counts of this program's chunk (module docstring)."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    st = ws_ptr + row * (16 + 2 * BINS_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    m_lo, scale = _sample_mapping(base, lo, hi, SAMPLE_, BINS_)
    if chunk == 0:  # kernel 2 reads the mapping instead of re-reading the sample
        tl.store(st + 12, m_lo.to(tl.int32, bitcast=True))
        tl.store(st + 13, scale.to(tl.int32, bitcast=True))
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    if end > start:
        counts = _count_d1(base, start, end, m_lo, scale, BLOCK, BINS_)
        tl.atomic_add(st + 16 + tl.arange(0, BINS_), counts, mask=counts != 0, sem="relaxed")


@triton.jit
def topk_select_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k,
                       ws_ptr, cand_ptr, idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                       WINDOW: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr,
                       WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr, SCAN_SLOTS: tl.constexpr,
                       CB_: tl.constexpr, PDL: tl.constexpr):
    """Kernel 2: scores above bin t1 to the output, bin t1's to the candidates; the row's last
    program selects among them and zeroes the row's state (module docstring)."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    st = ws_ptr + row * (16 + 2 * BINS_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    out_idx = idx_ptr + row.to(tl.int64) * stride_idx
    out_val = val_ptr + row.to(tl.int64) * stride_val
    cands = cand_ptr + row.to(tl.int64) * CAP_
    m_lo = tl.load(st + 12).to(tl.float32, bitcast=True)
    scale = tl.load(st + 13).to(tl.float32, bitcast=True)
    bins = tl.arange(0, BINS_)
    counts = tl.load(st + 16 + bins)
    t1, above = _threshold(counts, k, BINS_)
    if hi - lo <= k:  # the whole window is the answer
        t1 = -1
        above = hi - lo
    n_bin = tl.sum(tl.where(bins == t1, counts, 0), 0)  # exactly the scores with d1 == t1
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    offs = tl.arange(0, BLOCK)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        x = tl.load(base + t, mask=m, other=0.0)
        d1, d2 = _digits(x, m_lo, scale, BINS_)
        take = m & (d1 > t1)
        if SCAN_SLOTS:  # one atomic per block, slots by a prefix sum over the block
            n_take = tl.sum(take.to(tl.int32), 0)
            if n_take > 0:
                slot = tl.atomic_add(st + 8, n_take, sem="relaxed") + tl.cumsum(take.to(tl.int32), 0) - 1
                tl.store(out_idx + slot, t - lo, mask=take)
                if WRITE_VALUES:
                    tl.store(out_val + slot, x, mask=take)
        else:  # one atomic per selected score: no block-wide scan for the few that are
            slot = tl.atomic_add(st + 8 + tl.zeros_like(t), 1, mask=take, sem="relaxed")
            tl.store(out_idx + slot, t - lo, mask=take)
            if WRITE_VALUES:
                tl.store(out_val + slot, x, mask=take)
        if n_bin <= CAP_:  # else the overflow path rescans the row: nothing to keep
            cand = m & (d1 == t1)
            n_c = tl.sum(cand.to(tl.int32), 0)
            if n_c > 0:  # candidates are many per row (hundreds): one atomic per block, not per score
                slot = tl.atomic_add(st + 9, n_c, sem="relaxed") + tl.cumsum(cand.to(tl.int32), 0) - 1
                key = _key(x)
                tl.store(cands + slot, (key.to(tl.int64) << 32) | (0x7FFFFFFF - t).to(tl.int64),
                         mask=cand & (slot < CAP_))
                # the candidates' key range (words 10, 11: the largest unsigned key, the complement
                # of the smallest) spares the last program a pass before its radix; per block, as
                # a running range across blocks costs the loop registers (a spill on sm_90)
                ukey = (key ^ (-2147483647 - 1)).to(tl.uint32, bitcast=True)
                not_ukey = (key ^ 0x7FFFFFFF).to(tl.uint32, bitcast=True)  # ~ukey, in signed bit ops
                ust = st.to(tl.pointer_type(tl.uint32))
                tl.atomic_max(ust + 10, tl.max(tl.where(cand, ukey, 0), 0), sem="relaxed")
                tl.atomic_max(ust + 11, tl.max(tl.where(cand, not_ukey, 0), 0), sem="relaxed")
    done = tl.atomic_add(st + 7, 1)  # acq_rel: the last program sees every program's writes
    if done == tl.num_programs(1) - 1:
        written = tl.minimum(hi - lo, k)
        need = written - above  # still to take, all from bin t1
        if need > 0:
            if n_bin <= CAP_:
                _take_best(cands, st, n_bin, need, above, lo, out_idx, out_val, CB_, WRITE_VALUES)
            else:
                _overflow(base, lo, hi, m_lo, scale, t1, -1, need, above, out_idx, out_val, BLOCK, WRITE_VALUES,
                          BINS_)
        r = tl.arange(0, KP)
        pad = (r >= written) & (r < k)
        tl.store(out_idx + r, tl.full([KP], -1, tl.int32), mask=pad)
        if WRITE_VALUES:
            tl.store(out_val + r, tl.full([KP], float("-inf"), tl.float32), mask=pad)
        _zero_state(st, BINS_)  # every program of the row is done with its state and histograms


@triton.jit
def _candidates(cands, c0, n, CB: tl.constexpr):
    """(in range, unsigned key, index complement) of candidates c0 .. c0 + CB - 1, as int64 (a
    shift by 32 stays defined): larger key = higher score, larger complement = smaller index."""
    r = c0 + tl.arange(0, CB)
    ok = r < n
    packed = tl.load(cands + r, mask=ok, other=0, cache_modifier=".cg")
    ukey = ((packed >> 32) + 2147483648) & 0xFFFFFFFF  # the signed key, sign bit flipped
    return ok, ukey, packed & 0x7FFFFFFF


@triton.jit
def _tied_extent(cands, n, tie_key, CB: tl.constexpr):
    """(largest, smallest, count) of the index complements of the candidates whose key is tie_key."""
    vmax = tl.zeros([], tl.int64)
    vmin = tl.full([], 0xFFFFFFFF, tl.int64)
    n_sel = 0
    for c0 in range(0, n, CB):
        ok, ukey, cidx = _candidates(cands, c0, n, CB)
        sel = ok & (ukey == tie_key)
        vmax = tl.maximum(vmax, tl.max(tl.where(sel, cidx, 0), 0))
        vmin = tl.minimum(vmin, tl.min(tl.where(sel, cidx, 0xFFFFFFFF), 0))
        n_sel += tl.sum(sel.to(tl.int32), 0)
    return vmax, vmin, n_sel


@triton.jit
def _radix(cands, n, left, tie_key, vmax, vmin, n_sel, BY_INDEX: tl.constexpr, CB: tl.constexpr):
    """(prefix, shift, left, group size) of the left-th best selected candidate: the selected
    values v (keys; with BY_INDEX the index complements of the candidates whose key is tie_key),
    n_sel of them between vmin and vmax, with v >> shift > prefix are taken, and `left` more come
    from those with v >> shift == prefix (the group; all of it unless they share one value).
    4 bits a step (tl.histogram of 16 bins is cheap), from the selected values' highest
    differing bit (candidates share a bin, so their keys share their top bits), until the group
    fits. Candidates are read CB at a time from L2: CAP of them in registers would hold the whole
    compaction kernel to ~255 registers (bench.topk_xcompile), a quarter of its occupancy."""
    diff = (vmax ^ vmin).to(tl.float32)  # its exponent is the bit length (rounding up adds one at most)
    nbits = tl.maximum(((diff.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 126, 0)
    shift = tl.minimum((nbits + 3) // 4 * 4, 32).to(tl.int64)
    prefix = vmax >> shift
    n_grp = n_sel
    while (shift > 0) & (n_grp > left):
        counts = tl.zeros([16], tl.int32)
        for c0 in range(0, n, CB):
            ok, ukey, cidx = _candidates(cands, c0, n, CB)
            v = cidx if BY_INDEX else ukey
            sel = (ok & (ukey == tie_key)) if BY_INDEX else ok
            grp = sel & ((v >> shift) == prefix)
            counts += tl.histogram(((v >> (shift - 4)) & 15).to(tl.int32), 16, mask=grp)
        digit, n_above = _threshold(counts, left, 16)
        left -= n_above
        n_grp = tl.sum(tl.where(tl.arange(0, 16) == digit, counts, 0), 0)
        prefix = prefix * 16 + digit
        shift -= 4
    return prefix, shift, left, n_grp


@triton.jit
def _take_best(cands, st, n, need, above, lo, out_idx, out_val, CB: tl.constexpr, WRITE_VALUES: tl.constexpr):
    """The `need` best of the row's n candidates (score descending, then index ascending) to
    output slots above .. above + need - 1: a radix over the keys (their range from the
    compaction's atomics), then, where the need-th key is tied, one over the tied candidates'
    indices (the smallest win)."""
    kmax = tl.load(st + 10, cache_modifier=".cg").to(tl.uint32, bitcast=True).to(tl.int64)
    kmin = 0xFFFFFFFF - tl.load(st + 11, cache_modifier=".cg").to(tl.uint32, bitcast=True).to(tl.int64)
    prefix, shift, left, n_grp = _radix(cands, n, need, -1, kmax, kmin, n, False, CB)
    iprefix = tl.zeros([], tl.int64)
    ishift = tl.full([], 32, tl.int64)  # (index complement >> 32) == 0 >= 0: the whole group
    if n_grp > left:  # the group is one key (shift 0), tied: take `left` of it by index
        imax, imin, n_tied = _tied_extent(cands, n, prefix, CB)
        iprefix, ishift, ileft, in_grp = _radix(cands, n, left, prefix, imax, imin, n_tied, True, CB)
    slot0 = above
    for c0 in range(0, n, CB):
        ok, ukey, cidx = _candidates(cands, c0, n, CB)
        top = ukey >> shift
        keep = ok & ((top > prefix) | ((top == prefix) & ((cidx >> ishift) >= iprefix)))
        slot = slot0 + tl.cumsum(keep.to(tl.int32), 0) - 1
        tl.store(out_idx + slot, (0x7FFFFFFF - cidx).to(tl.int32) - lo, mask=keep)
        if WRITE_VALUES:
            key = (ukey - 2147483648).to(tl.int32)
            tl.store(out_val + slot, _score(key), mask=keep)
        slot0 += tl.sum(keep.to(tl.int32), 0)
