"""The shipped H200 table's configs against other tables' (a blind predicted one, a fresh tune's),
timed in one process.

How good is `cli.py predict`, or a tune that never saw the H200 table (`python -m bench.blind_tune`),
on a GPU it was not fit to pick for? The candidate tables (default: docs/perf_logs/predicted_h200/
dispatch.json, `cli.py predict --gpu h200` over the fp8 decode problems, next_n 1 and 2; only their
configs are read) and the shipped table (indexer_logits/tables/nvidia_h200/, tuned on the GPU)
choose per bucket; this tool renders every choice with the current templates, gates the
candidates' once (reference, CUDA-graph replay with other lengths, poisoned block table), then per
bucket times the distinct choices alternately (A B C A B C ..., --rounds rounds) by CUDA-graph
replay on the same inputs (4 block tables over a pool larger than the L2, as the tuner times), and
prints each candidate's time / shipped (median of the rounds) per bucket and the geometric mean. A
candidate that chose the shipped config scores 1 by construction; a bucket where every table chose
the same config is not timed. Stops timing when --total-s is spent (the rest are listed as skipped).
--adopt FILE then writes the buckets where a candidate read faster than the shipped config (under
--adopt-below of its time) as a seed table, and prints the `cli.py tune --seeds-only --seed-table
FILE` commands that time those configs into the trial store, whose emit keeps the faster: how the
H200 table took 20 of a fresh tune's choices (docs/PERF.md, "The tuner's search").

Usage (GPU host): python3 -m bench.predicted [--predicted [NAME=]PATH ...] [--family decode_paged|prefill_ragged|
                  prefill_paged] [--dtype fp8|bf16] [--next-n 1,2] [--lens full|quarter|score]
                  [--rounds 3] [--total-s 210] [--adopt FILE [--adopt-below 0.985]] [--shipped PATH|defaults]
                  (--shipped defaults: a GPU with no tuned table, its predicted table against the family defaults
                  it would get without one)
No GPU:           python3 -m bench.predicted --cpu-smoke  (H=16, D=32 under the interpreter, wall clock;
                  the pairing and the report, not the figures)
                  python3 -m bench.predicted --stored  (per bucket: the same config or not, and where the
                  trial store db/trials.sqlite timed the predicted config on the H200 at that bucket, the
                  stored score ratio, predicted / shipped: an estimate from past runs, not a same-process A/B)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench._common import ROOT, no_cuda

BLIND_TABLE = ROOT / "docs" / "perf_logs" / "predicted_h200" / "dispatch.json"
SHIPPED_TABLE = ROOT / "indexer_logits" / "tables" / "nvidia_h200" / "dispatch.json"
DEFAULTS_TABLE = ROOT / "indexer_logits" / "tables" / "default" / "dispatch.json"  # --shipped defaults
SMOKE_BUCKETS = ((2, 256), (3, 512))


def table_configs(path: Path) -> dict:
    """{(problem, (batch, context)): Config} of a dispatch table's entries."""
    from indexer_logits._identity import Config, Problem

    table = json.loads(Path(path).read_text())
    return {(Problem.from_dict(e["problem"]), (e["bucket"]["batch"], e["bucket"]["context"])):
            Config.from_dict(table["modules"][e["variant"]]["config"]) for e in table["entries"]}


def default_configs(candidates: list, path: Path = DEFAULTS_TABLE) -> dict:
    """--shipped defaults: {(problem, bucket): the family default Config} for every bucket of the
    candidate tables whose problem has one, i.e. what a GPU with no table is served (the defaults
    table's `defaults`, one module a problem, whatever the bucket)."""
    from indexer_logits._identity import Config

    table = json.loads(Path(path).read_text())
    out = {}
    for candidate in candidates:
        for problem, bucket in candidate:
            variant = table["defaults"].get(problem.key)
            if variant is not None:
                out[(problem, bucket)] = Config.from_dict(table["modules"][variant]["config"])
    return out


