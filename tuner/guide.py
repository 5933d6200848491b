"""The performance model's guidance for a tune on the local GPU: what each bucket's study times
first, and in which order the local search tries the neighbours of a bucket's best config.

A fresh tune on a GPU with no table used to start from the family default and TPE, and took
~20 trials a bucket to get within 10% of the hand-seeded H200 table (issue 25). The model
(tuner.model) already knows the notebook's lessons (one wave of programs, runs of MIN_RUN tiles,
the store axis, the fixed cost), so a tune asks it first:
  - the device is this GPU as the model sees it (`local_device`): the built-in entry of its board
    where tuner.devices has one, else its architecture's per-SM limits and torch's SM count; the
    copy bandwidth and matmul rate are the ones the run calibrated a moment ago;
  - every bucket's study is seeded with the model's best few points, chosen to differ in their
    structure (tile, tiles per program, stages, grid) so that one mistake of the model does not
    fill every seed (`SEEDS_PER_BUCKET`); with `compile`, points are ranked with their compiled
    registers and shared memory (tuner.predict, cached in db/xcompile_cache.jsonl), else with the
    model's estimate of them (the CPU interpreter's tests);
  - `order` ranks any configs for a bucket the same way (the local search's neighbours).
The model's first choice is within a geo-mean 1.030 of the best timed config on the H200's
stored trials (`python -m bench.model_fit`): close, which is why the search then measures a few
seeds and climbs from the best of them rather than trusting one.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from indexer_logits._identity import Bucket, Config, Problem, slugify

from .devices import ARCH_LIMITS, COPY_OF_NOMINAL, DEVICES, Device
from .model import Resources, estimate_resources, rank_us
from .predict import CompileCache, Prediction, predict_problem
from .space import Target, feasible_points

SEEDS_PER_BUCKET = 3  # model seeds a bucket's study starts with (distinct in structure)
# The knobs that make two configs the same shape of kernel; seeds differ in at least one of them
# (warps and the store mode are what the local search changes next).
STRUCTURE = ("block_t", "tiles_per_program", "num_stages", "programs_per_sm", "orient", "block_m")


@dataclass
class Guide:
    """The model's picks per bucket and its ranking, for one run's problems on one device."""

    device: Device
    seeds: dict = field(default_factory=dict)  # (problem key, batch, context) -> (Config, ...), best first
    # (problem key, config key) -> Resources: compiled ones where known (the model's ranking reads them)
    resources: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def seeds_for(self, problem: Problem, bucket: Bucket) -> tuple:
        return self.seeds.get((problem.key, bucket.batch, bucket.context), ())

    def order(self, problem: Problem, bucket: Bucket, configs: Sequence[Config]) -> list[Config]:
        """`configs` best first by the model on this bucket (ties by key: deterministic)."""
        def score(c: Config) -> tuple:
            res = self.resources.get((problem.key, c.key)) or estimate_resources(problem, c, self.device)
            t = rank_us(self.device, problem, c, res, bucket.batch, bucket.context)
            return (t if math.isfinite(t) else math.inf, c.key)

        return sorted(configs, key=score)


def local_device(gpu_name: str, sm_count: int, target: Target, copy_bw: Optional[float],
                 matmul_rate: Optional[float], dtype: str) -> Device:
    """This GPU as the model sees it (see the module docstring). `copy_bw` (bytes/s) and
    `matmul_rate` (flop/s of `dtype`) are the run's calibration; None keeps the built-in or,
    for a board tuner.devices does not know, scales from the other figure."""
    known = next((d for d in DEVICES.values() if gpu_name in d.gpu_names), None)
    if known is None:
        if target.name not in ARCH_LIMITS:
            raise ValueError(f"target: the model has no per-SM limits for {target.name} "
                             f"(tuner.devices.ARCH_LIMITS: {sorted(ARCH_LIMITS)})")
        if not copy_bw or not matmul_rate:
            raise ValueError(f"{gpu_name}: tuner.devices does not know this board and the run measured no "
                             "copy bandwidth or matmul rate for the model")
        fp8 = matmul_rate if dtype == "fp8" else 2 * matmul_rate
        known = Device(slugify(gpu_name), (gpu_name,), target.name, sm_count, copy_bw / COPY_OF_NOMINAL, copy_bw,
                       fp8, fp8 / 2, 50 << 20, sources={"all": "calibrated by the run (copy, matmul); the launch, "
                                                               "start and latency terms are the H200's"})
    changes = {"sm_count": sm_count}
    if copy_bw:
        changes["copy_bandwidth"] = float(copy_bw)
    if matmul_rate:
        changes["fp8_rate" if dtype == "fp8" else "bf16_rate"] = float(matmul_rate)
    return dataclasses.replace(known, **changes)


def diverse(ranked: Sequence[Config], count: int) -> list[Config]:
    """The first `count` configs of `ranked` that differ from each earlier pick in STRUCTURE."""
    picks, shapes = [], set()
    if count <= 0:
        return picks
    for c in ranked:
        shape = tuple(getattr(c, k) for k in STRUCTURE)
        if shape not in shapes:
            picks.append(c)
            shapes.add(shape)
        if len(picks) == count:
            break
    return picks


def build(device: Device, plan: Sequence[tuple[Problem, Sequence[Bucket]]], *, dot_dtype: str = "native",
          seeds_per_bucket: int = SEEDS_PER_BUCKET, compile: bool = True, cache_path: Path | None = None,
          jobs: int | None = None, on_line: Callable[[str], None] = lambda s: None) -> Guide:
    """The guide for a run's plan: seeds per bucket and the resources the ranking reads."""
    guide = Guide(device)
    for problem, buckets in plan:
        buckets = list(buckets)
        if compile and dot_dtype == "native":
            cache = CompileCache(cache_path)
            prediction = predict_problem(device, problem, buckets, cache, jobs, on_line=on_line, out=Prediction())
            guide.notes += prediction.notes
            ranked = {b: [c for _, c in prediction.ranked.get((problem, b), [])] for b in buckets}
            for c in dict.fromkeys(c for b in buckets for c in ranked[b]):  # every compiled point, once
                r = cache.get(CompileCache.key(problem, c, device))
                guide.resources[(problem.key, c.key)] = Resources(r.registers, r.shared_bytes, r.mma)
        else:  # estimates only: no compile (the interpreter's dot dtypes have no compiled counterpart here)
            points = [c for c in feasible_points(problem, device.target_limits, (dot_dtype,))]
            ranked = {b: guide.order(problem, b, points) for b in buckets}
        for b in buckets:
            picks = diverse(ranked[b], seeds_per_bucket)
            if picks:
                guide.seeds[(problem.key, b.batch, b.context)] = tuple(picks)
    return guide


