"""Read bench runs' stored rows (no GPU): the rows `cli.py bench` appends to
docs/results/bench_<gpu>.jsonl, one run id per bench campaign.

  goals RUN_ID             issue 7's goals and a verdict each (docs/PERF.md "Where the goals stand")
  compare RUN_A RUN_B      two runs' decode rows side by side ("against run X" lines)
  fixed-cost RUN_ID        the fixed cost and streaming rate of the shipped fp8 decode kernel
                           ("What bounds the small buckets")

Each takes --results FILE (default: the only docs/results/bench_*.jsonl, else the H200's).
Where a bucket was timed in more than one step of a run (the fp8 sweep and the baselines step
both time 64x8K), the slower row counts.

goals: conservatively, for each goal the figures that decide it and a verdict:
  fp8 decode (H=64, D=128, page 64, next_n 1, full tables unless a line says otherwise):
    >= 85% of the floor at contexts >= 32K, any batch;
    >= 75% at B=64 / 8K;  >= 60% at B=64 / 8K with the table a quarter full;
    >= 40x the full-width torch fallback at B=64 / 8K (fallback / kernel in the same step);
    next_n = 2 no slower per query row than next_n = 1 (per bucket: n2 time / 2 <= n1 time).
  bf16 decode: >= 80% of its floor at contexts >= 32K.
  fp8 prefill over ragged K: >= 60% of the fp8 matmul rate measured in the same run.
Each decode goal is read for the plain launch (`shipped`) and, where the run timed it, for
`shipped_pdl` (enable_pdl=True, launched back to back).

compare: per (dtype, next_n, lens), the geometric mean of B's time over A's for the buckets both
timed, its range, and the buckets at either end; --list DTYPE,NEXT_N,LENS also prints every
bucket of that group, fastest ratio first.

fixed-cost: the decode kernel's time depends almost only on the 64-token tiles a launch reads
(B x context / 64), so this groups the run's shipped full-length fp8 next_n=1 rows by tiles and
fits T = a + b x tiles by least squares over 8K-128K tiles: `a` is what a launch costs beyond
streaming, `b` against the floor's time per tile is the streaming rate. From it: the smallest
floor at which a bucket can reach --goal (85%) of its floor.

Usage: python -m bench.runs goals RUN_ID
       python -m bench.runs compare RUN_A RUN_B [--method shipped] [--list fp8,1,full]
       python -m bench.runs fixed-cost RUN_ID [--goal 0.85]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

from bench._common import default_results

METHODS = ("shipped", "shipped_pdl")


def load_run(path: Path, run_id: str) -> list[dict]:
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{n}: not a JSON line ({exc})")
            if row.get("run_id") == run_id:
                row["problem"] = json.loads(row["problem_json"])
                rows.append(row)
    if not rows:
        runs = sorted({json.loads(ln).get("run_id") for ln in open(path) if ln.strip()} - {None})
        raise SystemExit(f"run_id: no rows of {run_id!r} in {path} (runs there: {', '.join(runs[-6:])})")
    return rows


def decode_rows(rows, dtype: str, next_n: int, lens: str, method: str) -> dict[tuple[int, int], list[dict]]:
    """(batch, context) -> the run's rows of that decode problem, lens and method."""
    out = defaultdict(list)
    for r in rows:
        p = r["problem"]
        if (r["family"] == "decode_paged" and p["cache_dtype"] == dtype and p["next_n"] == next_n
                and p.get("lens_mode", "1d") == "1d" and p.get("heads") == 64 and p.get("head_dim") == 128
                and p.get("page_size") == 64 and r["lens"] == lens and r["method"] == method):
            out[(r["bucket_batch"], r["bucket_context"])].append(r)
    return out


def worst_pct(rs: list[dict]) -> float:
    return 100 * min(r["frac_of_floor"] for r in rs)


def pct_list(items) -> str:
    return ", ".join(f"{b}x{c // 1024}K {pct:.1f}%" for (b, c), pct in items) or "none"