def pairs(shipped: dict, predicted: dict, next_ns, dtype: str = "fp8", contexts=None) -> list:
    """(problem, bucket, shipped config, predicted config) for the decode buckets both tables have,
    smallest first (context, batch, next_n): when --total-s runs out, the largest go untimed."""
    return [(p, b, a, cs[0]) for p, b, a, cs in bucket_rows(shipped, [predicted], next_ns, dtype, contexts)
            if cs[0] is not None]


def bucket_rows(shipped: dict, candidates: list, next_ns, dtype: str = "fp8", contexts=None,
                family: str = "decode_paged") -> list:
    """(problem, bucket, shipped config, [each candidate table's config or None]) for the `family`'s
    buckets of this cache dtype the shipped table and at least one candidate have (decode: 1-D
    lengths, these next_n), smallest first; only those contexts where `contexts` is given (to time
    what a run cut by --total-s skipped)."""
    keys = set()
    for table in candidates:
        keys |= {k for k in table if k in shipped}
    out = []
    for problem, bucket in keys:
        decode_only = family == "decode_paged" and (problem.next_n not in next_ns or problem.lens_mode != "1d")
        if (problem.family != family or problem.cache_dtype != dtype or decode_only
                or (contexts and bucket[1] not in contexts)):
            continue
        out.append((problem, bucket, shipped[(problem, bucket)], [t.get((problem, bucket)) for t in candidates]))
    return sorted(out, key=lambda r: (r[1][1], r[1][0], r[0].next_n))


