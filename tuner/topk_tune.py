"""Tuning the top-k selection on this GPU (`python cli.py tune-topk`): per bucket (rows x width of
decode logits, next_n 1, full lengths; or a ragged prefill block), every launch setting in the space of
each selection path that suits the shape, gated exact against a stable sort, timed in a CUDA graph as
the decode or prefill top-k serves it, less its logits call (tune_bucket); the best of
each bucket, where it beats the built-in choice by MARGIN when the two are timed alternately (else
the built-in choice: an entry of no settings), goes to <table dir>/<gpu_slug>/topk.json
(indexer_logits._topk_table), which the runtime's "auto" path serves.

What the H200 taught is in the space as constraints, not as winners (docs/PERF.md, "Top-k"):
- the one-program-a-row path only where one wave of programs holds the rows (rows <= SMs; at
  256 rows it lost 10-20%) and rows of at most ROW_MAX_WIDTH keys (its passes over a long row);
- RANK_TILE at most 32: 64 put the compaction kernel at 219 registers (48 at 32) and lost 10-25%;
- the row path's sort costs what CAP holds, and its bins grow with the width: CAP 512-1,024,
  bins 64-128; its step at most 4,096 keys (8,192 spills under Triton 3.8 and 3.9);
- the four kernels' histogram cost grows with the bins (tl.histogram: ~log2(B) * B / 32 per key):
  32 or 64 bins, two rounds;
- the tiles path (two selections, over tile maxima and over the picked tiles' keys) only on rows of
  TILES_TRIED_FROM (64K) keys or more, where the pruning can pay for its phases (rows of 64K and 128K:
  level; one row of 1M: 1.7x slower, 16 of 1M: 2x faster); its tiles the model's or 8-16 (the model's
  sqrt(width / k): 6-23 at 64K-1M keys); its first selection stopping at the bin that fits the pick (FIT) or
  finding the exact k-th tile maximum: which pays depends on how the maxima spread; its own
  kernels launched with PDL;
- the bound path (round 1 over the tile maxima names a score k keys reach; one histogram of the
  keys above it and the compaction) from BOUND_TRIED_FROM (16K) keys a row: its tile the model's
  (at least 2k tiles a row) or an octave either side; its compaction reading the admitted keys'
  segments;
- an axis value the H100's exhaustive tunes never saw beat the others is not tried (below);
- the resident path (the four kernels' phases in one launch, a row's programs meeting at barriers) only
  where every program fits the SMs at once (rows x programs a row <= SMs: _topk_table.resident_shape),
  its chunk the model's, three settings (it lost at every shape timed on an H100).

The gate: the indices equal a stable descending sort's (ties to the smallest index) on the
bucket's logits and on the same logits rounded to bfloat16 (ties at the k-th score, long runs of
equal keys: the candidates' and the overflow paths). Nothing is lost on a crash: each trial is a
JSON line appended to the trials file as it ends, the table is rewritten after each bucket, and a
rerun keeps the buckets the table holds (--fresh retunes them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

import torch
import triton

import indexer_logits as K
from indexer_logits import _topk_select as S, _topk_table
from indexer_logits._api import _device_sms
from indexer_logits._identity import slugify

from .inputs import make_decode_inputs, make_prefill_inputs
from .space import Problem
from .timing import time_cuda_graph

# The decode shapes and 256 x 8K (decode: timed as the decode top-k serves them, the logits
# kernel writing the tiles and bound paths' maxima), and 256 x 64K: the blocks a prefill of 64K-key rows
# selects in (4096 x 64K: 164 rows a block at the default scratch; timed as fp8_mqa_topk serves a block,
# the ragged logits kernel writing the bound path's maxima), which an entry serves within an octave.
DEFAULT_BUCKETS = ((1, 1 << 20, "decode"), (64, 32768, "decode"), (64, 131072, "decode"), (128, 8192, "decode"),
                   (256, 8192, "decode"), (256, 65536, "prefill"))
DEFAULT_K = 2048
PATHS = ("rounds", "row", "tiles", "bound", "resident")  # every selection path the space holds
MARGIN = 0.02  # a tuned setting is kept only this much faster than the built-in choice (else the built-in)
ROUNDS = 3     # alternated timings of the best and the built-in choice, the fastest of each kept
# the tiles path is tried from rows of this many keys: a quarter of "auto"'s threshold
# (_topk_select.TILES_MIN_WIDTH), since it timed level with rounds at 64 x 128K end to end and at a
# prefill block of 204 x 64K (141 us each, the selection alone; docs/PERF.md "Top-k: tiles")
TILES_TRIED_FROM = 1 << 16
# the bound path is tried from rows of this many keys: with fewer than 2k tiles of 4 a row its bound
# admits a large share of the row (untimed; docs/PERF.md "Top-k: bounded by the tile maxima")
BOUND_TRIED_FROM = 1 << 14
# The space's narrowings below are what the H100's exhaustive tunes taught (docs/perf_logs/topk_bound_h200,
# calls 4 and 9: 634 trials over 1x1M, 64x32K, 64x128K and a 256x64K prefill block): an axis value
# whose best setting never beat the kept value's at any bucket (level at best, mostly 3-16% slower)
# left the space, so a tune tries 148 settings over the default buckets, not 556. Each is named where
# it is dropped ("the H100's tunes"); a GPU unlike Hopper may want them back (git history holds the space).
# The row path's step: 4,096 keys (indexer_logits._topk_row.BLOCK). Cross-compiled, 8,192 spills
# under Triton 3.8 and 3.9 (at 8 and 16 warps) and 2,048 at 16 warps (ptxas held it to 64 registers a
# thread) under 3.6 and 3.8; 4,096 under none.
ROW_BLOCKS = (4096,)


def ref_sets(logits, lo, hi, k):
    """Index sets of the stable descending sort inside each row's window (-1 pads), sorted per row."""
    cols = torch.arange(logits.shape[1], device=logits.device)
    valid = (cols[None] >= lo[:, None]) & (cols[None] < hi[:, None])
    x = torch.where(valid, logits, torch.full_like(logits, float("-inf")))
    idx = torch.sort(x, dim=1, descending=True, stable=True).indices[:, :k].int()
    n = (hi - lo).clamp(0, k)
    idx = torch.where(torch.arange(k, device=logits.device)[None] < n[:, None], idx - lo[:, None].int(),
                      torch.full_like(idx, -1))
    return idx.sort(dim=1).values


