"""The top-k selection's launch settings tuned on a GPU: <table dir>/<gpu_slug>/topk.json, written
by `python cli.py tune-topk` (tuner/topk_tune.py), read by indexer_logits._topk_select where the
path is "auto". Imports only the standard library and this package.

    {"format": 1, "gpu_slug": "nvidia_h200", "gpu_name": "NVIDIA H200", "k": 2048,
     "triton": "3.6.0", "sms": 132,
     "entries": [{"rows": 64, "width": 32768, "path": "rounds",
                  "settings": {"BINS": 64, "BLOCK": 512, ...}, "us": 33.9, "default_us": 34.6}, ...]}

An entry is the best exact setting the tuner timed for selecting k of `width` keys in each of
`rows` rows. A call is served by the entry nearest its shape (rows and width on a log scale) among
those whose path suits it (the one-program-a-row path only up to the SM count of rows: past it, a
second wave; the resident path only where its grid fits the SMs, resident_shape) and that lie
within an octave of it (REACH), else by the built-in choice (_topk_select.pick_path and the
modules' settings). The
settings are launch parameters: any of them selects exactly (the tuner times, it does not make
them correct), so a table tuned under another Triton or k still selects right, only perhaps
slower. A table that is malformed or made for another GPU is refused with an error naming it.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any, Optional

from ._tables import DispatchTableError, table_root

FORMAT = 1
FILE = "topk.json"
# What each path's settings may be (a table naming anything else is refused)
ALLOWED = {
    "rounds": {"BINS": (16, 32, 64, 128), "CAP": (256, 512, 1024, 2048), "RANK_TILE": (0, 8, 16, 32),
               "BLOCK": (256, 512, 1024, 2048), "NUM_WARPS": (2, 4, 8), "PROGRAMS_PER_SM": (1, 2, 4, 8, 16, 32),
               "SCAN_SLOTS": (False, True), "PDL": (False, True, None), "TRIGGER": (False, True, None)},
    "row": {"BINS": (64, 128, 256, None), "CAP": (256, 512, 1024, 2048), "BLOCK": (1024, 2048, 4096, 8192),
            "NUM_WARPS": (4, 8, 16, 32), "PDL": (False, True), "HOLD": (False, True)},
}
# the tiles path: the four kernels' settings (both of its selections), its tile (0: the model's),
# whether its first selection stops at the bin that fits the pick, whether its own kernels
# launch with PDL, and whether the pick gathers the tiles it picks and the last compaction remaps
ALLOWED["tiles"] = {**ALLOWED["rounds"], "TILE": (0, 8, 16, 32, 64), "STEP_KEYS": (1024, 2048, 4096),
                    "FIT": (False, True), "OWN_PDL": (False, True), "MERGE": (False, True)}
# the bound path: the four kernels' settings (its maxima's round and its keys'), its tile (0: the
# model's), the maxima kernel's step, whether the compaction reads the admitted keys' segments, and
# the keys' count's step (0: BLOCK), whether it loads a step ahead, and whether it reads a step as
# rows of 32 keys, a sub-segment each, or claims its segment slots from a counter (COUNT_BALLOT), or
# (neither) makes its atomics and stores by inline PTX (COUNT_INLINE), and whether the count and the
# compaction issue their loads that depend on nothing before them first (COUNT_EARLY, COMPACT_EARLY),
# whether the count fills a sub-segment a warp by votes (COUNT_VOTE, over the other forms), and how many
# count programs' segments a compaction program reads (COMPACT_GROUP; None: the model's)
ALLOWED["bound"] = {**ALLOWED["rounds"], "TILE": (0, 4, 8, 16, 32, 64), "STEP_KEYS": (1024, 2048, 4096),
                    "SEGMENTS": (False, True), "COUNT_STEP": (0, 512, 1024, 2048, 4096),
                    "COUNT_PREFETCH": (False, True), "COUNT_LANES": (False, True, None),
                    "COUNT_BALLOT": (False, True), "COUNT_INLINE": (False, True),
                    "COUNT_EARLY": (False, True, None), "COMPACT_EARLY": (False, True, None),
                    "COUNT_VOTE": (False, True, None), "COMPACT_GROUP": (1, 2, 4, 8, 16, None)}

# the resident path (one launch, a row's programs meeting at barriers): keys a program (0: resident_shape's
# model), keys a step, warps, the four kernels' bins, candidates, their ranking, slots and PDL
RESIDENT_STEP = 8192  # the resident path's default STEP (_topk_resident.STEP), also where an entry leaves it out
ALLOWED["resident"] = {"CHUNK": (0, 4096, 8192, 16384, 32768, 65536), "STEP": (1024, 2048, 4096, 8192),
                       "NUM_WARPS": (4, 8, 16),
                       **{n: ALLOWED["rounds"][n] for n in ("BINS", "CAP", "RANK_TILE", "SCAN_SLOTS", "PDL")}}


def resident_shape(rows: int, width: int, sms: int, chunk: int, step: int) -> Optional[int]:
    """Keys a program of the resident path (indexer_logits._topk_resident) reads in a (rows, width)
    block on a GPU of `sms` SMs, or None where it cannot serve: its barriers need every program
    resident at once, so rows x programs a row is at most `sms` (a program an SM, which fits however
    many registers it takes). `chunk` 0: the fewest steps of `step` keys that keep the grid within
    the SMs."""
    if not 1 <= rows <= sms or width < 1 or step < 1:
        return None
    if chunk == 0:
        chunk = step * -(-width // (sms // rows * step))
    return chunk if rows * -(-width // chunk) <= sms else None


# What an entry was timed as (its optional "kind"): "decode", the logits kernel writing the tile maxima
# where the path reads them (indexer_logits._topk.EPILOGUE), or "prefill", a ragged prefill's block of rows
# as fp8_mqa_topk serves it (the ragged logits kernel writing the bound path's maxima; tables tuned before
# 2026-12-06: the block's selection alone, with its own first pass). A call of one kind is served by entries
# of its kind or of none (tables before it).
KINDS = ("decode", "prefill")

_CACHE: dict[str, Optional[dict]] = {}
_ENTRIES: dict[tuple, Optional[dict]] = {}  # serving_entry's answers, per GPU and shape
MAX_ENTRIES = 4096  # shapes whose answer is kept (engines call a few hundred); then computed per call
_LOCK = threading.Lock()


def _fail(path: Path, msg: str):
    raise DispatchTableError(f"{path}: {msg}")


def validate(table: Any, path: Path, expect_slug: Optional[str] = None) -> dict:
    """Check a parsed top-k table's structure and its GPU; return it."""
    if not isinstance(table, dict):
        _fail(path, f"expected a JSON object, got {type(table).__name__}")
    if table.get("format") != FORMAT:
        _fail(path, f"format: expected {FORMAT}, got {table.get('format')!r}")
    if expect_slug is not None and table.get("gpu_slug") != expect_slug:
        _fail(path, f"made for GPU {table.get('gpu_slug')!r}, not for {expect_slug!r}: refusing a foreign table")
    entries = table.get("entries")
    if not isinstance(entries, list):
        _fail(path, "entries: expected a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            _fail(path, f"entries[{i}]: expected an object")
        for dim in ("rows", "width"):
            if isinstance(e.get(dim), bool) or not isinstance(e.get(dim), int) or e[dim] < 1:
                _fail(path, f"entries[{i}].{dim}: expected a positive int, got {e.get(dim)!r}")
        allowed = ALLOWED.get(e.get("path"))
        if allowed is None:
            _fail(path, f"entries[{i}].path: expected one of {sorted(ALLOWED)}, got {e.get('path')!r}")
        if e.get("kind", "decode") not in KINDS:
            _fail(path, f"entries[{i}].kind: expected one of {KINDS} or none, got {e.get('kind')!r}")
        settings = e.get("settings")
        if not isinstance(settings, dict):
            _fail(path, f"entries[{i}].settings: expected an object")
        for name, value in settings.items():
            if name not in allowed:
                _fail(path, f"entries[{i}].settings: {name!r} is not a setting of path {e['path']!r}")
            if not any(type(value) is type(c) and value == c for c in allowed[name]):  # True is not 1 here
                _fail(path, f"entries[{i}].settings.{name}: expected one of {allowed[name]}, got {value!r}")
        if (e["path"] == "bound" and settings.get("COUNT_LANES") is True and settings.get("COUNT_STEP") == 4096
                and settings.get("SEGMENTS") is not False):  # a step's rows of 32 keys: 64 sub-segments at most
            _fail(path, f"entries[{i}].settings: COUNT_LANES reads steps of at most 2048 keys, got COUNT_STEP 4096")
    return table


def load(slug: str) -> Optional[dict]:
    """The validated table of GPU `slug` in the table directory, or None where it has none (cached)."""
    with _LOCK:
        if slug in _CACHE:
            return _CACHE[slug]
    path = table_root() / slug / FILE
    table = None
    if path.is_file():
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            _fail(path, f"unreadable: {exc}")
        table = validate(raw, path, expect_slug=slug)
    with _LOCK:
        _CACHE[slug] = table
    return table


def clear() -> None:
    with _LOCK:
        _CACHE.clear()
        _ENTRIES.clear()


def serving_entry(slug: str, rows: int, width: int, sms: int, row_max_width: int,
                  kind: Optional[str] = None) -> Optional[dict]:
    """entry_for over GPU `slug`'s table, kept per shape: a top-k call's lookup after its shape's
    first is one dict read (no lock, no scan of the entries)."""
    key = (slug, rows, width, sms, row_max_width, kind)
    try:
        return _ENTRIES[key]
    except KeyError:
        pass
    entry = entry_for(load(slug), rows, width, sms, row_max_width, kind)
    if len(_ENTRIES) < MAX_ENTRIES:
        _ENTRIES[key] = entry
    return entry


REACH = 1.0  # an entry serves shapes within this many octaves of its own, in rows and in width


def entry_for(table: Optional[dict], rows: int, width: int, sms: int, row_max_width: int,
              kind: Optional[str] = None) -> Optional[dict]:
    """The entry nearest (rows, width) whose path suits the shape (the row path only for rows <= sms
    and widths <= row_max_width, its measured range; the resident path where resident_shape fits
    it), of the call's `kind` or of none (KINDS), and
    that lies within REACH octaves of it in both; None where no entry does (the built-in choice then
    serves: a table says what was measured, not what a shape far from it wants)."""
    if not table:
        return None
    best, best_d = None, math.inf
    for e in table["entries"]:
        if e["path"] == "row" and not (rows <= sms and width <= row_max_width):
            continue
        if e["path"] == "resident" and resident_shape(rows, width, sms, e["settings"].get("CHUNK", 0),
                                                      e["settings"].get("STEP", RESIDENT_STEP)) is None:
            continue
        if kind is not None and e.get("kind", kind) != kind:
            continue
        dr, dw = abs(math.log2(max(rows, 1) / e["rows"])), abs(math.log2(max(width, 1) / e["width"]))
        if dr <= REACH and dw <= REACH and dr + dw < best_d:
            best, best_d = e, dr + dw
    return best
