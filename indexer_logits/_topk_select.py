"""Launching the top-k selection over a block of logits rows: which path serves a call (the GPU's
tuned table, else pick_path), its settings and its launches. The paths' kernels are
indexer_logits._topk_kernels, _topk_fused, _topk_row, _topk_tiles and _topk_bound, their grids and
chunking (shapes and the SM count only) _topk_launch's; the torch reference is
indexer_logits._topk.topk_reference."""

from __future__ import annotations

import math
from typing import Optional

import torch

from . import _api, _recorded_launches, _topk_table
from ._identity import slugify
from ._api import get_num_sms
from ._checks import check_tile_maxima
from ._tables import interpreting
from ._topk_launch import (_launch_options, _launch_setup, _pdl, _window_args, bound_kernels, chunk_size, fused_kernels,
                           kernels, resident_kernels, row_kernels, tiles_kernels)

WINDOW_RAGGED, WINDOW_CAUSAL, WINDOW_LIMIT = 0, 1, 2
# Launch settings: the best of bench.topk --sweep on the H200 (selection alone, 4 decode shapes;
# docs/PERF.md "Top-k"): 64 bins, 512 keys a step, 4 warps, 8 programs per SM, PDL on.
BLOCK = 512           # keys a program reads per step
NUM_WARPS = 4
PROGRAMS_PER_SM = 8   # chunks per row are sized to fill the GPU about this many times over
SCAN_SLOTS = False    # output slots: per-score atomics (False) or a per-block prefix sum (True)
PDL = None            # kernels 2-4 as programmatic dependent launches: None = on CUDA sm_90+
# Which selection serves: "rounds" (_topk_kernels: range, two histogram rounds, compaction; four
# kernels), "fused" (_topk_fused: round 1 over a sampled range, then compaction and selection; two
# kernels), "row" (_topk_row: one kernel, a program a row) or "auto" (pick_path per call). Timed
# on the H200 in one process (bench.topk, docs/perf_logs/topk_h200/call6_*, topk_row_h200/call2_*):
# rounds as fast as fused or faster everywhere (decode 64x32K 117 vs 118 us, 1x1M 68 vs 85,
# prefill 4096x64K 7.6 vs 8.6 ms); row faster where its programs fill the GPU once (128 rows of
# 4K-32K keys, selection alone: 15.5-48 us against 17.8-53) and slower elsewhere (a program's
# passes over one long row; a second wave past the SM count). "tiles" and "bound" (_topk_tiles,
# _topk_bound) select over tile maxima first; "resident" (_topk_resident) runs the four kernels' phases
# in one launch where every program of the block fits the SMs at once (else the four kernels serve).
PATH = "auto"
# (path, settings) every call takes whatever the table says where not None: a tuner trial timed as the
# call it serves (tuner.topk_tune times decode buckets through the decode top-k, the epilogue included)
SERVING: Optional[tuple] = None
PATHS = ("fused", "rounds", "row", "tiles", "bound", "resident")
ROW_MIN_FILL = 0.85    # row serves from this fraction of the SMs' count of rows up to that count
ROW_MAX_WIDTH = 32768  # and rows of at most this many keys (the crossover measured 4K-32K)
# tiles serves rows of at least TILES_MIN_WIDTH keys, TILES_MIN_ROWS rows or more, TILES_MIN_KEYS
# keys in all. The H200's crossover, the selection alone (docs/PERF.md "Top-k: tiles"), tiles /
# rounds: 1 row 1.74-2.44 (256K-1M: its eleven phases for one row); 16 rows 1.04 at 256K, 0.70 at
# 512K, 0.49 at 1M; 64-128 rows 0.33-0.65 from 256K. 64 x 128K end to end: level (tiles of 8).
TILES_MIN_WIDTH = 1 << 18
TILES_MIN_ROWS = 16
TILES_MIN_KEYS = 1 << 23


def pick_path(rows: int, width: int, device) -> str:
    """The path "auto" stands for: tiles for many long rows (above); row where one program a row
    fills the GPU in one wave (at 64 rows it left half the SMs idle and lost by 2-45%; at 256, two
    waves, by 10-20%); rounds otherwise. The SM count is the device's own (not set_num_sms's,
    which sizes engines' metadata), of the logits' device."""
    if width >= TILES_MIN_WIDTH and rows >= TILES_MIN_ROWS and rows * width >= TILES_MIN_KEYS:
        return "tiles"
    sms = _api._device_sms(device.index) if device.type == "cuda" else _api.CPU_NUM_SMS
    return "row" if ROW_MIN_FILL * sms <= rows <= sms and width <= ROW_MAX_WIDTH else "rounds"