def mismatched_rows(ours, logits, lo, hi, k) -> int:
    """Rows whose index set differs from the stable sort's."""
    return int((ours.sort(dim=1).values != ref_sets(logits, lo, hi, k)).any(dim=1).sum())


def space(path: str, rows: int, width: int, sms: int) -> list[dict]:
    """The settings tried for `path` at this shape (module docstring): [] where the path does not suit it."""
    if path == "rounds":
        # blocks of 512 keys and rank tiles of 32 (1024: up to 11% slower, rank tile 0: up to 6%, never
        # faster: the H100's tunes); 4 programs an SM only pays on a row or two, so all three stay
        return [dict(BINS=b, BLOCK=512, PROGRAMS_PER_SM=p, RANK_TILE=32) for b in (32, 64) for p in (4, 8, 16)]
    if path == "row":
        if rows > sms or width > S.ROW_MAX_WIDTH:
            return []
        return [dict(BINS=b, CAP=c, BLOCK=bl, NUM_WARPS=w)
                for b in (64, 128) for c in (512, 1024) for bl in ROW_BLOCKS for w in (8, 16)]
    if path == "tiles":
        if width < TILES_TRIED_FROM:
            return []
        # (not MERGE: it lost wherever timed, 64 x 128K +6.6 us and a 102 x 1M prefill block +164 us on the
        # H200: indexer_logits._topk_tiles.MERGE)
        # 32 bins and its own kernels under PDL (64 bins: up to 7% slower, no PDL: up to 6%, never faster);
        # tiles of 32 keys lost up to 1.55x (the H100's tunes)
        return [dict(TILE=t, BINS=32, PROGRAMS_PER_SM=p, FIT=f, OWN_PDL=True)
                for t in (0, 8, 16) for p in (8, 16) for f in (True, False)]
    if path == "bound":
        if width < BOUND_TRIED_FROM:
            return []
        # its tile about the model's (0: at least 2k tiles a row) and one octave either side; 32 or 64
        # bins, and 128 at the model's tile and 16 (the keys' one round then 255 bins above the bound: fewer
        # candidates to rank, a tighter bound; an H100, the tables' settings at 128 bins: 0.2-2.0 us less at
        # five decode shapes, docs/perf_logs/topk_trigger call 1); its compaction reading the admitted
        # keys' segments (its chunk: 7-15% slower at every bucket) in blocks of 512 (1024: 3-16%)
        # and its count by rows of 32 keys (COUNT_LANES) at the tiles and bins the H100's tunes kept: 10-18
        # us saved at 64 x 128K and 6 at 16 x 256K, level at 64 x 32K and 1 x 1M, 89 us of 6.5 ms on the
        # 4096 x 64K prefill (docs/PERF.md, "Top-k: the prefill's blocks")
        lanes = [dict(TILE=t, BINS=64, PROGRAMS_PER_SM=p, BLOCK=512, SEGMENTS=True, COUNT_LANES=True)
                 for t in (0, 16) for p in (8, 16)]
        bins128 = [dict(TILE=t, BINS=128, PROGRAMS_PER_SM=p, BLOCK=512, SEGMENTS=True, COUNT_LANES=False)
                   for t in (0, 16) for p in (8, 16)]
        # and its count claiming its segment slots from a counter (COUNT_BALLOT: no prefix sum, no barrier in
        # its loop) at the tiles, bins and programs the others' winners used
        claimed = [dict(TILE=t, BINS=b, PROGRAMS_PER_SM=p, BLOCK=512, SEGMENTS=True, COUNT_BALLOT=True)
                   for t in (0, 16) for b in (64, 128) for p in (8, 16)]
        # and its count filling a sub-segment a warp by votes (COUNT_VOTE: no answering atomic, no barrier in its
        # loop; an H100: the 4096 x 64K prefill 3% faster, decode of a few steps a program up to 1.3 us slower:
        # docs/perf_logs/topk_vote) at the same; every other setting names it off, so that each form is timed as
        # itself rather than as the model (_topk_bound.votes_for) would resolve it
        voted = [dict(TILE=t, BINS=b, PROGRAMS_PER_SM=p, BLOCK=512, SEGMENTS=True, COUNT_VOTE=True)
                 for t in (0, 16) for b in (64, 128) for p in (8, 16)]
        # (not 256 bins, though each doubling from 32 to 128 took 1.7-3 us off the selection at 64 x 32K and
        # 1 x 1M: at 256, by each count form, end to end +0.7-1.3 us at 64 x 32K, 1 x 1M and 32 x 16K, level
        # at 64 x 128K and 16 x 256K and on prefill, and a tune over them chose 256 nowhere; an H100,
        # docs/perf_logs/topk_bins256, call 2, at commit 210d4a3)
        plain = [dict(TILE=t, BINS=b, PROGRAMS_PER_SM=p, BLOCK=512, SEGMENTS=True, COUNT_LANES=False)
                 for t in (0, 4, 16) for b in (32, 64) for p in (8, 16)]
        # and its compaction a program a group of the count's programs (COMPACT_GROUP: fewer, longer compaction
        # programs, a row's same-word slot and ticket atomics cut by the group; a group's keys read in series) at
        # the model's tile and 16, 128 bins and 8 programs an SM (64 x 32K's and 1 x 1M's kept settings on the
        # H100): the model's group (None: _topk_bound.group_for, by the keys a group reads) and 8 (1 x 1M's best on
        # the H100: docs/perf_logs/topk_compact_group, call 1), and the model's over the voted count (where
        # _topk_bound.compact_group holds it to 4: 32 sub-segments took 128 registers against 56, cross-compiled:
        # bench.topk_xcompile). Every other setting names 1, so that each is timed as itself, not as the model.
        grouped = [dict(TILE=t, BINS=128, PROGRAMS_PER_SM=8, BLOCK=512, SEGMENTS=True, COUNT_LANES=False,
                        COMPACT_GROUP=g) for t in (0, 16) for g in (None, 8)]
        voted_grouped = [dict(TILE=t, BINS=128, PROGRAMS_PER_SM=8, BLOCK=512, SEGMENTS=True, COUNT_VOTE=True,
                              COMPACT_GROUP=None) for t in (0, 16)]
        ungrouped = [dict(s, COMPACT_GROUP=1) for s in plain + lanes + bins128 + claimed + voted]
        return [dict(s, COUNT_VOTE=s.get("COUNT_VOTE", False)) for s in ungrouped + grouped + voted_grouped]
    if path == "resident":
        if _topk_table.resident_shape(rows, width, sms, 0, _topk_table.RESIDENT_STEP) is None:
            return []
        # its chunk the model's (the fewest steps that keep every program resident), a chunk of one step
        # held in registers; 8,192 keys a step at 16 or 8 warps, or 4,096 at 8 (4,096 at 16 warps spills
        # for sm_120 under Triton 3.8 and 3.9: bench.topk_xcompile); no PDL. Timed on an H100
        # (ten settings at 1 x 1M: 28.4-31.0 us, PDL on 0.2-0.6 us slower, steps of 2,048 the slowest; 8
        # warps 7-15 us slower at 128 x 8K and 64 x 32K): it lost to the serving choice everywhere, so it
        # stays in the space at three settings only (docs/PERF.md, "Top-k: one launch for a few rows")
        return [dict(STEP=st, NUM_WARPS=w, PDL=False) for st, w in ((8192, 16), (8192, 8), (4096, 8))]
    raise ValueError(f"path: expected one of {PATHS}, got {path!r}")


