"""`cli.py tune`: options -> problems and buckets -> worker, build pool, evaluator, Optuna search
-> the end-of-run table. Option errors are click.BadParameter naming the option."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Optional, Sequence

import click

from .buckets import default_sizes, make_buckets, make_problems, parse_sizes
from .problem import Config, Problem

# Gate input shapes per family on a GPU: (requests, width) for decode, (rows, keys) for prefill.
# Wider than one program's chunk (up to 8K tokens) so the gates cross chunk boundaries.
GPU_GATE_SHAPES = {"decode_paged": (4, 20480), "prefill_ragged": (256, 2048)}
# Interpreter dot dtypes (the interpreter gets bf16 dots wrong; fp16 is exact for fp8 inputs).
INTERPRETER_DOT_DTYPES = {"fp8": ("fp16",), "bf16": ("fp32",)}
_PROBLEM_OPTIONS = {"q_dtype": "--dtype", "cache_dtype": "--dtype", "heads": "--heads", "head_dim": "--head-dim",
                    "page_size": "--page-size", "next_n": "--next-n", "scale_layout": "--scale-layout",
                    "lens_mode": "--lens-mode", "family": "--family"}


def _problems(family, dtype, next_n, page_size, scale_layout, heads, head_dim, lens_mode) -> list[Problem]:
    try:
        next_ns = parse_sizes(next_n or ("1",), "next_n")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--next-n") from None
    try:
        return make_problems(family, dtype, next_ns, page_size, scale_layout, heads, head_dim, lens_mode)
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        raise click.BadParameter(str(exc), param_hint=_PROBLEM_OPTIONS.get(field, "--family")) from None


def _sizes(values: Sequence[str], default: tuple[int, ...], option: str) -> tuple[int, ...]:
    if not values:
        return default
    try:
        return parse_sizes(values, option.lstrip("-"))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _try_configs(texts: Sequence[str]) -> tuple[Config, ...]:
    out = []
    for text in texts:
        try:
            out.append(Config.from_dict(json.loads(text)))
        except (ValueError, TypeError) as exc:
            raise click.BadParameter(f"expected a Config as JSON, e.g. '{Config().to_json()}': {exc}",
                                     param_hint="--try-config") from None
    return tuple(out)


def _environment(interpret: bool) -> dict:
    from .envinfo import current

    env = current().to_dict()
    if interpret:  # the kernels run on CPU tensors even on a GPU host: do not file them under the GPU
        env.update(gpu_name="CPU (Triton interpreter)", gpu_slug="cpu", compute_capability="", sm_count=0, driver="")
    return env


def run(*, family: str, dtype: str, next_n: Sequence[str], page_size: int, scale_layout: Optional[str], heads: int,
        head_dim: int, lens_mode: str, batch: Sequence[str], context: Sequence[str], trials: int,
        time_budget: Optional[float], sampler: str, ask_batch: int, timeout: float, db: Path,
        optuna_db: Optional[Path], resume: bool, seed: int, interpret: bool, replays: int, jobs: Optional[int],
        try_config: Sequence[str], quiet: bool = False) -> None:
    from .evaluate import Evaluator, RunContext
    from .render import template_hash
    from .search import OptunaSpace, Search, SearchSettings, TqdmProgress, format_summary
    from .space import TUNED_DOT_DTYPES
    from .store import Store, now_iso

    problems = _problems(family, dtype, next_n, page_size, scale_layout, heads, head_dim, lens_mode)
    default_batches, default_contexts = default_sizes(family)
    batches = _sizes(batch, default_batches, "--batch")
    contexts = _sizes(context, default_contexts, "--context")
    try:
        plan = [(p, make_buckets(p, batches, contexts)) for p in problems]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--context") from None
    configs = _try_configs(try_config)
    dot_dtypes = INTERPRETER_DOT_DTYPES[dtype] if interpret else TUNED_DOT_DTYPES
    for config in configs:
        if OptunaSpace(problems[0], dot_dtypes).params_of(config) is None:
            raise click.BadParameter(f"{config.to_json()} lies outside the search space of {family} "
                                     f"(axes: {OptunaSpace(problems[0], dot_dtypes).signature})",
                                     param_hint="--try-config")

    import torch

    if not interpret and not torch.cuda.is_available():
        raise click.ClickException(
            "no GPU found (torch.cuda.is_available() is False): `tune` times kernels on a CUDA GPU. Pass --interpret "
            "to run the same loop under Triton's CPU interpreter with wall-clock timing (for tests: its times say "
            "nothing about a GPU).")
    target = None
    if not interpret:
        from .xcompile import local_target

        target = local_target()
    env = _environment(interpret)
    db = Path(db)
    optuna_path = Path(optuna_db) if optuna_db else db.with_name("optuna.sqlite")
    optuna_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        store = Store(db)
    except ValueError as exc:  # not a trial store, or another schema version: refuse before any work
        raise click.BadParameter(str(exc), param_hint="--db") from None
    run_id = f"{now_iso()}_{uuid.uuid4().hex[:8]}"
    ctx = RunContext(run_id=run_id, gpu_slug=env["gpu_slug"], timer="wall_clock" if interpret else "cuda_graph",
                     env=env, template_hashes={p.family: template_hash(p.family) for p in problems}, target=target,
                     interpret=interpret, replays=replays, timeout_s=timeout, seed=seed)
    settings = SearchSettings(trials=trials, time_budget_s=time_budget, sampler=sampler, ask_batch=ask_batch, seed=seed,
                              resume=resume, try_configs=configs,
                              dot_dtypes=dot_dtypes,
                              optuna_storage=f"sqlite:///{optuna_path.resolve()}")

    def gate_shape(problem: Problem) -> tuple[int, int]:
        if not interpret:
            return GPU_GATE_SHAPES[problem.family]
        # Interpreter: the smallest tuned shape keeps the gates quick.
        return (min(2, min(batches)), min(contexts)) if problem.is_decode else (min(batches), min(contexts))

    src_dir = Path(tempfile.mkdtemp(prefix="tune_src_"))
    evaluator = Evaluator(store, ctx, src_dir, gate_shape, jobs=jobs or min(ask_batch, _cpu_count()))
    args_json = json.dumps({"family": family, "dtype": dtype, "next_n": [p.next_n for p in problems],
                            "page_size": page_size, "scale_layout": problems[0].scale_layout, "heads": heads,
                            "head_dim": head_dim, "lens_mode": lens_mode, "batch": list(batches),
                            "context": list(contexts), "trials": trials, "time_budget": time_budget,
                            "sampler": sampler, "ask_batch": ask_batch, "timeout": timeout, "resume": resume,
                            "seed": seed, "interpret": interpret, "replays": replays}, sort_keys=True)
    progress = None
    try:
        calibration = {"copy_bw": None, "matmul_rate": None}
        if not interpret:
            click.echo("measuring copy bandwidth and matmul rate ...", err=True)
            calibration = evaluator.calibrate(dtype)
            click.echo(f"copy bandwidth {calibration['copy_bw'] / 1e12:.2f} TB/s, {dtype} matmul "
                       f"{calibration['matmul_rate'] / 1e12:.0f} Tflop/s", err=True)
        store.record_run(run_id, json.dumps(env, sort_keys=True), args_json, calibration["copy_bw"],
                         calibration["matmul_rate"])
        progress = TqdmProgress(total=trials * sum(len(b) for _, b in plan), disable=quiet)
        search = Search(evaluator, settings, target=target, progress=progress)
        summaries = search.run(plan)
    except RuntimeError as exc:  # the worker could not start, calibrate or build gate inputs
        raise click.ClickException(f"{exc}\n(trials measured so far are in {db}; --resume continues)") from exc
    finally:
        if progress is not None:
            progress.close()
        evaluator.close()
        shutil.rmtree(src_dir, ignore_errors=True)
    for warning in evaluator.build_warnings[:3]:
        click.echo(f"warning: {warning}", err=True)
    click.echo(format_summary(summaries, db, search.totals))


def _cpu_count() -> int:
    import os

    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
