"""Issue 7's goals, read off one bench run's stored rows (no GPU).

docs/PERF.md's "Where the goals stand" table is this script's output for the run it names. For
each goal it prints the figures that decide it and a verdict, from the rows `cli.py bench` wrote
(docs/results/bench_<gpu>.jsonl), conservatively: where a bucket was timed in more than one step
of the run (the fp8 sweep and the baselines step both time 64x8K), the slower row counts.

  fp8 decode (H=64, D=128, page 64, next_n 1, full tables unless a line says otherwise):
    >= 85% of the floor at contexts >= 32K, any batch;
    >= 75% at B=64 / 8K;  >= 60% at B=64 / 8K with the table a quarter full;
    >= 40x the full-width torch fallback at B=64 / 8K (fallback / kernel in the same step);
    next_n = 2 no slower per query row than next_n = 1 (per bucket: n2 time / 2 <= n1 time).
  bf16 decode: >= 80% of its floor at contexts >= 32K.
  fp8 prefill over ragged K: >= 60% of the fp8 matmul rate measured in the same run.

Each decode goal is read for the plain launch (`shipped`) and, where the run timed it, for
`shipped_pdl` (enable_pdl=True, launched back to back).

Usage: python scripts/goals.py RUN_ID [--results docs/results/bench_nvidia_h200.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_id")
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "results" / "bench_nvidia_h200.jsonl")
    args = ap.parse_args()
    if not args.results.is_file():
        ap.error(f"--results: no such file: {args.results}")
    rows = load_run(args.results, args.run_id)
    print(f"run {args.run_id}: {len(rows)} rows from {args.results}\n")
    print("| goal | figures | verdict |\n|---|---|---|")
    for goal, figures, verdict in goals(rows):
        print(f"| {goal} | {figures} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