def bucket_inputs(rows: int, width: int, device: str, seed: int = 0):
    """(the decode call's arguments, logits, lens) of a bucket: the fp8 logits kernel's output over
    random inputs, full lengths."""
    inp = make_decode_inputs(Problem(), rows, width, lens="full", device=device, seed=seed, max_pool_bytes=2 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
    return args, K.fp8_paged_mqa_logits(*args, False), inp.context_lens.int()


def prefill_bucket_inputs(rows: int, width: int, device: str, seed: int = 0):
    """(the ragged prefill top-k's arguments, their logits, window starts, window ends) of a "prefill"
    bucket: one block of `rows` query rows over `width` keys (fp8, the default problem; causal windows,
    the rows the last tokens of one sequence), as fp8_mqa_topk scores a block."""
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, width, device=device, seed=seed)
    args = inp.args()
    return args, K.fp8_mqa_logits(*args, False), inp.cu_seqlen_ks, inp.cu_seqlen_ke


def bucket_logits(rows: int, width: int, device: str, seed: int = 0):
    """(logits, lens) of a decode bucket (bucket_inputs)."""
    return bucket_inputs(rows, width, device, seed)[1:]


def as_served(path, settings, fn):
    """fn with every top-k call it makes served by (path, settings) (indexer_logits._topk_select.SERVING:
    read at launch, so at capture in a graph)."""
    def call():
        saved, S.SERVING = S.SERVING, (path, settings)
        try:
            return fn()
        finally:
            S.SERVING = saved
    return call