def scratch_bytes_per_row(rows: int, width: int, k: int, device) -> int:
    """Device memory a row of the selection that serves (rows, width) allocates beside the logits
    (the tiles path's buffers; the other paths' few words a row are not counted), so that
    prefill's blocks of rows count it in their scratch (indexer_logits._topk.scratch_rows)."""
    path, settings = _serving(rows, width, torch.device(device), "prefill")
    if path == "bound":  # its maxima and tile count, and its segments where on
        shapes = _bound_shapes(rows, width, k, path_settings(path, settings))
        return sum(4 * math.prod(shape) for shape in shapes) // max(rows, 1)
    if path != "tiles":
        return 0
    return tiles_kernels().scratch_bytes(1, width, k, _tile(path_settings("tiles", settings), width, k), 0)


def _serving(rows: int, width: int, device, kind: Optional[str] = None) -> tuple:
    """(path, settings) select_rows serves a call of this shape and kind (_topk_table.KINDS) with when
    given neither: SERVING's, PATH's, or where it is "auto" the GPU's tuned table entry, else
    pick_path (settings None: the modules')."""
    if SERVING is not None:
        return SERVING
    if PATH != "auto":
        return PATH, None
    entry = _tuned_entry(rows, width, device, kind)
    if entry is not None:
        return entry["path"], entry["settings"]
    return pick_path(rows, width, device), None


def workspace(rows: int, device) -> torch.Tensor:
    """The zeroed per-row state and histograms, twice over (the tiles path's two selections keep a
    state each); the kernels leave it zero again, so one workspace serves every row block of a
    call (in stream order)."""
    kn = kernels()
    bins = max(kn.BINS, max(_topk_table.ALLOWED["rounds"]["BINS"]))  # wide enough for any table entry's bins
    return torch.zeros((2 * rows, kn.STATE + 2 * bins), dtype=torch.int32, device=device)


def select_rows(logits: torch.Tensor, k: int, window: int, indices: torch.Tensor, values: Optional[torch.Tensor],
                ws: torch.Tensor, *, lo=None, hi=None, lens=None, next_n: int = 1, path: Optional[str] = None,
                settings: Optional[dict] = None, tile_maxima: Optional[tuple] = None, kind: Optional[str] = None) -> str:
    """Write each row's top-k key indices (relative to its window start) into `indices`, and the
    scores into `values` when given. logits [R, W] float32 with unit column stride. `path`:
    which selection (PATH when None), `settings`: its launch settings over the modules' own
    (path_settings). With neither given and PATH "auto", the GPU's tuned table serves where it
    has an entry for the shape (indexer_logits._topk_table), else pick_path and the modules'
    settings. `tile_maxima`: (maxima, ntiles[, True]) of the tiles path's tile (tiles_first_pass),
    written by the kernel before (the decode logits kernel's epilogue, launch(tile_max=...)) in place
    of the path's first pass; True: it merged their range into the first selection's state (the
    second half of `ws`) too. `kind`: the call's (_topk_table.KINDS), which table entries serve it.
    Returns the path that ran. A call's launches are recorded on its key's
    first call and replayed after (indexer_logits._recorded_launches)."""
    rows, width = logits.shape
    if path is None and settings is None:
        path, settings = _serving(rows, width, logits.device, kind)
    elif path is None:
        path = PATH
    if path == "auto":
        path = pick_path(rows, width, logits.device)
    if path not in PATHS:
        raise ValueError(f"path: expected one of {PATHS} or 'auto', got {path!r}")
    if rows == 0:
        return path
    s = path_settings(path, settings)
    if path == "resident" and _resident_chunk(rows, width, s, logits.device) is None:
        path, s = "rounds", path_settings("rounds")  # (its programs could not all be resident at once)
    words = rows * state_words(s) if path != "row" else 0  # the state and histograms read
    parts = 2 if path in ("tiles", "bound") else 1  # a state for the keys and one for the tile maxima
    if ws.numel() < parts * words or not ws.is_contiguous():
        raise ValueError(f"ws: {ws.numel()} int32 words{'' if ws.is_contiguous() else ', not contiguous,'} for "
                         f"{rows} rows of {s['BINS']} bins by path {path!r}, expected at least {parts * words} "
                         f"contiguous (workspace(rows, device))")
    launch_code = _PATH_CODE[path]
    cands = torch.empty((rows, s["CAP"]), dtype=torch.int64, device=logits.device)
    scratch = ()
    if path == "tiles":
        scratch = (*_tiles_scratch(rows, width, k, s, logits.device, tile_maxima), ws.view(-1)[words:2 * words])
    elif path == "bound":
        scratch = (*_bound_scratch(rows, width, k, s, logits.device, tile_maxima), ws.view(-1)[words:2 * words])
    elif tile_maxima is not None:
        raise ValueError(f"tile_maxima: only the tiles and bound paths read tile maxima, not path {path!r}")
    given = {} if tile_maxima is None else {"maxima_given": True, "range_given": tile_maxima[2:] == (True,)}
    inputs = [logits, indices, values, ws, cands, lo, hi, lens, *scratch]
    # everything the launch code reads beyond the inputs' shapes: the settings, the SM count, and the
    # tiles path's pick step and cap (module values an experiment may change between calls)
    extra = (tiles_kernels().PICK_BLOCK, tiles_kernels().fit_cap(k)) if path == "tiles" else ()
    if path == "resident":  # (its chunk follows the device's own SM count: resident_shape)
        extra = (_resident_chunk(rows, width, s, logits.device),)
    key = (k, window, next_n, tuple(s.values()), get_num_sms() if path != "row" else 0, *extra, *given.values())
    _recorded_launches.run("topk:" + path, inputs, key,
                           lambda launch: launch_code(launch, s, logits, k, window, indices, values, ws, cands,
                                                      lo, hi, lens, next_n, scratch, **given), out_index=1)
    return path


