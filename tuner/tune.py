"""One tuner (`cli.py tune`): settings (TuneSettings) -> problems and buckets -> worker, build pool,
evaluator, Optuna search -> the end-of-run table.

A bad option is a TuneUsageError naming the option, a run that cannot start or finish a
TuneError; cli.py shows them as a usage error (exit code 2) and an error (exit code 1).
`--workers N` runs N such tuners at once (one per GPU): tuner.launch, above this module, starts
them, each calling `run` with its Slot, on shared studies (a journal file beside --db, or
`--storage URL`) and one trial store, then prints one table from the store."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import torch

from indexer_logits._identity import INTERPRETER_DOT_DTYPES, Config, Problem

from . import guide, transfer
from .buckets import parse_sizes
from .envinfo import current
from .evaluate import Evaluator, RunContext
from .families import family_of
from .optuna_space import OptunaSpace
from .presets import ENGINE_DECIDES, engine_plan
from .ownership import describe_storage, is_journal, open_storage, owner_tag, sampler_seed, unowned_grace_s
from .render import template_hash
from .search import Search, SearchSettings
from .space import TUNED_DOT_DTYPES
from .store import Store, now_iso
from .summary import TqdmProgress, format_summary
from .xcompile import local_target
# Interpreter dot dtypes (the interpreter gets bf16 dots wrong; fp16 is exact for fp8 inputs).
_PROBLEM_OPTIONS = {"q_dtype": "--dtype", "cache_dtype": "--dtype", "heads": "--heads", "head_dim": "--head-dim",
                    "page_size": "--page-size", "next_n": "--next-n", "scale_layout": "--scale-layout",
                    "lens_mode": "--lens-mode", "family": "--family"}


class TuneUsageError(ValueError):
    """A bad option value (or combination). `param_hint` names the option, e.g. "--db"; cli.py
    shows it as a usage error of that option (exit code 2)."""

    def __init__(self, message: str, param_hint: Optional[str] = None):
        super().__init__(message)
        self.message, self.param_hint = message, param_hint


class TuneError(Exception):
    """A run that cannot start (no GPU, a storage that does not open, a bad environment value) or
    did not finish (the gate/timing worker failed, a tuning worker failed); cli.py shows it as an
    error (exit code 1)."""


@dataclass(frozen=True)
class TuneSettings:
    """Everything a tune takes: the options of `cli.py tune`, by the same names."""

    family: str
    dtype: str
    next_n: Sequence[str]
    page_size: int
    scale_layout: Optional[str]
    heads: int
    head_dim: int
    lens_mode: str
    batch: Sequence[str]
    context: Sequence[str]
    trials: int
    time_budget: Optional[float]
    sampler: str
    ask_batch: int
    timeout: float
    db: Path
    optuna_db: Optional[Path]
    resume: bool
    seed: int
    interpret: bool
    replays: int
    jobs: Optional[int]
    try_config: Sequence[str]
    quiet: bool = False
    workers: int = 1
    storage: Optional[str] = None
    seed_table: Optional[str] = None
    engine: bool = False  # tuner.presets.engine_plan instead of the problem options
    model_seeds: int = guide.SEEDS_PER_BUCKET  # the model's seeds per bucket (tuner.guide); 0: none
    climb: int = 5  # the local search's neighbourhood: the model's likeliest neighbours (tuner.climb); 0: none
    stop_at_optimum: bool = True  # a bucket whose best config's neighbours are measured is done
    short_first: bool = True  # multi-fidelity: clear losers keep a short timing (tuner.evaluate)
    transfer: bool = True  # other GPUs' tuned tables seed each bucket (tuner.transfer)
    xcompile_cache: Optional[Path] = None  # the model's cross-compile cache [default: xcompile_cache.jsonl beside --db]
    seeds_only: bool = False  # time the given configs only (--seed-table, --try-config): tuner.search


@dataclass(frozen=True)
class Prepared:
    """The settings checked and resolved (`prepare`): what a run tunes, and where its studies live."""

    problems: list  # [Problem, ...]
    batches: tuple
    contexts: tuple
    plan: list  # [(Problem, [Bucket, ...]), ...]
    configs: tuple  # --try-config, as Configs
    dot_dtypes: tuple
    table_seeds: tuple  # ((problem key, batch, context), Config) from --seed-table
    spec: str  # the Optuna storage (tuner.ownership.open_storage)
    shared: bool  # other processes work on the same studies
    grace_s: float  # tuner.ownership.unowned_grace_s


def say(text: str, err: bool = False) -> None:
    """One message on stdout (or stderr), flushed at once."""
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def _problems(family, dtype, next_n, page_size, scale_layout, heads, head_dim, lens_mode) -> list[Problem]:
    try:
        next_ns = parse_sizes(next_n or ("1",), "next_n")
    except ValueError as exc:
        raise TuneUsageError(str(exc), param_hint="--next-n") from None
    try:
        return family_of(family).problems(dtype, next_ns, page_size, scale_layout, heads, head_dim, lens_mode)
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        raise TuneUsageError(str(exc), param_hint=_PROBLEM_OPTIONS.get(field, "--family")) from None


def _sizes(values: Sequence[str], default: tuple[int, ...], option: str) -> tuple[int, ...]:
    if not values:
        return default
    try:
        return parse_sizes(values, option.lstrip("-"))
    except ValueError as exc:
        raise TuneUsageError(str(exc), param_hint=option) from None


def _try_configs(texts: Sequence[str]) -> tuple[Config, ...]:
    out = []
    for text in texts:
        try:
            out.append(Config.from_dict(json.loads(text)))
        except (ValueError, TypeError) as exc:
            raise TuneUsageError(f"expected a Config as JSON, e.g. '{Config().to_json()}': {exc}",
                                 param_hint="--try-config") from None
    return tuple(out)


def _engine(settings: TuneSettings) -> list:
    """tuner.presets.engine_plan, refusing the problem options it decides and the interpreter."""
    for name, unset in ENGINE_DECIDES.items():
        value = getattr(settings, name)
        if (tuple(value) if isinstance(value, (list, tuple)) else value) != unset:
            option = "--" + name.replace("_", "-")
            raise TuneUsageError(f"--engine decides the problems and buckets (tuner/presets.py); drop {option}",
                                 param_hint=option)
    if settings.interpret:
        raise TuneUsageError("--engine tunes an engine's full-size problems on a GPU; under --interpret name small "
                             "problems with --heads/--head-dim/--batch/--context instead", param_hint="--engine")
    return engine_plan()


def environment(interpret: bool) -> dict:
    """This machine as the trial rows record it (under the interpreter: the CPU, not the GPU)."""
    env = current().to_dict()
    if interpret:  # the kernels run on CPU tensors even on a GPU host: do not file them under the GPU
        env.update(gpu_name="CPU (Triton interpreter)", gpu_slug="cpu", compute_capability="", sm_count=0, driver="")
    return env


def prepare(settings: TuneSettings, slot=None) -> Prepared:
    """Check the settings before any work (TuneUsageError, TuneError) and resolve them: problems,
    buckets, seeds, the Optuna storage. `slot` (a tuner.launch.Slot): this process is one of
    several workers."""
    family, dtype, next_n, page_size = settings.family, settings.dtype, settings.next_n, settings.page_size
    scale_layout, heads, head_dim, lens_mode = settings.scale_layout, settings.heads, settings.head_dim, settings.lens_mode
    interpret, workers = settings.interpret, settings.workers
    try:
        grace_s = unowned_grace_s()  # before any work: a bad environment value is an error here
    except ValueError as exc:
        raise TuneError(str(exc)) from None
    if settings.engine:
        plan = _engine(settings)
        problems = [p for p, _ in plan]
        batches = tuple(sorted({b.batch for _, bs in plan for b in bs}))
        contexts = tuple(sorted({b.context for _, bs in plan for b in bs}))
    else:
        problems = _problems(family, dtype, next_n, page_size, scale_layout, heads, head_dim, lens_mode)
        default_batches, default_contexts = family_of(family).default_batches, family_of(family).default_contexts
        batches = _sizes(settings.batch, default_batches, "--batch")
        contexts = _sizes(settings.context, default_contexts, "--context")
        try:
            plan = [(p, family_of(p).buckets(batches, contexts)) for p in problems]
        except ValueError as exc:
            raise TuneUsageError(str(exc), param_hint="--context") from None
    configs = _try_configs(settings.try_config)
    dot_dtypes = INTERPRETER_DOT_DTYPES[dtype][:1] if interpret else TUNED_DOT_DTYPES  # the cheapest exact one
    for config in configs:
        space = OptunaSpace(problems[0], dot_dtypes)
        params = space.params_of(config)
        if params is None:
            raise TuneUsageError(f"{config.to_json()} lies outside the search space of {family} "
                                 f"(axes: {space.signature})", param_hint="--try-config")
        if space.config(params) != config:  # a knob the space ties to another, e.g. a persistent grid's tiles
            raise TuneUsageError(
                f"{config.to_json()} would be timed as {space.config(params).to_json()}: the space ties "
                f"{space.ties_text}",
                param_hint="--try-config")
    try:
        table_seeds = transfer.table_seeds(settings.seed_table, plan, dot_dtypes)
    except ValueError as exc:
        raise TuneUsageError(str(exc), param_hint="--seed-table") from None
    if settings.seeds_only and not (configs or table_seeds):
        raise TuneUsageError("times only the configs given: name them with --seed-table or --try-config",
                             param_hint="--seeds-only")

    if not interpret and not torch.cuda.is_available():
        raise TuneError(
            "no GPU found (torch.cuda.is_available() is False): `tune` times kernels on a CUDA GPU. Pass --interpret "
            "to run the same loop under Triton's CPU interpreter with wall-clock timing (for tests: its times say "
            "nothing about a GPU).")
    if workers > 1 and not interpret and workers > torch.cuda.device_count():
        raise TuneUsageError(f"{workers} workers, one per GPU, but {torch.cuda.device_count()} GPUs are visible",
                             param_hint="--workers")
    spec, shared = _storage(Path(settings.db), settings.optuna_db, settings.storage, workers, settings.resume)
    shared = shared or slot is not None
    if shared and slot is None:
        _check_storage(spec)
    return Prepared(problems=problems, batches=batches, contexts=contexts, plan=plan, configs=configs,
                    dot_dtypes=dot_dtypes, table_seeds=table_seeds, spec=spec, shared=shared, grace_s=grace_s)


def run(settings: TuneSettings, prepared: Optional[Prepared] = None, slot=None, events=None) -> Optional[dict]:
    """Tune in this process and print the table (`prepared`: from `prepare`, else made here).
    With `slot` (a tuner.launch.Slot: this process is one of several workers; `events`: the
    launching process's queue) print nothing and return what the launching process reports.
    Several workers without a slot are tuner.launch.tune's to start."""
    if settings.workers > 1 and slot is None:
        raise ValueError(f"workers: {settings.workers} tuners are started by tuner.launch.tune; run is one of them")
    prepared = prepared or prepare(settings, slot)
    family, dtype, page_size, heads = settings.family, settings.dtype, settings.page_size, settings.heads
    head_dim, lens_mode, trials, time_budget = settings.head_dim, settings.lens_mode, settings.trials, settings.time_budget
    sampler = settings.sampler
    ask_batch, timeout, resume, seed = settings.ask_batch, settings.timeout, settings.resume, settings.seed
    interpret, replays, jobs, quiet = settings.interpret, settings.replays, settings.jobs, settings.quiet
    problems, batches, contexts, plan = prepared.problems, prepared.batches, prepared.contexts, prepared.plan
    spec, shared, dot_dtypes = prepared.spec, prepared.shared, prepared.dot_dtypes
    target = None
    if not interpret:
        target = local_target()
    env = environment(interpret)
    db = Path(settings.db)
    if spec.startswith("sqlite:///"):
        Path(spec[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    try:
        store = Store(db)
    except ValueError as exc:  # not a trial store, or another schema version: refuse before any work
        raise TuneUsageError(str(exc), param_hint="--db") from None
    run_id = f"{slot.launch_id}_w{slot.index}" if slot is not None else f"{now_iso()}_{uuid.uuid4().hex[:8]}"
    owner = owner_tag(run_id) if shared else None
    ctx = RunContext(run_id=run_id, gpu_slug=env["gpu_slug"], timer="wall_clock" if interpret else "cuda_graph",
                     env=env, template_hashes={p.family: template_hash(p.family) for p in problems}, target=target,
                     interpret=interpret, replays=replays, timeout_s=timeout, seed=seed,
                     short_first=settings.short_first)
    search_settings = SearchSettings(
        trials=trials, time_budget_s=time_budget, sampler=sampler, ask_batch=ask_batch, seed=seed, resume=resume,
        try_configs=prepared.configs, bucket_seeds=prepared.table_seeds, dot_dtypes=dot_dtypes, optuna_storage=spec,
        shared=shared, owner=owner or "", sampler_seed=sampler_seed(seed, slot.index if slot else 0) if shared else None,
        unowned_grace_s=prepared.grace_s, climb=0 if settings.seeds_only else settings.climb,
        stop_at_optimum=settings.stop_at_optimum, seeds_only=settings.seeds_only,
        transfer_seeds=transfer.transfer_seeds(plan, env["gpu_slug"], dot_dtypes)
        if settings.transfer and not settings.seeds_only else ())

    def gate_shape(problem: Problem) -> tuple[int, int]:
        family = family_of(problem)
        return family.gate_shape_gpu if not interpret else family.gate_shape_cpu(batches, contexts)

    src_dir = Path(tempfile.mkdtemp(prefix="tune_src_"))
    evaluator = Evaluator(store, ctx, src_dir, gate_shape, jobs=jobs or min(ask_batch, cpu_count()), owner=owner)
    args_json = json.dumps({"family": family, "dtype": dtype, "next_n": [p.next_n for p in problems],
                            "page_size": page_size, "scale_layout": problems[0].scale_layout, "heads": heads,
                            "head_dim": head_dim, "lens_mode": lens_mode, "batch": list(batches),
                            "context": list(contexts), "trials": trials, "time_budget": time_budget,
                            "sampler": sampler, "ask_batch": ask_batch, "timeout": timeout, "resume": resume,
                            "seed": seed, "interpret": interpret, "replays": replays,
                            **({"storage": describe_storage(spec), "worker": [slot.index, slot.count] if slot else [0, 1],
                                "device": slot.device if slot else None} if shared else {})}, sort_keys=True)
    progress = None
    try:
        calibration = {"copy_bw": None, "matmul_rate": None}
        if not interpret:
            say("measuring copy bandwidth and matmul rate ...", err=True)
            calibration = evaluator.calibrate(dtype)
            say(f"copy bandwidth {calibration['copy_bw'] / 1e12:.2f} TB/s, {dtype} matmul "
                f"{calibration['matmul_rate'] / 1e12:.0f} Tflop/s", err=True)
        store.record_run(run_id, json.dumps(env, sort_keys=True), args_json, calibration["copy_bw"],
                         calibration["matmul_rate"])
        guidance = None
        if (settings.model_seeds or settings.climb) and not settings.seeds_only:
            guidance = guide.for_run(
                prepared.plan, env, calibration, target, settings.interpret, "fp8" if settings.engine else dtype,
                prepared.dot_dtypes[0], settings.model_seeds,
                settings.xcompile_cache or db.with_name("xcompile_cache.jsonl"), settings.jobs,
                (lambda line: None) if quiet or slot is not None else (lambda line: say(line, err=True)),
                lambda line: say(line, err=True))
        if slot is None:
            progress = TqdmProgress(total=trials * sum(len(b) for _, b in plan), disable=quiet)
        else:  # the launching process draws one bar for all workers
            def progress(event: str, **kw) -> None:
                if event == "trial":
                    events.put(("trial", slot.index))
        search = Search(evaluator, search_settings, target=target, progress=progress, guide=guidance)
        summaries = search.run(plan)
    except RuntimeError as exc:  # the worker could not start, calibrate or build gate inputs
        raise TuneError(f"{exc}\n(trials measured so far are in {db}; --resume continues)") from exc
    finally:
        if isinstance(progress, TqdmProgress):
            progress.close()
        evaluator.close()
        shutil.rmtree(src_dir, ignore_errors=True)
    if slot is not None:
        return {"run_id": run_id, "device": slot.device, "gpu_slug": ctx.gpu_slug, "timer": ctx.timer,
                "template_hashes": ctx.template_hashes, "totals": dataclasses.asdict(search.totals),
                "notes": [(s.problem.key, s.bucket.key, s.note) for s in summaries if s.note],
                "warnings": evaluator.build_warnings[:3]}
    for warning in evaluator.build_warnings[:3]:
        say(f"warning: {warning}", err=True)
    say(format_summary(summaries, db, search.totals))
    if evaluator.seconds:
        spent = ", ".join(f"{k} {v:.0f} s" for k, v in sorted(evaluator.seconds.items(), key=lambda kv: -kv[1]))
        say(f"where the search's time went: {spent}")


def _storage(db: Path, optuna_db: Optional[Path], storage: Optional[str], workers: int, resume: bool) -> tuple[str, bool]:
    """(Optuna storage spec, shared with other processes). One process: optuna.sqlite beside the
    db, as always. Several workers: a journal file beside the db. --storage: what it names."""
    if storage and optuna_db:
        raise TuneUsageError("--storage and --optuna-db both name the Optuna storage; pass one", param_hint="--storage")
    if storage:
        spec = storage if "://" in storage else str(Path(storage).resolve())
        server = not is_journal(spec) and not spec.startswith("sqlite")
        if server and not resume:
            raise TuneUsageError(
                "--no-resume deletes the studies at the start, which would wipe what other hosts sharing this "
                "server have done; delete them once (`optuna delete-study --storage URL --study-name NAME`) and "
                "start every host with --resume", param_hint="--no-resume")
        return spec, workers > 1 or not spec.startswith("sqlite")
    if optuna_db is None and workers > 1:
        return str(db.with_name("optuna.journal").resolve()), True
    path = Path(optuna_db) if optuna_db else db.with_name("optuna.sqlite")
    return f"sqlite:///{path.resolve()}", workers > 1


def _check_storage(spec: str) -> None:
    """Open the shared storage once, so that a wrong URL or a server that is down is one clear error."""
    try:
        open_storage(spec)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's connection errors, a missing driver, a bad journal path
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, ModuleNotFoundError) or "DB access module" in first:
            first += " (for PostgreSQL: pip install psycopg2-binary)"
        raise TuneError(f"cannot open the Optuna storage {describe_storage(spec)}: {first}") from None


def cpu_count() -> int:
    """CPUs this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
