"""The markdown report with PNG plots. It only reads stored results: the bench JSON-lines files
and the trial store; nothing here measures anything.

Plots: % of the floor per bucket and method; speedup of the shipped kernel over the full-width
torch fallback; ours / DeepGEMM per bucket (where the bench took DeepGEMM; else the report says
why it did not run); tuning convergence (best score so far against trials measured, per study, with
the exhaustive grid's best where a grid run exists); time to tune per run.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
from pathlib import Path
from typing import Iterable

from indexer_logits._identity import Problem
from indexer_logits._versions import other_minor

from .bench import read_rows
from .store import Store

METHOD_ORDER = ("shipped", "shipped_pdl", "default", "autotune", "torch_fullwidth", "deepgemm", "reference")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _problem_slug(problem_json: str) -> str:
    p = json.loads(problem_json)
    return Problem(**p).slug


def _latest_run(rows: list[dict]) -> list[dict]:
    """Rows of the newest run per (gpu, problem, bucket, lens, method): one run's figures per cell."""
    best: dict[tuple, dict] = {}
    for r in rows:
        k = (r["gpu_slug"], r["problem_json"], r["bucket_batch"], r["bucket_context"], r["lens"], r["method"])
        if k not in best or r["created_at"] >= best[k]["created_at"]:
            best[k] = r
    return list(best.values())


def _same_run_shipped(all_rows: list[dict], method: str = "shipped"):
    """fallback row -> the shipped row (or `method`'s) it should be divided by: the one timed by
    the same bench invocation (same run id and start time), else the newest of the same run, else
    None. The newest row of each method may come from different runs; a ratio across runs means
    nothing."""
    index: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in all_rows:
        if r["method"] == method:
            index[(r["gpu_slug"], r["problem_json"], r["bucket_batch"], r["bucket_context"], r["lens"],
                   r["run_id"])].append(r)

    def find(fb: dict) -> dict | None:
        same = index.get((fb["gpu_slug"], fb["problem_json"], fb["bucket_batch"], fb["bucket_context"], fb["lens"],
                          fb["run_id"]), [])
        exact = [r for r in same if r["created_at"] == fb["created_at"]]
        pool = exact or same
        return max(pool, key=lambda r: r["created_at"]) if pool else None

    return find


def bench_tables(rows: list[dict]) -> str:
    paired = _same_run_shipped(rows)
    rows = _latest_run(rows)
    by_cell = collections.defaultdict(dict)
    for r in rows:
        by_cell[(r["gpu_name"], _problem_slug(r["problem_json"]), r["bucket_batch"], r["bucket_context"], r["lens"])][r["method"]] = r
    out = []
    header = "| GPU | problem | bucket | lens | " + " | ".join(METHOD_ORDER) + " | fallback / shipped | ours / DeepGEMM |"
    out.append(header)
    out.append("|" + "---|" * (6 + len(METHOD_ORDER)))
    for (gpu, slug, b, c, lens), methods in sorted(by_cell.items()):
        cells = []
        for m in METHOD_ORDER:
            r = methods.get(m)
            cells.append("-" if r is None else f"{r['p50_ms'] * 1e3:.1f} us ({100 * r['frac_of_floor']:.0f}%)")
        fb = methods.get("torch_fullwidth")
        sh = paired(fb) if fb else None
        speed = f"{fb['p50_ms'] / sh['p50_ms']:.1f}x" if fb and sh else "-"
        dg = methods.get("deepgemm")
        ours = paired(dg) if dg else None
        vs = f"{ours['p50_ms'] / dg['p50_ms']:.2f}" if dg and ours else "-"
        out.append(f"| {gpu} | {slug} | B={b}, {c} | {lens} | " + " | ".join(cells) + f" | {speed} | {vs} |")
    return "\n".join(out)


def deepgemm_pairs(rows: list[dict]) -> list[tuple[tuple, dict, dict]]:
    """(gpu, problem slug, batch, context, lens) -> (shipped row, DeepGEMM row) of the same bench
    invocation, per bucket (the newest DeepGEMM row of each)."""
    paired = _same_run_shipped(rows)
    out = []
    for r in _latest_run(rows):
        if r["method"] == "deepgemm" and (sh := paired(r)) is not None:
            out.append(((r["gpu_name"], _problem_slug(r["problem_json"]), r["bucket_batch"], r["bucket_context"],
                         r["lens"]), sh, r))
    return sorted(out, key=lambda t: t[0])


