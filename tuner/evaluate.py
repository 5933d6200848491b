"""One verdict per (problem, bucket, config): from the store, from the static check, from the
gate cache, or measured (build in the pool, gate and time in the worker). Every verdict that is
not already stored becomes one trial row, written as soon as it is known.

Order of the questions, cheapest first:
1. the store has this trial_key (same GPU, problem, bucket, config, template, timer): answer
   with the stored row, measure nothing (resume, repeated runs, TPE re-proposals). Rows whose
   status is "error" (a harness failure, not the candidate's) are retried;
2. the static check against the local target fails: 'infeasible';
3. the config's gate verdict is known (this run, or the store's gates table): a failed gate
   marks this bucket's trial with the gate's status without running anything;
4. otherwise build (parallel), gate once per config, then time on the bucket. With
   `short_first` (multi-fidelity), a config is first timed briefly; one more than PROMOTE_WITHIN
   behind the bucket's best full timing is recorded as that short timing (fidelity 'short': it
   never wins) and only the others get the full replay count.

`seconds` adds up where the run's time went (build, inputs, gate, time_short, time_full).

With `owner` set (several workers on one store: tuner.ownership), each gate and each timing
is claimed in the store first: one worker measures it, another that asks the same config
waits for that row and answers from it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from . import __version__
from .ownership import claim_once, owner_run_id
from .prebuild import LaunchShape, Prebuilder
from indexer_logits._identity import Bucket, Config, Problem, variant_name
from .space import InfeasibleConfig, Target, check
from .store import RETRIED_STATUSES, Store, TrialRow, fill_timings, gate_key, now_iso, score_of, trial_key
from .summary import BucketSummary, fill_summary
from .worker import Worker, WorkerUnavailable

PREPARE_TIMEOUT_MIN_S = 600.0  # building a bucket's inputs (gigabytes on a GPU) is not a candidate
# A short timing this close to the bucket's best full timing (or better) earns a full timing. The
# short timing's own spread is a few percent on the H200's small buckets, so a 5% margin keeps a
# contender and cuts the clear losers, which are most of a climb's neighbours.
PROMOTE_WITHIN = 1.05
# Below this bucket score (ms: full + quarter p50 for decode) a short timing costs what a full one
# does (graph capture, warm-up and the worker's round trip dominate, not the replays) and a cut
# saves nothing: the H200 run of call 3 spent 112 s on 219 short timings, most of them in 3-50 us
# buckets, and had no time left to climb in 60 of its 96 buckets. At 1 ms a full timing's 30
# replays of 8 launches are ~250 ms of GPU time against the short one's ~80.
SHORT_FIRST_FROM_MS = 1.0


class BucketUnavailable(RuntimeError):
    """The worker could not build this bucket's inputs; its trials cannot be timed."""


@dataclass
class Verdict:
    status: str  # a tuner.store.STATUSES value
    score_ms: Optional[float]
    row: dict
    fresh: bool  # decided in this run (False: answered from the store)
    measured: bool  # timed in this run

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class RunContext:
    """What every row of this run shares."""

    run_id: str
    gpu_slug: str
    timer: str  # "cuda_graph" | "wall_clock"
    env: dict  # tuner.envinfo.Environment.to_dict()
    template_hashes: dict  # family -> template hash
    target: Optional[Target]  # static limits of the local GPU; None under the interpreter
    interpret: bool
    replays: int
    timeout_s: float
    seed: int
    short_first: bool = False  # multi-fidelity: time briefly first, fully only near the bucket's best


