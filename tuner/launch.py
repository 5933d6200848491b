"""`cli.py tune`: one tuner in this process (tuner.tune), or `--workers N` of them at once on
one search, one per local GPU.

The workers are spawned processes, worker i pinned to the i-th visible GPU (CUDA_VISIBLE_DEVICES,
in its environment from the start), each running `tuner.tune.run` on the shared studies (a
journal file beside --db, or `--storage URL`) and the one trial store; this process shows one
progress bar for all of them, then one table from the store. Who owns what among them is
tuner.ownership's business.

This module sits above tuner.tune: tuner.tune knows nothing of it.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue as _queue
import sys
import traceback
import uuid
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .interp import environ_set
from .ownership import describe_storage, open_storage
from .optuna_space import OptunaSpace, study_name
from .render import template_hash
from .schedule import tuning_order
from .search import OTHER_WORKERS_NOTE
from .store import Store, now_iso
from .summary import BucketSummary, RunTotals, fill_summary, format_summary
from .tune import Prepared, TuneError, TuneSettings, TuneUsageError, cpu_count, environment, prepare, run, say
from .worker import exit_with_parent


def tune(settings: TuneSettings) -> Optional[dict]:
    """Check the settings, then tune in this process or, with settings.workers > 1, in that many
    worker processes. Raises TuneUsageError (a bad option) or TuneError (nothing to run on, or a
    failed run)."""
    prepared = prepare(settings)
    if settings.workers > 1:
        return run_workers(settings, prepared)
    return run(settings, prepared)


# --------------------------------------------------------------------------------------------
# Workers.

@dataclass(frozen=True)
class Slot:
    """One worker of a launch."""

    index: int
    count: int
    launch_id: str
    device: Optional[str] = None  # its CUDA_VISIBLE_DEVICES value; None under the interpreter


def visible_gpus(count: int) -> list[str]:
    """The device ids worker 0..count-1 are pinned to: the i-th entry of CUDA_VISIBLE_DEVICES
    when it is set (e.g. "2,3"), else i."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return visible[:count] if visible else [str(i) for i in range(count)]


def error_text(exc: BaseException) -> str:
    """A tuner error as cli.py shows it (an invalid option: "Invalid value for --db: ...")."""
    if isinstance(exc, TuneUsageError):
        return f"Invalid value for {exc.param_hint}: {exc.message}" if exc.param_hint else f"Invalid value: {exc.message}"
    return str(exc)


def _child(slot: Slot, settings: TuneSettings, events) -> None:
    """A worker process: its GPU was pinned in its environment before it started (`_pinned`), so
    CUDA sees only that one; run the tuner."""
    if slot.device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = slot.device
    exit_with_parent()
    try:
        events.put(("done", slot.index, run(settings, slot=slot, events=events)))
    except (TuneError, TuneUsageError) as exc:
        events.put(("error", slot.index, error_text(exc)))
    except BaseException:  # noqa: BLE001 - reported by the parent, which exits non-zero
        events.put(("error", slot.index, traceback.format_exc()[-4000:]))


def _pinned(device: Optional[str]):
    """CUDA_VISIBLE_DEVICES=device in this process's environment while a worker is started (a
    spawned process inherits it, and has it before its first import); then as it was."""
    return contextlib.nullcontext() if device is None else environ_set("CUDA_VISIBLE_DEVICES", device)


def launch(slots: list[Slot], settings: TuneSettings, on_event: Callable[[tuple], None]) -> tuple[dict, dict]:
    """Run one spawned process per slot until all end. Returns ({index: result}, {index:
    error text}); `on_event` gets every other message (progress)."""
    ctx = multiprocessing.get_context("spawn")
    events = ctx.Queue()
    procs = {s.index: ctx.Process(target=_child, args=(s, settings, events), name=f"tune-worker-{s.index}")
             for s in slots}
    devices = {s.index: s.device for s in slots}
    results: dict = {}
    errors: dict = {}

    def handle(msg: tuple) -> None:
        if msg[0] == "done":
            results[msg[1]] = msg[2]
        elif msg[0] == "error":
            errors[msg[1]] = msg[2]
        else:
            on_event(msg)

    try:
        for i, proc in procs.items():
            with _pinned(devices[i]):
                proc.start()
        while len(results) + len(errors) < len(procs):
            try:
                handle(events.get(timeout=1.0))
                continue
            except _queue.Empty:
                pass
            dead = [i for i, p in procs.items() if not p.is_alive() and i not in results and i not in errors]
            if dead:  # a last look: a process may have put its result just before it ended
                try:
                    while True:
                        handle(events.get(timeout=0.5))
                except _queue.Empty:
                    pass
                for i in dead:
                    if i not in results and i not in errors:
                        errors[i] = f"the worker process ended without a result (exit code {procs[i].exitcode})"
    finally:  # after an interrupt, end the workers (their own workers follow: exit_with_parent)
        done = len(results) + len(errors) == len(procs)
        for proc in procs.values():
            proc.join(30 if done else 1)
            if proc.is_alive():
                proc.terminate()
                proc.join(10)
    return results, errors


