"""`cli.py tune`: options -> problems and buckets -> worker, build pool, evaluator, Optuna search
-> the end-of-run table. Option errors are click.BadParameter naming the option.

`--workers N` runs N such tuners at once (one per GPU), spawned by tuner.distributed, on shared
studies (a journal file beside --db, or `--storage URL`) and one trial store; this process
then prints one table from the store."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Optional, Sequence

import click

from .buckets import default_sizes, make_buckets, make_problems, parse_sizes
from indexer_logits._identity import INTERPRETER_DOT_DTYPES, Config, Problem

# Gate input shapes per family on a GPU: (requests, width) for decode, (rows, keys) for prefill,
# (rows, width) for chunked prefill. The paged ones are wider than one program's chunk (up to 8K
# tokens for decode, 16K for chunked prefill) so the gates cross chunk boundaries.
GPU_GATE_SHAPES = {"decode_paged": (4, 20480), "prefill_ragged": (256, 2048), "prefill_paged": (256, 20480)}
# Interpreter dot dtypes (the interpreter gets bf16 dots wrong; fp16 is exact for fp8 inputs).
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


def _table_seeds(seed_table: Optional[str], plan, dot_dtypes) -> tuple:
    """((problem key, batch, context), Config) for every bucket of `plan` that the dispatch table
    `seed_table` (a GPU slug under indexer_logits/tables/, or a dispatch.json path) ships a config for."""
    if not seed_table:
        return ()
    import indexer_logits

    path = Path(seed_table)
    if path.suffix != ".json":
        path = indexer_logits._dispatch.TABLES_DIR / seed_table / "dispatch.json"
    if not path.is_file():
        raise click.BadParameter(f"expected a GPU slug with a table under indexer_logits/tables/ or a dispatch.json "
                                 f"path; {path} does not exist", param_hint="--seed-table")
    try:
        table = json.loads(path.read_text())
        shipped = {(Problem(**e["problem"]).key, e["bucket"]["batch"], e["bucket"]["context"]):
                   Config.from_dict(table["modules"][e["variant"]]["config"]) for e in table["entries"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(f"{path} is not a dispatch table: {exc!r}", param_hint="--seed-table") from None
    out = []
    for problem, buckets in plan:
        for bucket in buckets:
            config = shipped.get((problem.key, bucket.batch, bucket.context))
            if config is not None and config.dot_dtype in dot_dtypes:
                out.append(((problem.key, bucket.batch, bucket.context), config))
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
        try_config: Sequence[str], quiet: bool = False, workers: int = 1, storage: Optional[str] = None,
        seed_table: Optional[str] = None, _slot=None, _events=None) -> Optional[dict]:
    """Tune and print the table. With `_slot` (a tuner.distributed.Slot: this process is one of
    several workers) print nothing and return what the launching process reports."""
    options = {k: v for k, v in locals().items() if not k.startswith("_")}
    from .distributed import describe_storage, owner_tag, sampler_seed, unowned_grace_s
    from .evaluate import Evaluator, RunContext
    from .render import template_hash
    from .search import OptunaSpace, Search, SearchSettings, TqdmProgress, format_summary
    from .space import TUNED_DOT_DTYPES
    from .store import Store, now_iso

    try:
        grace_s = unowned_grace_s()  # before any work: a bad environment value is an error here
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    problems = _problems(family, dtype, next_n, page_size, scale_layout, heads, head_dim, lens_mode)
    default_batches, default_contexts = default_sizes(family)
    batches = _sizes(batch, default_batches, "--batch")
    contexts = _sizes(context, default_contexts, "--context")
    try:
        plan = [(p, make_buckets(p, batches, contexts)) for p in problems]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--context") from None
    configs = _try_configs(try_config)
    dot_dtypes = INTERPRETER_DOT_DTYPES[dtype][:1] if interpret else TUNED_DOT_DTYPES  # the cheapest exact one
    for config in configs:
        space = OptunaSpace(problems[0], dot_dtypes)
        params = space.params_of(config)
        if params is None:
            raise click.BadParameter(f"{config.to_json()} lies outside the search space of {family} "
                                     f"(axes: {space.signature})", param_hint="--try-config")
        if space.config(params) != config:  # a knob the space ties to another, e.g. a persistent grid's tiles
            raise click.BadParameter(
                f"{config.to_json()} would be timed as {space.config(params).to_json()}: the space ties "
                f"{space.ties_text}",
                param_hint="--try-config")
    table_seeds = _table_seeds(seed_table, plan, dot_dtypes)

    import torch

    if not interpret and not torch.cuda.is_available():
        raise click.ClickException(
            "no GPU found (torch.cuda.is_available() is False): `tune` times kernels on a CUDA GPU. Pass --interpret "
            "to run the same loop under Triton's CPU interpreter with wall-clock timing (for tests: its times say "
            "nothing about a GPU).")
    if workers > 1 and not interpret and workers > torch.cuda.device_count():
        raise click.BadParameter(f"{workers} workers, one per GPU, but {torch.cuda.device_count()} GPUs are visible",
                                 param_hint="--workers")
    spec, shared = _storage(Path(db), optuna_db, storage, workers, resume)
    shared = shared or _slot is not None
    if shared and _slot is None:
        _check_storage(spec)
    if workers > 1 and _slot is None:
        return _run_workers(options, plan, spec, dot_dtypes)
    target = None
    if not interpret:
        from .xcompile import local_target

        target = local_target()
    env = _environment(interpret)
    db = Path(db)
    if spec.startswith("sqlite:///"):
        Path(spec[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    try:
        store = Store(db)
    except ValueError as exc:  # not a trial store, or another schema version: refuse before any work
        raise click.BadParameter(str(exc), param_hint="--db") from None
    run_id = f"{_slot.launch_id}_w{_slot.index}" if _slot is not None else f"{now_iso()}_{uuid.uuid4().hex[:8]}"
    owner = owner_tag(run_id) if shared else None
    ctx = RunContext(run_id=run_id, gpu_slug=env["gpu_slug"], timer="wall_clock" if interpret else "cuda_graph",
                     env=env, template_hashes={p.family: template_hash(p.family) for p in problems}, target=target,
                     interpret=interpret, replays=replays, timeout_s=timeout, seed=seed)
    settings = SearchSettings(trials=trials, time_budget_s=time_budget, sampler=sampler, ask_batch=ask_batch, seed=seed,
                              resume=resume, try_configs=configs, bucket_seeds=table_seeds,
                              dot_dtypes=dot_dtypes, optuna_storage=spec, shared=shared, owner=owner or "",
                              sampler_seed=sampler_seed(seed, _slot.index if _slot else 0) if shared else None,
                              unowned_grace_s=grace_s)

    def gate_shape(problem: Problem) -> tuple[int, int]:
        if not interpret:
            return GPU_GATE_SHAPES[problem.family]
        # Interpreter: the smallest tuned shape keeps the gates quick.
        return (min(2, min(batches)), min(contexts)) if problem.is_decode else (min(batches), min(contexts))

    src_dir = Path(tempfile.mkdtemp(prefix="tune_src_"))
    evaluator = Evaluator(store, ctx, src_dir, gate_shape, jobs=jobs or min(ask_batch, _cpu_count()), owner=owner)
    args_json = json.dumps({"family": family, "dtype": dtype, "next_n": [p.next_n for p in problems],
                            "page_size": page_size, "scale_layout": problems[0].scale_layout, "heads": heads,
                            "head_dim": head_dim, "lens_mode": lens_mode, "batch": list(batches),
                            "context": list(contexts), "trials": trials, "time_budget": time_budget,
                            "sampler": sampler, "ask_batch": ask_batch, "timeout": timeout, "resume": resume,
                            "seed": seed, "interpret": interpret, "replays": replays,
                            **({"storage": describe_storage(spec), "worker": [_slot.index, _slot.count] if _slot else [0, 1],
                                "device": _slot.device if _slot else None} if shared else {})}, sort_keys=True)
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
        if _slot is None:
            progress = TqdmProgress(total=trials * sum(len(b) for _, b in plan), disable=quiet)
        else:  # the launching process draws one bar for all workers
            def progress(event: str, **kw) -> None:
                if event == "trial":
                    _events.put(("trial", _slot.index))
        search = Search(evaluator, settings, target=target, progress=progress)
        summaries = search.run(plan)
    except RuntimeError as exc:  # the worker could not start, calibrate or build gate inputs
        raise click.ClickException(f"{exc}\n(trials measured so far are in {db}; --resume continues)") from exc
    finally:
        if isinstance(progress, TqdmProgress):
            progress.close()
        evaluator.close()
        shutil.rmtree(src_dir, ignore_errors=True)
    if _slot is not None:
        return {"run_id": run_id, "device": _slot.device, "gpu_slug": ctx.gpu_slug, "timer": ctx.timer,
                "template_hashes": ctx.template_hashes, "totals": dataclasses.asdict(search.totals),
                "notes": [(s.problem.key, s.bucket.key, s.note) for s in summaries if s.note],
                "warnings": evaluator.build_warnings[:3]}
    for warning in evaluator.build_warnings[:3]:
        click.echo(f"warning: {warning}", err=True)
    click.echo(format_summary(summaries, db, search.totals))


def _storage(db: Path, optuna_db: Optional[Path], storage: Optional[str], workers: int, resume: bool) -> tuple[str, bool]:
    """(Optuna storage spec, shared with other processes). One process: optuna.sqlite beside the
    db, as always. Several workers: a journal file beside the db. --storage: what it names."""
    from .distributed import is_journal

    if storage and optuna_db:
        raise click.BadParameter("--storage and --optuna-db both name the Optuna storage; pass one", param_hint="--storage")
    if storage:
        spec = storage if "://" in storage else str(Path(storage).resolve())
        server = not is_journal(spec) and not spec.startswith("sqlite")
        if server and not resume:
            raise click.BadParameter(
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
    from .distributed import describe_storage, open_storage

    try:
        open_storage(spec)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's connection errors, a missing driver, a bad journal path
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, ModuleNotFoundError) or "DB access module" in first:
            first += " (for PostgreSQL: pip install psycopg2-binary)"
        raise click.ClickException(f"cannot open the Optuna storage {describe_storage(spec)}: {first}") from None


def _run_workers(options: dict, plan, spec: str, dot_dtypes) -> None:
    """Start one tuner per GPU (or per CPU worker under the interpreter) on the shared studies,
    show one progress bar, then one table from the store."""
    import sys

    from tqdm import tqdm

    from .distributed import Slot, describe_storage, launch, visible_gpus
    from .search import OTHER_WORKERS_NOTE, BucketSummary, RunTotals, fill_summary, format_summary, tuning_order
    from .store import Store, now_iso

    workers, interpret, db = options["workers"], options["interpret"], Path(options["db"])
    try:
        Store(db)  # the tables, once, before the workers race to create them
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--db") from None
    if not options["resume"]:
        _delete_studies(spec, plan, options, dot_dtypes)
    devices = [None] * workers if interpret else visible_gpus(workers)
    jobs = options["jobs"] or max(1, min(options["ask_batch"], _cpu_count() // workers))
    child = {**options, "workers": 1, "storage": spec, "optuna_db": None, "resume": True, "quiet": True, "jobs": jobs}
    launch_id = f"{now_iso()}_{uuid.uuid4().hex[:8]}"
    where = "CPU, interpreter" if interpret else "CUDA_VISIBLE_DEVICES " + ", ".join(devices)
    click.echo(f"{workers} workers ({where}) on {describe_storage(spec)}; trials in {db}", err=True)
    total = options["trials"] * sum(len(b) for _, b in plan)
    bar = tqdm(total=total, file=sys.stderr, unit="trial", dynamic_ncols=True, disable=options["quiet"])

    def on_event(msg: tuple) -> None:
        if msg[0] == "trial" and bar.n < total:
            bar.update(1)

    try:
        results, errors = launch([Slot(i, workers, launch_id, devices[i]) for i in range(workers)], child, on_event)
    finally:
        bar.close()
    failed = "\n".join(f"worker {i} failed: {e}" for i, e in sorted(errors.items()))
    if not results:
        raise click.ClickException(failed)
    totals, notes = RunTotals(), {}
    for i, r in sorted(results.items()):
        t = r["totals"]
        for name in ("measured", "from_store", "from_study", "decided"):
            setattr(totals, name, getattr(totals, name) + t[name])
        for status, n in t["by_status"].items():
            totals.by_status[status] = totals.by_status.get(status, 0) + n
        for pkey, bkey, note in r["notes"]:
            if note != OTHER_WORKERS_NOTE:
                notes.setdefault((pkey, bkey), set()).add(note)
        device = f"GPU {r['device']}" if r["device"] is not None else "CPU"
        click.echo(f"worker {i} ({device}, run {r['run_id']}): {t['measured']} trials measured, "
                   f"{t['from_store']} answered from the store", err=True)
        for warning in r["warnings"]:
            click.echo(f"warning: {warning}", err=True)
    first = results[min(results)]
    store = Store(db)
    summaries = []
    for problem, bucket in tuning_order(plan):
        summary = BucketSummary(problem, bucket)
        fill_summary(summary, store, first["gpu_slug"], first["timer"], first["template_hashes"][problem.family])
        summary.note = "; ".join(sorted(notes.get((problem.key, bucket.key), ())))
        summaries.append(summary)
    click.echo(format_summary(summaries, db, totals))
    if errors:
        raise click.ClickException(f"{failed}\n(trials measured so far are in {db}; --resume continues)")


def _delete_studies(spec: str, plan, options: dict, dot_dtypes) -> None:
    """--no-resume with several workers: delete this plan's studies once, before they start."""
    import optuna

    from .distributed import open_storage
    from .render import template_hash
    from .search import OptunaSpace, study_name

    env = _environment(options["interpret"])
    timer = "wall_clock" if options["interpret"] else "cuda_graph"
    storage = open_storage(spec)
    for problem, buckets in plan:
        space = OptunaSpace(problem, dot_dtypes)
        for bucket in buckets:
            name = study_name(problem, bucket, env["gpu_slug"], timer, template_hash(problem.family), space,
                              options["sampler"])
            try:
                optuna.delete_study(study_name=name, storage=storage)
            except KeyError:
                pass


def _cpu_count() -> int:
    import os

    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
