"""Each top-k selection path's launches over a block of logits rows (indexer_logits._topk_select
decides which path serves a call and with which settings, then calls _PATH_CODE[path]): the four
kernels' (rounds), the two kernels' (fused), the one program a row's (row), the two-pass paths over
tile maxima (tiles, bound) with their buffers, and the one-launch path (resident). Grids and chunking
come from shapes and the SM count only (_topk_launch)."""

from __future__ import annotations

from typing import Optional

import torch

from . import _api, _topk_table
from ._checks import check_tile_maxima
from ._tables import interpreting
from ._topk_launch import (WINDOW_LIMIT, _launch_options, _launch_setup, _pdl, _window_args, bound_count_kernels,
                           bound_kernels, chunk_size, fused_kernels, kernels, resident_kernels, row_kernels,
                           tiles_kernels)


def _launch_rounds(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch=(),
                   range_done: bool = False, fit_cap: int = 0, remap=None) -> None:
    """The four-kernel path (indexer_logits._topk_kernels): range, two histogram rounds, compaction
    (without the range kernel where the kernel before merged the rows' ranges: `range_done`; with
    `fit_cap`, round 2 and the compaction skip the rows whose threshold bin holds few enough
    scores, and the rows' state is left for the caller to zero: _topk_digits._fit; with `remap`,
    (tiles list, tile, first state), the tiles path's compaction that writes keys)."""
    kn = kernels()
    BINS, BLOCK_ = s["BINS"], s["BLOCK"]
    grid, chunk, window_args, pdl, options = _launch_setup(logits, indices, lo, hi, lens, next_n, s)
    trigger = _trigger(s, pdl)
    if not range_done:
        launch(kn.topk_range_kernel, grid, *window_args, ws, chunk, WINDOW=window, BLOCK=BLOCK_, BINS_=BINS,
               PDL=False, TRIGGER_=trigger, num_warps=s["NUM_WARPS"])
    for round_ in (1, 2):
        launch(kn.topk_hist_kernel, grid, *window_args, k, ws, chunk, ROUND=round_, WINDOW=window, BLOCK=BLOCK_,
               BINS_=BINS, PDL=pdl, FIT_CAP_=fit_cap, TRIGGER_=trigger, **options)
    val = indices if values is None else values
    args = (*window_args, k, ws, cands, indices, indices.stride(0), val, val.stride(0), chunk)
    consts = dict(WINDOW=window, BLOCK=BLOCK_, KP=1 << (k - 1).bit_length(), CAP_=s["CAP"],
                  WRITE_VALUES=values is not None, BINS_=BINS, SCAN_SLOTS=s["SCAN_SLOTS"], PDL=pdl,
                  RANK_TILE_=s["RANK_TILE"], **options)
    if remap is None:
        launch(kn.topk_compact_kernel, grid, *args, FIT_CAP_=fit_cap, **consts)
    else:
        tiles, tile, ws_first = remap
        launch(kn.topk_compact_remap_kernel, grid, *args, tiles, tiles.stride(0), ws_first, REMAP_=tile, **consts)


def _trigger(s: dict, pdl: bool) -> bool:
    """Whether a path's kernels before its last let their dependent launch at their start (TRIGGER:
    griddepcontrol.launch_dependents, after their own wait), so that the next kernel's programs are
    resident, waiting at their gdc_wait, when this one ends: only where the dependents launch with PDL."""
    return bool(s.get("TRIGGER")) and pdl