def goals(rows: list[dict]) -> list[tuple[str, str, str]]:
    """(goal, figures, verdict) per goal and launch method."""
    out = []
    for m in METHODS:
        full = decode_rows(rows, "fp8", 1, "full", m)
        if not full:
            continue
        tag = "" if m == "shipped" else f" ({m})"
        long = {k: worst_pct(v) for k, v in sorted(full.items()) if k[1] >= 32768}
        under = [(k, v) for k, v in long.items() if v < 85]
        out.append((f"fp8 decode >= 85% at >= 32K{tag}",
                    f"{len(long) - len(under)} of {len(long)} buckets; under: {pct_list(under)}",
                    "met" if long and not under else "not met"))
        if (64, 8192) in full:
            pcts = sorted(100 * r["frac_of_floor"] for r in full[(64, 8192)])
            out.append((f"fp8 decode >= 75% at 64x8K{tag}",
                        " / ".join(f"{p:.1f}%" for p in pcts) + " (each step's row)",
                        "met" if pcts[0] >= 75 else "not met"))
        quarter = decode_rows(rows, "fp8", 1, "quarter", m)
        if (64, 8192) in quarter:
            pct = worst_pct(quarter[(64, 8192)])
            out.append((f"fp8 decode >= 60% at 64x8K, a quarter full{tag}", f"{pct:.1f}%",
                        "met" if pct >= 60 else "not met"))
        ratios = fallback_ratios(rows, m)
        if ratios:
            out.append((f">= 40x the full-width fallback at 64x8K{tag}",
                        "; ".join(f"{fb * 1e3:.1f} us / {k * 1e3:.2f} us = {fb / k:.2f}x" for fb, k in ratios),
                        "met" if min(fb / k for fb, k in ratios) >= 40 else "not met"))
        n2 = decode_rows(rows, "fp8", 2, "full", m)
        per_row = [min(r["p50_ms"] for r in n2[k]) / 2 / min(r["p50_ms"] for r in full[k]) for k in n2 if k in full]
        if per_row:
            out.append((f"next_n = 2 no slower per query row{tag}",
                        f"n2 / 2 over n1: {min(per_row):.2f}-{max(per_row):.2f} in {len(per_row)} buckets",
                        "met" if max(per_row) <= 1 else "not met"))
        bf16 = decode_rows(rows, "bf16", 1, "full", m)
        long16 = {k: worst_pct(v) for k, v in sorted(bf16.items()) if k[1] >= 32768}
        if long16:
            under = [(k, v) for k, v in long16.items() if v < 80]
            # the smallest batch from which every >= 32K bucket meets it
            batches = sorted({b for b, _ in long16})
            from_b = next((b for b in batches if all(v >= 80 for (bb, _), v in long16.items() if bb >= b)), None)
            out.append((f"bf16 decode >= 80% at >= 32K{tag}",
                        f"{len(long16) - len(under)} of {len(long16)} buckets; under: {pct_list(under)}",
                        "met" if not under else (f"met from B={from_b}" if from_b else "not met")))
    prefill = [r for r in rows if r["family"] == "prefill_ragged" and r["problem"]["cache_dtype"] == "fp8"
               and r["method"] == "shipped"]
    if prefill:
        pcts = sorted((r["bucket_context"], r["bucket_batch"], 100 * r["frac_of_floor"], r["matmul_rate"])
                      for r in prefill)
        out.append(("fp8 prefill (ragged K) >= 60% of the matmul rate",
                    "; ".join(f"{b}x{c // 1024}K {p:.1f}% of {rate / 1e12:.0f} TFLOP/s" for c, b, p, rate in pcts),
                    "met" if min(p for _, _, p, _ in pcts) >= 60 else "not met"))
    return out