def path_settings(path: str, given: Optional[dict] = None) -> dict:
    """The launch settings of `path`: its modules' current values, with `given` over them (a name
    the path does not read is refused)."""
    if path == "row":
        rk = row_kernels()
        s = dict(BINS=rk.BINS, CAP=rk.CAP, BLOCK=rk.BLOCK, NUM_WARPS=rk.NUM_WARPS, PDL=rk.PDL)
    elif path == "rounds":
        kn = kernels()
        s = dict(BINS=kn.BINS, CAP=kn.CAP, RANK_TILE=kn.RANK_TILE, BLOCK=BLOCK, NUM_WARPS=NUM_WARPS,
                 PROGRAMS_PER_SM=PROGRAMS_PER_SM, SCAN_SLOTS=SCAN_SLOTS, PDL=PDL)
    elif path == "tiles":  # the four kernels' settings serve both of its selections
        tk = tiles_kernels()
        s = dict(path_settings("rounds"), TILE=tk.TILE, STEP_KEYS=tk.STEP_KEYS, FIT=tk.FIT, OWN_PDL=tk.OWN_PDL,
                 MERGE=tk.MERGE)
    elif path == "bound":  # the four kernels' settings, its tile and the maxima kernel's step
        s = dict(path_settings("rounds"), TILE=bound_kernels().TILE, STEP_KEYS=tiles_kernels().STEP_KEYS,
                 SEGMENTS=bound_kernels().SEGMENTS)
    elif path == "resident":
        kn, rk = kernels(), resident_kernels()
        s = dict(CHUNK=rk.CHUNK, STEP=rk.STEP, NUM_WARPS=rk.NUM_WARPS, BINS=kn.BINS, CAP=kn.CAP,
                 RANK_TILE=kn.RANK_TILE, SCAN_SLOTS=rk.SCAN_SLOTS, PDL=PDL)
    elif path == "fused":
        kn, fk = kernels(), fused_kernels()
        s = dict(BINS=kn.BINS, CAP=fk.CAP, SAMPLE=fk.SAMPLE, CB=fk.CB, BLOCK=BLOCK, NUM_WARPS=NUM_WARPS,
                 PROGRAMS_PER_SM=PROGRAMS_PER_SM, SCAN_SLOTS=SCAN_SLOTS, PDL=PDL)
    else:
        raise ValueError(f"path: expected one of {PATHS}, got {path!r}")
    if given:
        unknown = sorted(set(given) - set(s))
        if unknown:
            raise ValueError(f"settings: {unknown} are not settings of path {path!r} (it reads {sorted(s)})")
        s.update(given)
    return s


