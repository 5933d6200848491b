"""How well tuner.model picks on a GPU whose trials are stored: per bucket, the config the model
ranks first among the timed ones (with each trial's own registers and shared memory), against the
best timed score; the geo-mean of that regret is tuner.model's fit figure. No GPU.

Usage: python -m bench.model_fit [--db db/trials.sqlite] [--slug nvidia_h200] [--gpu h200] [--min-configs 5]
                                 [--family decode|prefill] [--latency-us X --start-us Y] [--verbose]
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

from bench._common import ROOT


FAMILIES = {"decode": ("decode_paged",), "prefill": ("prefill_ragged", "prefill_paged")}


def load_groups(db: Path, slug: str, family: str = "decode") -> dict:
    """{(problem, batch, context): {config key: the best ok trial row of that config}} of the
    family's problems (FAMILIES: decode, or the two prefill families)."""
    from indexer_logits._identity import Problem

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    names = FAMILIES[family]
    rows = con.execute("select * from trials where gpu_slug = ? and status = 'ok' and score_ms is not null "
                       f"and family in ({', '.join('?' * len(names))}) and registers is not null",
                       [slug, *names]).fetchall()
    groups: dict = defaultdict(dict)
    for r in rows:
        key = (Problem.from_json(r["problem_json"]), r["bucket_batch"], r["bucket_context"])
        old = groups[key].get(r["config_key"])
        if old is None or r["score_ms"] < old["score_ms"]:
            groups[key][r["config_key"]] = r
    return groups


def regrets(groups: dict, dev, min_configs: int = 5) -> list:
    """(problem, batch, context, configs, regret, chosen row) per bucket with min_configs or more."""
    from indexer_logits._identity import Config
    from tuner import model

    out = []
    for (problem, b, c), trials in sorted(groups.items(), key=lambda kv: (kv[0][0].slug, kv[0][1], kv[0][2])):
        if len(trials) < min_configs:
            continue
        best = min(r["score_ms"] for r in trials.values())

        def rank(r):
            config = Config.from_json(r["config_json"])
            res = model.Resources(r["registers"], r["shared_bytes"], model._likely_mma(problem, config, dev))
            return model.rank_us(dev, problem, config, res, b, c), r["config_key"]

        chosen = min(trials.values(), key=rank)
        out.append((problem, b, c, len(trials), chosen["score_ms"] / best, chosen))
    return out


def geo_mean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.model_fit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=ROOT / "db" / "trials.sqlite")
    ap.add_argument("--slug", default="nvidia_h200", help="the GPU slug of the stored trials")
    ap.add_argument("--gpu", default="h200", help="the built-in device (tuner/devices.py) the model takes")
    ap.add_argument("--min-configs", type=int, default=5, help="buckets with fewer timed configs are left out")
    ap.add_argument("--family", default="decode", choices=sorted(FAMILIES), help="decode, or the two prefill families")
    ap.add_argument("--latency-us", type=float, default=None)
    ap.add_argument("--start-us", type=float, default=None)
    ap.add_argument("--verbose", action="store_true", help="one line per bucket")
    args = ap.parse_args(argv)
    from tuner.devices import device

    if not args.db.is_file():
        ap.error(f"--db: no trial store at {args.db}")
    try:
        dev = device(args.gpu, latency_us=args.latency_us, start_us=args.start_us)
    except ValueError as exc:
        ap.error(str(exc))
    rows = regrets(load_groups(args.db, args.slug, args.family), dev, args.min_configs)
    if not rows:
        print(f"no {args.family} bucket with {args.min_configs}+ timed configs for {args.slug} in {args.db}")
        return 1
    by_problem: dict = defaultdict(list)
    for problem, b, c, n, regret, chosen in rows:
        by_problem[problem.slug].append(regret)
        if args.verbose:
            print(f"{problem.slug:24s} {b:4d}x{c:<8d} {n:3d} configs  regret {regret:.3f}  {chosen['variant']}")
    for slug, rs in sorted(by_problem.items()):
        print(f"{slug:24s} {len(rs):3d} buckets  geo-mean regret {geo_mean(rs):.3f}  worst {max(rs):.3f}")
    everything = [r[4] for r in rows]
    print(f"all: {len(everything)} buckets, geo-mean regret {geo_mean(everything):.3f}, worst {max(everything):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
