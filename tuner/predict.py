"""Choose a config per (problem, bucket) for a GPU nobody has, by the performance model
(tuner.model) over the target's feasible space, with every choice cross-compiled for the target.

Per problem: every feasible point (tuner.space.feasible_points for the target) is ranked per
bucket with estimated resources (cheap: no compile); the top few of each bucket, and the family
default, are cross-compiled (tuner.xcompile, results cached on disk by variant, target, Triton
and template); each bucket then takes the best compiled point by the model with its real
registers and shared memory, unless the family default is predicted within DEFAULT_MARGIN of it
(then the default). When an uncompiled point's estimate still beats a bucket's best
real prediction, the next few are compiled too (a few rounds at most), so an estimate that was
too optimistic about registers does not decide. Only points that compiled within the target's
limits (xcompile's status "ok": shared memory within the target, spills within MAX_SPILL_BYTES,
the same rule `cli.py check` applies) are chosen.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from indexer_logits._identity import Bucket, Config, Problem, variant_name

from . import xcompile
from .buckets import POW2_BATCHES
from .devices import Device
from .families import family_of
from .model import Resources, estimate_resources, predict_score_us, rank_us
from .render import template_hash
from .space import default_config, feasible_points
from .tables import timing_hashes

PRERANK_TOP = 3  # points compiled per bucket and round
_PRERANKS: dict = {}  # (problem with lens 1d, bucket, device) -> config keys, best first
ROUNDS = 4  # rounds of compiling the next best estimates
# A bucket keeps the family default unless the model's choice is predicted at least this much faster: the
# model's prefill fit leaves ~6% regret and its H100 ranking put three configs 0.8-2.4% ahead of the
# default bt64_tp32_w4_s3_m4_kr that all ran 0.4-4.8% behind it there (4096 x 16K and 64K; docs/PERF.md,
# "The H100's predicted table"). Decode's choices are predicted 21-61% ahead on the H100, untouched.
DEFAULT_MARGIN = 0.03


@dataclass(frozen=True)
class Choice:
    problem: Problem
    bucket: Bucket
    config: Config
    predicted_us: float
    result: xcompile.CompileResult


@dataclass
class Prediction:
    choices: list[Choice] = field(default_factory=list)
    compiled: int = 0  # compiles run (cache misses)
    cached: int = 0
    notes: list[str] = field(default_factory=list)
    # (problem, bucket) -> [(rank_us, config), ...]: every compiled point within the target's
    # limits, best first by the model with its real resources (the tuner's model seeds).
    ranked: dict = field(default_factory=dict)


def default_buckets(problem: Problem) -> list[Bucket]:
    """The tuning grid of run.sh's GPU branch: decode at pow2 batches (1..256) over the family's
    contexts; the prefill families' own default rows and keys."""
    family = family_of(problem)
    batches = POW2_BATCHES if problem.kind.decode else family.default_batches
    return family.buckets(batches, family.default_contexts)