def fallback_ratios(rows: list[dict], method: str) -> list[tuple[float, float]]:
    """(fallback p50, kernel p50) of 64x8K full, per bench step (one `cli.py bench` call) that
    timed both: the ratio compares timings of one process."""
    steps = defaultdict(dict)
    for m in (method, "torch_fullwidth"):
        for r in decode_rows(rows, "fp8", 1, "full", m).get((64, 8192), []):
            steps[r["created_at"]][m] = r["p50_ms"]
    return [(s["torch_fullwidth"], s[method]) for _, s in sorted(steps.items())
            if "torch_fullwidth" in s and method in s]



# ---------------------------------------------------------------------------------------------
# compare

GROUPS = [(dtype, next_n, lens) for dtype in ("fp8", "bf16") for next_n in (1, 2) for lens in ("full", "quarter")]


def slowest(rows_by_bucket: dict) -> dict[tuple[int, int], float]:
    return {bucket: max(r["p50_ms"] for r in rs) for bucket, rs in rows_by_bucket.items()}


def ratios(rows_a: list[dict], rows_b: list[dict], group: tuple[str, int, str], method: str) -> list[tuple[float, tuple, float, float]]:
    """(B / A, bucket, A's ms, B's ms) for the buckets of `group` that both runs timed."""
    a = slowest(decode_rows(rows_a, *group, method))
    b = slowest(decode_rows(rows_b, *group, method))
    return sorted((b[k] / a[k], k, a[k], b[k]) for k in set(a) & set(b))


def compare(rows_a: list[dict], rows_b: list[dict], method: str, listed: tuple | None) -> list[str]:
    """The comparison's lines (empty: no decode bucket timed by `method` in both runs)."""
    out = []
    for group in GROUPS:
        rs = ratios(rows_a, rows_b, group, method)
        if not rs:
            continue
        geo = math.exp(sum(math.log(r) for r, *_ in rs) / len(rs))
        (lo, klo, *_), (hi, khi, *_) = rs[0], rs[-1]
        out.append(f"{group[0]:5s} n{group[1]} {group[2]:8s} {len(rs):3d} buckets  geo-mean {geo:.3f}  "
                   f"min {lo:.3f} ({klo[0]}x{klo[1] // 1024}K)  max {hi:.3f} ({khi[0]}x{khi[1] // 1024}K)")
        if group == listed:
            for r, (batch, context), ms_a, ms_b in rs:
                out.append(f"    {batch}x{context // 1024}K  {1e3 * ms_a:.2f} -> {1e3 * ms_b:.2f} us  {r:.3f}")
    return out


# ---------------------------------------------------------------------------------------------
# fixed-cost

FIT_PROBLEM = {"cache_dtype": "fp8", "family": "decode_paged", "head_dim": 128, "heads": 64, "lens_mode": "1d",
               "next_n": 1, "page_size": 64, "q_dtype": "fp8", "scale_layout": "page_blocked"}
FIT_TILES = (8192, 131072)  # the tile counts the fit uses: below, the fixed cost is all; above, L2 plays no part


