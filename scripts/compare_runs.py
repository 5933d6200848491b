"""Two bench runs' decode rows side by side (no GPU): per (dtype, next_n, lens), the geometric mean
of B's time over A's for the buckets both timed, its range, and the buckets at either end.

docs/PERF.md's "against run X" lines are this script's output. As in scripts/goals.py, a bucket
timed in more than one step of a run counts its slower row.

Usage: python scripts/compare_runs.py RUN_A RUN_B [--method shipped] [--list fp8,1,full]
       [--results docs/results/bench_nvidia_h200.jsonl]
  --list DTYPE,NEXT_N,LENS   also print every bucket of that group, fastest ratio first
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from goals import ROOT, decode_rows, load_run  # noqa: E402

GROUPS = [(dtype, next_n, lens) for dtype in ("fp8", "bf16") for next_n in (1, 2) for lens in ("full", "quarter")]


def slowest(rows_by_bucket: dict) -> dict[tuple[int, int], float]:
    return {bucket: max(r["p50_ms"] for r in rs) for bucket, rs in rows_by_bucket.items()}


def ratios(rows_a: list[dict], rows_b: list[dict], group: tuple[str, int, str], method: str) -> list[tuple[float, tuple, float, float]]:
    """(B / A, bucket, A's ms, B's ms) for the buckets of `group` that both runs timed."""
    a = slowest(decode_rows(rows_a, *group, method))
    b = slowest(decode_rows(rows_b, *group, method))
    return sorted((b[k] / a[k], k, a[k], b[k]) for k in set(a) & set(b))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--method", default="shipped")
    ap.add_argument("--list", default="", help="DTYPE,NEXT_N,LENS: print that group's buckets too")
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "results" / "bench_nvidia_h200.jsonl")
    args = ap.parse_args()
    if not args.results.is_file():
        ap.error(f"--results: no such file: {args.results}")
    listed = None
    if args.list:
        try:
            dtype, next_n, lens = args.list.split(",")
            listed = (dtype, int(next_n), lens)
        except ValueError:
            ap.error(f"--list: expected DTYPE,NEXT_N,LENS such as fp8,1,full, got {args.list!r}")
    rows_a, rows_b = load_run(args.results, args.run_a), load_run(args.results, args.run_b)
    print(f"{args.run_b} over {args.run_a}, method {args.method} (p50, the slower row of a bucket)")
    found = False
    for group in GROUPS:
        rs = ratios(rows_a, rows_b, group, args.method)
        if not rs:
            continue
        found = True
        geo = math.exp(sum(math.log(r) for r, *_ in rs) / len(rs))
        (lo, klo, *_), (hi, khi, *_) = rs[0], rs[-1]
        print(f"{group[0]:5s} n{group[1]} {group[2]:8s} {len(rs):3d} buckets  geo-mean {geo:.3f}  "
              f"min {lo:.3f} ({klo[0]}x{klo[1] // 1024}K)  max {hi:.3f} ({khi[0]}x{khi[1] // 1024}K)")
        if group == listed:
            for r, (batch, context), ms_a, ms_b in rs:
                print(f"    {batch}x{context // 1024}K  {1e3 * ms_a:.2f} -> {1e3 * ms_b:.2f} us  {r:.3f}")
    if not found:
        print(f"no decode bucket timed by method {args.method!r} in both runs")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
