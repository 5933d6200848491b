"""The exact top-k of long rows in two passes over tiles (path "tiles"): the k-th largest tile
maximum bounds the k-th score from below, so only the tiles whose maximum reaches it can hold
the answer, and the full selection runs over those tiles alone.

With a row of n keys cut into tiles of TILE (aligned to the row's window start):
1. tile maxima: one read of the row, a maximum a tile ([rows, ceil(width / TILE)]), and the
   row's tile count.
2. the k largest maxima by the four-kernel selection (indexer_logits._topk_kernels) over the
   maxima; tau, the smallest of them, is the k-th largest tile maximum (-inf where the row has
   fewer than k tiles). At least k scores are >= tau (one a tile), so the k-th score is >= tau.
   That selection stops early where it can (_topk_digits._fit): where round 1's threshold bin,
   or round 2's, holds few enough maxima that all of them at or above it number at most 2k, the
   pick takes exactly those (a superset of the tiles reaching tau: the digits are monotone), and
   round 2 and the compaction skip the row. Only rows whose bin holds more (ties, an outlier's
   range) find tau itself.
3. pick, in key order: every tile whose maximum is at or above the bin (where it fitted), or
   every tile whose maximum is > tau (fewer than k of them) and the first k tiles whose maximum
   equals tau (a count per chunk of maxima, then each chunk's program writes its picks after the
   earlier chunks'). At most 2k tiles, so no overflow: a score > tau lies in a tile with a
   maximum > tau; a score equal to tau left out lies behind k picked tiles that each hold one, so
   ties at the k-th score still go to the smallest indices (where the bin fitted, every tile
   holding a score >= tau is picked).
4. gather the picked tiles' scores, in key order, into a [rows, min(2k, tiles) * TILE] buffer
   (and their range into the row's state); with MERGE the pick copies each tile as it picks it,
   and no gather kernel runs.
5. the four-kernel selection over the buffer, less its range kernel (its window: the picked
   tiles' keys, the row's partial last tile cut off at the window's end), then
6. remap: a buffer position p is key tile[p // TILE] * TILE + p % TILE of the window (with MERGE,
   written so by the second selection's compaction: no remap kernel).

Keys read: the row once (cheap: a load and a max a key), then the selection's passes over
n / TILE maxima and about k * TILE gathered keys, where the four kernels alone pass over all n
(docs/PERF.md, "Top-k: tiles"). So it pays on rows much longer than k * TILE; grids are fixed by
shapes, and no count goes to the host.
"""

from __future__ import annotations

import math

import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from ._topk_digits import _digit_take, _fit, _publish_range, _range, _range_keys, _start, _window, _zero_state

TILE = 0           # keys a tile (a power of two); 0: tile_for(width, k)
STEP_KEYS = 2048   # keys a program reads per step in the maxima and gather kernels
PICK_BLOCK = 1024  # maxima a pick program scans per step
# Whether the selection over the maxima stops at the bin that fits the pick (_topk_digits._fit)
# instead of finding tau, the exact k-th largest maximum, in every row: a tuner axis. Either is
# exact; on the H200 it skipped ~6 us of compaction at 64 x 128K and gave about as much back to
# a second selection over ~20% more keys: level end to end (docs/PERF.md, "Top-k: the first
# selection stops at the bin that fits").
FIT = True
# Whether the path's own five kernels launch as programmatic dependent launches (each waits for the
# kernel before it), as the four kernels' last three do: a tuner axis. Timed on the H200 (docs/PERF.md,
# "Top-k: the first selection stops at the bin that fits"): -1 us at 64 x 128K, level on a prefill block.
OWN_PDL = False
# Whether the pick copies each tile's scores as it picks it (topk_tile_pick_gather_kernel) and the second
# selection's compaction writes keys (_topk_kernels.topk_compact_remap_kernel), so that neither the
# gather nor the remap kernel is launched: ten launches, not twelve. Timed on the H200 it loses (+6.6 us
# at 64 x 128K, +164 us on a 102 x 1M prefill block; not profiled, the likely cause: every pick step
# issues its [step, TILE] masked copy whether or not its tiles are picked, a full read's instructions,
# where the gather reads only the picked list), so it is off and the tuner does not try it; kept for
# the A/B (docs/perf_logs/topk_fit_h200/fit_ab.py).
MERGE = False


