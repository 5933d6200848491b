"""What a search reports: per-bucket summaries from the store, the run's totals, the end-of-run
table, and the progress bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from indexer_logits._identity import Bucket, Problem


@dataclass
class BucketSummary:
    problem: Problem
    bucket: Bucket
    best: Optional[dict] = None  # the best ok trial row
    measured: int = 0  # ok rows (timed), any run
    pruned: int = 0  # statically infeasible rows
    failed: int = 0  # compile errors, failed gates, crashes, timeouts, errors
    new_measured: int = 0  # timed in this run
    from_store: int = 0  # answered from the store in this run
    note: str = ""


@dataclass
class RunTotals:
    measured: int = 0
    from_store: int = 0
    from_study: int = 0  # decided by another host (shared studies), its row in that host's store
    decided: int = 0  # fresh verdicts (measured or not)
    by_status: dict = field(default_factory=dict)


def fill_summary(summary: BucketSummary, store, gpu_slug: str, timer: str, template_hash: str) -> None:
    """Counts and the best ok row of one bucket, from the store (every run's rows)."""
    p, b = summary.problem, summary.bucket
    rows = store.trials(
        "gpu_slug = ? and problem_key = ? and bucket_batch = ? and bucket_context = ? and template_hash = ?",
        [gpu_slug, p.key, b.batch, b.context, template_hash])
    for r in rows:
        if r["status"] == "ok" and r["timer"] == timer:
            summary.measured += 1
            if r.get("fidelity") == "short":  # a loser cut after a short timing (tuner.evaluate) never wins
                continue
            if summary.best is None or (r["score_ms"], r["trial_key"]) < (summary.best["score_ms"], summary.best["trial_key"]):
                summary.best = r
        elif r["status"] == "infeasible":
            summary.pruned += 1
        elif r["status"] != "ok":
            summary.failed += 1


def format_summary(summaries: Sequence[BucketSummary], db_path: Path, totals: RunTotals) -> str:
    """The end-of-run table: one line per bucket."""
    head = f"{'problem':<24} {'bucket':<16} {'best variant':<44} {'p50 full / partial':>22} {'% floor':>14} {'ok/pruned/failed':>17}"
    lines = [head, "-" * len(head)]
    for s in summaries:
        best = s.best
        if best is None:
            variant, times, floor = "-", "-", "-"
        else:
            variant = best["variant"].split("__")[2] if best["variant"].count("__") >= 3 else best["variant"]
            times = _ms(best["p50_ms"]) + (" / " + _ms(best["partial_p50_ms"]) if best["partial_p50_ms"] is not None else "")
            floor = _pct(best["frac_of_floor"]) + (" / " + _pct(best["partial_frac_of_floor"])
                                                    if best["partial_p50_ms"] is not None else "")
        counts = f"{s.measured}/{s.pruned}/{s.failed}"
        line = f"{s.problem.slug:<24} {s.bucket.slug:<16} {variant:<44} {times:>22} {floor:>14} {counts:>17}"
        if s.note:
            line += f"  ({s.note})"
        lines.append(line)
    status = ", ".join(f"{k} {v}" for k, v in sorted(totals.by_status.items())) or "none"
    lines.append("")
    study = f"{totals.from_study} answered from the shared study, " if totals.from_study else ""
    lines.append(f"this run: {totals.measured} trials measured, {totals.from_store} answered from the store, "
                 f"{study}new verdicts by status: {status}")
    lines.append(f"db: {db_path}")
    return "\n".join(lines)


def _ms(v) -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.1f}us" if v < 1 else f"{v:.2f}ms"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


class TqdmProgress:
    """Progress bar on stderr: bucket, trials with a verdict, best time and its % of the floor."""

    def __init__(self, total: int, disable: bool = False):
        import sys

        from tqdm import tqdm

        self.bar = tqdm(total=total, file=sys.stderr, unit="trial", dynamic_ncols=True, disable=disable)
        self.label, self.goal, self.seen, self.best, self.eta = "", 0, 0, None, ""

    def __call__(self, event: str, **kw) -> None:
        if event == "bucket":
            eta = kw.get("eta_s")
            self.eta = "" if eta is None else f" | run ETA {int(eta) // 60}m{int(eta) % 60:02d}s"
            self.label = f"{kw['problem'].slug} {kw['bucket'].slug}"
            self.goal, self.seen, self.best = kw["goal"], 0, None
            self.bar.update(min(kw["counted"], kw["goal"]))
            self.seen = min(kw["counted"], kw["goal"])
        elif event == "trial":
            v = kw["verdict"]
            if v.ok and (self.best is None or v.score_ms < self.best[0]):
                self.best = (v.score_ms, v.row.get("p50_ms"), v.row.get("frac_of_floor"))
        step = 0
        if event == "trial" and self.seen < self.goal:
            step = 1
        elif event == "bucket_done":
            step = max(0, self.goal - self.seen)  # a bucket cut short still moves the bar
        self.seen += step
        best = "-" if self.best is None else _ms(self.best[1]) + (f" ({_pct(self.best[2])} of floor)" if self.best[2] else "")
        self.bar.set_postfix_str(f"{self.label} {self.seen}/{self.goal} best {best}{self.eta}", refresh=step == 0)
        if step:
            self.bar.update(step)  # redraws with the new postfix

    def close(self) -> None:
        self.bar.close()
