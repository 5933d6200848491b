"""The exact top-k of a few rows in one launch (path "resident"): every program of a row is resident
at once, and the four kernels' phases (range, two histogram rounds, compaction:
indexer_logits._topk_kernels, whose steps this kernel calls) run one after the other over the
program's chunk in that one kernel, the row's programs meeting at a barrier in the row's workspace
between them. A phase reads the chunk again, STEP keys a step: from L1 or L2, where the phase before
left it (a chunk held in registers through the phases took 255 registers a thread at 32 keys a
thread and spilled at more: cross-compiled, bench.topk_xcompile).

Why (docs/PERF.md, "Top-k: one launch for a few rows"): where few rows fill the GPU (decode
1 x 1M, 64 x 32K, 128 x 8K), the four kernels' selection is a chain: each kernel a grid of programs
that reads the row again, atomics into the row's histograms, and a launch boundary the next kernel
waits at (19.5 us of selection at 1 x 1M on the H200, where a read of its 4 MB of logits from L2
takes ~1 us). Here a phase boundary is one atomic arrival and a poll of one L2 word, a row's
programs only, and the chunk a program reads again is its own, in its SM's L1 where it fits.

The barrier waits for every program of the row, so every program of the grid must be resident at
once: the grid is at most the SM count of programs (rows x chunks; _topk_table.resident_shape), one
program an SM, and a program fits an SM alone whatever its registers. A shape that does not fit is
not served by this path (the tuner's space and the table's entries ask resident_shape; select_rows
refuses it). Under the interpreter, whose programs run one after another, a row of more than one
program runs the four phases as four launches (PHASE_ 1-4), the barrier's place taken by the
launch boundary; a row of one program runs as on the GPU.

Exact as the four kernels are (their mapping, digits, thresholds, candidates and overflow path, the
row's last program finishing the row and zeroing its workspace); ties at the k-th score go to the
smallest indices.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_digits import _digits, _key_range, _publish_range, _range, _threshold, _window
from ._topk_kernels import _compact, _count_d1, _thresholds

# Launch settings (the tuner's axes, _topk_table.ALLOWED["resident"]): keys a program reads (0: the
# fewest steps that keep rows x programs within the SM count: _topk_table.resident_shape), keys a step,
# warps, and the output slots by per-score atomics (False) or a prefix sum a step (True)
CHUNK = 0
STEP = 2048
NUM_WARPS = 8
SCAN_SLOTS = False
BARRIER = tl.constexpr(6)  # the row's state word its programs arrive at, once a phase (zeroed with the state)


@triton.jit
def _row_barrier(st, target):
    """Arrive at the row's barrier and wait until `target` arrivals (every program of the row, times
    the phases passed). The CTA's barrier first, so that every thread's atomics of the phase are
    ordered before the release arrival; the poll reads the word from L2 (volatile), then one acquire
    and the CTA's barrier order the next phase's reads after every program's arrival."""
    tl.debug_barrier()
    tl.atomic_add(st + BARRIER, 1, sem="release")
    seen = tl.load(st + BARRIER, volatile=True)
    while seen < target:
        seen = tl.load(st + BARRIER, volatile=True)
    tl.atomic_add(st + BARRIER, 0, sem="acquire")
    tl.debug_barrier()


@triton.jit
def topk_resident_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, k, ws_ptr, cand_ptr,
                         idx_ptr, stride_idx, val_ptr, stride_val, chunk_len,
                         WINDOW: tl.constexpr, STEP: tl.constexpr, KP: tl.constexpr, CAP_: tl.constexpr,
                         WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr, SCAN_SLOTS: tl.constexpr,
                         RANK_TILE_: tl.constexpr, PDL: tl.constexpr, PHASE_: tl.constexpr = 0):
    """Program (row, chunk) over keys [chunk * chunk_len, (chunk + 1) * chunk_len) of the row's
    window: 1 the range, 2 round 1, 3 round 2, 4 the compaction (the row's last program finishes the
    row and zeroes its workspace, the barrier word with it); PHASE_ 0 runs them all with the row's
    barrier between, PHASE_ 1-4 that phase alone (the interpreter's launches, module docstring)."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    n_prog = tl.num_programs(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    st = ws_ptr + row * (16 + 2 * BINS_)
    base = logits_ptr + row.to(tl.int64) * stride_row
    start = tl.maximum(chunk * chunk_len, lo)
    end = tl.minimum(chunk * chunk_len + chunk_len, hi)
    go = (end > start) & (hi - lo > k)  # (a window of at most k keys is the answer: no range, no rounds)
    if PHASE_ == 0 or PHASE_ == 1:
        if go:
            kmin, kmax = _key_range(base, start, end, STEP)
            _publish_range(st, kmin, kmax)
    if PHASE_ == 0:
        _row_barrier(st, n_prog)
    if PHASE_ == 0 or PHASE_ == 2:
        if go:
            m_lo, scale = _range(st, BINS_)
            counts = _count_d1(base, start, end, m_lo, scale, STEP, BINS_)
            tl.atomic_add(st + 16 + tl.arange(0, BINS_), counts, mask=counts != 0, sem="relaxed")
    if PHASE_ == 0:
        _row_barrier(st, 2 * n_prog)
    if PHASE_ == 0 or PHASE_ == 3:
        if go:
            m_lo, scale = _range(st, BINS_)
            t1, above1 = _threshold(tl.load(st + 16 + tl.arange(0, BINS_)), k, BINS_)
            offs = tl.arange(0, STEP)
            for b0 in range(start, end, STEP):
                t = b0 + offs
                m = t < end
                d1, d2 = _digits(tl.load(base + t, mask=m, other=0.0), m_lo, scale, BINS_)
                tl.atomic_add(st + 16 + BINS_ + d2, 1, mask=m & (d1 == t1), sem="relaxed")
    if PHASE_ == 0:
        _row_barrier(st, 3 * n_prog)
    if PHASE_ == 0 or PHASE_ == 4:
        m_lo, scale = _range(st, BINS_)
        t1, t2, above = _thresholds(st, k, hi - lo, BINS_)
        out_idx = idx_ptr + row.to(tl.int64) * stride_idx
        _compact(base, lo, hi, k, st, cand_ptr + row.to(tl.int64) * CAP_, out_idx,
                 val_ptr + row.to(tl.int64) * stride_val, chunk, chunk_len, m_lo, scale, t1, t2, above,
                 STEP, KP, CAP_, WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_, True, out_idx, 0)