def _tuned_entry(rows: int, width: int, device, kind: Optional[str] = None) -> Optional[dict]:
    """The tuned table's entry for this shape and kind on this CUDA device, or None (no table, no CUDA)."""
    if device.type != "cuda":
        return None
    slug = _DEVICE_SLUGS.get(device.index)
    if slug is None:
        slug = _DEVICE_SLUGS[device.index] = slugify(torch.cuda.get_device_name(device))
    return _topk_table.serving_entry(slug, rows, width, _api._device_sms(device.index), ROW_MAX_WIDTH, kind)


_DEVICE_SLUGS: dict = {}


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
    if not range_done:
        launch(kn.topk_range_kernel, grid, *window_args, ws, chunk, WINDOW=window, BLOCK=BLOCK_, BINS_=BINS,
               PDL=False, num_warps=s["NUM_WARPS"])
    for round_ in (1, 2):
        launch(kn.topk_hist_kernel, grid, *window_args, k, ws, chunk, ROUND=round_, WINDOW=window, BLOCK=BLOCK_,
               BINS_=BINS, PDL=pdl, FIT_CAP_=fit_cap, **options)
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


def _launch_row(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch=()) -> None:
    """The one-kernel path (indexer_logits._topk_row): a program a row, a candidate buffer of CAP a row."""
    rk = row_kernels()
    rows, width = logits.shape
    pdl = bool(s["PDL"]) and _pdl(logits.device)
    val = indices if values is None else values
    launch(rk.topk_row_kernel, (rows,), *_window_args(logits, indices, lo, hi, lens, next_n), k,
           indices, indices.stride(0), val, val.stride(0), cands,
           WINDOW=window, BLOCK_=s["BLOCK"], BINS_=s["BINS"] or rk.bins_for(width), CAP_=s["CAP"],
           WRITE_VALUES=values is not None, PDL=pdl, **_launch_options(pdl, s["NUM_WARPS"]))


def _tile(s: dict, width: int, k: int, path: str = "tiles") -> int:
    """The tiles or bound path's tile: its TILE setting, or the path's model (tile_for) where that is 0."""
    return s["TILE"] or (bound_kernels() if path == "bound" else tiles_kernels()).tile_for(width, k)


def tiles_first_pass(rows: int, width: int, k: int, device) -> tuple:
    """(tile, words a row of the first selection's state) of the tiles or bound path where it serves
    a decode call of this shape unasked (select_rows with neither path nor settings), else (0, 0):
    what a logits epilogue writes tile_maxima for, that state starting at rows * words in the workspace."""
    path, settings = _serving(rows, width, torch.device(device), "decode")
    if path not in ("tiles", "bound"):
        return 0, 0
    s = path_settings(path, settings)
    return _tile(s, width, k, path), state_words(s)


def state_words(s: dict) -> int:
    """int32 words of one row's selection state and histograms under settings `s` (a workspace row)."""
    return kernels().STATE + 2 * s["BINS"]