def _launch_fused(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch=()) -> None:
    """The two-kernel path (indexer_logits._topk_fused): same grid, same workspace."""
    fk = fused_kernels()
    BINS, BLOCK_ = s["BINS"], s["BLOCK"]
    grid, chunk, window_args, pdl, options = _launch_setup(logits, indices, lo, hi, lens, next_n, s)
    launch(fk.topk_round1_kernel, grid, *window_args, ws, chunk, WINDOW=window, BLOCK=BLOCK_, BINS_=BINS,
           SAMPLE_=s["SAMPLE"], PDL=False, num_warps=s["NUM_WARPS"])
    val = indices if values is None else values
    launch(fk.topk_select_kernel, grid, *window_args, k, ws, cands, indices, indices.stride(0), val, val.stride(0),
           chunk, WINDOW=window, BLOCK=BLOCK_, KP=1 << (k - 1).bit_length(), CAP_=s["CAP"],
           WRITE_VALUES=values is not None, BINS_=BINS, SCAN_SLOTS=s["SCAN_SLOTS"], CB_=s["CB"], PDL=pdl, **options)


def _inline_ptx(t: torch.Tensor) -> bool:
    """Whether kernels reading `t` may take their inline-PTX forms (_topk_ptx): CUDA only, not the interpreter."""
    return t.device.type == "cuda" and not interpreting()


def _launch_row(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch=()) -> None:
    """The one-kernel path (indexer_logits._topk_row): a program a row, a candidate buffer of CAP a row."""
    rk = row_kernels()
    rows, width = logits.shape
    pdl = bool(s["PDL"]) and _pdl(logits.device)
    val = indices if values is None else values
    launch(rk.topk_row_kernel, (rows,), *_window_args(logits, indices, lo, hi, lens, next_n), k,
           indices, indices.stride(0), val, val.stride(0), cands,
           WINDOW=window, BLOCK_=s["BLOCK"], BINS_=s["BINS"] or rk.bins_for(width), CAP_=s["CAP"],
           WRITE_VALUES=values is not None, PDL=pdl, HOLD_=rk.holds(s["HOLD"], width, s["BLOCK"], s["NUM_WARPS"]),
           INLINE_=bool(s["INLINE"]) and _inline_ptx(logits),
           **_launch_options(pdl, s["NUM_WARPS"]))


def _tile(s: dict, width: int, k: int, path: str = "tiles") -> int:
    """The tiles or bound path's tile: its TILE setting, or the path's model (tile_for) where that is 0."""
    return s["TILE"] or (bound_kernels() if path == "bound" else tiles_kernels()).tile_for(width, k)


def _tiles_scratch(rows: int, width: int, k: int, s: dict, device, given: Optional[tuple] = None,
                   without_maxima: bool = False) -> tuple:
    """The tiles path's buffers, as indexer_logits._topk_tiles.scratch_shapes lists (and
    scratch_bytes counts) them; the first two (maxima, tile counts) are `given`'s where given, None
    with without_maxima (a plan whose runs are given them: _topk_select.SelectionPlan)."""
    tile = _tile(s, width, k)
    chunks = _pick_chunks(rows, tiles_kernels().tiles_for(width, tile), s)[1]
    shapes = tiles_kernels().scratch_shapes(rows, width, k, tile, chunks)
    return _buffers(shapes, rows, device, given, without_maxima)


def _buffers(shapes: list, rows: int, device, given: Optional[tuple], without_maxima: bool) -> tuple:
    """The buffers of (shape, float32 or int32) `shapes`: the first two given's (checked: tile maxima and
    counts) where given, None where without_maxima, else empty tensors."""
    if given is not None:
        check_tile_maxima(given, rows, shapes[0][0][1], device)
    return tuple(given[i] if given is not None and i < 2 else None if without_maxima and i < 2 else
                 torch.empty(shape, dtype=torch.float32 if real else torch.int32, device=device)
                 for i, (shape, real) in enumerate(shapes))