class Evaluator:
    def __init__(self, store: Store, ctx: RunContext, src_dir: Path, gate_shape: Callable[[Problem], tuple[int, int]],
                 jobs: int | None = None, owner: str | None = None):
        self.store, self.ctx = store, ctx
        self.owner = owner  # tuner.ownership.owner_tag when workers share the store: claim measurements
        self.gate_shape = gate_shape
        self.src_dir = Path(src_dir)
        self.worker = Worker(ctx.interpret)
        self.builder = Prebuilder(ctx.interpret, src_dir, jobs)
        self.calibration: dict = {"copy_bw": None, "matmul_rate": None}
        self._gates: dict[str, dict] = {}  # gate_key -> gate row
        self._built: set[tuple] = set()  # _build_key of the builds the pool made in this run
        self._ahead: dict[tuple, Bucket] = {}  # _build_key -> the bucket its build was prefetched for
        self._gate_ready: Optional[str] = None  # problem key whose gate inputs the worker holds
        self._bucket_ready: Optional[tuple[str, str]] = None
        self.build_warnings: list[str] = []
        self.seconds: dict[str, float] = {}  # phase -> seconds spent in it this run
        self._best_full: dict[tuple[str, str], float] = {}  # (problem key, bucket key) -> best full score_ms

    @contextlib.contextmanager
    def _phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def close(self) -> None:
        self.worker.close()
        self.builder.close()

    # -- the run ----------------------------------------------------------------------------

    def calibrate(self, dtype: str) -> dict:
        """Copy bandwidth and matmul rate of the GPU (at the start of a GPU run)."""
        reply = self.worker.request("calibrate", {"dtype": dtype}, timeout=max(PREPARE_TIMEOUT_MIN_S, self.ctx.timeout_s))
        if not reply.ok:
            raise RuntimeError(f"calibrating the GPU (copy bandwidth, matmul rate) failed: {reply.status}: {reply.detail}")
        self.calibration = {"copy_bw": reply.data["copy_bw"], "matmul_rate": reply.data["matmul_rate"]}
        return self.calibration

    def evaluate(self, problem: Problem, bucket: Bucket, configs: Sequence[Config], sources: Sequence[str],
                 deadline: float | None = None,
                 on_verdict: Callable[[int, Verdict], None] | None = None) -> list[Optional[Verdict]]:
        """Verdicts in input order; None for a config left undecided because `deadline`
        (time.monotonic) passed. Duplicate configs in one call are decided once."""
        verdicts: list[Optional[Verdict]] = [None] * len(configs)
        first: dict[str, int] = {}
        todo: list[int] = []

        def settle(i: int, v: Verdict) -> None:
            verdicts[i] = v
            if on_verdict:
                on_verdict(i, v)

        for i, config in enumerate(configs):
            if config.key in first:
                continue
            first[config.key] = i
            v = self._quick_verdict(problem, bucket, config, sources[i])
            if v is None:
                todo.append(i)
            else:
                settle(i, v)
        self._build([configs[i] for i in todo], problem, bucket)
        for i in todo:
            if deadline is not None and time.monotonic() > deadline:
                break
            v = self._measure_once(problem, bucket, configs[i], sources[i], deadline)
            if v is not None:
                settle(i, v)
        for i, config in enumerate(configs):  # duplicates take their first's verdict
            j = first[config.key]
            if j != i and verdicts[j] is not None:
                verdicts[i] = Verdict(verdicts[j].status, verdicts[j].score_ms, verdicts[j].row, False, False)
        return verdicts

    # -- the cheap answers ------------------------------------------------------------------

    def _key(self, problem: Problem, bucket: Bucket, config: Config) -> str:
        return trial_key(self.ctx.gpu_slug, problem, bucket, config, self.ctx.template_hashes[problem.family], self.ctx.timer)

    def _gate_key(self, problem: Problem, config: Config) -> str:
        return gate_key(self.ctx.gpu_slug, problem, config, self.ctx.template_hashes[problem.family])

    def _quick_verdict(self, problem, bucket, config, source) -> Optional[Verdict]:
        stored = self.store.get(self._key(problem, bucket, config))
        if stored is not None and stored["status"] not in RETRIED_STATUSES:
            return Verdict(stored["status"], stored["score_ms"], stored, fresh=False, measured=False)
        try:
            check(problem, config, self.ctx.target)
        except InfeasibleConfig as exc:
            return self._record(problem, bucket, config, source, "infeasible", f"{exc.reason}: {exc.detail}")
        gate = self._known_gate(problem, config)
        if gate is not None and gate["status"] != "ok":
            return self._record(problem, bucket, config, source, gate["status"], f"gate: {gate['reason']}", gate=gate)
        return None

    def _known_gate(self, problem: Problem, config: Config) -> Optional[dict]:
        key = self._gate_key(problem, config)
        if key not in self._gates:
            stored = self.store.get_gate(key)
            if stored is not None and stored["status"] not in RETRIED_STATUSES:
                self._gates[key] = stored
        return self._gates.get(key)

    def _remember_gate(self, problem: Problem, config: Config, status: str, reason: str, data: dict) -> dict:
        row = {"gate_key": self._gate_key(problem, config), "run_id": self.ctx.run_id, "created_at": now_iso(),
               "gpu_slug": self.ctx.gpu_slug, "problem_key": problem.key, "config_key": config.key,
               "variant": variant_name(problem, config), "template_hash": self.ctx.template_hashes[problem.family],
               "status": status, "reason": reason[:4000], "rel_err": data.get("rel_err"),
               "registers": data.get("registers"), "spills": data.get("spills"), "shared_bytes": data.get("shared_bytes")}
        self._gates[row["gate_key"]] = row
        if status not in RETRIED_STATUSES:
            self.store.record_gate(row)
        return row

    # -- building and measuring -------------------------------------------------------------

    @staticmethod
    def _build_key(problem: Problem, config: Config, bucket: Bucket) -> tuple:
        """(variant, what of the bucket can change the compiled kernel): a batch of 1 becomes a
        constant, and the persistent grid takes next_power_of_2(batch) as a constexpr; the widths'
        integers are all multiples of 16 over the grid. Built once per key: a wrong guess only means
        the worker's first launch compiles."""
        batch = bucket.batch
        return (variant_name(problem, config), batch == 1,
                1 << (batch - 1).bit_length() if config.programs_per_sm else 0)

    def _shapes(self, problem: Problem, bucket: Bucket) -> list:
        gb, gc = self.gate_shape(problem)
        return [LaunchShape(gb, gc, True), LaunchShape(gb, gc, False), LaunchShape(bucket.batch, bucket.context, False)]

    def prefetch(self, problem: Problem, bucket: Bucket, configs: Sequence[Config]) -> None:
        """Start building, in the background, configs this bucket will ask for (its seeds)."""
        todo = {self._build_key(problem, c, bucket): c for c in configs}
        todo = {k: c for k, c in todo.items() if k not in self._built and k not in self._ahead}
        if todo:
            self.builder.prefetch(problem, list(todo.values()), self._shapes(problem, bucket))
            self._ahead.update(dict.fromkeys(todo, bucket))

    def build_now(self, problem: Problem, bucket: Bucket, configs: Sequence[Config]) -> None:
        """Build configs this bucket will ask for and wait for them (the run's first bucket,
        whose seeds no earlier bucket's timing could hide)."""
        self._build(list(configs), problem, bucket)

    def _build(self, configs: Sequence[Config], problem: Problem, bucket: Bucket) -> None:
        """Render/import/compile the configs not built yet, in parallel; a failure is the
        config's gate verdict ('compile_error')."""
        gates = {c.key: self._known_gate(problem, c) for c in configs}
        need = [c for c in configs if self._build_key(problem, c, bucket) not in self._built
                and (gates[c.key] is None or gates[c.key]["status"] == "ok")]
        if not need:
            return
        self.worker.start()  # its imports (and CUDA start-up) overlap the builds
        # a prefetched build is waited for under the shapes it was started with (same specialisation)
        groups: dict = {}
        for c in need:
            ahead = self._ahead.pop(self._build_key(problem, c, bucket), bucket)
            groups.setdefault(ahead, []).append(c)
        built = []
        with self._phase("build"):
            for shape_bucket, group in groups.items():
                built += self.builder.build(problem, group, self._shapes(problem, shape_bucket))
        for result in built:
            self._built.add(self._build_key(problem, result.config, bucket))
            if result.status != "ok":
                self._remember_gate(problem, result.config, result.status, result.detail, {})
            elif result.detail and len(self.build_warnings) < 20:
                self.build_warnings.append(f"{variant_name(problem, result.config)}: {result.detail}")

    def _payload(self, problem: Problem, config: Config, **extra) -> dict:
        return {"problem": problem.to_json(), "config": config.to_json(), "src_dir": str(self.src_dir),
                "seed": self.ctx.seed, **extra}

    def _prepare_timeout(self) -> float:
        return max(PREPARE_TIMEOUT_MIN_S, 5 * self.ctx.timeout_s)

    def _ensure_gate_inputs(self, problem: Problem) -> None:
        if self._gate_ready == problem.key:
            return
        batch, context = self.gate_shape(problem)
        with self._phase("inputs"):
            reply = self.worker.prepare("gate_inputs", "gate_inputs", {"problem": problem.to_json(), "batch": batch,
                                        "context": context, "seed": self.ctx.seed + 1}, self._prepare_timeout())
        if not reply.ok:
            raise RuntimeError(f"building the gate inputs of {problem.slug} failed: {reply.status}: {reply.detail}")
        self._gate_ready = problem.key

    def _ensure_bucket_inputs(self, problem: Problem, bucket: Bucket) -> None:
        if self._bucket_ready == (problem.key, bucket.key):
            return
        self._bucket_ready = None
        with self._phase("inputs"):
            reply = self.worker.prepare("bucket_inputs", "bucket_inputs", {"problem": problem.to_json(),
                                        "bucket": bucket.to_json(), "seed": self.ctx.seed + 2}, self._prepare_timeout())
        if not reply.ok:
            raise BucketUnavailable(f"building the timing inputs of {problem.slug} {bucket.slug} failed: "
                                    f"{reply.status}: {reply.detail}")
        self._bucket_ready = (problem.key, bucket.key)

    def _claim_wait_s(self) -> float:
        """How long to wait for another worker's measurement before leaving the trial undecided."""
        return 2 * self._prepare_timeout() + 4 * self.ctx.timeout_s

    def _measure_once(self, problem, bucket, config, source, deadline) -> Optional[Verdict]:
        """`_measure`, or with other workers on the store: measured by whichever claims it first."""
        if self.owner is None:
            return self._measure(problem, bucket, config, source)
        key = self._key(problem, bucket, config)

        def lookup(holder: Optional[str]) -> Optional[Verdict]:
            row = self.store.get(key)
            if row is None:
                return None
            if row["status"] in RETRIED_STATUSES and (holder is None or row["run_id"] != owner_run_id(holder)):
                return None  # an old harness error: measured again
            return Verdict(row["status"], row["score_ms"], row, fresh=False, measured=False)

        return claim_once(self.store, key, self.owner, lambda: (self._measure(problem, bucket, config, source), True),
                          lookup, deadline=deadline, wait_cap_s=self._claim_wait_s())

    def _measure(self, problem, bucket, config, source) -> Verdict:
        try:
            return self._gate_and_time(problem, bucket, config, source)
        except WorkerUnavailable as exc:  # a restarted worker could not rebuild its inputs
            self._gate_ready = self._bucket_ready = None
            raise BucketUnavailable(str(exc)) from None

    def _gate_and_time(self, problem, bucket, config, source) -> Verdict:
        gate = self._known_gate(problem, config)
        if gate is None and self.owner is None:
            gate = self._run_gate(problem, config)
        elif gate is None:  # one gate per config among the workers sharing the store
            def run_gate() -> tuple[dict, bool]:
                g = self._run_gate(problem, config)
                return g, g["status"] not in RETRIED_STATUSES  # an unstored harness error frees the claim

            gate = claim_once(self.store, "gate:" + self._gate_key(problem, config), self.owner, run_gate,
                              lambda holder: self._known_gate(problem, config), wait_cap_s=self._claim_wait_s())
            if gate is None:  # its holder outlived the wait: gate it here too
                gate = self._run_gate(problem, config)
        if gate["status"] != "ok":
            return self._record(problem, bucket, config, source, gate["status"], f"gate: {gate['reason']}", gate=gate)
        self._ensure_bucket_inputs(problem, bucket)
        payload = self._payload(problem, config, bucket=bucket.to_json(), replays=self.ctx.replays, **self.calibration)
        best = self._bucket_best(problem, bucket) if self.ctx.short_first else None
        if best is not None and best >= SHORT_FIRST_FROM_MS:
            with self._phase("time_short"):
                reply = self.worker.request("time", {**payload, "fidelity": "short"}, self.ctx.timeout_s)
            if not reply.ok:
                return self._record(problem, bucket, config, source, reply.status, f"timing: {reply.detail}", gate=gate)
            short = score_of(problem, reply.data)
            if short > best * PROMOTE_WITHIN:
                return self._record(problem, bucket, config, source, "ok",
                                    f"cut after a short timing: {short / best:.3f}x the bucket's best",
                                    gate=gate, timings=reply.data, fidelity="short")
        with self._phase("time_full"):
            reply = self.worker.request("time", payload, self.ctx.timeout_s)
        if not reply.ok:  # bucket-specific (e.g. an overflow only at 1M tokens): not a gate verdict
            return self._record(problem, bucket, config, source, reply.status, f"timing: {reply.detail}", gate=gate)
        verdict = self._record(problem, bucket, config, source, "ok", "", gate=gate, timings=reply.data)
        key = (problem.key, bucket.key)
        if key not in self._best_full or verdict.score_ms < self._best_full[key]:
            self._best_full[key] = verdict.score_ms
        return verdict

    def _bucket_best(self, problem: Problem, bucket: Bucket) -> Optional[float]:
        """The bucket's best full score_ms: this run's, or the store's (its summary, which skips short rows)."""
        key = (problem.key, bucket.key)
        if key not in self._best_full:
            stored = BucketSummary(problem, bucket)
            fill_summary(stored, self.store, self.ctx.gpu_slug, self.ctx.timer, self.ctx.template_hashes[problem.family])
            if stored.best is None:
                return None
            self._best_full[key] = stored.best["score_ms"]
        return self._best_full[key]

    def _run_gate(self, problem: Problem, config: Config) -> dict:
        self._ensure_gate_inputs(problem)
        with self._phase("gate"):
            reply = self.worker.request("gate", self._payload(problem, config), self.ctx.timeout_s)
        return self._remember_gate(problem, config, reply.status, reply.detail, reply.data)

    # -- rows -------------------------------------------------------------------------------

    def _record(self, problem: Problem, bucket: Bucket, config: Config, source: str, status: str, reason: str,
                gate: Optional[dict] = None, timings: Optional[dict] = None, fidelity: str = "full") -> Verdict:
        env = self.ctx.env
        row = TrialRow(
            trial_key=self._key(problem, bucket, config), run_id=self.ctx.run_id, created_at=now_iso(),
            gpu_slug=self.ctx.gpu_slug, family=problem.family, problem_json=problem.to_json(), problem_key=problem.key,
            bucket_batch=bucket.batch, bucket_context=bucket.context, config_json=config.to_json(),
            config_key=config.key, variant=variant_name(problem, config), status=status, reason=reason[:4000],
            gpu_name=env["gpu_name"], compute_capability=env["compute_capability"], sm_count=env["sm_count"],
            driver=env["driver"], cuda_version=env["cuda"], torch_version=env["torch"], triton_version=env["triton"],
            template_hash=self.ctx.template_hashes[problem.family], tool_version=__version__,
            copy_bw=self.calibration["copy_bw"], matmul_rate=self.calibration["matmul_rate"], source=source,
            fidelity=fidelity,
        )
        if gate is not None:
            row.rel_err, row.registers = gate.get("rel_err"), gate.get("registers")
            row.spills, row.shared_bytes = gate.get("spills"), gate.get("shared_bytes")
        if timings is not None:
            fill_timings(row, problem, timings)
        self.store.record(row)  # autocommit: a killed run keeps every row written so far
        return Verdict(status, row.score_ms, row.to_dict(), fresh=True, measured=timings is not None)