def _tiles_scratch(rows: int, width: int, k: int, s: dict, device, given: Optional[tuple] = None) -> tuple:
    """The tiles path's buffers, as indexer_logits._topk_tiles.scratch_shapes lists (and
    scratch_bytes counts) them; the first two (maxima, tile counts) are `given`'s where given."""
    tile = _tile(s, width, k)
    chunks = _pick_chunks(rows, tiles_kernels().tiles_for(width, tile), s)[1]
    shapes = tiles_kernels().scratch_shapes(rows, width, k, tile, chunks)
    if given is not None:
        check_tile_maxima(given, rows, shapes[0][0][1], device)
    return tuple(given[i] if given is not None and i < 2 else
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


def _bound_shapes(rows: int, width: int, k: int, s: dict) -> tuple:
    """The shapes of the bound path's buffers (4-byte elements): its tile maxima, tile counts, and with
    SEGMENTS a segment of positions per program and their counts (none without)."""
    nt = tiles_kernels().tiles_for(width, _tile(s, width, k, "bound"))
    chunk = chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"])
    nch = max(1, -(-width // chunk)) if s["SEGMENTS"] else 0
    return (rows, nt), (rows,), (rows, nch, bound_kernels().seg_cap(k, width, chunk) if nch else 0), (rows, nch)


def _bound_scratch(rows: int, width: int, k: int, s: dict, device, given: Optional[tuple] = None) -> tuple:
    """The bound path's buffers (_bound_shapes); the maxima and tile counts `given`'s where the logits
    kernel wrote them."""
    shapes = _bound_shapes(rows, width, k, s)
    if given is not None:
        check_tile_maxima(given, rows, shapes[0][1], device)
    return tuple(given[i] if given is not None and i < 2 else
                 torch.empty(shape, dtype=torch.float32 if i == 0 else torch.int32, device=device)
                 for i, shape in enumerate(shapes))


def _launch_bound(launch, s, logits, k, window, indices, values, ws, cands, lo, hi, lens, next_n, scratch,
                  maxima_given: bool = False, range_given: bool = False) -> None:
    """The path bounded by the tile maxima (indexer_logits._topk_bound): the maxima, their range and
    round 1 over them in the second half of the workspace (`ws_first`), the keys' histogram above the
    bound, the compaction: five launches, three where the logits kernel wrote the maxima and range."""
    kn, bk = kernels(), bound_kernels()
    maxima, ntiles, seg, seg_counts, ws_first = scratch
    T = _tile(s, logits.shape[1], k, "bound")
    grid, chunk, window_args, pdl, options = _launch_setup(logits, indices, lo, hi, lens, next_n, s)
    if not maxima_given:  # (else the kernel before wrote them: select_rows' tile_maxima)
        _launch_tile_maxima(launch, s, window_args, window, T, maxima, ntiles, {"num_warps": s["NUM_WARPS"]})
    mgrid, mchunk, maxima_args = _launch_setup(maxima, indices, None, None, ntiles, 1, s)[:3]
    consts = dict(BLOCK=s["BLOCK"], BINS_=s["BINS"], PDL=pdl, **options)
    if not range_given:
        launch(kn.topk_range_kernel, mgrid, *maxima_args, ws_first, mchunk, WINDOW=WINDOW_LIMIT, **consts)
    launch(kn.topk_hist_kernel, mgrid, *maxima_args, k, ws_first, mchunk, ROUND=1, WINDOW=WINDOW_LIMIT, **consts)
    segs = (seg, seg.shape[2], seg_counts) if s["SEGMENTS"] else (ws, 0, ws)  # (never read without SEGMENTS)
    launch(bk.topk_bound_count_kernel, grid, *window_args, k, -(-k // T), ws, ws_first, chunk, *segs, WINDOW=window,
           MARGIN_=bk.MARGIN, SEG_=s["SEGMENTS"], **consts)
    val = indices if values is None else values
    launch(bk.topk_bound_compact_kernel, grid, *window_args, k, ws, ws_first, cands, indices, indices.stride(0), val,
           val.stride(0), chunk, *segs, WINDOW=window, KP=1 << (k - 1).bit_length(), CAP_=s["CAP"],
           WRITE_VALUES=values is not None, SCAN_SLOTS=s["SCAN_SLOTS"], RANK_TILE_=s["RANK_TILE"],
           SEG_=s["SEGMENTS"], **consts)


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
    for phase in phases:
        launch(resident_kernels().topk_resident_kernel, grid, *_window_args(logits, indices, lo, hi, lens, next_n), k,
               ws, cands, indices, indices.stride(0), val, val.stride(0), chunk, WINDOW=window, STEP=s["STEP"],
               KP=1 << (k - 1).bit_length(), CAP_=s["CAP"], WRITE_VALUES=values is not None, BINS_=s["BINS"],
               SCAN_SLOTS=s["SCAN_SLOTS"], RANK_TILE_=s["RANK_TILE"], PDL=pdl, PHASE_=phase,
               **_launch_options(pdl, s["NUM_WARPS"]))


_PATH_CODE = {"rounds": _launch_rounds, "fused": _launch_fused, "row": _launch_row, "tiles": _launch_tiles,
              "bound": _launch_bound, "resident": _launch_resident}
