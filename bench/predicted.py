"""The shipped H200 table's configs against a blind predicted H200 table's, timed in one process.

How good is `cli.py predict` on a GPU it was not fit to pick for? The blind table
(docs/perf_logs/predicted_h200/dispatch.json: `cli.py predict --gpu h200` over the fp8 decode problems, next_n 1 and
2; only its configs are read) and the shipped table (indexer_logits/tables/nvidia_h200/, tuned on
the GPU) choose per bucket; this tool renders both choices with the current templates, gates the
predicted ones once (reference, CUDA-graph replay with other lengths, poisoned block table), then
per bucket times them alternately (A B A B ..., --rounds pairs) by CUDA-graph replay on the same
inputs (4 block tables over a pool larger than the L2, as the tuner times), and prints each
bucket's predicted / shipped ratio (median of the rounds) and the geometric mean. A bucket where
both tables chose the same config is not timed (ratio 1 by construction). Stops timing when
--total-s is spent (the remaining buckets are listed as skipped).

Usage (GPU host): python3 -m bench.predicted [--next-n 1,2] [--lens full] [--rounds 3] [--total-s 210]
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
SMOKE_BUCKETS = ((2, 256), (3, 512))


def table_configs(path: Path) -> dict:
    """{(problem, (batch, context)): Config} of a dispatch table's entries."""
    from indexer_logits._identity import Config, Problem

    table = json.loads(Path(path).read_text())
    return {(Problem.from_dict(e["problem"]), (e["bucket"]["batch"], e["bucket"]["context"])):
            Config.from_dict(table["modules"][e["variant"]]["config"]) for e in table["entries"]}


def pairs(shipped: dict, predicted: dict, next_ns, dtype: str = "fp8") -> list:
    """(problem, bucket, shipped config, predicted config) for the decode buckets both tables have,
    smallest first (context, batch, next_n): when --total-s runs out, the largest go untimed."""
    out = []
    for (problem, bucket), config in predicted.items():
        if (problem.family != "decode_paged" or problem.cache_dtype != dtype or problem.next_n not in next_ns
                or problem.lens_mode != "1d" or (problem, bucket) not in shipped):
            continue
        out.append((problem, bucket, shipped[(problem, bucket)], config))
    return sorted(out, key=lambda r: (r[1][1], r[1][0], r[0].next_n))