def geo_mean(values) -> float:
    values = [v for v in values if v and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def report(rows, names=("predicted",)) -> str:
    """rows: (problem, bucket, shipped, [candidate configs], result) where result is None (skipped)
    or {config: median us}; a candidate's ratio is its config's time over the shipped config's
    (1.000 by construction where it chose the shipped config)."""
    head = f"{'n':>2s} {'bucket':>12s} {'shipped':28s} {'shipped us':>10s}"
    for name in names:
        head += f" {name[:28]:28s} {name[:14] + ' /':>16s}"
    lines, ratios = [head], {name: {} for name in names}
    for problem, bucket, a, cands, result in rows:
        line = f"{problem.next_n:2d} {bucket[0]:>4d}x{bucket[1]:<7d} {a.slug:28s} "
        line += f"{'-' if not result or a not in result else format(result[a], '.1f'):>10s}"
        for name, c in zip(names, cands):
            if c is None:
                cell = "absent"
            elif c == a:
                cell = "1.000 same"
            elif not result or c not in result:
                cell = "skipped"
            else:
                cell = f"{result[c] / result[a]:.3f}"
            if cell not in ("absent", "skipped"):
                group = f"next_n {problem.next_n}" if problem.family == "decode_paged" else problem.family
                ratios[name].setdefault(group, []).append(float(cell.split()[0]))
            line += f" {'-' if c is None else c.slug:28s} {cell:>16s}"
        lines.append(line)
    for i, name in enumerate(names):
        for group, rs in sorted(ratios[name].items()):
            lines.append(f"{group}: geo-mean {name} / shipped {geo_mean(rs):.3f} over {len(rs)} buckets "
                         f"({sum(r <= 1.02 for r in rs)} within 2% or faster), worst {max(rs):.3f}")
        everything = [r for rs in ratios[name].values() for r in rs]
        mine = [(a, cands[i], result) for *_, a, cands, result in rows]
        absent = sum(1 for _, c, _ in mine if c is None)
        # A run cut by --total-s counts its same-config buckets as 1.000 beside the timed ones: say
        # how many of each, and how many were skipped, so a partial figure reads as one.
        same = sum(1 for a, c, _ in mine if c is not None and c == a)
        skipped = sum(1 for a, c, result in mine if c not in (None, a) and (not result or c not in result))
        worst = f", worst {max(everything):.3f}" if everything else ""
        lines.append(f"all: geo-mean {name} / shipped {geo_mean(everything):.3f} over {len(everything)} buckets"
                     f"{worst}" + (f", {absent} buckets absent from it" if absent else "")
                     + f" ({len(everything) - same} timed, {same} the shipped config"
                     + (f"; {skipped} skipped" if skipped else "") + ")")
    return "\n".join(lines)


def stored_scores(db: Path, slug: str = "nvidia_h200") -> dict:
    """{(problem key, batch, context, config key): the best stored score_ms (any template version)}."""
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("select problem_key, bucket_batch, bucket_context, config_key, min(score_ms) from trials "
                       "where gpu_slug = ? and status = 'ok' and score_ms is not null group by 1, 2, 3, 4", [slug])
    return {tuple(r[:4]): r[4] for r in rows}


def stored_report(todo, scores: dict) -> str:
    """Per bucket: same config or not, and the stored score ratio predicted / shipped where both were timed."""
    lines, ratios = [f"{'n':>2s} {'bucket':>12s} {'shipped':28s} {'predicted':28s} {'stored pred/shipped':>20s}"], {}
    for problem, bucket, a, b in todo:
        if a == b:
            cell, ratio = "same", 1.0
        else:
            sa, sb = (scores.get((problem.key, bucket[0], bucket[1], c.key)) for c in (a, b))
            ratio = sb / sa if sa and sb else None
            cell = f"{ratio:.3f}" if ratio else "not stored"
        if ratio:
            ratios.setdefault(problem.next_n, []).append(ratio)
        lines.append(f"{problem.next_n:2d} {bucket[0]:>4d}x{bucket[1]:<7d} {a.slug:28s} {b.slug:28s} {cell:>20s}")
    for n in sorted({p.next_n for p, *_ in todo}):
        mine = [r for r in todo if r[0].next_n == n]
        same = sum(a == b for _, _, a, b in mine)
        rs = ratios.get(n, [])
        lines.append(f"next_n {n}: {same} of {len(mine)} buckets the same config; stored geo-mean predicted / shipped "
                     f"{geo_mean(rs):.3f} over the {len(rs)} buckets with both stored (same ones count 1.000)")
    return "\n".join(lines)


def adopt(rows, named: list, below: float, out: Path) -> list:
    """The buckets where a candidate's config read faster than the shipped one in these rounds (its
    time / the shipped config's < below), each with the fastest such candidate's entry, written as a
    dispatch table that `cli.py tune --seeds-only --seed-table OUT` times into the trial store (emit
    then keeps whichever the store has faster): what a fresh tune found, adopted without hand-made
    filtering. Returns the tune commands, one per next_n."""
    from indexer_logits._identity import Problem

    picked = {}
    for problem, bucket, a, cands, result in rows:
        if not result or a not in result:
            continue
        best = min(((result[c] / result[a], i) for i, c in enumerate(cands) if c not in (None, a) and c in result),
                   default=None)
        if best and best[0] < below:
            picked[(problem, bucket)] = best[1]
    tables = [json.loads(Path(path).read_text()) for _, path in named]
    entries, modules, written = [], {}, []
    for i, table in enumerate(tables):
        for e in table["entries"]:
            key = (Problem.from_dict(e["problem"]), (e["bucket"]["batch"], e["bucket"]["context"]))
            if picked.get(key) == i:
                entries.append(e)
                modules[e["variant"]] = table["modules"][e["variant"]]
                written.append(key)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"format": tables[0].get("format") if tables else None, "entries": entries,
                               "modules": modules, "defaults": {},
                               "provenance": {"adopted_from": [str(p) for _, p in named], "below": below}},
                              indent=1, sort_keys=True) + "\n")
    commands = []
    for n in sorted({p.next_n for p, _ in written}):
        mine = [(p, b) for p, b in written if p.next_n == n]
        dtype = mine[0][0].cache_dtype
        batches = ",".join(str(b) for b in sorted({b[0] for _, b in mine}))
        contexts = ",".join(str(c) for c in sorted({b[1] for _, b in mine}))
        commands.append(f"python3 cli.py tune --dtype {dtype} --next-n {n} --batch {batches} --context {contexts} "
                        f"--seeds-only --seed-table {out} --trials 1")
    return commands


