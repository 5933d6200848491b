"""Launching the top-k selection over a block of logits rows: which path serves a call (the GPU's
tuned table, else pick_path), its settings, and the call's launches, recorded on its first call
and replayed after. The paths' launch code is indexer_logits._topk_paths', their kernels
_topk_kernels, _topk_fused, _topk_row, _topk_tiles, _topk_bound and _topk_resident, their grids and
chunking (shapes and the SM count only) _topk_launch's; the torch reference is
indexer_logits._topk.topk_reference."""

from __future__ import annotations

import math
from typing import Optional

import torch

from . import _api, _recorded_launches, _tile_max_rule, _topk_table, _topk_workspace
from ._checks import check_tile_maxima
from ._identity import slugify
from ._api import get_num_sms
# (the window modes, _window_args and _pick_chunks: this module's names for the callers and tests that use them)
from ._topk_launch import (WINDOW_CAUSAL, WINDOW_LIMIT, WINDOW_RAGGED, _window_args, bound_kernels,  # noqa: F401
                           chunk_size, fused_kernels, kernels, resident_kernels, row_kernels, tiles_kernels)
from ._topk_paths import (_PATH_CODE, _bound_scratch, _bound_shapes, _count_step, _pick_chunks,  # noqa: F401
                          _resident_chunk, _tile, _tiles_scratch)

# Launch settings: the best of bench.topk --sweep on the H200 (selection alone, 4 decode shapes;
# docs/PERF.md "Top-k"): 64 bins, 512 keys a step, 4 warps, 8 programs per SM, PDL on.
BLOCK = 512           # keys a program reads per step
NUM_WARPS = 4
PROGRAMS_PER_SM = 8   # chunks per row are sized to fill the GPU about this many times over
SCAN_SLOTS = False    # output slots: per-score atomics (False) or a per-block prefix sum (True)
PDL = None            # kernels 2-4 as programmatic dependent launches: None = on CUDA sm_90+
# With PDL, whether the rounds, tiles and bound paths' kernels but the last let the next launch at their
# start (_topk_paths._trigger): its programs then wait resident at their gdc_wait, where without it the
# next kernel launches as this one's programs exit. None: for decode calls only. Measured on an H100
# (docs/perf_logs/topk_trigger, call 1; alternated, exact): decode 0.7-2.3 us less a call at six shapes
# (32x16K 51.8 -> 49.5 us, 64x32K 129.6 -> 128.6, 1x1M 74.7 -> 73.8), prefill 3-4% more (4096x64K 6.25 ->
# 6.42 ms, 2048x1M 44.9 -> 46.7: its blocks' selections beside the next block's logits, not measured apart).
TRIGGER = None
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
# bound serves, where tiles and row do not, rows of at least BOUND_MIN_WIDTH keys, BOUND_MIN_KEYS keys in
# all. The H100's crossover, the selection alone with the path's own maxima pass (docs/PERF.md "Top-k: the
# tuner's space narrowed; the built-in choice from a crossover"), bound - rounds: +1 to +3.5 us below 2M
# keys (1-32 rows of 16K-512K: the maxima pass and round 1 over them cost what the fewer counted keys
# save), -2.5 to -5 us at 2M (4 x 512K, 8 x 256K, 16 x 128K, 32 x 64K, 64 x 32K) and -13 to -485 us
# above; rows of 16K keys level at 2M (128 x 16K: 32.0 against 31.7).
BOUND_MIN_WIDTH = 1 << 15
BOUND_MIN_KEYS = 1 << 21
# and a decode call of at most _tile_max_rule.PER_TILE_EPILOGUE_MAX_ROWS rows of BOUND_DECODE_MIN_WIDTH keys
# or more, whose logits kernel writes the maxima and their range (every split-grid module does there):
# bound then runs neither of its own first kernels (1 x 1M on an H100, end to end: 20.6 us against
# rounds' 23.6; its own maxima cost it 4.8 us there, and rounds led by 0.8 at 1 x 512K without them).
BOUND_DECODE_MIN_WIDTH = 1 << 19