def tile_points(rows: list[dict]) -> list[tuple[int, list[float], float]]:
    """(tiles, the p50s in us of the shipped full-length fp8 next_n=1 rows with that many tiles,
    their mean floor in us), by tiles."""
    by_tiles = collections.defaultdict(list)
    for r in rows:
        if r["method"] == "shipped" and r["lens"] == "full" and r["problem"] == FIT_PROBLEM:
            by_tiles[r["bucket_batch"] * r["bucket_context"] // FIT_PROBLEM["page_size"]].append(r)
    return [(tiles, [r["p50_ms"] * 1e3 for r in rs], sum(r["floor_ms"] * 1e3 for r in rs) / len(rs))
            for tiles, rs in sorted(by_tiles.items())]


def fit_fixed_cost(points: list[tuple[int, list[float], float]]) -> tuple[float, float, float]:
    """(fixed us, us per tile, the floor's us per tile) of T = a + b x tiles, least squares over the
    mean time of each tile count in FIT_TILES (ValueError if fewer than two)."""
    fit = [(t, sum(ts) / len(ts), fl) for t, ts, fl in points if FIT_TILES[0] <= t <= FIT_TILES[1]]
    if len(set(t for t, _, _ in fit)) < 2:
        raise ValueError("fewer than two tile counts between 8K and 128K: nothing to fit")
    n = len(fit)
    mx, my = sum(t for t, _, _ in fit) / n, sum(y for _, y, _ in fit) / n
    b = sum((t - mx) * (y - my) for t, y, _ in fit) / sum((t - mx) ** 2 for t, _, _ in fit)
    return my - b * mx, b, sum(fl / t for t, _, fl in fit) / n


def fixed_cost(rows: list[dict], goal: float) -> list[str]:
    points = tile_points(rows)
    if not points:
        raise ValueError("no shipped full-length fp8 next_n=1 decode rows")
    out = [f"{'tiles':>9} {'buckets':>7} {'time (us)':>19} {'floor':>9} {'% of floor':>11}"]
    for tiles, ts, floor in points:
        out.append(f"{tiles:9d} {len(ts):7d} {min(ts):9.1f}-{max(ts):9.1f} {floor:9.1f} {100 * floor / max(ts):5.0f}-"
                   f"{100 * floor / min(ts):3.0f}%")
    a, b, floor_per_tile = fit_fixed_cost(points)
    out.append(f"fit over 8K-128K tiles: fixed {a:.2f} us + {b * 1024:.3f} us per 1024 tiles "
               f"(the floor's {floor_per_tile * 1024:.3f}: streaming at {100 * floor_per_tile / b:.1f}% of the floor's rate)")
    if goal * b / floor_per_tile < 1:
        need = goal * a / (1 - goal * b / floor_per_tile)
        out.append(f"{100 * goal:.0f}% of the floor needs a floor of >= {need:.1f} us "
                   f"(>= {need / floor_per_tile:.0f} tiles)")
    else:
        out.append(f"{100 * goal:.0f}% of the floor is out of reach at this streaming rate")
    return out


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.runs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=None,
                    help="the bench results file (default: the only docs/results/bench_*.jsonl, else the H200's)")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("goals", help="issue 7's goals read off one run")
    p.add_argument("run_id")
    p = sub.add_parser("compare", help="run B's decode times over run A's")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--method", default="shipped")
    p.add_argument("--list", default="", help="DTYPE,NEXT_N,LENS: print that group's buckets too")
    p = sub.add_parser("fixed-cost", help="fit T = fixed + per-tile over the shipped fp8 decode rows of one run")
    p.add_argument("run_id")
    p.add_argument("--goal", type=float, default=0.85, help="fraction of the floor to solve for")
    # --results is accepted after the sub-command too
    for p in sub.choices.values():
        p.add_argument("--results", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    results = args.results or default_results()
    if not results.is_file():
        ap.error(f"--results: no such file: {results}")
    if args.command == "goals":
        rows = load_run(results, args.run_id)
        print(f"run {args.run_id}: {len(rows)} rows from {results}\n")
        print("| goal | figures | verdict |\n|---|---|---|")
        for goal, figures, verdict in goals(rows):
            print(f"| {goal} | {figures} | {verdict} |")
        return 0
    if args.command == "compare":
        listed = None
        if args.list:
            try:
                dtype, next_n, lens = args.list.split(",")
                listed = (dtype, int(next_n), lens)
            except ValueError:
                ap.error(f"--list: expected DTYPE,NEXT_N,LENS such as fp8,1,full, got {args.list!r}")
        rows_a, rows_b = load_run(results, args.run_a), load_run(results, args.run_b)
        print(f"{args.run_b} over {args.run_a}, method {args.method} (p50, the slower row of a bucket)")
        lines = compare(rows_a, rows_b, args.method, listed)
        print("\n".join(lines) if lines else f"no decode bucket timed by method {args.method!r} in both runs")
        return 0 if lines else 1
    rows = load_run(results, args.run_id)
    try:
        print("\n".join(fixed_cost(rows, args.goal)))
    except ValueError as exc:
        print(f"run {args.run_id!r} in {results}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