def _pick_chunks(rows: int, nt: int, s: dict) -> tuple:
    """(maxima a pick program scans, programs a row): enough to fill the GPU PROGRAMS_PER_SM times."""
    chunk = chunk_size(rows, nt, tiles_kernels().PICK_BLOCK, s["PROGRAMS_PER_SM"])
    return chunk, max(1, -(-nt // chunk))


def _launch_tiles(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch,
                  maxima_given: bool = False, range_given: bool = False) -> None:
    """The two-pass path (indexer_logits._topk_tiles): tile maxima, the four kernels over them, the
    pick (counts, then the picks), the gather (and its keys' range), three of the four kernels over
    the picked tiles' keys, the remap: twelve launches (ten with MERGE: the pick gathers, the last
    compaction remaps). The selection over the maxima keeps its state in its own workspace
    (`ws_first`), which its pick reads after it and the gather (with MERGE, the last compaction)
    zeroes; its round 2 and compaction skip the rows where round 1's bin already names at most 2k
    tiles."""
    tk = tiles_kernels()
    maxima, ntiles, sel_idx, sel_val, tiles, cand_len, buf, counts, tau, ws_first = scratch
    rows, width = logits.shape
    T = _tile(s, width, k)
    step = max(1, s["STEP_KEYS"] // T)
    win = _window_args(logits, indices, lo, hi, lens, next_n)
    pdl = _pdl(logits.device, s["OWN_PDL"])  # its own kernels as programmatic dependent launches, where set
    options = dict(_launch_options(pdl, s["NUM_WARPS"]), PDL=pdl)
    nt = tiles_kernels().tiles_for(logits.shape[1], T)  # (given maxima may be wider)
    if not maxima_given:  # (else the kernel before wrote them: select_rows' tile_maxima)
        _launch_tile_maxima(launch, s, win, window, T, maxima, ntiles, options)
    fit = tk.fit_cap(k) if s["FIT"] else 0
    _launch_rounds(launch, s, maxima, k, WINDOW_LIMIT, sel_idx, sel_val, ws_first, cands, None, None, ntiles, 1,
                   range_done=range_given, fit_cap=fit)
    kb = min(1024, 1 << (k - 1).bit_length())
    pick, nch = _pick_chunks(rows, nt, s)
    launch(tk.topk_tile_count_kernel, (rows, nch), maxima, maxima.stride(0), ntiles, sel_val, sel_val.stride(0), k,
           counts, nch, pick, tau, ws_first, KB=kb, PB=tk.PICK_BLOCK, BINS_=s["BINS"], FIT_CAP_=fit, **options)
    pick_args = (maxima, maxima.stride(0), ntiles, tau, k, counts, nch, pick, tiles, tiles.stride(0), cand_len,
                 *win[2:], ws_first)
    pick_consts = dict(WINDOW=window, TILE_=T, NCP=1 << (nch - 1).bit_length(), BINS_=s["BINS"], FIT_CAP_=fit,
                       **options)
    if s["MERGE"]:  # the pick copies the tiles it picks: no gather kernel (a step's scores in registers)
        launch(tk.topk_tile_pick_gather_kernel, (rows, nch), *pick_args, logits, logits.stride(0), buf,
               buf.stride(0), ws, PB=min(tk.PICK_BLOCK, step), **pick_consts)
    else:
        launch(tk.topk_tile_pick_kernel, (rows, nch), *pick_args, PB=tk.PICK_BLOCK, **pick_consts)
        picked = tiles.shape[1]
        per_program = chunk_size(rows, picked * T, step * T, s["PROGRAMS_PER_SM"]) // T
        launch(tk.topk_tile_gather_kernel, (rows, -(-picked // per_program)), *win, tiles, tiles.stride(0),
               cand_len, buf, buf.stride(0), ws, ws_first, per_program, WINDOW=window, TILE_=T, STEP=step,
               BINS_=s["BINS"], **options)
    remap = (tiles, T, ws_first) if s["MERGE"] else None  # the compaction writes keys: no remap kernel
    _launch_rounds(launch, s, buf, k, WINDOW_LIMIT, indices, values, ws, cands, None, None, cand_len, 1,
                   range_done=True, remap=remap)
    if not s["MERGE"]:
        launch(tk.topk_tile_remap_kernel, (rows, -(-k // kb)), indices, indices.stride(0), tiles, tiles.stride(0), k,
               TILE_=T, KB=kb, **options)


def _launch_tile_maxima(launch, s, win, window, T, maxima, ntiles, options) -> None:
    """The tiles and bound paths' first pass (topk_tile_max_kernel) over the logits of `win`
    (_window_args): STEP_KEYS keys a step, enough programs to fill the GPU PROGRAMS_PER_SM times."""
    rows, nt, step = maxima.shape[0], tiles_kernels().tiles_for(win[-1], T), max(1, s["STEP_KEYS"] // T)
    chunk = chunk_size(rows, nt * T, step * T, s["PROGRAMS_PER_SM"])
    launch(tiles_kernels().topk_tile_max_kernel, (rows, -(-nt * T // chunk)), *win, maxima, maxima.stride(0), ntiles,
           chunk, WINDOW=window, TILE_=T, STEP=step, **options)


def _count_step(s: dict) -> int:
    """Keys the bound path's count reads a step: COUNT_STEP, or the path's BLOCK where that is 0."""
    return s["COUNT_STEP"] or s["BLOCK"]


def _voters(s: dict) -> int:
    """The warps whose sub-segments the bound path's count fills by votes (COUNT_VOTE with SEGMENTS: the path's
    NUM_WARPS, over COUNT_BALLOT and COUNT_LANES), else 0."""
    return s["NUM_WARPS"] if s["COUNT_VOTE"] and s["SEGMENTS"] else 0  # (None, unresolved: off)


def _vote_pack(s: dict) -> int:
    """The keys a thread holds of a step of the voting count (its vote op takes them at once): the step over the
    program's threads; 1 where the count does not vote."""
    voters = _voters(s)
    return _count_step(s) // (32 * voters) if voters else 1


def _claims(s: dict) -> bool:
    """Whether the bound path's count claims its segment slots from a counter (COUNT_BALLOT with SEGMENTS;
    over COUNT_LANES where both are set; not with COUNT_VOTE)."""
    return bool(s["COUNT_BALLOT"] and s["SEGMENTS"]) and not _voters(s)


def _lane_rows(s: dict) -> int:
    """The sub-segments a program of the bound path's count fills (COUNT_LANES with SEGMENTS, and neither
    COUNT_BALLOT nor COUNT_VOTE: a step's rows of 32 keys), else 0: its segment's slots (a multiple of 64) split
    evenly among at most 64."""
    if not (s["COUNT_LANES"] and s["SEGMENTS"]) or _claims(s) or _voters(s):
        return 0
    step = _count_step(s)
    if step > 2048:
        raise ValueError(f"settings: COUNT_LANES reads steps of at most 2048 keys, got COUNT_STEP {s['COUNT_STEP']} "
                         f"and BLOCK {s['BLOCK']}")
    return step // 32


def _bound_shapes(rows: int, width: int, k: int, s: dict) -> tuple:
    """The shapes of the bound path's buffers (4-byte elements): its tile maxima, tile counts, and with
    SEGMENTS a segment of positions per program and their counts (none without; with COUNT_LANES the
    count's sub-segments in it, packed in place: _topk_bound_count._count_lanes; with COUNT_VOTE a
    sub-segment and a count per warp: _count_voting)."""
    nt = tiles_kernels().tiles_for(width, _tile(s, width, k, "bound"))
    chunk = chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"])
    nch = max(1, -(-width // chunk)) if s["SEGMENTS"] else 0
    cap = bound_kernels().seg_cap(k, width, chunk) if nch else 0
    lanes = _lane_rows(s)
    if _claims(s) and _count_step(s) < 32 * s["NUM_WARPS"]:  # (a key in two threads: two claims)
        raise ValueError(f"settings: COUNT_BALLOT reads steps of at least 32 keys a warp, got {_count_step(s)} "
                         f"keys and {s['NUM_WARPS']} warps")
    voters = _voters(s)
    packs = bound_count_kernels().VOTE_PACKS
    if voters and (_count_step(s) % (32 * voters) or _vote_pack(s) not in packs):  # (one vote op a step)
        raise ValueError(f"settings: COUNT_VOTE reads steps of {', '.join(map(str, packs[:-1]))} or {packs[-1]} keys "
                         f"a thread, got {_count_step(s)} keys and {voters} warps")
    if voters and cap % voters:  # (segments are whole blocks of 64 slots: never, but never silently)
        raise ValueError(f"settings: a segment of {cap} slots does not split into {voters} warps' sub-segments")
    if lanes and cap % lanes:  # (chunks are whole blocks of at least 256 keys: never, but never silently)
        raise ValueError(f"settings: a segment of {cap} slots does not split into {lanes} sub-segments")
    return (rows, nt), (rows,), (rows, nch, cap), (rows, nch, voters) if voters else (rows, nch)


def _bound_scratch(rows: int, width: int, k: int, s: dict, device, given: Optional[tuple] = None,
                   without_maxima: bool = False) -> tuple:
    """The bound path's buffers (_bound_shapes); the maxima and tile counts `given`'s where the logits
    kernel wrote them (None with without_maxima, as _tiles_scratch)."""
    shapes = [(shape, i == 0) for i, shape in enumerate(_bound_shapes(rows, width, k, s))]
    return _buffers(shapes, rows, device, given, without_maxima)


def _launch_bound(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch,
                  maxima_given: bool = False, range_given: bool = False) -> None:
    """The path bounded by the tile maxima (indexer_logits._topk_bound): the maxima, their range and
    round 1 over them in the second half of the workspace (`ws_first`), the keys' histogram above the
    bound, the compaction: five launches, three where the logits kernel wrote the maxima and range."""
    kn, bk = kernels(), bound_kernels()
    maxima, ntiles, seg, seg_counts, ws_first = scratch
    T = _tile(s, logits.shape[1], k, "bound")
    grid, chunk, window_args, pdl, options = _launch_setup(logits, indices, lo, hi, lens, next_n, s)
    trigger = _trigger(s, pdl)
    if not maxima_given:  # (else the kernel before wrote them: select_rows' tile_maxima)
        _launch_tile_maxima(launch, s, window_args, window, T, maxima, ntiles,
                            {"num_warps": s["NUM_WARPS"], "TRIGGER_": trigger})
    mgrid, mchunk, maxima_args = _launch_setup(maxima, indices, None, None, ntiles, 1, s)[:3]
    consts = dict(BLOCK=s["BLOCK"], BINS_=s["BINS"], PDL=pdl, **options)
    if not range_given:
        launch(kn.topk_range_kernel, mgrid, *maxima_args, ws_first, mchunk, WINDOW=WINDOW_LIMIT, TRIGGER_=trigger,
               **consts)
    launch(kn.topk_hist_kernel, mgrid, *maxima_args, k, ws_first, mchunk, ROUND=1, WINDOW=WINDOW_LIMIT,
           TRIGGER_=trigger, EARLY_=bool(s["COUNT_EARLY"]), **consts)
    segs = (seg, seg.shape[2], seg_counts) if s["SEGMENTS"] else (ws, 0, ws)  # (never read without SEGMENTS)
    lanes = _lane_rows(s)
    ballot = _claims(s)
    voters = _voters(s)
    cuda = _inline_ptx(logits)
    asm = (lanes > 0 or ballot or voters > 0) and cuda
    inline = bool(s["COUNT_INLINE"]) and cuda and not (lanes or ballot or voters)
    # (the sub-segments' slots as a power of two: the registers the count packs them through)
    sub = {"SUB_P2": min(1 << (max(1, seg.shape[2] // lanes) - 1).bit_length(), bk.SUB_SLOTS // lanes)} if lanes else {}
    launch(bound_count_kernels().topk_bound_count_kernel, grid, *window_args, k, -(-k // T), ws, ws_first, chunk,
           *segs, WINDOW=window, MARGIN_=bk.MARGIN, SEG_=s["SEGMENTS"], PREFETCH_=s["COUNT_PREFETCH"],
           LANES_=lanes > 0, ASM_=asm, TRIGGER_=trigger, BALLOT_=ballot, INLINE_=inline,
           EARLY_=bool(s["COUNT_EARLY"]), VOTE_=voters, PACK_=_vote_pack(s), **sub,
           **dict(consts, BLOCK=_count_step(s)))
    val = indices if values is None else values
    # a compaction program a group of the count's programs (COMPACT_GROUP): their segments, one after another,
    # read as one list of sub-segments (a count program's, or a count warp's) with their counts
    group = bk.compact_group(s["COMPACT_GROUP"], grid[1], voters)
    if s["SEGMENTS"] and group > 1:
        segs, voters = (seg, group * seg.shape[2], seg_counts), group * max(voters, 1)
    launch(bk.topk_bound_compact_kernel, (grid[0], grid[1] // group), *window_args, k, ws, ws_first, cands, indices,
           indices.stride(0), val, val.stride(0), chunk * group, *segs, WINDOW=window, KP=1 << (k - 1).bit_length(),
           CAP_=s["CAP"], WRITE_VALUES=values is not None, SCAN_SLOTS=s["SCAN_SLOTS"], RANK_TILE_=s["RANK_TILE"],
           SEG_=s["SEGMENTS"], EARLY_=bool(s["COMPACT_EARLY"]) and s["SEGMENTS"], VOTE_=voters, **consts)


def _resident_chunk(rows: int, width: int, s: dict, device) -> Optional[int]:
    """_topk_table.resident_shape on this device: its own SM count (not set_num_sms's: the programs
    must fit the SMs there are); under the interpreter, whose programs run one after another, any
    grid (a program a step where CHUNK is 0; a row of several programs then runs phase by phase:
    _launch_resident)."""
    if device.type == "cuda":
        return _topk_table.resident_shape(rows, width, _api._device_sms(device.index), s["CHUNK"], s["STEP"])
    chunk = s["CHUNK"] or s["STEP"]
    return _topk_table.resident_shape(rows, width, rows * -(-width // chunk), chunk, s["STEP"])


def _launch_resident(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch=()) -> None:
    """The one-launch path (indexer_logits._topk_resident): a program a row and chunk, all resident,
    meeting at the row's barrier between phases; under the interpreter a row of several programs
    runs its four phases as four launches (its programs run one after another there)."""
    rows, width = logits.shape
    chunk = _resident_chunk(rows, width, s, logits.device)
    grid = (rows, -(-width // chunk))
    pdl = _pdl(logits.device, s["PDL"])
    val = indices if values is None else values
    phases = (1, 2, 3, 4) if interpreting() and grid[1] > 1 else (0,)
    # a cooperative launch: the driver starts the grid only with every program resident at once (else
    # CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), so another stream's grid holding SMs cannot leave a
    # row's programs waiting at the barrier for programs that never start
    options = {**_launch_options(pdl, s["NUM_WARPS"]), **({} if interpreting() else {"launch_cooperative_grid": True})}
    for phase in phases:
        launch(resident_kernels().topk_resident_kernel, grid, *_window_args(logits, indices, lo, hi, lens, next_n), k,
               ws, cands, indices, indices.stride(0), val, val.stride(0), chunk, WINDOW=window, STEP=s["STEP"],
               KP=1 << (k - 1).bit_length(), CAP_=s["CAP"], WRITE_VALUES=values is not None, BINS_=s["BINS"],
               SCAN_SLOTS=s["SCAN_SLOTS"], RANK_TILE_=s["RANK_TILE"], PDL=pdl, PHASE_=phase, HOLD_=chunk <= s["STEP"],
               **options)


_PATH_CODE = {"rounds": _launch_rounds, "fused": _launch_fused, "row": _launch_row, "tiles": _launch_tiles,
              "bound": _launch_bound, "resident": _launch_resident}