def _name(path: Path) -> str:
    """A candidate table's column name: NAME=PATH's name, else its folder (tables/<slug>/<kind>/dispatch.json)."""
    parts = Path(path).parts
    return "/".join(parts[-3:-1]) if len(parts) >= 3 else Path(path).stem


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.predicted", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--predicted", action="append", default=None, metavar="[NAME=]PATH",
                    help="a candidate table (a dispatch.json; repeatable: every candidate is timed in the same "
                         "rounds) [default: the blind predicted H200 table]")
    ap.add_argument("--shipped", type=Path, default=SHIPPED_TABLE,
                    help="the tuned table (a dispatch.json), or `defaults`: the family defaults a GPU with no table "
                         "gets, at each of the candidates' buckets")
    ap.add_argument("--family", default="decode_paged", choices=["decode_paged", "prefill_ragged", "prefill_paged"],
                    help="whose buckets are timed (prefill: every query row's window, --next-n not read)")
    ap.add_argument("--next-n", default="1,2", help="decode draft tokens, a comma list")
    ap.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"], help="the problems' cache dtype")
    ap.add_argument("--lens", default="full", choices=["full", "quarter", "score"],
                    help="how the timed lengths are filled; score: full and a quarter, summed (the tuner's objective)")
    ap.add_argument("--rounds", type=int, default=3, help="A/B pairs timed per bucket")
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--total-s", type=float, default=210.0,
                    help="stop timing after this many seconds from the start (gates and compiles included)")
    ap.add_argument("--contexts", default="",
                    help="only these bucket contexts, a comma list (e.g. 32768,131072: what a cut run skipped)")
    ap.add_argument("--adopt", type=Path, default=None, metavar="FILE",
                    help="write the buckets where a candidate read faster than the shipped config (see --adopt-below) "
                         "as a seed table for `cli.py tune --seeds-only --seed-table FILE`, and print those commands")
    ap.add_argument("--adopt-below", type=float, default=0.985, metavar="RATIO",
                    help="candidate / shipped time under which --adopt takes a bucket [default: 0.985]")
    ap.add_argument("--cpu-smoke", action="store_true", help="no GPU: tiny shapes under the Triton interpreter")
    ap.add_argument("--stored", nargs="?", const=ROOT / "db" / "trials.sqlite", type=Path, default=None,
                    metavar="DB", help="no GPU: compare with the scores a trial store holds (default db/trials.sqlite)")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    named, items = [], args.predicted or [str(BLIND_TABLE)]
    for item in items:  # NAME=PATH; one unnamed candidate is "predicted", several are named by their folders
        name, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        named.append((name or ("predicted" if len(items) == 1 else _name(Path(path))), Path(path)))
    names = [n for n, _ in named]
    try:
        next_ns = [int(v) for v in args.next_n.split(",") if v.strip()]
        tables = [table_configs(path) for _, path in named]
        shipped = default_configs(tables) if str(args.shipped) == "defaults" else table_configs(args.shipped)
        contexts = {int(v) for v in args.contexts.split(",") if v.strip()}
        todo = bucket_rows(shipped, tables, next_ns, args.dtype, contexts, args.family)
    except (OSError, ValueError, KeyError) as exc:
        ap.error(f"--predicted/--shipped/--next-n/--contexts: {exc}")
    if not todo:
        what = "decode bucket is in both tables for these next_n" if args.family == "decode_paged" else \
            f"{args.family} bucket is in both tables"
        ap.error(f"no {args.dtype} {what}" + (f" and contexts {sorted(contexts)}" if contexts else ""))
    if args.stored is not None:
        if not args.stored.is_file():
            ap.error(f"--stored: no trial store at {args.stored}")
        print(stored_report(pairs(shipped, tables[0], next_ns, args.dtype, contexts), stored_scores(args.stored)))
        return 0

    import torch

    if not args.cpu_smoke and not torch.cuda.is_available():
        return no_cuda("with --cpu-smoke")
    from indexer_logits._identity import Bucket
    from tuner.families import family_of, run_all_gates
    from tuner.gates import GateFailure
    from tuner.measure import time_candidate, timing_inputs
    from tuner.render import emit, load_module

    smoke, device = args.cpu_smoke, "cpu" if args.cpu_smoke else "cuda"
    if smoke:  # the pairing and the report on tiny shapes: one bucket per next_n
        firsts = {}
        for p, b, a, cs in todo:
            small = lambda c: None if c is None else replace(c, dot_dtype="fp16")  # noqa: E731
            firsts.setdefault(p.next_n, (replace(p, heads=16, head_dim=32), small(a), [small(c) for c in cs]))
        todo = [(p, bucket, a, cs) for (p, a, cs), bucket in zip(firsts.values(), SMOKE_BUCKETS)]
    gen = Path(tempfile.mkdtemp(prefix="bench_predicted_"))
    modules, rejected = {}, set()
    start = time.perf_counter()  # --total-s counts the gates and compiles too

    def module(problem, config):
        if (problem, config) not in modules:
            modules[(problem, config)] = load_module(emit(problem, config, gen))
        return modules[(problem, config)]

    for problem in dict.fromkeys(p for p, *_ in todo):  # the candidates' configs are gated; the shipped ones were
        decode = problem.family == "decode_paged"  # (decode: 3 requests of 4,096 keys, as this tool always gated)
        shape = (3, 700 if smoke else 4096) if decode else ((2, 256) if smoke else family_of(problem).gate_shape_gpu)
        gate_in = family_of(problem).gate_inputs(problem, *shape, 1, device)
        for config in dict.fromkeys(c for p, _, a, cs in todo if p == problem for c in cs if c not in (None, a)):
            try:
                run_all_gates(module(problem, config), problem, gate_in, False)
            except GateFailure as exc:
                print(f"REJECT {problem.slug} {config.slug}: {exc}", flush=True)
                rejected.add((problem, config))
    rows = []
    for problem, bucket, shipped_config, cands in todo:
        configs = [c for c in dict.fromkeys([shipped_config, *cands]) if c is not None and (problem, c) not in rejected]
        if len(configs) == 1 or time.perf_counter() - start > args.total_s:
            rows.append((problem, bucket, shipped_config, cands, None))
            continue
        kw = {"min_pool_bytes": 1 << 20} if smoke else {}
        sets = timing_inputs(problem, Bucket(*bucket), "full" if args.lens == "score" else args.lens, device=device, **kw)
        fills = [sets]
        partial = family_of(problem).partial_timing_inputs(problem, Bucket(*bucket), sets, 0) \
            if args.lens == "score" else None
        if partial is not None:  # the same pool and tables, a quarter of the lengths (tuner.tasks' "partial")
            fills.append(partial)
        times = {c: [] for c in configs}
        for _ in range(args.rounds):  # alternating: A B C A B C ...
            for config in configs:
                times[config].append(sum(
                    time_candidate(module(problem, config), fill, False, method="wall_clock" if smoke else "cuda_graph",
                                   replays=args.replays).p50_ms * 1e3 for fill in fills))
        rows.append((problem, bucket, shipped_config, cands, {c: statistics.median(v) for c, v in times.items()}))
        print(report(rows[-1:], names).splitlines()[1], flush=True)
        del sets
        if not smoke:
            torch.cuda.empty_cache()
    print("\n" + report(rows, names))
    if args.adopt is not None:
        commands = adopt(rows, named, args.adopt_below, args.adopt)
        print(f"\n{args.adopt}: {len(commands)} tune command(s) to time its buckets"
              if commands else f"\n{args.adopt}: no bucket read faster than {args.adopt_below} of the shipped config")
        for command in commands:
            print(f"  {command}")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
