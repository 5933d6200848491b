"""The exact top-k of a few rows in one launch (path "resident"): every program of a row is resident
at once, and the four kernels' phases (range, two histogram rounds, compaction:
indexer_logits._topk_kernels, whose steps this kernel calls) run one after the other over the
program's chunk in that one kernel, the row's programs meeting at a barrier in the row's workspace
between them. A chunk of one step (HOLD_) is read once and held in registers through the phases
(8,192 keys at 16 warps: ~100 registers a thread, no spill; 32 keys a thread took 255 and more
spilled: bench.topk_xcompile); a longer chunk is read again each phase, STEP keys a step, from L1
or L2 where the phase before left it.

Why (docs/PERF.md, "Top-k: one launch for a few rows"): where few rows fill the GPU (decode
1 x 1M, 64 x 32K, 128 x 8K), the four kernels' selection is a chain: each kernel a grid of programs
that reads the row again, atomics into the row's histograms, and a launch boundary the next kernel
waits at (19.5 us of selection at 1 x 1M on the H200, where a read of its 4 MB of logits from L2
takes ~1 us). Here a phase boundary is one atomic arrival and a poll of one L2 word, a row's
programs only, and the chunk a program reads again is its own, in its SM's L1 where it fits.

The barrier waits for every program of the row, so every program of the grid must be resident at
once: the grid is at most the SM count of programs (rows x chunks; _topk_table.resident_shape), one
program an SM, and a program fits an SM alone whatever its registers; and it is a cooperative launch,
which the driver starts only with all of it resident (another stream's grid holding SMs cannot leave
a row waiting for programs that never start). A shape that does not fit is not served by this path
(the tuner's space and the table's entries ask resident_shape; select_rows serves it by the four
kernels). Under the interpreter, whose programs run one after another, a row of more than one
program runs the four phases as four launches (PHASE_ 1-4), the barrier's place taken by the
launch boundary; a row of one program runs as on the GPU.

Measured (an H100, the H200 not lent; docs/PERF.md "Top-k: one launch for a few rows"): exact, and
slower than the serving choice at every shape timed: 1 x 1M 28.4 us against the four kernels' 23.8
(the decode call less the logits, tune-topk's trials), and the selection alone 128 x 8K 23.9 against
the row path's 15.1, 64 x 32K 38.0 against the bound path's 26.0. One program an SM leaves most of an SM idle where the four kernels run eight: the chain of
launches was not the whole cost. It stays a tuner axis (tuner.topk_tune.space: three settings where
it fits), chosen only where it times faster.

Exact as the four kernels are (their mapping, digits, thresholds, candidates and overflow path, the
row's last program finishing the row and zeroing its workspace); ties at the k-th score go to the
smallest indices.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_digits import (_digits, _key, _key_range, _publish_range, _range, _range_keys, _threshold, _window,
                           _zero_state)
from ._topk_kernels import _compact, _count_d1, _finish, _thresholds
from ._topk_table import RESIDENT_STEP

# Launch settings (the tuner's axes, _topk_table.ALLOWED["resident"]): keys a program reads (0: the
# fewest steps that keep rows x programs within the SM count: _topk_table.resident_shape), keys a step,
# warps, and the output slots by per-score atomics (False) or a prefix sum a step (True). The best of
# what was timed (an H100, docs/PERF.md "Top-k: one launch for a few rows"): 8,192 keys a step at 16
# warps (a 1 x 1M chunk held), no PDL; 8 warps lost 7-15 us at 128 x 8K and 64 x 32K (0.6 us
# ahead at 1 x 1M).
CHUNK = 0
STEP = RESIDENT_STEP  # (_topk_table keeps it, for the entries that leave STEP out, without importing triton)
NUM_WARPS = 16
SCAN_SLOTS = False
# Not a programmatic dependent launch: its programs (up to half an SM's registers each) would sit on
# the SMs while the logits kernel runs; timed at 1 x 1M, PDL on (None: where CUDA has it; it launched
# cooperative and exact) cost 0.2-0.6 us, so the tuner tries it off only
PDL = False
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
                         RANK_TILE_: tl.constexpr, PDL: tl.constexpr, PHASE_: tl.constexpr = 0,
                         HOLD_: tl.constexpr = False):
    """Program (row, chunk) over keys [chunk * chunk_len, (chunk + 1) * chunk_len) of the row's
    window: 1 the range, 2 round 1, 3 round 2, 4 the compaction (the row's last program finishes the
    row and zeroes its workspace, the barrier word with it); PHASE_ 0 runs them all with the row's
    barrier between, PHASE_ 1-4 that phase alone (the interpreter's launches, module docstring).
    HOLD_ (a chunk of at most STEP keys): the chunk is read once and held in registers through the
    phases, where each phase would otherwise read it again a step at a time."""
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
    if HOLD_:
        t_h = chunk * chunk_len + tl.arange(0, STEP)
        m_h = (t_h >= start) & (t_h < end)
        x_h = tl.load(base + t_h, mask=m_h, other=0.0)
    if PHASE_ == 0 or PHASE_ == 1:
        if go:
            if HOLD_:
                kmin_h, kmax_h = _range_keys(x_h, m_h)
                kmin, kmax = tl.min(kmin_h, 0), tl.max(kmax_h, 0)
            else:
                kmin, kmax = _key_range(base, start, end, STEP)
            _publish_range(st, kmin, kmax)
    if PHASE_ == 0:
        _row_barrier(st, n_prog)
    if PHASE_ == 0 or PHASE_ == 2:
        if go:
            m_lo, scale = _range(st, BINS_)
            if HOLD_:
                d1, d2 = _digits(x_h, m_lo, scale, BINS_)
                counts = tl.histogram(d1, BINS_, mask=m_h)
            else:
                counts = _count_d1(base, start, end, m_lo, scale, STEP, BINS_)
            tl.atomic_add(st + 16 + tl.arange(0, BINS_), counts, mask=counts != 0, sem="relaxed")
    if PHASE_ == 0:
        _row_barrier(st, 2 * n_prog)
    if PHASE_ == 0 or PHASE_ == 3:
        if go:
            m_lo, scale = _range(st, BINS_)
            t1, above1 = _threshold(tl.load(st + 16 + tl.arange(0, BINS_)), k, BINS_)
            if HOLD_:
                d1, d2 = _digits(x_h, m_lo, scale, BINS_)
                tl.atomic_add(st + 16 + BINS_ + d2, 1, mask=m_h & (d1 == t1), sem="relaxed")
            else:
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
        cands = cand_ptr + row.to(tl.int64) * CAP_
        out_val = val_ptr + row.to(tl.int64) * stride_val
        if HOLD_:
            _compact_held(x_h, t_h, m_h, base, lo, hi, k, st, cands, out_idx, out_val, n_prog, m_lo, scale, t1, t2,
                          above, KP, CAP_, WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_)
        else:
            _compact(base, lo, hi, k, st, cands, out_idx, out_val, chunk, chunk_len, m_lo, scale, t1, t2, above,
                     STEP, KP, CAP_, WRITE_VALUES, BINS_, SCAN_SLOTS, RANK_TILE_, True, out_idx, 0)


@triton.jit
def _compact_held(x, t, m, base, lo, hi, k, st, cands, out_idx, out_val, n_prog, m_lo, scale, t1, t2, above,
                  KP: tl.constexpr, CAP_: tl.constexpr, WRITE_VALUES: tl.constexpr, BINS_: tl.constexpr,
                  SCAN_SLOTS: tl.constexpr, RANK_TILE_: tl.constexpr):
    """Phase 4 over a chunk held in registers: _topk_kernels._compact's step for one block (scores
    above (t1, t2) to the output, those in it to the candidates), then the row's last program
    finishes the row (_topk_kernels._finish) and zeroes its workspace. The slot claims repeat
    _compact's loop body rather than share a helper with it: moved into one, the four kernels'
    compaction compiled to other PTX (bench.topk_xcompile), which the tuned tables were not timed with."""
    d1, d2 = _digits(x, m_lo, scale, BINS_)
    take = m & ((d1 > t1) | ((d1 == t1) & (d2 > t2)))
    tie = m & (d1 == t1) & (d2 == t2)
    packed = (_key(x).to(tl.int64) << 32) | (0x7FFFFFFF - t).to(tl.int64)
    if SCAN_SLOTS:  # one atomic a program, slots by a prefix sum over the chunk
        n_take = tl.sum(take.to(tl.int32), 0)
        if n_take > 0:
            slot = tl.atomic_add(st + 8, n_take, sem="relaxed") + tl.cumsum(take.to(tl.int32), 0) - 1
            tl.store(out_idx + slot, t - lo, mask=take)
            if WRITE_VALUES:
                tl.store(out_val + slot, x, mask=take)
        n_tie = tl.sum(tie.to(tl.int32), 0)
        if n_tie > 0:
            slot = tl.atomic_add(st + 9, n_tie, sem="relaxed") + tl.cumsum(tie.to(tl.int32), 0) - 1
            tl.store(cands + slot, packed, mask=tie & (slot < CAP_))
    else:  # one atomic a selected score
        slot = tl.atomic_add(st + 8 + tl.zeros_like(t), 1, mask=take, sem="relaxed")
        tl.store(out_idx + slot, t - lo, mask=take)
        if WRITE_VALUES:
            tl.store(out_val + slot, x, mask=take)
        slot = tl.atomic_add(st + 9 + tl.zeros_like(t), 1, mask=tie, sem="relaxed")
        tl.store(cands + slot, packed, mask=tie & (slot < CAP_))
    done = tl.atomic_add(st + 7, 1)
    if done == n_prog - 1:
        _finish(base, lo, hi, k, st, cands, out_idx, out_val, m_lo, scale, t1, t2, above,
                1024, KP, CAP_, WRITE_VALUES, BINS_, RANK_TILE_)
        _zero_state(st, BINS_)