# --------------------------------------------------------------------------------------------
# The launching process.

def run_workers(settings: TuneSettings, prepared: Prepared) -> None:
    """Start one tuner per GPU (or per CPU worker under the interpreter) on the shared studies,
    show one progress bar, then one table from the store."""
    from tqdm import tqdm  # the bar's library, only where a bar is drawn

    workers, interpret, db = settings.workers, settings.interpret, Path(settings.db)
    plan, spec = prepared.plan, prepared.spec
    try:
        Store(db)  # the tables, once, before the workers race to create them
    except ValueError as exc:
        raise TuneUsageError(str(exc), param_hint="--db") from None
    if not settings.resume:
        _delete_studies(spec, plan, settings, prepared.dot_dtypes)
    devices = [None] * workers if interpret else visible_gpus(workers)
    jobs = settings.jobs or max(1, min(settings.ask_batch, cpu_count() // workers))
    child = dataclasses.replace(settings, workers=1, storage=spec, optuna_db=None, resume=True, quiet=True, jobs=jobs)
    launch_id = f"{now_iso()}_{uuid.uuid4().hex[:8]}"
    where = "CPU, interpreter" if interpret else "CUDA_VISIBLE_DEVICES " + ", ".join(devices)
    say(f"{workers} workers ({where}) on {describe_storage(spec)}; trials in {db}", err=True)
    total = settings.trials * sum(len(b) for _, b in plan)
    bar = tqdm(total=total, file=sys.stderr, unit="trial", dynamic_ncols=True, disable=settings.quiet)

    def on_event(msg: tuple) -> None:
        if msg[0] == "trial" and bar.n < total:
            bar.update(1)

    try:
        results, errors = launch([Slot(i, workers, launch_id, devices[i]) for i in range(workers)], child, on_event)
    finally:
        bar.close()
    failed = "\n".join(f"worker {i} failed: {e}" for i, e in sorted(errors.items()))
    if not results:
        raise TuneError(failed)
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
        say(f"worker {i} ({device}, run {r['run_id']}): {t['measured']} trials measured, "
            f"{t['from_store']} answered from the store", err=True)
        for warning in r["warnings"]:
            say(f"warning: {warning}", err=True)
    first = results[min(results)]
    store = Store(db)
    summaries = []
    for problem, bucket in tuning_order(plan):
        summary = BucketSummary(problem, bucket)
        fill_summary(summary, store, first["gpu_slug"], first["timer"], first["template_hashes"][problem.family])
        summary.note = "; ".join(sorted(notes.get((problem.key, bucket.key), ())))
        summaries.append(summary)
    say(format_summary(summaries, db, totals))
    if errors:
        raise TuneError(f"{failed}\n(trials measured so far are in {db}; --resume continues)")


def _delete_studies(spec: str, plan, settings: TuneSettings, dot_dtypes) -> None:
    """--no-resume with several workers: delete this plan's studies once, before they start."""
    import optuna  # heavy (~0.3 s): only on this path

    env = environment(settings.interpret)
    timer = "wall_clock" if settings.interpret else "cuda_graph"
    storage = open_storage(spec)
    for problem, buckets in plan:
        space = OptunaSpace(problem, dot_dtypes)
        for bucket in buckets:
            name = study_name(problem, bucket, env["gpu_slug"], timer, template_hash(problem.family), space,
                              settings.sampler)
            try:
                optuna.delete_study(study_name=name, storage=storage)
            except KeyError:
                pass