def deepgemm_absences(rows: list[dict]) -> dict[str, list[str]]:
    """Why DeepGEMM was not run -> the buckets (newest run per bucket) that say so; buckets with a
    DeepGEMM row are left out, and rows written before DeepGEMM was a baseline give one reason."""
    timed = {(r["gpu_slug"], r["problem_json"], r["bucket_batch"], r["bucket_context"], r["lens"])
             for r in rows if r["method"] == "deepgemm"}
    why: dict[str, list[str]] = collections.defaultdict(list)
    seen = set()
    for r in sorted(_latest_run(rows), key=lambda r: (r["problem_json"], r["bucket_batch"], r["bucket_context"])):
        key = (r["gpu_slug"], r["problem_json"], r["bucket_batch"], r["bucket_context"], r["lens"])
        if key in timed or key in seen:
            continue
        seen.add(key)
        reason = r.get("deepgemm_absent") or ("these bench rows predate the DeepGEMM baseline"
                                               if "deepgemm_absent" not in r else "no reason recorded")
        why[reason].append(f"{_problem_slug(r['problem_json'])} B={r['bucket_batch']} {r['bucket_context']} {r['lens']}")
    return dict(why)


def deepgemm_section(rows: list[dict], plot_dir: Path, out_md: Path) -> list[str]:
    """The report's "Against DeepGEMM" part: per bucket our time over DeepGEMM's (table and plot),
    and a line per reason where it did not run."""
    pairs = deepgemm_pairs(rows)
    absent = deepgemm_absences(rows)
    parts = ["## Against DeepGEMM", ""]
    if not pairs:
        reasons = "; ".join(absent) or "no bench rows"
        return parts + [f"DeepGEMM: not run ({reasons}).", ""]
    parts += ["Ours = the shipped kernel; both timed by the same bench invocation on the same inputs and timer, "
              "DeepGEMM's logits checked against ours on the valid region first (calc_diff). "
              "ours / DeepGEMM < 1: ours is faster.", "",
              "| GPU | problem | bucket | lens | ours | DeepGEMM | ours / DeepGEMM | DeepGEMM version | calc_diff | timer |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for (gpu, slug, b, c, lens), sh, dg in pairs:
        diff = dg.get("deepgemm_diff")
        parts.append(f"| {gpu} | {slug} | B={b}, {c} | {lens} | {sh['p50_ms'] * 1e3:.1f} us | {dg['p50_ms'] * 1e3:.1f} us | "
                     f"{sh['p50_ms'] / dg['p50_ms']:.2f} | {dg.get('deepgemm_version') or '?'} | "
                     f"{'-' if diff is None else f'{diff:.1e}'} | {dg['timer']} |")
    parts.append("")
    if plot_vs_deepgemm(pairs, plot_dir / "vs_deepgemm.png"):
        parts += [f"![ours / DeepGEMM]({_rel(plot_dir / 'vs_deepgemm.png', out_md)})", ""]
    for reason, buckets in absent.items():
        shown = ", ".join(buckets[:6]) + (f" and {len(buckets) - 6} more" if len(buckets) > 6 else "")
        parts += [f"DeepGEMM: not run at {shown} ({reason}).", ""]
    return parts


def plot_vs_deepgemm(pairs: list, path: Path) -> bool:
    """One heat map per (GPU, problem, lens): batch (rows) by context (columns), each cell our time
    over DeepGEMM's, green where ours is faster; read at a glance over ~100 buckets, where a bar
    per bucket was not."""
    if not pairs:
        return False
    plt = _plt()
    groups: dict[tuple, dict] = collections.defaultdict(dict)
    for (gpu, slug, b, c, lens), sh, dg in pairs:
        groups[(gpu, slug, lens)][(b, c)] = sh["p50_ms"] / dg["p50_ms"]
    fig, axes = plt.subplots(1, len(groups), figsize=(4.4 * len(groups), 4.2), squeeze=False,
                             gridspec_kw={"wspace": 0.3})
    for ax, ((gpu, slug, lens), cells) in zip(axes[0], sorted(groups.items())):
        batches, contexts = sorted({b for b, _ in cells}), sorted({c for _, c in cells})
        grid = [[cells.get((b, c), float("nan")) for c in contexts] for b in batches]
        image = ax.imshow(grid, cmap="RdYlGn_r", vmin=0.8, vmax=1.2, aspect="auto")
        for i, row in enumerate(grid):
            for k, v in enumerate(row):
                if v == v:
                    ax.text(k, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(contexts)), [f"{c // 1024}K" if c < 1 << 20 else f"{c >> 20}M" for c in contexts],
                      fontsize=7)
        ax.set_yticks(range(len(batches)), [str(b) for b in batches], fontsize=7)
        ax.set_xlabel("context (keys)")
        ax.set_ylabel("batch" if "_pg" in slug else "query rows")
        ax.set_title(f"{slug}, {lens}", fontsize=9)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="ours / DeepGEMM time (< 1: ours faster)")
    versions = sorted({dg.get("deepgemm_version") or "?" for _, _, dg in pairs})
    fig.suptitle(f"Shipped kernels against DeepGEMM {', '.join(versions)}, same bench invocation", fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_floor(rows: list[dict], path: Path) -> None:
    plt = _plt()
    rows = _latest_run(rows)
    cells = sorted({(_problem_slug(r["problem_json"]), r["bucket_batch"], r["bucket_context"], r["lens"]) for r in rows})
    methods = [m for m in METHOD_ORDER if any(r["method"] == m for r in rows)]
    idx = {c: i for i, c in enumerate(cells)}
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(cells) * len(methods) / 2), 4.5))
    width = 0.8 / max(len(methods), 1)
    for k, m in enumerate(methods):
        xs, ys = [], []
        for r in rows:
            if r["method"] == m:
                xs.append(idx[(_problem_slug(r["problem_json"]), r["bucket_batch"], r["bucket_context"], r["lens"])] + k * width)
                ys.append(100 * r["frac_of_floor"])
        ax.bar(xs, ys, width=width, label=m)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cells))])
    ax.set_xticklabels([f"{s}\nB={b} {c // 1024}K {l}" for s, b, c, l in cells], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("% of the floor (higher is better)")
    ax.set_yscale("log")
    ax.axhline(100, color="k", lw=0.5)
    ax.legend(fontsize=8)
    ax.set_title("Fraction of the roofline floor per bucket")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_speedup(rows: list[dict], path: Path) -> bool:
    plt = _plt()
    paired = _same_run_shipped(rows)
    rows = _latest_run(rows)
    fallbacks = {(_problem_slug(r["problem_json"]), r["bucket_batch"], r["bucket_context"], r["lens"]): r
                 for r in rows if r["method"] == "torch_fullwidth"}
    cells = [(k, fb["p50_ms"] / sh["p50_ms"]) for k, fb in sorted(fallbacks.items())
             if (sh := paired(fb)) is not None]
    if not cells:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(cells)), 4))
    ax.bar(range(len(cells)), [s for _, s in cells])
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels([f"B={b} {c // 1024}K {l}" for (s, b, c, l), _ in cells], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("full-width torch fallback time / shipped time")
    ax.set_title("Speedup over the torch fallback")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def convergence(trials: list[dict]) -> dict:
    """Per study (gpu, problem, bucket): best score so far after each measured trial, in order."""
    studies = collections.defaultdict(list)
    for t in sorted(trials, key=lambda t: (t["created_at"], t["trial_key"])):
        if t["status"] == "ok" and t["score_ms"] is not None:
            studies[(t["gpu_slug"], t["problem_key"], t["bucket_batch"], t["bucket_context"], t.get("source", ""))].append(t["score_ms"])
    curves = {}
    for k, scores in studies.items():
        best, curve = float("inf"), []
        for s in scores:
            best = min(best, s)
            curve.append(best)
        curves[k] = curve
    return curves


def plot_convergence(trials: list[dict], path: Path) -> bool:
    plt = _plt()
    by_bucket = collections.defaultdict(list)
    for t in sorted(trials, key=lambda t: (t["created_at"], t["trial_key"])):
        if t["status"] == "ok" and t["score_ms"] is not None:
            by_bucket[(_problem_slug(t["problem_json"]), t["bucket_batch"], t["bucket_context"])].append(t)
    if not by_bucket:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (slug, b, c), ts in sorted(by_bucket.items())[:12]:
        searched = [t["score_ms"] for t in ts if not str(t.get("source", "")).startswith("grid")]
        grid = [t["score_ms"] for t in ts if str(t.get("source", "")).startswith("grid")]
        best, curve = float("inf"), []
        for s in searched:
            best = min(best, s)
            curve.append(best)
        ref = min(grid) if grid else min(t["score_ms"] for t in ts)
        line, = ax.plot(range(1, len(curve) + 1), [ref / v for v in curve], label=f"{slug} B={b} {c // 1024}K")
        if grid:
            ax.axhline(1.0, color=line.get_color(), ls=":", lw=0.8)
    ax.set_xlabel("trials measured")
    ax.set_ylabel("best score so far, as a fraction of the best known (1 = best)")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(f"Tuning convergence ({min(len(by_bucket), 12)} of {len(by_bucket)} buckets shown)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def tune_times(trials: list[dict]) -> list[tuple[str, int, float]]:
    runs = collections.defaultdict(list)
    for t in trials:
        runs[t["run_id"]].append(dt.datetime.fromisoformat(t["created_at"]))
    return [(rid, len(ts), (max(ts) - min(ts)).total_seconds()) for rid, ts in sorted(runs.items())]


def tables_line(rows: list[dict]) -> str:
    """Per run: the Triton it ran under and the one the served table was tuned under (issue 30: a
    table tuned under 3.6 ran prefill 1.19x slower under 3.8; the report must not hide that)."""
    runs: dict = {}
    for r in rows:
        runs.setdefault(r["run_id"], set()).add((r.get("triton_version") or "?", r.get("table_kind") or "?",
                                                 r.get("table_triton_version")))
    parts = []
    for run_id, seen in sorted(runs.items()):
        for running, kind, tuned in sorted(seen, key=str):
            if tuned is None and kind == "?":
                parts.append(f"`{run_id}` ran under Triton {running} (the served table's Triton was not recorded then)")
                continue
            other = " (another minor)" if other_minor(tuned, running) else ""
            parts.append(f"`{run_id}` ran under Triton {running}, serving the {kind} table tuned under Triton "
                         f"{tuned or '(not recorded)'}{other}")
    return "Triton: " + "; ".join(parts) + "."


def write_report(bench_files: Iterable[Path], db_path: Path | None, out_md: Path, plot_dir: Path) -> Path:
    rows = [r for f in bench_files for r in read_rows(f)]
    trials = []
    if db_path is not None and Path(db_path).exists():
        trials = Store(db_path).trials()
    plot_dir.mkdir(parents=True, exist_ok=True)
    names = ", ".join(_rel(Path(f), out_md) for f in bench_files) or "no bench files"
    parts = ["# Benchmark and tuning report", "",
             "Generated by `python cli.py report` from the stored results only "
             f"({names}; trials: {_rel(Path(db_path), out_md) if db_path else 'none'}).",
             "Reproduce: on the GPU host `python cli.py tune`, `emit`, `verify` and `bench` (the H200 rows: "
             "`python3 -m bench.host` with the tune, emit, verify and bench presets, `--help` shows the "
             "commands; docs/PERF.md and docs/PERF_ARCHIVE.md give each run), "
             "then `python cli.py report`.", ""]
    if rows:
        runs = collections.Counter(r["run_id"] for r in rows)
        parts += ["Bench runs: " + ", ".join(f"`{k}` ({v} rows)" for k, v in sorted(runs.items())) + ".", ""]
        parts += [tables_line(rows), ""]
        timers = sorted({r["timer"] for r in rows})
        parts += [f"Timers used: {', '.join(timers)}. Cells: p50 and % of the floor (decode: bytes / measured copy "
                  "bandwidth; prefill: flops / the matmul rate of its dtype measured in the same run).", "", bench_tables(rows), ""]
        plot_floor(rows, plot_dir / "floor.png")
        parts += [f"![% of floor]({_rel(plot_dir / 'floor.png', out_md)})", ""]
        if plot_speedup(rows, plot_dir / "speedup.png"):
            parts += [f"![speedup over the fallback]({_rel(plot_dir / 'speedup.png', out_md)})", ""]
        parts += deepgemm_section(rows, plot_dir, out_md)
    else:
        parts += ["No benchmark rows yet: run `python cli.py bench`.", ""]
    if trials:
        n_ok = sum(t["status"] == "ok" for t in trials)
        parts += ["## Tuning", "", f"{len(trials)} trials stored, {n_ok} ok.", ""]
        if plot_convergence(trials, plot_dir / "convergence.png"):
            parts += [f"![convergence]({_rel(plot_dir / 'convergence.png', out_md)})", ""]
        parts += ["| run | trials | wall time between first and last trial |", "|---|---|---|"]
        parts += [f"| {rid} | {n} | {secs:.0f} s |" for rid, n, secs in tune_times(trials)]
        parts.append("")
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text("\n".join(parts))
    return out_md


def _rel(path: Path, md: Path) -> str:
    """path as seen from the report's folder (so links work), e.g. `plots/floor.png`, `../db/x`."""
    import os

    return os.path.relpath(Path(path).resolve(), Path(md).parent.resolve())