def pick_path(rows: int, width: int, device, kind: Optional[str] = None) -> str:
    """The path "auto" stands for where the GPU's table has no entry (a GPU never tuned: its prior):
    tiles for many long rows (above); row where one program a row fills the GPU in one wave (at 64
    rows it left half the SMs idle and lost by 2-45%; at 256, two waves, by 10-20%); bound from 2M
    keys of rows of 32K or more, or a decode call (`kind`) of a few rows of 512K or more (above);
    rounds otherwise. The SM count is the device's own (not set_num_sms's, which sizes engines'
    metadata), of the logits' device."""
    if width >= TILES_MIN_WIDTH and rows >= TILES_MIN_ROWS and rows * width >= TILES_MIN_KEYS:
        return "tiles"
    sms = _api._device_sms(device.index) if device.type == "cuda" else _api.CPU_NUM_SMS
    if ROW_MIN_FILL * sms <= rows <= sms and width <= ROW_MAX_WIDTH:
        return "row"
    if width >= BOUND_MIN_WIDTH and rows * width >= BOUND_MIN_KEYS:
        return "bound"
    few_long = rows <= _tile_max_rule.PER_TILE_EPILOGUE_MAX_ROWS and width >= BOUND_DECODE_MIN_WIDTH
    return "bound" if kind == "decode" and few_long else "rounds"


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
    return pick_path(rows, width, device, kind), None


def workspace(rows: int, device) -> torch.Tensor:
    """The zeroed per-row state and histograms, twice over (the tiles path's two selections keep a
    state each); the kernels leave it zero again, so one workspace serves every row block of a
    call (in stream order)."""
    return torch.zeros(workspace_shape(rows), dtype=torch.int32, device=device)


def workspace_shape(rows: int) -> tuple:
    """The int32 shape of workspace(rows, ...)."""
    kn = kernels()
    bins = max(kn.BINS, max(_topk_table.ALLOWED["rounds"]["BINS"]))  # wide enough for any table entry's bins
    return (2 * rows, kn.STATE + 2 * bins)


# A call whose every block the row path serves (one program a row: no state, no histograms) gets an empty workspace,
# made once a device, in place of a zeroed one: no allocation and no fill kernel a call (call_workspace). Measured on
# an H100 (docs/perf_logs/topk_arena, calls 5 and 6; docs/PERF.md, "Top-k: the workspace"): 128 x 8K decode in CUDA
# graphs 75.1 -> 73.6 us (1.324 -> 1.298 of the logits), an eager call's host time 11-13 us less.
SKIP_UNREAD_WORKSPACE = True
_EMPTY_WORKSPACES: dict = {}


def call_workspace(row_counts, width: int, device, kind: Optional[str] = None) -> tuple:
    """(ws, key) of a call whose blocks have these row counts (select_rows with neither path nor settings): a
    zeroed workspace of at least the largest count's rows, kept from an earlier call on this stream where one is
    (_topk_workspace.take; the caller hands `key` to _topk_workspace.give_back once its launches are enqueued), or
    where the row path serves every block (SKIP_UNREAD_WORKSPACE) an empty one, shared by every such call on the
    device (nothing reads or writes it; its key None)."""
    device = torch.device(device)
    rows = max(row_counts, default=0)
    if not SKIP_UNREAD_WORKSPACE or rows < 1 or any(_serving(n, width, device, kind)[0] != "row" for n in
                                                   set(row_counts) if n > 0):
        return _topk_workspace.take(rows, device, lambda n: workspace(n, device))
    empty = _EMPTY_WORKSPACES.get(device)
    if empty is None:
        empty = _EMPTY_WORKSPACES[device] = torch.empty((0, workspace_shape(1)[1]), dtype=torch.int32, device=device)
    return empty, None


