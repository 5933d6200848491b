"""Re-time a tuned table under the running Triton (issue 30, item 2): the fast path for a new
Triton, minutes instead of a full tune.

A table is tuned for a (GPU, Triton minor) pair: the same source compiles to other code under
another Triton (docs/PERF.md, "Prefill under Triton 3.8 and 3.9: why"). Per bucket of an existing
table this takes the best few distinct configs the trial store holds for it (its shipped config
first) and their twins along TWIN_AXES: the head sum (the chained one is what Triton 3.7+ loses
most without) and, for ragged prefill, the key-tile load (TMA saves 3.7+'s per-tile proxy fence), and
times them through the tuner's own path: `tune --seeds-only` per (family, dtype), so every config
passes the gates (reference, CUDA-graph replay, poisoned block table) and its trial row records the
running Triton. The rows go to a store of their own, one per Triton (db/triton-X.Y/trials.sqlite),
so that neither table's winners mix versions; `emit --by-triton` then writes
tables/<gpu>/triton-X.Y/, which the runtime serves under that Triton (indexer_logits._versions).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from indexer_logits import _dispatch
from indexer_logits._identity import INTERPRETER_DOT_DTYPES, Bucket, Config, Problem
from indexer_logits._versions import minor_of, table_triton, version_dir_name

from .ownership import unowned_grace_s
from .schedule import bucket_weight
from .space import axes_of, is_feasible, tied
from .store import FULL_TIMING, Store
from .tables import emit_gpu, gpu_slugs
from .tune import Prepared, TuneSettings, _storage
from .tune import run as tune_run

# The wall-time estimate of a re-time (`--plan`), from the H200's tuning runs: one timed trial of a
# small bucket takes ~0.2 s, growing with the keys a launch scores (tuner.schedule.bucket_weight);
# each new variant is built and gated once (compile, reference, graph replay, poisoned table),
# ~6 s of one build process (assumption: sm_90, 4 processes at once); each (family, dtype) run
# first measures the copy bandwidth and the matmul rate. Against the H200 tuning runs of
# db/trials.sqlite: 894 trials of 151 variants 436 s (took 480), 661 of 18 234 s (251), 546 of 30
# 166 s (154).
TRIAL_S = 0.2
BUILD_S = 6.0
BUILD_JOBS = 4
CALIBRATE_S = 5.0


@dataclass(frozen=True)
class Item:
    """One bucket of the table: the configs to time there, the shipped one first."""

    problem: Problem
    bucket: Bucket
    configs: tuple


def load_table(table: str) -> tuple[dict, Path]:
    """A table by GPU slug (its primary table under indexer_logits/tables/) or dispatch.json path."""
    path = Path(table)
    if not path.is_file():
        path = _dispatch.TABLES_DIR / table / _dispatch.TABLE_FILE
    if not path.is_file():
        raise ValueError(f"no table {table!r}: expected a GPU slug under {_dispatch.TABLES_DIR} or a dispatch.json")
    return json.loads(path.read_text()), path


# The two-valued axes whose other value is timed beside each config (`candidates`), in order: each
# axis twins every config picked so far, the earlier axes' twins included (a ragged config gives 4).
TWIN_AXES = ("head_sum", "k_load")


def twin(problem: Problem, config: Config, axis: str = "head_sum") -> Optional[Config]:
    """The config with the other value of `axis`, where the family searches that axis and it applies."""
    values = axes_of(problem).get(axis, ())
    if len(values) != 2 or getattr(config, axis) not in values:
        return None
    other = values[1 - values.index(getattr(config, axis))]
    candidate = tied(problem, replace(config, **{axis: other}))
    return candidate if candidate != config else None


def candidates(table: dict, store: Optional[Store], top: int, twins: bool = True) -> list[Item]:
    """Per entry of the table: its config, then the store's best distinct ok configs of that bucket
    on the table's GPU (fully timed, by score) up to `top`, then (`twins`) their twins along TWIN_AXES."""
    slug = table["provenance"]["gpu_slug"]
    items = []
    for e in table["entries"]:
        problem = Problem.from_dict(e["problem"])
        bucket = Bucket(e["bucket"]["batch"], e["bucket"]["context"])
        picked = [Config.from_dict(table["modules"][e["variant"]]["config"])]
        if store is not None:
            rows = store.trials(f"gpu_slug = ? and status = 'ok' and score_ms is not null and {FULL_TIMING} and "
                                "problem_key = ? and bucket_batch = ? and bucket_context = ?",
                                [slug, problem.key, bucket.batch, bucket.context])
            for r in sorted(rows, key=lambda r: (r["score_ms"], r["trial_key"])):
                if len(picked) >= top:
                    break
                config = tied(problem, Config.from_json(r["config_json"]))
                if config not in picked and is_feasible(problem, config):  # a point of today's space
                    picked.append(config)
        picked = picked[:top]
        for axis in TWIN_AXES if twins else ():
            picked += [t for c in picked for t in [twin(problem, c, axis)] if t is not None and t not in picked]
        items.append(Item(problem, bucket, tuple(dict.fromkeys(picked))))
    return items


def groups(items: list[Item]) -> dict[tuple[str, str], list[Item]]:
    """The items per (family, dtype): one `tune` run each (it calibrates per dtype)."""
    out: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        out.setdefault((item.problem.family, item.problem.cache_dtype), []).append(item)
    return out