def for_run(plan, env: dict, calibration: dict, target: Target | None, interpret: bool, dtype: str, dot_dtype: str,
            seeds_per_bucket: int, cache_path: Path, jobs: int | None, tell: Callable[[str], None],
            warn: Callable[[str], None]) -> Optional[Guide]:
    """The guide of one tune (tuner.tune.run): on a GPU, the local device with the run's
    calibration and compiled resources; under the interpreter the model ranks as for an H200 by
    its estimates (an order for the tests of the search, not a prediction). None, with a
    warning, when the model cannot describe this GPU."""
    if interpret:
        device, compile_points = DEVICES["h200"], False
    else:
        try:
            device = local_device(env["gpu_name"], env["sm_count"], target, calibration.get("copy_bw"),
                                  calibration.get("matmul_rate"), dtype)
        except ValueError as exc:
            warn(f"warning: no model guidance ({exc}); the search starts from the family default")
            return None
        compile_points = True
    start = time.perf_counter()
    tell(f"ranking the space with the performance model ({device.target}, {device.sm_count} SMs) ...")
    out = build(device, plan, dot_dtype=dot_dtype, seeds_per_bucket=seeds_per_bucket, compile=compile_points,
                cache_path=cache_path, jobs=jobs, on_line=tell)
    tell(f"model seeds for {len(out.seeds)} buckets in {time.perf_counter() - start:.0f} s")
    return out