def select_rows(logits: torch.Tensor, k: int, window: int, indices: torch.Tensor, values: Optional[torch.Tensor],
                ws: torch.Tensor, *, lo=None, hi=None, lens=None, next_n: int = 1, path: Optional[str] = None,
                settings: Optional[dict] = None, tile_maxima: Optional[tuple] = None, kind: Optional[str] = None,
                plans: Optional[dict] = None) -> str:
    """Write each row's top-k key indices (relative to its window start) into `indices`, and the
    scores into `values` when given. logits [R, W] float32 with unit column stride. `path`:
    which selection (PATH when None), `settings`: its launch settings over the modules' own
    (path_settings). With neither given and PATH "auto", the GPU's tuned table serves where it
    has an entry for the shape (indexer_logits._topk_table), else pick_path and the modules'
    settings. `tile_maxima`: (maxima, ntiles[, True]) of the tiles path's tile (tiles_first_pass),
    written by the kernel before (the decode logits kernel's epilogue, launch(tile_max=...)) in place
    of the path's first pass; True: it merged their range into the first selection's state (the
    second half of `ws`) too. `kind`: the call's (_topk_table.KINDS), which table entries serve it.
    `plans`: a dict one call's blocks of rows share (the same k, window, next_n, path, settings and
    kind for all of them): a block of a row count seen before takes that block's plan and buffers
    (SelectionPlan) in place of the path's choice, its settings and its allocations, in stream order.
    Returns the path that ran. A call's launches are recorded on its key's
    first call and replayed after (indexer_logits._recorded_launches)."""
    rows, width = logits.shape
    given = None if tile_maxima is None else tile_maxima[2:] == (True,)
    memo = (rows, width, given, logits.device)
    plan = None if plans is None else plans.get(memo)
    if plan is None:
        plan = plan_selection(rows, width, k, window, logits.device, next_n=next_n, path=path, settings=settings,
                              kind=kind, maxima_given=tile_maxima is not None, range_given=bool(given))
        if plans is not None:
            plans[memo] = plan
    return plan.run(logits, indices, values, ws, lo, hi, lens, tile_maxima)


class SelectionPlan:
    """What select_rows derives from a block's shape before its launches: the path and its settings
    (the table, the modules), the recorded launches' key, and the buffers the path reads beside the
    workspace (the candidates', the tiles or bound path's). Built once per row count of a prefill
    call's blocks, whose selections run in stream order: the buffers serve each block in turn (no
    kernel reads what a block before left in them)."""

    __slots__ = ("path", "s", "k", "window", "next_n", "rows", "words", "parts", "cands", "scratch", "given", "key",
                 "tile_shape")

    def __init__(self, path, s, k, window, next_n, rows, words, parts, cands, scratch, given, key, tile_shape):
        self.path, self.s, self.k, self.window, self.next_n = path, s, k, window, next_n
        self.rows, self.words, self.parts = rows, words, parts
        self.cands, self.scratch, self.given, self.key, self.tile_shape = cands, scratch, given, key, tile_shape

    def run(self, logits, indices, values, ws, lo, hi, lens, tile_maxima) -> str:
        path, s, k, words = self.path, self.s, self.k, self.words
        if self.rows == 0:
            return path
        if tile_maxima is not None and self.tile_shape is None:
            raise ValueError(f"tile_maxima: only the tiles and bound paths read tile maxima, not path {path!r}")
        if (tile_maxima is not None) != bool(self.given):
            raise ValueError(f"tile_maxima: {'none' if tile_maxima is None else 'given'} for a plan built "
                             f"{'with' if self.given else 'without'} them")
        if ws.numel() < self.parts * words or not ws.is_contiguous():
            raise ValueError(f"ws: {ws.numel()} int32 words{'' if ws.is_contiguous() else ', not contiguous,'} for "
                             f"{self.rows} rows of {s['BINS']} bins by path {path!r}, expected at least "
                             f"{self.parts * words} contiguous (workspace(rows, device))")
        scratch = self.scratch
        if self.tile_shape is not None:
            if tile_maxima is not None:  # (the kernel before wrote them: in place of the path's own)
                check_tile_maxima(tile_maxima, self.rows, self.tile_shape, logits.device)
                scratch = (tile_maxima[0], tile_maxima[1], *scratch[2:])
            scratch = (*scratch, ws.view(-1)[words:2 * words])
        cands, window, next_n, given = self.cands, self.window, self.next_n, self.given
        inputs = [logits, indices, values, ws, cands, lo, hi, lens, *scratch]
        _recorded_launches.run("topk:" + path, inputs, self.key,
                               lambda launch: _PATH_CODE[path](launch, s, logits, k, window, indices, values, ws,
                                                               cands, lo, hi, lens, next_n, scratch, **given),
                               out_index=1)
        return path


