"""The bound path's compaction as one program a row (ROW_COMPACTION, indexer_logits._topk_bound):
topk_bound_row_compact_kernel reads the positions every count program of its row admitted (their
segments), takes the keys above the threshold bin and ranks the bin's, in place of the compaction
kernel's program a chunk.

Why: the compaction kernel runs the count's grid (1,024 programs a row at 1 x 1M, 16 at 64 x 32K),
each program reading its segment, claiming output slots with atomics on its row's counters and ending
on a third, and then its row's last program ranks the candidates: 8.4-8.9 us of the selection at
64 x 32K and 1 x 1M on an H100 (docs/PERF.md, "Top-k: the workspace, and the decode bar's cases kernel
by kernel"), where the keys it reads are a few thousand a row. Here one program a row reads them, a
tile of TT slots at a time (SB slots of each of TT // SB segments: about the keys a segment holds, so
that a row's segments take one to three tiles), and claims no slot with an atomic. (Done by the
count's last program a row instead, the tail put the count kernel at 95-234 registers, 48 without:
too few count programs an SM; so it is a launch of its own, with its own warps.)

Exact as the compaction is: the same mapping bits (the count's, from the row's state words 12 and 13),
the same threshold read off the same histogram (bin 0 read as holding k keys), the same candidates
ranked by _topk_kernels._finish (or its exact overflow path). A segment that overflowed, a row whose
threshold is bin 0 and a row of at most k keys are read from the logits instead (the chunk, the
window), as the compaction's programs read their chunks there.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_digits import _digits, _key, _threshold, _window, _zero_state
from ._topk_kernels import _finish

# Slots of the row's segments its program reads a step (a power of two), its warps, and the keys it
# reads a step where it reads the logits (an overflowed segment's chunk, a window without a bound).
TAIL_TILE = 4096
NUM_WARPS = 8
BLOCK = 1024


def tail_shape(seg_cap: int, width: int, chunk: int, k: int, tile: int = 0) -> tuple:
    """(TT, SB): the row's program's tile of slots and the slots of each segment in it: SB about the
    keys a chunk of `chunk` of a `width`-key row admits (1.4k a row: _topk_bound.seg_cap's model, at
    most the segment), a power of two, and TT = `tile` (TAIL_TILE where 0), at least SB."""
    want = max(1, min(seg_cap, -(-14 * k * chunk // (10 * max(width, 1)))))
    sb = 1 << (want - 1).bit_length()
    tt = tile or TAIL_TILE
    return max(tt, sb), sb


@triton.jit
def _classify(x, t, m, lo, m_lo, scale, t1, n_take, n_tie, out_idx, out_val, cands, CAP_: tl.constexpr,
              WRITE_VALUES: tl.constexpr, KB: tl.constexpr):
    """The keys at positions t (where m) with scores x: those above bin t1 to the output after the
    n_take already there, those in it to the candidates after n_tie (at most CAP_ kept), slots by one
    prefix sum of both counts packed in an int32 (a tile of fewer than 65,536 keys); the new counts."""
    d1, d2 = _digits(x, m_lo, scale, KB)
    take = m & (d1 > t1)
    tie = m & (d1 == t1)
    both = tl.cumsum(take.to(tl.int32) + (tie.to(tl.int32) << 16), 0)
    slot = n_take + (both & 0xFFFF) - 1
    tl.store(out_idx + slot, t - lo, mask=take)
    if WRITE_VALUES:
        tl.store(out_val + slot, x, mask=take)
    cslot = n_tie + (both >> 16) - 1
    packed = (_key(x).to(tl.int64) << 32) | (0x7FFFFFFF - t).to(tl.int64)
    tl.store(cands + cslot, packed, mask=tie & (cslot < CAP_))
    return n_take + tl.sum(take.to(tl.int32), 0), n_tie + tl.sum(tie.to(tl.int32), 0)


@triton.jit
def _classify_keys(base, start, end, lo, m_lo, scale, t1, n_take, n_tie, out_idx, out_val, cands,
                   BLOCK: tl.constexpr, CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr, KB: tl.constexpr):
    """_classify over the scores base[start:end], read from the logits a block at a time."""
    offs = tl.arange(0, BLOCK)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        x = tl.load(base + t, mask=m, other=0.0)
        n_take, n_tie = _classify(x, t, m, lo, m_lo, scale, t1, n_take, n_tie, out_idx, out_val, cands, CAP_,
                                  WRITE_VALUES, KB)
    return n_take, n_tie


@triton.jit
def _finish_row(base, lo, hi, k, st, st_first, seg_row, seg_cap, counts_row, nch, chunk_len, cands, out_idx,
                out_val, BLOCK: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr,
                BINS_: tl.constexpr, RANK_TILE_: tl.constexpr, TT: tl.constexpr, SB: tl.constexpr):
    """The row's compaction (module docstring), after its count: `seg_row` / `counts_row` the row's nch
    segments of seg_cap slots and their counts; BINS_ the maxima's bins (the keys' histogram has
    2 * BINS_). Leaves both of the row's states zero."""
    KB: tl.constexpr = 2 * BINS_
    # the count's mapping, bit for bit (zero where the row holds at most k keys: all of them taken then)
    m_lo = tl.load(st + 12, cache_modifier=".cg").to(tl.float32, bitcast=True)
    scale = tl.load(st + 13, cache_modifier=".cg").to(tl.float32, bitcast=True)
    bins = tl.arange(0, KB)
    t1, above = _threshold(tl.where(bins == 0, k, tl.load(st + 16 + bins, cache_modifier=".cg")), k, KB)
    total = hi - lo
    whole = total <= k  # the whole window is the answer
    t1 = tl.where(whole, -1, t1)
    above = tl.where(whole, total, above)
    n_take = above * 0
    n_tie = above * 0
    if t1 > 0:  # every key taken or a candidate is in a segment, unless its segment overflowed
        j = tl.arange(0, TT)
        for c0 in range(0, nch, TT // SB):
            c = c0 + j // SB
            s = j % SB
            cnt = tl.load(counts_row + c, mask=c < nch, other=0, cache_modifier=".cg")
            n_c = tl.where(cnt <= seg_cap, cnt, 0)
            for s0 in range(0, tl.max(n_c, 0), SB):
                m = s0 + s < n_c
                t = tl.load(seg_row + c.to(tl.int64) * seg_cap + s0 + s, mask=m, other=0, cache_modifier=".cg")
                x = tl.load(base + t, mask=m, other=0.0)
                n_take, n_tie = _classify(x, t, m, lo, m_lo, scale, t1, n_take, n_tie, out_idx, out_val, cands,
                                          CAP_, WRITE_VALUES, KB)
            # a segment that overflowed (more admitted keys than slots): its chunk's keys from the logits
            over = tl.where((c < nch) & (cnt > seg_cap), c, nch)
            first = tl.min(over, 0)
            while first < nch:
                n_take, n_tie = _classify_keys(base, tl.maximum(first * chunk_len, lo),
                                               tl.minimum(first * chunk_len + chunk_len, hi), lo, m_lo, scale, t1,
                                               n_take, n_tie, out_idx, out_val, cands, BLOCK, CAP_, WRITE_VALUES, KB)
                over = tl.where(over == first, nch, over)
                first = tl.min(over, 0)
    else:  # bin 0's keys are candidates, or every key is taken: the window from the logits
        n_take, n_tie = _classify_keys(base, lo, hi, lo, m_lo, scale, t1, n_take, n_tie, out_idx, out_val, cands,
                                       BLOCK, CAP_, WRITE_VALUES, KB)
    tl.store(st + 9, n_tie)  # (_finish reads the candidates' count there, and the candidates, after the barrier)
    tl.debug_barrier()  # every thread's outputs and candidates, visible to the threads that rank them
    _finish(base, lo, hi, k, st, cands, out_idx, out_val, m_lo, scale, t1, -1, above, BLOCK, KP, CAP_,
            WRITE_VALUES, KB, RANK_TILE_)
    tl.debug_barrier()  # (the state read by every thread above before any thread zeroes it)
    _zero_state(st, BINS_)
    _zero_state(st_first, BINS_)


@triton.jit
def topk_bound_row_compact_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr,
                                  ws_first_ptr, cand_ptr, idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                                  seg_ptr, seg_cap, counts_ptr, nch, WINDOW: tl.constexpr, BLOCK: tl.constexpr,
                                  KP: tl.constexpr, CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr,
                                  BINS_: tl.constexpr, RANK_TILE_: tl.constexpr, TT: tl.constexpr,
                                  SB: tl.constexpr, PDL: tl.constexpr):
    """Step 4 of the bound path with ROW_COMPACTION: a program a row (grid (rows,)), its count's nch
    segments and counts at seg_ptr / counts_ptr (_topk_bound.topk_bound_count_kernel's, SEGMENTS)."""
    if PDL:  # a programmatic dependent launch: wait for the count (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    words = row * (16 + 2 * BINS_)
    _finish_row(logits_ptr + row.to(tl.int64) * stride_row, lo, hi, k, ws_ptr + words, ws_first_ptr + words,
                seg_ptr + (row * nch).to(tl.int64) * seg_cap, seg_cap, counts_ptr + row * nch, nch, chunk_len,
                cand_ptr + row.to(tl.int64) * CAP_, idx_ptr + row.to(tl.int64) * stride_idx,
                val_ptr + row.to(tl.int64) * stride_val, BLOCK, KP, CAP_, WRITE_VALUES, BINS_, RANK_TILE_, TT, SB)