def gpu_timer(fn) -> float:
    """Microseconds per call, median of CUDA-graph replays (tuner.timing)."""
    return time_cuda_graph([fn]).p50_ms * 1e3


def tune_bucket(rows: int, width: int, k: int, device: str, sms: int, timer: Callable = gpu_timer,
                on_trial: Callable[[dict], None] = lambda t: None,
                paths: Iterable[str] = PATHS, kind: str = "decode",
                progress: Callable[[str], None] = lambda line: None) -> dict:
    """The table entry of one bucket: the fastest exact setting, and the built-in choice's time. A
    "decode" bucket times each setting as the decode top-k serves it (the logits kernel writing the
    maxima where the path reads them: indexer_logits._topk.EPILOGUE), less the logits call alone, and
    gates that call's answer too; a "prefill" bucket likewise times a ragged prefill top-k of one block
    (fp8_mqa_topk: the ragged logits kernel writing the bound path's maxima) less its logits call. Not
    the selection alone over decode logits, as before: that timed a maxima kernel the prefill no longer
    runs, and the count by rows 14% faster where the prefill ran it 10-17% slower (docs/PERF.md, "Top-k:
    the prefill's blocks"). `progress` gets a line as each path's settings are done (a bucket's compiles
    take minutes)."""
    if kind not in _topk_table.KINDS:
        raise ValueError(f"kind: expected one of {_topk_table.KINDS}, got {kind!r}")
    args, logits, lens = bucket_inputs(rows, width, device)
    ties = logits.to(torch.bfloat16).float()  # equal keys in runs: the candidates' and overflow paths
    zeros = torch.zeros_like(lens)
    idx = torch.empty(rows, k, dtype=torch.int32, device=device)
    ws = S.workspace(rows, device)
    out = torch.empty_like(idx)

    def select(x, path, settings):
        return lambda: S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path=path, settings=settings)

    if kind == "decode":
        served_logits, lo, hi = logits, zeros, lens

        def served(path, settings):
            return as_served(path, settings, lambda: K.fp8_paged_mqa_topk(*args, k, out=out))
        logits_out = torch.empty_like(logits)
        logits_call = lambda: K.fp8_paged_mqa_logits(*args, False, out=logits_out)  # noqa: E731
    else:
        pargs, served_logits, lo, hi = prefill_bucket_inputs(rows, width, device)
        block = 2 * served_logits.numel() * served_logits.element_size()  # one block of rows, whatever the path

        def served(path, settings):
            return as_served(path, settings, lambda: K.fp8_mqa_topk(*pargs, k, out=out, max_scratch_bytes=block))
        prefill_out = torch.empty_like(served_logits)
        logits_call = lambda: K.fp8_mqa_logits(*pargs, False, out=prefill_out)  # noqa: E731

    # the logits call alone, timed once: what a trial's time less it is the selection's share of (every
    # trial's call runs the same logits kernel, so the ranking is by the whole call)
    logits_us = timer(logits_call)

    def timed(path, settings) -> float:
        return timer(served(path, settings)) - logits_us

    default_path = S.pick_path(rows, width, logits.device, kind)
    default_us = timed(default_path, None)
    best = None
    for path in paths:
        t0, tried = time.time(), []
        for settings in space(path, rows, width, sms):
            trial = {"rows": rows, "width": width, "kind": kind, "k": k, "path": path, "settings": settings}
            try:
                exact = True
                for x in (logits, ties):
                    select(x, path, settings)()
                    exact = exact and mismatched_rows(idx, x, zeros, lens, k) == 0
                served(path, settings)()  # (and the served call's, maxima from the epilogue where it writes them)
                exact = exact and mismatched_rows(out, served_logits, lo, hi, k) == 0
                trial["exact"] = exact
                if exact:
                    trial["us"] = timed(path, settings)
            except Exception as exc:  # a setting that does not compile or launch here: recorded, skipped
                trial["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            on_trial(trial)
            tried.append(trial)
            if trial.get("us") is not None and (best is None or trial["us"] < best["us"]):
                best = trial
        if tried:
            exact = sum(bool(t.get("exact")) for t in tried)
            errors = sum("error" in t for t in tried)
            path_best = min((t["us"] for t in tried if t.get("us") is not None), default=None)
            progress(f"  {rows}x{width} {kind}, {path}: {len(tried)} setting{'s' * (len(tried) > 1)}, {exact} exact"
                     + (f", {errors} failed to run" if errors else "")
                     + (f", best {path_best:.1f} us" if path_best is not None else "")
                     + f" ({time.time() - t0:.0f} s)")
    if best is None:
        raise RuntimeError(f"bucket {rows}x{width}: no setting was exact (the trials file says why)")
    # the best against the built-in choice, alternated (the GPU's clock drifts between two timings
    # of one setting by ~2%): the entry is the built-in choice unless the best beats it by MARGIN
    best_us = best["us"]
    for _ in range(ROUNDS):
        best_us, default_us = min(best_us, timed(best["path"], best["settings"])), min(default_us,
                                                                                      timed(default_path, None))
    if best_us > default_us * (1 - MARGIN):
        best = {"path": default_path, "settings": {}}
        best_us = default_us
    return {"rows": rows, "width": width, "kind": kind, "path": best["path"], "settings": best["settings"],
            "us": round(best_us, 2), "default_path": default_path, "default_us": round(default_us, 2)}


def write_table(path: Path, entries: list[dict], k: int, device: str) -> None:
    """The table, written to a temporary file and renamed over the old one (never half a file)."""
    name = torch.cuda.get_device_name(device) if torch.cuda.is_available() else "cpu"
    table = {"format": 1, "gpu_slug": slugify(name), "gpu_name": name, "k": k,
             "triton": getattr(triton, "__version__", None),
             "sms": _device_sms(torch.device(device).index) if torch.cuda.is_available() else None,
             "entries": sorted(entries, key=lambda e: (e["rows"], e["width"], e.get("kind", "")))}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(table, indent=1) + "\n")
    os.replace(tmp, path)