def estimate_s(items: list[Item]) -> float:
    """Wall seconds a GPU run of these items takes, roughly (TRIAL_S and the constants below it)."""
    trials = sum(TRIAL_S * bucket_weight(i.problem, i.bucket) * len(i.configs) for i in items)
    variants = {(i.problem, c) for i in items for c in i.configs}
    return trials + BUILD_S * len(variants) / BUILD_JOBS + CALIBRATE_S * len(groups(items))


def plan_lines(items: list[Item]) -> list[str]:
    out = []
    for (family, dtype), part in groups(items).items():
        configs = sum(len(i.configs) for i in part)
        variants = len({(i.problem, c) for i in part for c in i.configs})
        out.append(f"{family} {dtype}: {len(part)} buckets, {configs} timings of {variants} variants, "
                   f"~{estimate_s(part) / 60:.1f} min")
    total = sum(len(i.configs) for i in items)
    out.append(f"total: {len(items)} buckets, {total} timings, ~{estimate_s(items) / 60:.1f} min "
               f"(estimate: {TRIAL_S} s a small trial, {BUILD_S} s a variant's build and gates / {BUILD_JOBS})")
    return out


def check_versions(table: dict, running: str, store: Optional[Store], slug: str) -> None:
    """Refuse a re-time under the Triton the primary table was tuned under (re-tune that one),
    and a store that holds trials of another Triton (a table is tuned for one)."""
    tuned = table_triton(table)
    if minor_of(tuned) is not None and minor_of(tuned) == minor_of(running):
        raise ValueError(f"the table was tuned under Triton {tuned}, which runs here: re-tune it "
                         "(`cli.py tune --seed-table ...`) instead of writing a triton-X.Y copy beside it")
    if store is not None:
        rows = store.db.execute("select distinct triton_version from trials where gpu_slug = ?", [slug]).fetchall()
        other = sorted({r[0] for r in rows if r[0] and minor_of(r[0]) != minor_of(running)})
        if other:
            raise ValueError(f"{store.path} holds {slug} trials of Triton {other}: a re-time under {running} "
                             "needs a store of its own (the default is db/triton-X.Y/trials.sqlite)")


def default_db(db_dir: Path, running: str) -> Path:
    return Path(db_dir) / version_dir_name(running) / "trials.sqlite"


def run(items: list[Item], db: Path, out_root: Path, *, interpret: bool = False, replays: int = 30,
        quiet: bool = False, say: Callable[[str], None] = print):
    """Time the items, a `tune --seeds-only` run per (family, dtype), then emit the GPU's table into
    its triton-X.Y folder under out_root. Returns tuner.tables.EmitResult."""
    parts = list(groups(items).items())
    # The Optuna studies of this store alone: a study name does not say which Triton timed it, and a
    # seeds-only study that already holds its seeds asks for nothing, so two re-times whose stores
    # share a folder (and tune's optuna.sqlite there) would leave the second with no trials.
    optuna_db = Path(db).with_name(Path(db).stem + ".optuna.sqlite")
    total_est, done_est, start = estimate_s(items), 0.0, time.monotonic()
    for n, ((family, dtype), part) in enumerate(parts, 1):
        elapsed = time.monotonic() - start
        left = total_est - done_est
        eta = left if done_est == 0 else left * elapsed / done_est  # the estimate, scaled by the pace so far
        say(f"[{n}/{len(parts)}] {family} {dtype}: {len(part)} buckets, {sum(len(i.configs) for i in part)} "
            f"timings; {elapsed / 60:.1f} min elapsed, ~{eta / 60:.1f} min left")
        plan: dict[Problem, list[Bucket]] = {}
        for i in part:
            plan.setdefault(i.problem, []).append(i.bucket)
        problems = list(plan)
        seeds = tuple(((i.problem.key, i.bucket.batch, i.bucket.context), c) for i in part for c in i.configs)
        first = problems[0]
        settings = TuneSettings(
            family=family, dtype=dtype, next_n=tuple(sorted({str(p.next_n) for p in problems})),
            page_size=first.page_size, scale_layout=first.scale_layout, heads=first.heads, head_dim=first.head_dim,
            lens_mode=first.lens_mode, batch=(), context=(), trials=max(len(i.configs) for i in part),
            time_budget=None, sampler="tpe", ask_batch=BUILD_JOBS, timeout=60.0, db=Path(db), optuna_db=optuna_db,
            resume=True, seed=0, interpret=interpret, replays=replays, jobs=None, try_config=(), quiet=quiet,
            model_seeds=0, climb=0, stop_at_optimum=False, transfer=False, seeds_only=True)
        spec, _ = _storage(Path(db), optuna_db, None, 1, True)
        prepared = Prepared(problems=problems, batches=tuple(sorted({b.batch for bs in plan.values() for b in bs})),
                            contexts=tuple(sorted({b.context for bs in plan.values() for b in bs})),
                            plan=list(plan.items()), configs=(),
                            dot_dtypes=INTERPRETER_DOT_DTYPES[dtype][:1] if interpret else ("native",),
                            table_seeds=seeds, spec=spec, shared=False, grace_s=unowned_grace_s())
        tune_run(settings, prepared)
        done_est += estimate_s(part)
    store = Store(db)
    slugs = gpu_slugs(store)  # this GPU's (the command checked it is the table's), or "cpu" under the interpreter
    if len(slugs) != 1:
        raise ValueError(f"{db}: expected the trials of one GPU, found {slugs}")
    result = emit_gpu(store, slugs[0], out_root, by_triton=True)
    say(f"{result.directory}: {result.entries} entries, {result.modules} modules "
        f"({time.monotonic() - start:.0f} s in all)")
    return result
