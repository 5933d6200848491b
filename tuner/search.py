"""The Optuna search: one study per (problem, bucket), asked in batches, told every verdict.

- Studies live in an SQLite file beside the trial store and are named from what makes a
  measurement comparable (tuner.optuna_space.study_name), so a resumed run reloads them
  (`load_if_exists`). The space as Optuna sees it is tuner.optuna_space; the summaries, the
  end-of-run table and the progress bar are tuner.summary.
- Each study is seeded (enqueue_trial) with a table's config (`--seed-table`), configs the user
  names, the performance model's best few points for the bucket (tuner.guide; without them the
  family default), other GPUs' tuned choices (tuner.transfer) and the winners of finished buckets
  (nearest first, up to NEIGHBOUR_SEEDS distinct configs); its sampler's seed is derived from the
  run's seed and the study name.
- The local search (`climb` > 0): after every batch, the best config of the bucket so far has its
  one-step neighbours (tuner.space.neighbours) ranked by the model; the untried ones among the
  first `climb` are enqueued; when those are all tried and nothing else waits, the bucket has
  reached a local optimum and, with `stop_at_optimum`, is done before `--trials`.
- Static infeasibility and every failed candidate are told as PRUNED (never FAIL): the sampler
  learns that region is worse, and the trial still counts as visited.
- `seeds_only`: the bucket's given configs and nothing else (a re-time under a new Triton).
- `--trials N` is the number of distinct configs per bucket that reach a verdict other than
  static infeasibility; `--time-budget` bounds the whole run and is shared out between the
  buckets still to do in proportion to their trial cost (bucket_weight), so a budget cut leaves
  no bucket untuned.
- Asked trials left without a verdict (the run was killed or its budget ran out) stay RUNNING in
  the study; the next run evaluates them first.
- Shared studies (`--workers N`, `--storage URL`: several processes, maybe several hosts, on one
  study per bucket; see tuner.ownership): each process samples with its own seed, marks the
  trials it asks with its owner, counts the verdicts of the others towards `--trials` after
  every batch, asks no more than is left once the others' trials in flight are counted (so the
  workers spread over the buckets), takes over only trials whose owner is gone, and answers a
  config another host already decided from the study.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from .buckets import by_distance
from .schedule import bucket_weight, eta_s, tuning_order
from .climb import climb, waiting
from .ownership import UNOWNED_GRACE_S, open_storage, owner_alive
from .evaluate import BucketUnavailable, Evaluator, Verdict
from indexer_logits._identity import Bucket, Config, Problem, sha256_hex
from .optuna_space import OptunaSpace, make_sampler, study_name
from .space import default_config, feasible_points, is_feasible
from .summary import BucketSummary, RunTotals, fill_summary

NEIGHBOUR_SEEDS = 2  # distinct winners of finished buckets enqueued in each new study
PREFETCH_BUCKETS = 3  # buckets ahead whose model seeds are built in the background
STALE_ASKS = 40  # asks in a row without a new config: the sampler has converged or the space is used up
OTHER_WORKERS_NOTE = "its last trials ran on other workers"  # shared studies: moved on to the next bucket


# --------------------------------------------------------------------------------------------
# Settings.

@dataclass(frozen=True)
class SearchSettings:
    trials: int = 20
    time_budget_s: Optional[float] = None
    sampler: str = "tpe"
    ask_batch: int = 8
    seed: int = 0
    resume: bool = True
    dot_dtypes: tuple = ("native",)
    try_configs: tuple = ()  # Config objects enqueued in every study
    # ((problem key, batch, context), Config) pairs: a config enqueued first in that bucket's study
    # only (`tune --seed-table`: the configs a dispatch table ships)
    bucket_seeds: tuple = ()
    optuna_storage: str = "sqlite:///db/optuna.sqlite"  # or a journal file path (tuner.ownership.open_storage)
    shared: bool = False  # other processes work on the same studies
    owner: str = ""  # this process's tuner.ownership.owner_tag (shared studies)
    sampler_seed: Optional[int] = None  # None: `seed` (a shared study: one per worker)
    # how long an unowned RUNNING trial counts as being asked by a live process
    # (tuner.ownership.unowned_grace_s: UNOWNED_GRACE_S or $INDEXER_TUNER_UNOWNED_GRACE_S)
    unowned_grace_s: float = UNOWNED_GRACE_S
    climb: int = 0  # neighbours of the bucket's best enqueued after each batch (0: no local search)
    # ((problem key, batch, context), Config, source): other GPUs' tuned choices (tuner.transfer)
    transfer_seeds: tuple = ()
    stop_at_optimum: bool = False  # a bucket whose best has no untried neighbour left is done
    seeds_only: bool = False  # time only bucket_seeds and try_configs, nothing else (`cli.py retime`)


# --------------------------------------------------------------------------------------------
# The search.

def tell_once(study, number: int, value: float | None = None, state=None) -> None:
    """Tell a trial its verdict unless it has one. In a shared study two workers may tell the
    same trial (both took over one left behind by a killed run; one measured it, the other read
    the verdict from the store): `skip_if_finished` checks the state and then writes it, so the
    second can still lose the race in between, and Optuna raises UpdateFinishedTrialError. The
    trial has its verdict then; that is all this call wanted."""
    from optuna.exceptions import UpdateFinishedTrialError

    try:
        study.tell(number, value, state=state, skip_if_finished=True)
    except UpdateFinishedTrialError:
        pass


class Search:
    def __init__(self, evaluator: Evaluator, settings: SearchSettings, target=None,
                 progress: Callable[..., None] | None = None, guide=None):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.ev = evaluator
        self.s = settings
        self.target = target
        self.progress = progress or (lambda **kw: None)
        self.guide = guide  # tuner.guide.Guide: the model's seeds and ranking, or None
        self.storage = open_storage(settings.optuna_storage)
        self.totals = RunTotals()
        self.winners: dict[str, dict[Bucket, Config]] = {}  # problem key -> bucket -> best config
        self.eta_s: float | None = None  # seconds the run has left, as of the current bucket's start
        self._feasible: dict[str, int] = {}  # problem key -> statically feasible points

    def run(self, plan: Sequence[tuple[Problem, Sequence[Bucket]]]) -> list[BucketSummary]:
        start = time.monotonic()
        end = start + self.s.time_budget_s if self.s.time_budget_s else None
        order = tuning_order(plan)
        weights = [bucket_weight(p, b) for p, b in order]
        summaries = []
        for done, (problem, bucket) in enumerate(order):
            if self.guide is not None:  # compile the next buckets' model seeds while this one is timed
                for p, b in order[done:done + PREFETCH_BUCKETS]:
                    self.ev.prefetch(p, b, self.guide.seeds_for(p, b))
                if done == 0:
                    # the first bucket's seeds cannot compile behind an earlier bucket: its share starts
                    # once they are built (else start-up ate it; docs/PERF.md, "The tuner's search")
                    self.ev.build_now(problem, bucket, self.guide.seeds_for(problem, bucket))
            share = None
            now = time.monotonic()
            if end is not None:  # this bucket's weighted share of what is left; unused time rolls over
                share = now + max(0.0, end - now) * weights[done] / sum(weights[done:])
            self.eta_s = eta_s(now - start, weights, done, None if end is None else end - now)
            summaries.append(self.tune_bucket(problem, bucket, share, end))
        return summaries

    # -- one bucket -------------------------------------------------------------------------

    def tune_bucket(self, problem: Problem, bucket: Bucket, share_end: float | None, run_end: float | None) -> BucketSummary:
        ctx = self.ev.ctx
        space = OptunaSpace(problem, self.s.dot_dtypes)
        name = study_name(problem, bucket, ctx.gpu_slug, ctx.timer, ctx.template_hashes[problem.family], space, self.s.sampler)
        study = self._open_study(name, space)
        summary = BucketSummary(problem, bucket)
        if problem.key not in self._feasible:  # enumerating the space takes a moment: once per problem
            self._feasible[problem.key] = len(feasible_points(problem, self.target, self.s.dot_dtypes))
        goal = min(self.s.trials, self._feasible[problem.key])
        counted = self._counted(study, space, problem)
        self._seed(study, space, problem, bucket)
        pending = self._unfinished(study, space)
        self.progress(event="bucket", problem=problem, bucket=bucket, goal=goal, counted=len(counted), eta_s=self.eta_s)
        stale, first = 0, True
        best = self._stored_best(problem, bucket) if self.s.climb else None  # (score, config) the climb's start
        while len(counted) < goal or pending:
            now = time.monotonic()
            if run_end is not None and now > run_end:
                summary.note = "time budget spent"
                break
            if share_end is not None and now > share_end and not first:  # the first batch always runs
                summary.note = "its share of the time budget spent"
                break
            first = False
            if stale >= STALE_ASKS:
                summary.note = f"sampler proposed nothing new in {STALE_ASKS} asks"
                break
            batch = pending
            pending = []
            want = min(self.s.ask_batch, max(1, goal - len(counted)))
            if self.s.seeds_only and not batch:
                if not (queued := waiting(study)):
                    summary.note = "its seeds are timed"
                    break
                want = min(want, queued)
            if self.s.climb and self.s.stop_at_optimum and not batch:
                # Guided: the seeds, then the climb; TPE never fills a batch (the H200 run whose first
                # batch of 8 took 3 TPE draws beside 5 seeds spent its buckets' shares on them).
                if best is not None:
                    climb(study, space, problem, bucket, best[1], self.s.climb, self.target, self.s.dot_dtypes,
                          self.guide)
                queued = waiting(study)
                if not queued and best is not None:
                    summary.note = f"local optimum: {best[1].slug}'s neighbours are measured"
                    break
                want = min(want, queued) if queued else want
            if self.s.shared:  # the other workers' trials in flight will count too
                elsewhere = self._in_flight_elsewhere(study, space) - counted
                want = min(self.s.ask_batch, goal - len(counted) - len(elsewhere))
                if want <= 0 and not batch:
                    summary.note = OTHER_WORKERS_NOTE
                    break
            while len(batch) < want:
                if self.s.sampler == "grid" and study.sampler.is_exhausted(study):
                    break
                trial = study.ask(fixed_distributions=space.distributions)
                if self.s.shared:
                    trial.set_user_attr("owner", self.s.owner)
                batch.append((trial.number, space.config(trial.params),
                              trial.user_attrs.get("source", f"optuna:{self.s.sampler}")))
            if not batch:
                summary.note = "grid exhausted"
                break
            before = len(counted)
            try:
                results = self._evaluate_batch(study, problem, bucket, batch, counted, run_end, space)
            except BucketUnavailable as exc:
                summary.note = f"skipped: {exc}"
                break
            if self.s.shared:
                counted |= self._counted(study, space, problem)  # the other workers' verdicts
            stale = stale + len(batch) if len(counted) == before else 0
            for config, v in results:
                if v is not None and v.ok and (best is None or (v.score_ms, config.key) < (best[0], best[1].key)):
                    best = (v.score_ms, config)
            if self.s.climb and not self.s.stop_at_optimum and best is not None and len(counted) < goal:
                climb(study, space, problem, bucket, best[1], self.s.climb, self.target, self.s.dot_dtypes, self.guide)
        self._summarize(summary)
        if summary.best is not None:
            self.winners.setdefault(problem.key, {})[bucket] = Config.from_json(summary.best["config_json"])
        self.progress(event="bucket_done", summary=summary)
        return summary

    def _evaluate_batch(self, study, problem, bucket, batch, counted: set, run_end, space=None) -> list:
        """Evaluate and tell a batch; returns [(config, verdict or None), ...] of what was evaluated."""
        State = self.optuna.trial.TrialState
        if self.s.shared:
            batch = self._answer_from_study(study, problem, bucket, batch, counted, space)
            if not batch:
                return []
        configs = [c for _, c, _ in batch]
        sources = [s for _, _, s in batch]

        def on_verdict(i: int, v: Verdict) -> None:
            self._note(v)
            if v.status != "infeasible" and configs[i].key not in counted:
                counted.add(configs[i].key)
                self.progress(event="trial", problem=problem, bucket=bucket, verdict=v, counted=len(counted))

        verdicts = self.ev.evaluate(problem, bucket, configs, sources, deadline=run_end, on_verdict=on_verdict)
        for (number, config, _), v in zip(batch, verdicts):
            if v is None:
                continue  # left RUNNING: the next run evaluates it
            if v.ok:
                tell_once(study, number, v.score_ms)
            else:  # infeasible or failed: PRUNED, never FAIL (see the module docstring)
                tell_once(study, number, state=State.PRUNED)
            if v.status != "infeasible" and config.key not in counted:
                counted.add(config.key)  # a duplicate of an earlier verdict in this batch
        return [(config, v) for (_, config, _), v in zip(batch, verdicts)]

    # -- the local search -------------------------------------------------------------------

    def _stored_best(self, problem: Problem, bucket: Bucket):
        """(score, config) of the bucket's best ok row in the store (this GPU, template, timer), or None."""
        probe = BucketSummary(problem, bucket)
        self._summarize(probe)
        return None if probe.best is None else (probe.best["score_ms"], Config.from_json(probe.best["config_json"]))

    def _answer_from_study(self, study, problem, bucket, batch, counted: set, space) -> list:
        """Tell the trials whose config the study already decided and this host's store does not
        hold (another host measured it: its row is in that host's store) the same; returns the
        rest of the batch."""
        State = self.optuna.trial.TrialState
        decided = {}
        for t in study.get_trials(deepcopy=False, states=(State.COMPLETE, State.PRUNED)):
            if set(t.params) == set(space.distributions):
                decided.setdefault(space.config(t.params).key, t)
        rest = []
        for number, config, source in batch:
            t = decided.get(config.key)
            if t is None or self.ev.store.get(self.ev._key(problem, bucket, config)) is not None:
                rest.append((number, config, source))
                continue
            if t.state == State.COMPLETE:
                tell_once(study, number, t.value)
            else:
                tell_once(study, number, state=State.PRUNED)
            self.totals.from_study += 1
            if is_feasible(problem, config, self.target):
                counted.add(config.key)
        return rest

    def _in_flight_elsewhere(self, study, space: OptunaSpace) -> set:
        """Config keys of trials other live processes are evaluating."""
        State = self.optuna.trial.TrialState
        return {space.config(t.params).key for t in study.get_trials(deepcopy=False, states=(State.RUNNING,))
                if set(t.params) == set(space.distributions) and self._held_elsewhere(t)}

    def _held_elsewhere(self, trial) -> bool:
        """A RUNNING trial of a shared study that another live process owns (or is still asking)."""
        import datetime as dt

        owner = trial.user_attrs.get("owner")
        if owner == self.s.owner:
            return False
        held_s = None
        if trial.datetime_start is not None:
            held_s = (dt.datetime.now() - trial.datetime_start).total_seconds()
        if owner is None:  # asked a moment ago, its owner not yet written (or from a single-process run)
            return held_s is not None and held_s < self.s.unowned_grace_s
        return owner_alive(owner, held_s)

    def _note(self, v: Verdict) -> None:
        t = self.totals
        if v.measured:
            t.measured += 1
        if v.fresh:
            t.decided += 1
            t.by_status[v.status] = t.by_status.get(v.status, 0) + 1
        else:
            t.from_store += 1

    # -- studies ----------------------------------------------------------------------------

    def _open_study(self, name: str, space: OptunaSpace):
        optuna = self.optuna
        if not self.s.resume:
            try:
                optuna.delete_study(study_name=name, storage=self.storage)
            except KeyError:
                pass
        seed = self.s.seed if self.s.sampler_seed is None else self.s.sampler_seed
        # One sampler seed per study: with one seed for all, every bucket drew the same random
        # startup points and explored the same corner of the space.
        seed = (seed + int(sha256_hex(name)[:8], 16)) % (2 ** 31)
        return optuna.create_study(study_name=name, storage=self.storage, direction="minimize", load_if_exists=True,
                                   sampler=make_sampler(self.s.sampler, space, seed, self.s.trials))

    def _unfinished(self, study, space: OptunaSpace) -> list:
        """Trials asked but never told (a killed run, or a budget cut), to evaluate first. One
        killed while its params were being written cannot be evaluated: it is told FAIL (it says
        nothing about any config)."""
        State = self.optuna.trial.TrialState
        out = []
        for t in study.get_trials(deepcopy=False, states=(State.RUNNING,)):
            if self.s.shared and self._held_elsewhere(t):
                continue  # another worker's, in flight
            if set(t.params) != set(space.distributions):
                tell_once(study, t.number, state=State.FAIL)
                fixed = t.system_attrs.get("fixed_params")
                if fixed:  # an interrupted seed: queue it again (skip_if_exists would see the FAIL)
                    # without the dead run's owner: the copy, once a live worker pops it, would
                    # look left behind to the others until its new owner is written
                    study.enqueue_trial(fixed, user_attrs={k: v for k, v in t.user_attrs.items() if k != "owner"})
                continue
            out.append((t.number, space.config(t.params), t.user_attrs.get("source", f"optuna:{self.s.sampler}")))
        return out

    def _counted(self, study, space: OptunaSpace, problem: Problem) -> set:
        """Configs of this study that already have a verdict other than static infeasibility."""
        State = self.optuna.trial.TrialState
        out = set()
        for t in study.get_trials(deepcopy=False, states=(State.COMPLETE, State.PRUNED)):
            config = space.config(t.params)
            if is_feasible(problem, config, self.target):
                out.add(config.key)
        return out

    def _seed(self, study, space: OptunaSpace, problem: Problem, bucket: Bucket) -> None:
        seeds = [(c, "seed:table") for (key, c) in self.s.bucket_seeds
                 if key == (problem.key, bucket.batch, bucket.context)]
        seeds += [(c, "seed:user") for c in self.s.try_configs]
        if self.s.seeds_only:
            self._enqueue(study, space, seeds)
            return
        if self.guide is not None:
            seeds += [(c, f"seed:model:{i + 1}") for i, c in enumerate(self.guide.seeds_for(problem, bucket))]
        seeds += [(c, src) for (key, c, src) in self.s.transfer_seeds if key == (problem.key, bucket.batch, bucket.context)]
        if not any(src.startswith("seed:model") for _, src in seeds):  # the model's seeds stand in for it
            seeds += [(default_config(problem, self.s.dot_dtypes[0]), "seed:default")]
        # The winners of finished buckets, nearest first, up to NEIGHBOUR_SEEDS distinct configs:
        # few configs win most buckets, and the nearest one's winner alone was often not among them.
        done = self.winners.get(problem.key, {})
        picked, added = {c for c, _ in seeds}, 0
        for near in by_distance(bucket, done):
            if added == NEIGHBOUR_SEEDS:
                break
            if done[near] not in picked:
                picked.add(done[near])
                seeds.append((done[near], f"seed:neighbour:{near.slug}"))
                added += 1
        self._enqueue(study, space, seeds)

    @staticmethod
    def _enqueue(study, space: OptunaSpace, seeds) -> None:
        for config, source in seeds:
            params = space.params_of(config)
            if params is not None:
                study.enqueue_trial(params, user_attrs={"source": source}, skip_if_exists=True)

    # -- summary ----------------------------------------------------------------------------

    def _summarize(self, summary: BucketSummary) -> None:
        ctx = self.ev.ctx
        fill_summary(summary, self.ev.store, ctx.gpu_slug, ctx.timer, ctx.template_hashes[summary.problem.family])