def run(buckets, k: int, table_path: Path, trials_path: Path, fresh: bool = False, device: str = "cuda",
        timer: Callable = gpu_timer, log: Callable[[str], None] = print, paths: Iterable[str] = PATHS) -> list[dict]:
    """Tune every bucket not already in the table (every listed one with `fresh`), keeping the
    table's other entries; returns the table's entries. A table of another k keeps none (its
    entries were gated and timed for that k), and says so. `paths` narrows the search to those paths
    (a shorter tune: each bucket's entry is then the fastest of theirs, or the built-in choice)."""
    paths = parse_paths(paths)
    sms = _device_sms(torch.device(device).index) if torch.device(device).type == "cuda" else 4
    entries = []
    if table_path.is_file():
        old = _topk_table.validate(json.loads(table_path.read_text()), table_path)
        if old.get("k") == k:
            entries = old["entries"]
        else:
            log(f"{table_path}: tuned for k={old.get('k')!r}, not {k}: its {len(old['entries'])} entries are replaced")
    def same(e, rows, width, kind):  # (an entry of no kind, from before kinds, serves both)
        return (e["rows"], e["width"]) == (rows, width) and e.get("kind", kind) == kind

    trials_path.parent.mkdir(parents=True, exist_ok=True)
    n_all = len(buckets)
    for n, (rows, width, kind) in enumerate((*b, "decode")[:3] for b in buckets):
        if not fresh and any(same(e, rows, width, kind) for e in entries):
            log(f"[{n + 1}/{n_all}] {rows}x{width} {kind}: in the table, kept (--fresh retunes it)")
            continue
        t0 = time.time()
        with trials_path.open("a") as f:
            def on_trial(trial, f=f):
                f.write(json.dumps(trial) + "\n")
                f.flush()
            entry = tune_bucket(rows, width, k, device, sms, timer, on_trial, paths=paths, kind=kind, progress=log)
        entries = [e for e in entries if not same(e, rows, width, kind)] + [entry]
        write_table(table_path, entries, k, device)
        _topk_table.clear()
        log(f"[{n + 1}/{n_all}] {rows}x{width} {kind}: {entry['path']} {entry['settings']} {entry['us']:.1f} us "
            f"(built-in {entry['default_path']} {entry['default_us']:.1f} us), {time.time() - t0:.0f} s")
    return entries