def tile_for(width: int, k: int) -> int:
    """The tile that balances the two selections: the first passes over width / TILE maxima, the
    second over about k * TILE keys (k to 2k tiles), so their sum is least near
    TILE = sqrt(width / k); a power of two from 8 to 64. (H200, 2048 x 1M, k 2048: tiles of 16
    and 32 timed alike, 8 slower: docs/PERF.md "Top-k: tiles".)"""
    t = max(width // max(k, 1), 1) ** 0.5
    return min(64, max(8, 1 << max(0, round(math.log2(t)))))


def tiles_for(width: int, tile: int) -> int:
    """Tile maxima a row of `width` keys can have (the window is at most the width)."""
    return -(-width // tile)


def picked_for(width: int, k: int, tile: int) -> int:
    """Tiles the pick keeps at most: 2k (fit_cap), or every tile of the row."""
    return min(2 * k, tiles_for(width, tile))


def fit_cap(k: int) -> int:
    """The most tiles the pick may take without tau (_topk_digits._fit): the buffer's 2k."""
    return 2 * k


def scratch_shapes(rows: int, width: int, k: int, tile: int, pick_chunks: int) -> list:
    """(shape, float32 or int32) of each buffer the path allocates a call beside the selection's own,
    in the launch code's order: the maxima, the tile counts, the k selected maxima's indices and
    values, the picked tiles' list, the buffer's windows, the buffer, two counts a chunk of the
    pick, tau. Every element 4 bytes."""
    nt, picked = tiles_for(width, tile), picked_for(width, k, tile)
    return [((rows, nt), True), ((rows,), False), ((rows, k), False), ((rows, k), True), ((rows, picked), False),
            ((rows,), False), ((rows, picked * tile), True), ((rows, 2 * pick_chunks), False), ((rows,), True)]


def scratch_bytes(rows: int, width: int, k: int, tile: int, pick_chunks: int) -> int:
    """The bytes of scratch_shapes' buffers."""
    return 4 * sum(math.prod(shape) for shape, _ in scratch_shapes(rows, width, k, tile, pick_chunks))


@triton.jit
def topk_tile_max_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, maxima_ptr, maxima_stride,
                         ntiles_ptr, chunk_len, WINDOW: tl.constexpr, TILE_: tl.constexpr, STEP: tl.constexpr,
                         PDL: tl.constexpr = False, TRIGGER_: tl.constexpr = False):
    """Pass 1: each tile's largest score (-inf for a tile of -inf scores), and (chunk 0) the row's
    tile count. A program covers chunk_len keys of the window (a multiple of TILE_), STEP tiles a
    step. (Merging the maxima's range into the rows' state here, as the gather does for its keys,
    slowed this kernel by more than the range kernel it saved: 10.7 -> 17.9 us at 64 x 128K,
    call 8.)"""
    _start(PDL, TRIGGER_)
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    n = hi - lo
    ntiles = (n + TILE_ - 1) // TILE_
    if chunk == 0:
        tl.store(ntiles_ptr + row, ntiles)
    base = logits_ptr + row.to(tl.int64) * stride_row + lo
    out = maxima_ptr + row.to(tl.int64) * maxima_stride
    tiles = tl.arange(0, STEP)
    offs = tl.arange(0, TILE_)
    first = chunk * (chunk_len // TILE_)
    end = tl.minimum(first + chunk_len // TILE_, ntiles)
    for t0 in range(first, end, STEP):
        t = t0 + tiles
        key = t[:, None] * TILE_ + offs[None, :]
        x = tl.load(base + key, mask=(t[:, None] < end) & (key < n), other=float("-inf"))
        tl.store(out + t, tl.max(x, 1), mask=t < end)


@triton.jit
def _level(ws_ptr, row, k, ntiles, BINS_: tl.constexpr, FIT_CAP_: tl.constexpr):
    """(level, t1, t2, m, scale) of the row's selection over its maxima (_topk_digits._fit): level
    > 0 where its threshold bin holds few enough maxima that every maximum at or above it is
    picked (its compaction skipped the row), 0 where the pick goes by tau, the exact k-th
    largest maximum."""
    if FIT_CAP_ > 0:
        st = ws_ptr + row * (16 + 2 * BINS_)
        level, t1, t2, above = _fit(st, k, ntiles, FIT_CAP_, BINS_)
        m_lo, scale = _range(st, BINS_)
    else:  # the selection found tau in every row (FIT off)
        level, t1, t2 = ntiles * 0, ntiles * 0, ntiles * 0
        m_lo, scale = 0.0, 0.0
    return level, t1, t2, m_lo, scale


@triton.jit
def _taken(m, tau, level, t1, t2, m_lo, scale, BINS_: tl.constexpr):
    """The maxima picked whatever the ties: above tau (level 0), or at or above the threshold bin."""
    return tl.where(level > 0, _digit_take(m, m_lo, scale, level, t1, t2, BINS_), m > tau)


@triton.jit
def _tau(vals_ptr, vals_stride, row, k, KB: tl.constexpr):
    """The smallest of the row's k selected maxima: the k-th largest tile maximum (-inf pads
    where the row has fewer than k tiles)."""
    vrow = vals_ptr + row.to(tl.int64) * vals_stride
    kb = tl.arange(0, KB)
    tau = float("inf")
    for i0 in range(0, k, KB):
        v = tl.load(vrow + i0 + kb, mask=i0 + kb < k, other=float("inf"))
        tau = tl.minimum(tau, tl.min(v, 0))
    return tau


@triton.jit
def topk_tile_count_kernel(maxima_ptr, maxima_stride, ntiles_ptr, vals_ptr, vals_stride, k, counts_ptr, nchunks,
                           chunk_tiles, tau_ptr, ws_ptr, KB: tl.constexpr, PB: tl.constexpr, BINS_: tl.constexpr,
                           FIT_CAP_: tl.constexpr, PDL: tl.constexpr = False):
    """Pass 3a: per chunk of a row's maxima, how many are taken outright and how many equal tau
    (counts [rows, 2 * nchunks]: the first, then the second), so that 3b's programs pick in key
    order without a serial scan of the row; chunk 0 keeps tau for them. Taken outright: those
    above tau, or, where the selection's threshold bin fit (_level), those at or above that bin."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    ntiles = tl.load(ntiles_ptr + row)
    level, t1, t2, m_lo, scale = _level(ws_ptr, row, k, ntiles, BINS_, FIT_CAP_)
    tau = float("inf")
    if level == 0:
        tau = _tau(vals_ptr, vals_stride, row, k, KB)
    if chunk == 0:
        tl.store(tau_ptr + row, tau)
    mrow = maxima_ptr + row.to(tl.int64) * maxima_stride
    pb = tl.arange(0, PB)
    first = chunk * chunk_tiles
    end = tl.minimum(first + chunk_tiles, ntiles)
    gt = 0
    eq = 0
    for j0 in range(first, end, PB):
        j = j0 + pb
        m = tl.load(mrow + j, mask=j < end, other=float("-inf"))
        gt += tl.sum(((j < end) & _taken(m, tau, level, t1, t2, m_lo, scale, BINS_)).to(tl.int32), 0)
        eq += tl.sum(((level == 0) & (j < end) & (m == tau)).to(tl.int32), 0)
    crow = counts_ptr + row.to(tl.int64) * 2 * nchunks
    tl.store(crow + chunk, gt)
    tl.store(crow + nchunks + chunk, eq)


@triton.jit
def topk_tile_pick_kernel(maxima_ptr, maxima_stride, ntiles_ptr, tau_ptr, k, counts_ptr, nchunks,
                          chunk_tiles, list_ptr, list_stride, cand_len_ptr, lo_ptr, hi_ptr, len_ptr, next_n, width,
                          ws_ptr, WINDOW: tl.constexpr, TILE_: tl.constexpr, PB: tl.constexpr, NCP: tl.constexpr,
                          BINS_: tl.constexpr, FIT_CAP_: tl.constexpr, PDL: tl.constexpr = False):
    """Pass 3b: each program picks its chunk's tiles (module docstring) into the list at the
    slots the chunks before it took (from 3a's counts); the program holding the row's last tile
    (chunk 0 for an empty row) writes the buffer's window: picked tiles x TILE_, less the part of
    the last tile past the window's end."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    _pick(maxima_ptr, maxima_stride, ntiles_ptr, tau_ptr, k, counts_ptr, nchunks, chunk_tiles, list_ptr, list_stride,
          cand_len_ptr, lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, maxima_ptr, 0, maxima_ptr, 0, ws_ptr,
          WINDOW, TILE_, PB, NCP, BINS_, FIT_CAP_, False)


@triton.jit
def topk_tile_pick_gather_kernel(maxima_ptr, maxima_stride, ntiles_ptr, tau_ptr, k, counts_ptr, nchunks,
                                 chunk_tiles, list_ptr, list_stride, cand_len_ptr, lo_ptr, hi_ptr, len_ptr, next_n,
                                 width, ws_ptr, logits_ptr, stride_row, buf_ptr, buf_stride, ws_second_ptr,
                                 WINDOW: tl.constexpr, TILE_: tl.constexpr, PB: tl.constexpr, NCP: tl.constexpr,
                                 BINS_: tl.constexpr, FIT_CAP_: tl.constexpr, PDL: tl.constexpr = False):
    """Passes 3b and 4 in one (setting MERGE): as each program picks a tile it copies the tile's
    scores to the buffer at the tile's slot, and it merges the range of the keys it copied into the
    second selection's state (`ws_second_ptr`), as the gather kernel would; the first selection's
    state (`ws_ptr`) is zeroed by the second selection's compaction instead (MERGE's other half,
    _topk_kernels.topk_compact_remap_kernel), after every pick program has read it.
    PB: maxima a step, few enough that a step's [PB, TILE_] scores sit in registers."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    _pick(maxima_ptr, maxima_stride, ntiles_ptr, tau_ptr, k, counts_ptr, nchunks, chunk_tiles, list_ptr, list_stride,
          cand_len_ptr, lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, logits_ptr, stride_row, buf_ptr, buf_stride,
          ws_second_ptr, WINDOW, TILE_, PB, NCP, BINS_, FIT_CAP_, True)


@triton.jit
def _pick(maxima_ptr, maxima_stride, ntiles_ptr, tau_ptr, k, counts_ptr, nchunks, chunk_tiles, list_ptr, list_stride,
          cand_len_ptr, lo_ptr, hi_ptr, len_ptr, next_n, width, ws_ptr, logits_ptr, stride_row, buf_ptr, buf_stride,
          ws_second_ptr, WINDOW: tl.constexpr, TILE_: tl.constexpr, PB: tl.constexpr, NCP: tl.constexpr,
          BINS_: tl.constexpr, FIT_CAP_: tl.constexpr, GATHER: tl.constexpr):
    """The pick of one chunk of a row's maxima (topk_tile_pick_kernel), and with GATHER the copy of
    each picked tile's scores (topk_tile_pick_gather_kernel)."""
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    ntiles = tl.load(ntiles_ptr + row)
    tau = tl.load(tau_ptr + row)
    level, t1, t2, m_lo, scale = _level(ws_ptr, row, k, ntiles, BINS_, FIT_CAP_)
    crow = counts_ptr + row.to(tl.int64) * 2 * nchunks
    c = tl.arange(0, NCP)
    gts = tl.load(crow + c, mask=c < nchunks, other=0)
    eqs = tl.load(crow + nchunks + c, mask=c < nchunks, other=0)
    eq_before = tl.cumsum(eqs, 0) - eqs
    takes = gts + tl.minimum(eqs, tl.maximum(k - eq_before, 0))  # the first k ties in key order
    taken = tl.sum(tl.where(c < chunk, takes, 0), 0)
    ties = tl.sum(tl.where(c < chunk, eqs, 0), 0)
    mrow = maxima_ptr + row.to(tl.int64) * maxima_stride
    lrow = list_ptr + row.to(tl.int64) * list_stride
    pb = tl.arange(0, PB)
    first = chunk * chunk_tiles
    end = tl.minimum(first + chunk_tiles, ntiles)
    last = 0
    if GATHER:
        lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
        base = logits_ptr + row.to(tl.int64) * stride_row + lo
        brow = buf_ptr + row.to(tl.int64) * buf_stride
        kmax = tl.full([PB], -2147483647 - 1, tl.int32)
        kmin = tl.full([PB], 2147483647, tl.int32)
        copied = 0
    for j0 in range(first, end, PB):
        j = j0 + pb
        ok = j < end
        m = tl.load(mrow + j, mask=ok, other=float("-inf"))
        eq = ((level == 0) & ok & (m == tau)).to(tl.int32)
        take = (ok & _taken(m, tau, level, t1, t2, m_lo, scale, BINS_)) | ((eq > 0) & (ties + tl.cumsum(eq, 0) - eq < k))
        t32 = take.to(tl.int32)
        tl.store(lrow + taken + tl.cumsum(t32, 0) - t32, j, mask=take)
        if GATHER:  # the tiles' scores to their slots of the buffer (the list's slots, as just stored)
            kmin, kmax = _copy_tiles(base, brow, j, taken + tl.cumsum(t32, 0) - t32, take, hi - lo, kmin, kmax,
                                     TILE_)
            copied += tl.sum(t32, 0)
        taken += tl.sum(t32, 0)
        ties += tl.sum(eq, 0)
        last = tl.maximum(last, tl.max(tl.where(take & (j == ntiles - 1), 1, 0), 0))
    if GATHER:
        if copied > 0:  # the workspace's row: 16 state words, then the two rounds' histograms
            _publish_range(ws_second_ptr + row * (16 + 2 * BINS_), tl.min(kmin, 0), tl.max(kmax, 0))
    if (first < ntiles) & (ntiles <= first + chunk_tiles) | (ntiles == 0) & (chunk == 0):
        lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
        total = tl.sum(takes, 0)
        tl.store(cand_len_ptr + row, total * TILE_ - tl.where(last > 0, ntiles * TILE_ - (hi - lo), 0))


@triton.jit
def topk_tile_gather_kernel(logits_ptr, stride_row, lo_ptr, hi_ptr, len_ptr, next_n, width, list_ptr, list_stride,
                            cand_len_ptr, buf_ptr, buf_stride, ws_ptr, ws_first_ptr, slots_per_program,
                            WINDOW: tl.constexpr, TILE_: tl.constexpr, STEP: tl.constexpr, BINS_: tl.constexpr,
                            PDL: tl.constexpr = False):
    """Pass 4: the picked tiles' scores into the buffer, tile after tile in pick order, and their
    key range into the row's state (the range kernel's work for the second selection; the first
    left the state zero). A program covers slots_per_program picked tiles; programs past the
    row's count return at once."""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    if chunk == 0:  # the selection over the maxima is done with its state (the pick read it last): zero it
        _zero_state(ws_first_ptr + row * (16 + 2 * BINS_), BINS_)
    lo, hi = _window(row, lo_ptr, hi_ptr, len_ptr, next_n, width, WINDOW)
    n = hi - lo
    count = (tl.load(cand_len_ptr + row) + TILE_ - 1) // TILE_
    first = chunk * slots_per_program
    end = tl.minimum(first + slots_per_program, count)
    base = logits_ptr + row.to(tl.int64) * stride_row + lo
    lrow = list_ptr + row.to(tl.int64) * list_stride
    brow = buf_ptr + row.to(tl.int64) * buf_stride
    slots = tl.arange(0, STEP)
    kmax = tl.full([STEP], -2147483647 - 1, tl.int32)
    kmin = tl.full([STEP], 2147483647, tl.int32)
    for s0 in range(first, end, STEP):
        s = s0 + slots
        ok = s < end
        tile = tl.load(lrow + s, mask=ok, other=0)
        kmin, kmax = _copy_tiles(base, brow, tile, s, ok, n, kmin, kmax, TILE_)
    if end > first:  # the workspace's row: 16 state words, then the two rounds' histograms
        _publish_range(ws_ptr + row * (16 + 2 * BINS_), tl.min(kmin, 0), tl.max(kmax, 0))


@triton.jit
def _copy_tiles(base, brow, tile, slot, ok, n, kmin, kmax, TILE_: tl.constexpr):
    """Tiles `tile` of the window (base: its first key; n keys) to their buffer slots (-inf past the
    window's end) where `ok`, the gather's step and the pick's with MERGE; returns the running
    (smallest finite, largest) keys a tile, merged with the copied scores'."""
    offs = tl.arange(0, TILE_)
    key = tile[:, None] * TILE_ + offs[None, :]
    inside = ok[:, None] & (key < n)
    x = tl.load(base + key, mask=inside, other=float("-inf"))
    tl.store(brow + slot[:, None] * TILE_ + offs[None, :], x, mask=ok[:, None])
    lo_key, hi_key = _range_keys(x, inside)
    kmax = tl.maximum(kmax, tl.max(hi_key, 1))
    kmin = tl.minimum(kmin, tl.min(lo_key, 1))
    return kmin, kmax


@triton.jit
def topk_tile_remap_kernel(idx_ptr, idx_stride, list_ptr, list_stride, k, TILE_: tl.constexpr, KB: tl.constexpr,
                           PDL: tl.constexpr = False):
    """Pass 6: buffer positions to the window's key indices, in place (-1 stays -1). (With MERGE the
    second selection's compaction writes keys itself: _topk_kernels.topk_compact_remap_kernel.)"""
    if PDL:  # a programmatic dependent launch: wait for the kernel before (its writes) first
        tl_cuda.gdc_wait()
    row = tl.program_id(0)
    i = tl.program_id(1) * KB + tl.arange(0, KB)
    irow = idx_ptr + row.to(tl.int64) * idx_stride
    p = tl.load(irow + i, mask=i < k, other=-1)
    ok = p >= 0
    tile = tl.load(list_ptr + row.to(tl.int64) * list_stride + p // TILE_, mask=ok, other=0)
    tl.store(irow + i, tile * TILE_ + p % TILE_, mask=ok)