class CompileCache:
    """Cross-compile results on disk, one JSON line each, keyed by what could change them."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path else None
        self.rows: dict[str, xcompile.CompileResult] = {}
        if self.path and self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                    self.rows[row["cache_key"]] = _result_from_row(row)
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line from an interrupted run

    @staticmethod
    def key(problem: Problem, config: Config, device: Device) -> str:
        import triton

        # A template proven PTX-equivalent to an older one (tuner.tables.PTX_EQUIVALENT_TEMPLATES: a
        # `True & x` mask the frontend folds to `x` before any target lowering) compiles to the same
        # registers and shared memory: its results are keyed by the oldest equivalent hash.
        return "|".join((variant_name(problem, config), device.target, triton.__version__,
                         timing_hashes(template_hash(problem.family))[-1], str(xcompile.MAX_SPILL_BYTES)))

    def get(self, key: str):
        return self.rows.get(key)

    def put(self, key: str, result: xcompile.CompileResult) -> None:
        self.rows[key] = result
        if self.path and result.status != "error":  # an error may be the machine's: try again next run
            self.path.parent.mkdir(parents=True, exist_ok=True)
            row = {"cache_key": key, **result.to_dict()}
            row["detail"] = row["detail"][:300]  # enough to say why; the file stays small enough to commit
            with open(self.path, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")


def _result_from_row(row: dict) -> xcompile.CompileResult:
    fields = {k: row[k] for k in ("variant", "target", "status", "reason", "detail", "registers", "spills",
                                  "stack_bytes", "shared_bytes", "compile_seconds", "mma", "mma_detail", "triton")}
    return xcompile.CompileResult(problem=Problem.from_dict(row["problem"]), config=Config.from_dict(row["config"]),
                                  **fields)


def _compile(points: Sequence[tuple[Problem, Config]], device: Device, cache: CompileCache, jobs: int | None,
             out: Prediction, on_line: Callable[[str], None]) -> None:
    todo = [(p, c) for p, c in dict.fromkeys(points) if cache.get(CompileCache.key(p, c, device)) is None]
    out.cached += len(points) - len(todo)
    if not todo:
        return
    on_line(f"  cross-compiling {len(todo)} variants for {device.target}")
    target = device.target_limits
    for r in xcompile.compile_many([(p, c, target) for p, c in todo], jobs=jobs):
        cache.put(CompileCache.key(r.problem, r.config, device), r)
    out.compiled += len(todo)


def _real(result: xcompile.CompileResult) -> Resources:
    return Resources(result.registers, result.shared_bytes, result.mma)


def _corrections(problem: Problem, compiled, estimates: dict, cache: "CompileCache", device: Device) -> tuple:
    """(registers, shared) factors real / estimated over the compiled points, medians rounded to
    0.05 (1.0 before any compile): the estimate is optimistic by a problem-wide factor (sm_120's
    registers run ~1.7x the accumulator's guess, a bf16 prefill's shared memory ~1.1x)."""
    regs, shared = [], []
    for c in compiled:
        r = cache.get(CompileCache.key(problem, c, device))
        if r is not None and r.registers:
            regs.append(r.registers / max(estimates[c].registers, 1))
        if r is not None and r.shared_bytes:
            shared.append(r.shared_bytes / max(estimates[c].shared_bytes, 1))
    med = lambda xs: round(sorted(xs)[len(xs) // 2] * 20) / 20 if xs else 1.0  # noqa: E731
    return med(regs), med(shared)


def _corrected(est: Resources, factors: tuple) -> Resources:
    return Resources(min(255, math.ceil(est.registers * factors[0])), int(est.shared_bytes * factors[1]), est.mma)


def _one_twin(ranked: Sequence[Config]) -> list[str]:
    """Keys of `ranked` with only the first of each group of twins (the same config but its head sum
    or, ragged prefill, its key-tile load). Twins differ in instructions the model prices by its
    priors (tuner.model.head_sum_cost, k_load_cost), not by resources: compiling each would halve a
    round's points (the RTX PRO 6000's bf16 next_n = 2 buckets lost 3-8% of predicted time that way)."""
    seen, out = set(), []
    for c in ranked:
        pair = replace(c, head_sum="tree", k_load="threads")
        if pair not in seen:
            seen.add(pair)
            out.append(c.key)
    return out


def predict_problem(device: Device, problem: Problem, buckets: Iterable[Bucket], cache: CompileCache,
                    jobs: int | None = None, top: int = PRERANK_TOP, rounds: int = ROUNDS,
                    on_line: Callable[[str], None] = lambda s: None, out: Prediction | None = None) -> Prediction:
    """A choice per bucket of one problem (see the module docstring)."""
    out = out or Prediction()
    buckets = list(buckets)
    points = feasible_points(problem, device.target_limits)
    if not points:
        out.notes.append(f"{problem.slug}: no feasible point on {device.target} (tuner.space.check)")
        return out
    default = default_config(problem)
    estimates = {c: estimate_resources(problem, c, device) for c in points}
    twin = replace(problem, lens_mode="1d")  # the model does not see the lens mode: 1d and 2d share a pre-rank
    max_shared = device.target_limits.max_shared_bytes

    def prerank(factors) -> dict:
        ranked = {}
        for b in buckets:
            key = (twin, b, device.model_key, factors)
            if key not in _PRERANKS:
                fits = [c for c in points if _corrected(estimates[c], factors).shared_bytes <= max_shared]
                _PRERANKS[key] = _one_twin([c for c in sorted(fits, key=lambda c: (
                    rank_us(device, problem, c, _corrected(estimates[c], factors), b.batch, b.context), c.key))])
            by_key = {c.key: c for c in points}
            ranked[b] = [by_key[k] for k in _PRERANKS[key]]
        return ranked

    factors = (1.0, 1.0)
    ranked, compiled = prerank(factors), set()
    best: dict[Bucket, tuple[float, Config, xcompile.CompileResult]] = {}
    for _ in range(rounds):
        wanted = {default: None}
        for b in buckets:
            wanted.update(dict.fromkeys([c for c in ranked[b] if c not in compiled][:top]))
        _compile([(problem, c) for c in wanted], device, cache, jobs, out, on_line)
        compiled.update(wanted)
        for b in buckets:
            for c in compiled:
                r = cache.get(CompileCache.key(problem, c, device))
                if r is None or not r.ok:
                    continue
                t = rank_us(device, problem, c, _real(r), b.batch, b.context)
                if b not in best or (t, c.key) < (best[b][0], best[b][1].key):
                    best[b] = (t, c, r)
        new = _corrections(problem, compiled, estimates, cache, device)
        if any(abs(n / f - 1) > 0.1 for n, f in zip(new, factors)):
            factors, ranked = new, prerank(new)
        again = False
        for b in buckets:
            nxt = next((c for c in ranked[b] if c not in compiled), None)
            if nxt is not None and (b not in best or rank_us(
                    device, problem, nxt, _corrected(estimates[nxt], factors), b.batch, b.context) < best[b][0]):
                again = True
        if not again:
            break
    for b in buckets:
        scored = []
        for c in compiled:
            r = cache.get(CompileCache.key(problem, c, device))
            if r is not None and r.ok:
                scored.append((rank_us(device, problem, c, _real(r), b.batch, b.context), c))
        out.ranked[(problem, b)] = sorted(scored, key=lambda tc: (tc[0], tc[1].key))
        if b not in best:
            out.notes.append(f"{problem.slug} {b.slug}: no point compiled within {device.target}'s limits")
            continue
        t, c, r = best[b]
        t_default = next((tc for tc, cc in scored if cc == default), None)  # (None: the default did not compile ok)
        if c != default and t_default is not None and t_default <= t * (1 + DEFAULT_MARGIN):
            # a predicted gain within the model's error is no evidence
            c, r = default, cache.get(CompileCache.key(problem, default, device))
        out.choices.append(Choice(problem, b, c, predict_score_us(device, problem, c, _real(r), b.batch, b.context), r))
    return out


def predict(device: Device, problems: Sequence[Problem], cache: CompileCache, jobs: int | None = None,
            buckets: Callable[[Problem], list[Bucket]] = default_buckets, top: int = PRERANK_TOP,
            on_line: Callable[[str], None] = lambda s: None) -> Prediction:
    out = Prediction()
    for problem in problems:
        on_line(f"{problem.family} {problem.slug}: ranking")
        predict_problem(device, problem, buckets(problem), cache, jobs, top, on_line=on_line, out=out)
    return out