def parse_paths(paths) -> tuple:
    """'bound,rounds' or an iterable of path names -> a tuple of known paths, in the space's order."""
    names = [p.strip() for p in (paths.split(",") if isinstance(paths, str) else paths) if p.strip()]
    unknown = [p for p in names if p not in PATHS]
    if unknown or not names:
        raise ValueError(f"--paths: expected some of {', '.join(PATHS)} (comma-separated), got {paths!r}")
    return tuple(p for p in PATHS if p in names)


def parse_buckets(text: Optional[str]) -> tuple:
    """'64x32768,256x65536:prefill' -> ((64, 32768, "decode"), (256, 65536, "prefill")); None -> DEFAULT_BUCKETS."""
    if not text:
        return DEFAULT_BUCKETS
    out = []
    for part in text.split(","):
        shape, _, kind = part.strip().lower().partition(":")
        try:
            rows, width = (int(v) for v in shape.split("x"))
        except ValueError:
            raise ValueError(f"--buckets: expected ROWSxWIDTH[:KIND][,...], got {part!r}") from None
        if rows < 1 or width < 1:
            raise ValueError(f"--buckets: rows and width must be positive, got {part!r}")
        if (kind or "decode") not in _topk_table.KINDS:
            raise ValueError(f"--buckets: a bucket's kind is one of {_topk_table.KINDS}, got {part!r}")
        out.append((rows, width, kind or "decode"))
    return tuple(out)