def geo_mean(values) -> float:
    values = [v for v in values if v and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def report(rows) -> str:
    """rows: (problem, bucket, shipped, predicted, ratio or None when skipped)."""
    lines = [f"{'n':>2s} {'bucket':>12s} {'shipped':28s} {'predicted':28s} {'shipped us':>10s} "
             f"{'pred us':>9s} {'pred/shipped':>12s}"]
    for problem, bucket, a, b, result in rows:
        if result is None:
            cells = ("-", "-", "skipped")
        elif result == "same":
            cells = ("-", "-", "1.000 same")
        else:
            cells = (f"{result[0]:.1f}", f"{result[1]:.1f}", f"{result[1] / result[0]:.3f}")
        lines.append(f"{problem.next_n:2d} {bucket[0]:>4d}x{bucket[1]:<7d} {a.slug:28s} {b.slug:28s} "
                     f"{cells[0]:>10s} {cells[1]:>9s} {cells[2]:>12s}")
    ratios = {}
    for problem, _, _, _, result in rows:
        if result is not None:
            ratios.setdefault(problem.next_n, []).append(1.0 if result == "same" else result[1] / result[0])
    for n, rs in sorted(ratios.items()):
        lines.append(f"next_n {n}: geo-mean predicted / shipped {geo_mean(rs):.3f} over {len(rs)} buckets "
                     f"({sum(r <= 1.02 for r in rs)} within 2% or faster)")
    everything = [r for rs in ratios.values() for r in rs]
    lines.append(f"all: geo-mean predicted / shipped {geo_mean(everything):.3f} over {len(everything)} buckets")
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.predicted", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--predicted", type=Path, default=BLIND_TABLE, help="the predicted table (a dispatch.json)")
    ap.add_argument("--shipped", type=Path, default=SHIPPED_TABLE, help="the tuned table (a dispatch.json)")
    ap.add_argument("--next-n", default="1,2", help="decode draft tokens, a comma list")
    ap.add_argument("--lens", default="full", choices=["full", "quarter"], help="how the timed lengths are filled")
    ap.add_argument("--rounds", type=int, default=3, help="A/B pairs timed per bucket")
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--total-s", type=float, default=210.0,
                    help="stop timing after this many seconds from the start (gates and compiles included)")
    ap.add_argument("--cpu-smoke", action="store_true", help="no GPU: tiny shapes under the Triton interpreter")
    ap.add_argument("--stored", nargs="?", const=ROOT / "db" / "trials.sqlite", type=Path, default=None,
                    metavar="DB", help="no GPU: compare with the scores a trial store holds (default db/trials.sqlite)")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    try:
        next_ns = [int(v) for v in args.next_n.split(",") if v.strip()]
        todo = pairs(table_configs(args.shipped), table_configs(args.predicted), next_ns)
    except (OSError, ValueError, KeyError) as exc:
        ap.error(f"--predicted/--shipped/--next-n: {exc}")
    if not todo:
        ap.error("no fp8 decode bucket is in both tables for these next_n")
    if args.stored is not None:
        if not args.stored.is_file():
            ap.error(f"--stored: no trial store at {args.stored}")
        print(stored_report(todo, stored_scores(args.stored)))
        return 0

    import torch

    if not args.cpu_smoke and not torch.cuda.is_available():
        return no_cuda("with --cpu-smoke")
    from tuner.families import run_all_gates
    from tuner.gates import GateFailure
    from tuner.inputs import make_decode_inputs
    from tuner.measure import time_candidate, timing_inputs
    from tuner.render import emit, load_module

    smoke, device = args.cpu_smoke, "cpu" if args.cpu_smoke else "cuda"
    if smoke:  # the pairing and the report on tiny shapes: one pair per next_n
        firsts = {}
        for p, b, a, c in todo:
            firsts.setdefault(p.next_n, (replace(p, heads=16, head_dim=32), b, replace(a, dot_dtype="fp16"),
                                         replace(c, dot_dtype="fp16")))
        todo = [(p, bucket, a, c) for (p, _, a, c), bucket in zip(firsts.values(), SMOKE_BUCKETS)]
    gen = Path(tempfile.mkdtemp(prefix="bench_predicted_"))
    modules, rejected = {}, set()
    start = time.perf_counter()  # --total-s counts the gates and compiles too

    def module(problem, config):
        if (problem, config) not in modules:
            modules[(problem, config)] = load_module(emit(problem, config, gen))
        return modules[(problem, config)]

    for problem in dict.fromkeys(p for p, *_ in todo):
        gate_in = make_decode_inputs(problem, 3, 700 if smoke else 4096, "random", seed=1, device=device)
        for config in dict.fromkeys(c for p, _, _, c in todo if p == problem):
            try:
                run_all_gates(module(problem, config), problem, gate_in, False)
            except GateFailure as exc:
                print(f"REJECT predicted {problem.slug} {config.slug}: {exc}", flush=True)
                rejected.add((problem, config))
    rows = []
    for problem, bucket, shipped, predicted in todo:
        if (problem, predicted) in rejected or time.perf_counter() - start > args.total_s:
            rows.append((problem, bucket, shipped, predicted, None))
            continue
        if shipped == predicted:
            rows.append((problem, bucket, shipped, predicted, "same"))
            continue
        from indexer_logits._identity import Bucket

        kw = {"min_pool_bytes": 1 << 20} if smoke else {}
        sets = timing_inputs(problem, Bucket(*bucket), args.lens, device=device, **kw)
        times = {"a": [], "b": []}
        for _ in range(args.rounds):
            for key, config in (("a", shipped), ("b", predicted)):
                t = time_candidate(module(problem, config), sets, False,
                                   method="wall_clock" if smoke else "cuda_graph", replays=args.replays)
                times[key].append(t.p50_ms * 1e3)
        rows.append((problem, bucket, shipped, predicted,
                     (statistics.median(times["a"]), statistics.median(times["b"]))))
        print(report(rows[-1:]).splitlines()[1], flush=True)
        del sets
        if not smoke:
            torch.cuda.empty_cache()
    print("\n" + report(rows))
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
