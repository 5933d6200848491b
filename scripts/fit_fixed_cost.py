"""Fixed cost and streaming rate of the shipped fp8 decode kernel, from one bench run's rows.

The decode kernel's time depends almost only on the 64-token tiles a launch reads (B x context /
64), so this groups the run's shipped full-length fp8 next_n=1 rows by tiles and fits
T = a + b x tiles by least squares over 8K-128K tiles: `a` is what a launch costs beyond
streaming, `b` against the floor's time per tile is the streaming rate. From it: the smallest
floor at which a bucket can reach 85% (docs/PERF.md, "What bounds the small buckets").

Usage (no GPU needed): python scripts/fit_fixed_cost.py RUN_ID [--results docs/results/bench_nvidia_h200.jsonl]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

PROBLEM = {"cache_dtype": "fp8", "family": "decode_paged", "head_dim": 128, "heads": 64, "lens_mode": "1d",
           "next_n": 1, "page_size": 64, "q_dtype": "fp8", "scale_layout": "page_blocked"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_id")
    ap.add_argument("--results", default=str(Path(__file__).resolve().parent.parent / "docs/results/bench_nvidia_h200.jsonl"))
    ap.add_argument("--goal", type=float, default=0.85, help="fraction of the floor to solve for")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    rows = [r for r in rows if r["run_id"] == args.run_id and r["method"] == "shipped" and r["lens"] == "full"
            and json.loads(r["problem_json"]) == PROBLEM]
    if not rows:
        print(f"run_id: no shipped full-length fp8 next_n=1 decode rows for {args.run_id!r} in {args.results}",
              file=sys.stderr)
        return 2
    by_tiles = collections.defaultdict(list)
    for r in rows:
        by_tiles[r["bucket_batch"] * r["bucket_context"] // PROBLEM["page_size"]].append(r)
    points = []
    print(f"{'tiles':>9} {'buckets':>7} {'time (us)':>19} {'floor':>9} {'% of floor':>11}")
    for tiles in sorted(by_tiles):
        ts = [r["p50_ms"] * 1e3 for r in by_tiles[tiles]]
        floor = float(np.mean([r["floor_ms"] * 1e3 for r in by_tiles[tiles]]))
        points.append((tiles, float(np.mean(ts)), floor))
        print(f"{tiles:9d} {len(ts):7d} {min(ts):9.1f}-{max(ts):9.1f} {floor:9.1f} {100 * floor / max(ts):5.0f}-"
              f"{100 * floor / min(ts):3.0f}%")
    fit = [p for p in points if 8192 <= p[0] <= 131072]
    if len(fit) < 2:
        print("fewer than two tile counts between 8K and 128K: nothing to fit", file=sys.stderr)
        return 2
    a, b = np.linalg.lstsq(np.array([[1.0, p[0]] for p in fit]), np.array([p[1] for p in fit]), rcond=None)[0]
    floor_per_tile = float(np.mean([p[2] / p[0] for p in fit]))
    rate = floor_per_tile / b
    print(f"fit over 8K-128K tiles: fixed {a:.2f} us + {b * 1024:.3f} us per 1024 tiles "
          f"(the floor's {floor_per_tile * 1024:.3f}: streaming at {100 * rate:.1f}% of the floor's rate)")
    if args.goal * b / floor_per_tile < 1:
        need = args.goal * a / (1 - args.goal * b / floor_per_tile)
        print(f"{100 * args.goal:.0f}% of the floor needs a floor of >= {need:.1f} us "
              f"(>= {need / floor_per_tile:.0f} tiles)")
    else:
        print(f"{100 * args.goal:.0f}% of the floor is out of reach at this streaming rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