def plan_selection(rows: int, width: int, k: int, window: int, device, *, next_n: int = 1, path: Optional[str] = None,
                   settings: Optional[dict] = None, kind: Optional[str] = None,
                   maxima_given: bool = False, range_given: bool = False) -> SelectionPlan:
    """select_rows' plan for a block of `rows` x `width` logits on `device` (its arguments; with
    maxima_given, each run takes the tile maxima the kernel before wrote, and their range where
    range_given). Allocates the block's buffers."""
    device = torch.device(device)
    if path is None and settings is None:
        path, settings = _serving(rows, width, device, kind)
    elif path is None:
        path = PATH
    if path == "auto":
        path = pick_path(rows, width, device, kind)
    if path not in PATHS:
        raise ValueError(f"path: expected one of {PATHS} or 'auto', got {path!r}")
    given = {} if not maxima_given else {"maxima_given": True, "range_given": range_given}
    if rows == 0:
        return SelectionPlan(path, {}, k, window, next_n, 0, 0, 0, None, (), given, (), None)
    s = path_settings(path, settings)
    if s.get("TRIGGER", False) is None:  # decode calls only (TRIGGER)
        s = dict(s, TRIGGER=kind == "decode")
    if path == "bound":  # the count's forms and the compaction's group where not set: the model's
        # (_topk_bound.lanes_for, votes_for over a count program's steps; group_for over the programs a row, as
        # _launch_setup's grid has them)
        chunk = chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"])
        steps = -(-chunk // _count_step(s))
        s = dict(s, **{name: rule(kind, steps) for name, rule in (("COUNT_LANES", bound_kernels().lanes_for),
                                                                  ("COUNT_VOTE", bound_kernels().votes_for))
                       if s[name] is None})
        if s["COMPACT_GROUP"] is None:
            s = dict(s, COMPACT_GROUP=bound_kernels().group_for(k, -(-width // chunk)))
    if path == "bound":  # the early loads: decode calls only where not set (_topk_bound.COUNT_EARLY)
        s = dict(s, **{name: kind == "decode" for name in ("COUNT_EARLY", "COMPACT_EARLY") if s[name] is None})
    if path == "resident" and _resident_chunk(rows, width, s, device) is None:
        path, s = "rounds", path_settings("rounds")  # (its programs could not all be resident at once)
    words = rows * state_words(s) if path != "row" else 0  # the state and histograms read
    parts = 2 if path in ("tiles", "bound") else 1  # a state for the keys and one for the tile maxima
    cands = torch.empty((rows, s["CAP"]), dtype=torch.int64, device=device)
    scratch, tile_shape = (), None
    if path in ("tiles", "bound"):  # (the maxima and tile counts None where given: run() puts those in their places)
        scratch = (_tiles_scratch if path == "tiles" else _bound_scratch)(rows, width, k, s, device,
                                                                          without_maxima=maxima_given)
        tile_shape = (tiles_kernels().tiles_for(width, _tile(s, width, k, path)) if maxima_given else
                      scratch[0].shape[1])
    # everything the launch code reads beyond the inputs' shapes: the settings, the SM count, and the
    # tiles path's pick step and cap (module values an experiment may change between calls)
    extra = (tiles_kernels().PICK_BLOCK, tiles_kernels().fit_cap(k)) if path == "tiles" else ()
    if path == "resident":  # (its chunk follows the device's own SM count: resident_shape)
        extra = (_resident_chunk(rows, width, s, device),)
    key = (k, window, next_n, tuple(s.values()), get_num_sms() if path != "row" else 0, *extra, *given.values())
    return SelectionPlan(path, s, k, window, next_n, rows, words, parts, cands, scratch, given, key, tile_shape)


def path_settings(path: str, given: Optional[dict] = None) -> dict:
    """The launch settings of `path`: its modules' current values, with `given` over them (a name
    the path does not read is refused)."""
    if path == "row":
        rk = row_kernels()
        s = dict(BINS=rk.BINS, CAP=rk.CAP, BLOCK=rk.BLOCK, NUM_WARPS=rk.NUM_WARPS, PDL=rk.PDL, HOLD=rk.HOLD,
                 INLINE=rk.INLINE)
    elif path == "rounds":
        kn = kernels()
        s = dict(BINS=kn.BINS, CAP=kn.CAP, RANK_TILE=kn.RANK_TILE, BLOCK=BLOCK, NUM_WARPS=NUM_WARPS,
                 PROGRAMS_PER_SM=PROGRAMS_PER_SM, SCAN_SLOTS=SCAN_SLOTS, PDL=PDL, TRIGGER=TRIGGER)
    elif path == "tiles":  # the four kernels' settings serve both of its selections
        tk = tiles_kernels()
        s = dict(path_settings("rounds"), TILE=tk.TILE, STEP_KEYS=tk.STEP_KEYS, FIT=tk.FIT, OWN_PDL=tk.OWN_PDL,
                 MERGE=tk.MERGE)
    elif path == "bound":  # the four kernels' settings, its tile and the maxima kernel's step
        s = dict(path_settings("rounds"), TILE=bound_kernels().TILE, STEP_KEYS=tiles_kernels().STEP_KEYS,
                 SEGMENTS=bound_kernels().SEGMENTS, COUNT_STEP=bound_kernels().COUNT_STEP,
                 COUNT_PREFETCH=bound_kernels().COUNT_PREFETCH, COUNT_LANES=bound_kernels().COUNT_LANES,
                 COUNT_BALLOT=bound_kernels().COUNT_BALLOT, COUNT_INLINE=bound_kernels().COUNT_INLINE,
                 COUNT_EARLY=bound_kernels().COUNT_EARLY, COMPACT_EARLY=bound_kernels().COMPACT_EARLY,
                 COUNT_VOTE=bound_kernels().COUNT_VOTE, COMPACT_GROUP=bound_kernels().COMPACT_GROUP)
    elif path == "resident":
        kn, rk = kernels(), resident_kernels()
        s = dict(CHUNK=rk.CHUNK, STEP=rk.STEP, NUM_WARPS=rk.NUM_WARPS, BINS=kn.BINS, CAP=kn.CAP,
                 RANK_TILE=kn.RANK_TILE, SCAN_SLOTS=rk.SCAN_SLOTS, PDL=rk.PDL)
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


def tiles_first_pass(rows: int, width: int, k: int, device, kind: str = "decode") -> tuple:
    """(tile, words a row of the first selection's state) of the tiles or bound path where it serves
    a decode call of this shape unasked (select_rows with neither path nor settings), else (0, 0):
    what a logits epilogue writes tile_maxima for, that state starting at rows * words in the workspace.
    A prefill block (`kind`): the bound path only, whose bound holds for tiles of any alignment (the
    ragged prefill kernel's are of absolute keys; the tiles path's pick needs them from the window start)."""
    path, settings = _serving(rows, width, torch.device(device), kind)
    if path not in (("tiles", "bound") if kind == "decode" else ("bound",)):
        return 0, 0
    s = path_settings(path, settings)
    return _tile(s, width, k, path), state_words(s)


def state_words(s: dict) -> int:
    """int32 words of one row's selection state and histograms under settings `s` (a workspace row)."""
    return kernels().STATE + 2 * s["BINS"]
