"""`cli.py tune` on the CPU: the whole loop (ask, render, build, gate, time, store) under Triton's
interpreter with wall-clock timing, on tiny problems.

What is proved here: rows are stored with their timer; static infeasibility is PRUNED, never
FAIL; a candidate that kills its worker ('crash') or hangs ('timeout') is recorded and the search
goes on; a run killed with SIGKILL part-way loses nothing and `--resume` re-measures nothing; a
repeated run measures nothing new. Plus the option errors, the bucket lists, the Optuna encoding
of the space and the meta-tensor launch shapes the GPU build pool compiles for.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import trial_rows
import torch
from click.testing import CliRunner

from cli import main
from tuner.buckets import DECODE_LENS_MODES, POW2_BATCHES, SGLANG_DECODE_BATCHES, by_distance, parse_bucket_specs, parse_sizes
from tuner.families import family_of
from indexer_logits._identity import Bucket, Config, Problem
from tuner.optuna_space import OptunaSpace
from tuner.space import InfeasibleConfig, check, default_config, feasible_points, grid_points, is_feasible, store_run_applies
from tuner.store import Store
from tuner.summary import BucketSummary
from tuner.worker import FAULTS_ENV

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = Problem(heads=16, head_dim=32, page_size=32)  # fp8, page-blocked, next_n 1
WIDE = Problem(heads=64, head_dim=32, page_size=32)
DOT = ("fp16",)  # what the interpreter search space allows for fp8
TINY = ["--interpret", "--heads", "16", "--head-dim", "32", "--page-size", "32", "--replays", "10", "--quiet"]


def _study_trials(optuna_db: Path):
    import optuna

    storage = f"sqlite:///{optuna_db}"
    out = []
    for name in optuna.study.get_all_study_names(storage):
        out += optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    return out


def _tune(args, env=None):
    result = CliRunner().invoke(main, ["tune", *TINY, *args], env=env)
    assert result.exit_code == 0, result.output + "".join(__import__("traceback").format_exception(*result.exc_info))
    return result


# ---------------------------------------------------------------------------------------------
# The loop, with an infeasible, a crashing and a hanging candidate.


def test_loop_records_infeasible_crash_and_timeout_and_goes_on(tmp_path):
    # 64 heads: 64 query rows, so a wide tile on few warps is statically infeasible (registers);
    # with 16 heads only the unused knobs are (a persistent grid's tiles, store='run' outside the
    # split grid's k_rows tiles), and the space maps those away.
    db = tmp_path / "trials.sqlite"
    default = default_config(WIDE, DOT[0])
    infeasible = next(c for c in grid_points(WIDE, DOT)  # too many accumulator registers
                      if not is_feasible(WIDE, c) and not c.programs_per_sm and c.store == "tile" and c.head_sum == "tree")
    crash, hang = [c for c in feasible_points(WIDE, None, DOT) if c != default][:2]
    faults = json.dumps({"crash": [crash.slug], "hang": [hang.slug]})
    tries = [f"--try-config={c.to_json()}" for c in (infeasible, crash, hang)]
    result = _tune(["--heads", "64", "--batch", "1,2", "--context", "64", "--trials", "4", "--ask-batch", "4", "--timeout", "10",
                    "--db", str(db), "--model-seeds", "0", "--climb", "0", *tries], env={FAULTS_ENV: faults})

    rows = list(trial_rows(db).values())
    by_bucket = {}
    for r in rows:
        by_bucket.setdefault(r["bucket_batch"], {}).setdefault(r["status"], set()).add(r["config_key"])
    for batch in (1, 2):
        statuses = by_bucket[batch]
        assert infeasible.key in statuses["infeasible"]
        assert statuses["crash"] == {crash.key}  # gated once; the verdict serves both buckets
        assert statuses["timeout"] == {hang.key}
        assert default.key in statuses["ok"]
        assert len(statuses["ok"]) >= 2, "the search went on after the crash and the hang"
    for r in rows:
        assert r["run_id"] and r["gpu_slug"] == "cpu" and r["template_hash"]
        if r["status"] == "ok":
            assert r["timer"] == "wall_clock"
            assert r["p50_ms"] > 0 and r["partial_p50_ms"] > 0
            assert r["score_ms"] == pytest.approx(r["p50_ms"] + r["partial_p50_ms"])
            assert r["rel_err"] is not None and r["rel_err"] < 1e-3
        else:
            assert r["p50_ms"] is None and r["reason"]
    crash_row = next(r for r in rows if r["status"] == "crash")
    assert "died" in crash_row["reason"]

    trials = _study_trials(db.with_name("optuna.sqlite"))
    states = {t.state.name for t in trials}
    assert "FAIL" not in states and "RUNNING" not in states
    space = OptunaSpace(WIDE, DOT)
    for t in trials:
        status_is_ok = t.state.name == "COMPLETE"
        config = space.config(t.params)
        if config in (infeasible, crash, hang):
            assert t.state.name == "PRUNED" and not status_is_ok
    # the gate verdicts were stored once per config, not per bucket
    con = sqlite3.connect(db)
    gates = dict(con.execute("select config_key, status from gates").fetchall())
    con.close()
    assert gates[crash.key] == "crash" and gates[hang.key] == "timeout"
    assert "b1_c64" in result.output and "db:" in result.output


# ---------------------------------------------------------------------------------------------
# Kill part-way, resume, repeat.


def test_sigkill_then_resume_loses_nothing_and_repeat_measures_nothing(tmp_path):
    db = tmp_path / "trials.sqlite"
    args = ["--batch", "1,2", "--context", "64", "--trials", "3", "--ask-batch", "2", "--db", str(db)]
    env = {k: v for k, v in os.environ.items() if k != FAULTS_ENV}
    proc = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "tune", *TINY, *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    if sum(r["status"] == "ok" for r in trial_rows(db).values()) >= 1:
                        break
                except sqlite3.OperationalError:
                    pass  # the table is being created
            time.sleep(0.1)
        assert proc.poll() is None, "the run finished before it could be killed: " + proc.stderr.read().decode()[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the tuner, its worker and its build processes
        proc.wait(30)
    before = trial_rows(db)
    assert before, "nothing was stored before the kill"

    _tune(["--resume", *args])
    after = trial_rows(db)
    assert len(after) > len(before)
    for key, row in before.items():
        assert after[key] == row, f"stored trial {row['variant']} was changed (re-measured?) by --resume"
    ok = {(r["bucket_batch"], r["config_key"]) for r in after.values() if r["status"] != "infeasible"}
    for batch in (1, 2):
        assert sum(1 for b, _ in ok if b == batch) >= 3
    assert "RUNNING" not in {t.state.name for t in _study_trials(db.with_name("optuna.sqlite"))}

    again = _tune(args)
    assert trial_rows(db) == after
    assert "this run: 0 trials measured" in again.output


# ---------------------------------------------------------------------------------------------
# Options, buckets, the Optuna space, the build pool's launch shapes (no worker processes).


@pytest.mark.parametrize("args, option", [
    (["--batch", "0"], "--batch"),
    (["--batch", "many"], "--batch"),
    (["--context", "4Q"], "--context"),
    (["--next-n", "9"], "--next-n"),
    (["--page-size", "48"], "--page-size"),
    (["--heads", "12"], "--heads"),
    (["--dtype", "bf16", "--scale-layout", "page_blocked"], "--scale-layout"),
    (["--family", "prefill_ragged", "--batch", "4096", "--context", "1024"], "--context"),
    (["--try-config", "{\"block_t\": 3}"], "--try-config"),
    # a persistent grid has no tiles_per_program: 4 would silently be timed as 1
    (["--try-config", "{\"block_t\": 64, \"tiles_per_program\": 4, \"programs_per_sm\": 2, \"dot_dtype\": \"fp16\"}"],
     "would be timed as"),
])
def test_bad_options_name_the_option(args, option):
    result = CliRunner().invoke(main, ["tune", "--interpret", *args])
    assert result.exit_code == 2, result.output
    assert option in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown where there is no GPU")
def test_without_gpu_and_without_interpret_says_so(tmp_path):
    result = CliRunner().invoke(main, ["tune", "--db", str(tmp_path / "t.sqlite")])
    assert result.exit_code != 0
    assert "no GPU found" in result.output and "--interpret" in result.output


def test_bucket_lists():
    assert parse_sizes("pow2", "batch") == POW2_BATCHES == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert parse_sizes(["4K,8k", "1M"], "context") == (4096, 8192, 1 << 20)
    assert SGLANG_DECODE_BATCHES[:7] == (1, 2, 4, 8, 12, 16, 24) and SGLANG_DECODE_BATCHES[-1] == 256
    buckets = family_of(PROBLEM).buckets((1, 2), (128, 64))
    assert buckets == [Bucket(1, 64), Bucket(2, 64), Bucket(1, 128), Bucket(2, 128)]
    assert by_distance(Bucket(4, 64), buckets)[:2] == [Bucket(2, 64), Bucket(1, 64)]
    assert by_distance(Bucket(1, 64), []) == []


def test_bucket_specs_of_the_gpu_scripts():
    assert parse_bucket_specs("64x8192:quarter, 1X1048576") == [(Bucket(64, 8192), "quarter"),
                                                                 (Bucket(1, 1048576), "full")]
    assert parse_bucket_specs("4096x16384:causal") == [(Bucket(4096, 16384), "causal")]
    for bad in ("64x8192,", "64*8192", "64x8192:", "0x8192", "x8192:full"):
        with pytest.raises(ValueError, match="--buckets"):
            parse_bucket_specs(bad)
    with pytest.raises(ValueError, match="lens 'causal'.*not one of"):
        parse_bucket_specs("64x8192:causal", lens_modes=DECODE_LENS_MODES)


def test_optuna_space_round_trips_every_point():
    for problem, dots in ((PROBLEM, DOT), (Problem(family="prefill_ragged", page_size=0, heads=8), ("native",))):
        space = OptunaSpace(problem, dots)
        for config in grid_points(problem, dots):
            params = space.params_of(config)
            for name, value in params.items():
                assert space.distributions[name]._contains(space.distributions[name].to_internal_repr(value))
            expected = config
            if config.programs_per_sm and config.tiles_per_program != 1:  # the unused knob maps to 1
                expected = dataclasses.replace(expected, tiles_per_program=1)
            if config.store == "run" and not store_run_applies(problem.page_size, config.orient,
                                                               config.programs_per_sm, config.block_t):
                expected = dataclasses.replace(expected, store="tile")  # store='run' would change nothing
            if config.head_sum == "chain" and config.orient != "k_rows":
                expected = dataclasses.replace(expected, head_sum="tree")  # q_rows has no chain to sum
            assert space.config(params) == expected
        assert "log2_block_t" in space.distributions and space.fixed["dot_dtype"] == dots[0]
        assert space.params_of(Config(dot_dtype="fp32")) is None  # outside the restricted dot dtypes


def test_optuna_space_is_conditional_on_the_persistent_grid():
    """A persistent grid ignores tiles_per_program: every proposal is feasible, none is pruned for
    the unused knob, and the proposals that differ only there are one config."""
    problem = Problem()  # the GPU decode space has programs_per_sm > 0
    space = OptunaSpace(problem, ("native",))
    assert "idx_programs_per_sm" in space.distributions and "idx_tiles_per_program" in space.distributions
    base = space.params_of(default_config(problem, "native"))
    persistent = [space.config({**base, "idx_programs_per_sm": 2, "idx_tiles_per_program": k}) for k in range(0, 5)]
    assert {c.tiles_per_program for c in persistent} == {1} and len(set(persistent)) == 1
    assert is_feasible(problem, persistent[0])
    assert space.config({**base, "idx_programs_per_sm": 0, "idx_tiles_per_program": 5}).tiles_per_program == 8
    # the half-octave steps keep their order for TPE: position i is the i-th smallest value
    assert [space.config({**base, "idx_programs_per_sm": 0, "idx_tiles_per_program": k}).tiles_per_program
            for k in range(10)] == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]


def test_optuna_space_ties_store_where_it_changes_nothing():
    """store='run' exists for the split grid's k_rows tiles within one page. Elsewhere the space
    times it as 'tile' instead of pruning it: no proposal of the GPU decode space is infeasible
    for an unused knob, so TPE is never taught to shun block_t > page, q_rows or persistent grids
    (which are half of their proposals) for the store's sake."""
    problem = Problem()  # page 64
    space = OptunaSpace(problem, ("native",))
    assert "store" in space.distributions
    base = {**space.params_of(default_config(problem, "native")), "idx_programs_per_sm": 0, "store": "run"}
    split = space.config({**base, "log2_block_t": 6, "orient": "k_rows"})
    assert split.store == "run" and split.block_t == 64 and is_feasible(problem, split)
    for change in ({"log2_block_t": 7}, {"orient": "q_rows"}, {"idx_programs_per_sm": 2}):
        tied = space.config({**base, "log2_block_t": 6, "orient": "k_rows", **change})
        assert tied.store == "tile", change
        assert tied == space.config({**base, "log2_block_t": 6, "orient": "k_rows", **change, "store": "tile"})
    unused = []
    for config in grid_points(problem, ("native",)):
        tied = space.config(space.params_of(config))
        try:
            check(problem, tied)
        except InfeasibleConfig as exc:
            if exc.reason == "unused_knob":
                unused.append(tied.slug)
    assert not unused, unused[:5]
    # the same rule refuses such a config outside the space (a hand-written --try-config)
    with pytest.raises(InfeasibleConfig, match="store='run' is for"):
        check(problem, dataclasses.replace(split, block_t=128))
    assert "store to tile" in space.ties_text


def _kernel_ints(module, inputs, clean):
    """The integer arguments and tensor dtypes the launcher hands the jit kernel."""
    from tuner.gates import launch, new_output

    name = next(n for n in dir(module) if n.startswith("_") and n.endswith("_kernel"))
    kernel, seen = getattr(module, name), []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append(([x.dtype if isinstance(x, torch.Tensor) else x for x in a], kw))

    setattr(module, name, Recorder())
    try:
        launch(module, inputs, new_output(inputs), clean)
    finally:
        setattr(module, name, kernel)
    return seen


@pytest.mark.parametrize("problem, batch, context", [
    (PROBLEM, 3, 256),
    (Problem(heads=16, head_dim=32, page_size=32, cache_dtype="bf16", q_dtype="bf16", scale_layout="none", next_n=2,
             lens_mode="2d"), 2, 128),
    (Problem(heads=16, head_dim=32, page_size=32, scale_layout="token_interleaved"), 1, 96),
    (Problem(family="prefill_ragged", page_size=0, heads=16, head_dim=32), 16, 64),
    (Problem(family="prefill_paged", page_size=32, heads=16, head_dim=32), 16, 96),
    (Problem(family="prefill_paged", page_size=32, heads=16, head_dim=32, scale_layout="token_interleaved"), 40, 32),
    (Problem(family="prefill_paged", page_size=64, heads=16, head_dim=32, cache_dtype="bf16", q_dtype="bf16",
             scale_layout="none"), 8, 64),  # one request of one page: the launcher takes no page stride
])
def test_build_pool_warms_the_launch_the_worker_makes(problem, batch, context, tmp_path):
    """The GPU build pool compiles from meta tensors; their launch must hand the kernel the same
    integers (what Triton specialises on) as the real timing inputs."""
    from tuner.measure import timing_inputs
    from tuner.prebuild import mock_inputs
    from tuner.render import emit, load_module

    dots = ("fp16",) if problem.cache_dtype == "fp8" else ("fp32",)
    config = default_config(problem, dots[0])
    if not is_feasible(problem, config):
        config = feasible_points(problem, None, dots)[0]
    module = load_module(emit(problem, config, tmp_path))
    real = timing_inputs(problem, Bucket(batch, context), "full", device="cpu", min_pool_bytes=0)[0]
    assert _kernel_ints(module, mock_inputs(problem, batch, context), False) == _kernel_ints(module, real, False)


def test_time_budget_is_shared_by_bucket_cost(monkeypatch):
    """Each bucket gets a share of the time left in proportion to its trial cost, so the big
    buckets tuned last are not starved (the H200 run with equal shares left 256 x 1M untuned)."""
    from tuner import search as S

    small, big = Bucket(1, 4096), Bucket(256, 1 << 20)
    assert S.bucket_weight(Problem(), small) == pytest.approx(1.0, abs=1e-3)
    assert S.bucket_weight(Problem(next_n=2), big) > S.bucket_weight(Problem(), big) > 5
    plan = [(Problem(), [small, Bucket(64, 1 << 17), big])]
    shares = []
    clock = [1000.0]
    monkeypatch.setattr(S.time, "monotonic", lambda: clock[0])

    def fake_tune_bucket(self, problem, bucket, share_end, run_end):
        shares.append((bucket, share_end - clock[0]))
        clock[0] = share_end  # uses its whole share
        return BucketSummary(problem, bucket)

    monkeypatch.setattr(S.Search, "tune_bucket", fake_tune_bucket)
    searcher = S.Search.__new__(S.Search)
    searcher.s = S.SearchSettings(time_budget_s=100.0)
    searcher.guide = None
    searcher.run(plan)
    got = dict(shares)
    weights = {b: S.bucket_weight(Problem(), b) for b in got}
    assert sum(got.values()) == pytest.approx(100.0)
    for b in got:
        assert got[b] == pytest.approx(100.0 * weights[b] / sum(weights.values()))
    assert got[big] > 4 * got[small]


def test_first_bucket_share_starts_after_its_seeds_are_built(monkeypatch):
    """Later buckets' seeds compile while the bucket before them is timed; the first bucket's are
    built before its share is measured out, so the run's start-up is not charged to it (on the
    H200 a 9 s first trial spent the 1x4096 bucket's whole share on 3 seeds)."""
    from tuner import search as S

    plan = [(Problem(), [Bucket(1, 4096), Bucket(64, 1 << 17)])]
    clock = [1000.0]
    monkeypatch.setattr(S.time, "monotonic", lambda: clock[0])
    events = []

    class Guide:
        def seeds_for(self, problem, bucket):
            return (f"seed-{bucket.batch}",)

    class Ev:
        def prefetch(self, problem, bucket, configs):
            events.append(("prefetch", bucket.batch))

        def build_now(self, problem, bucket, configs):
            events.append(("build_now", bucket.batch, tuple(configs)))
            clock[0] += 9.0  # the first builds and the worker's start-up

    def fake_tune_bucket(self, problem, bucket, share_end, run_end):
        events.append(("tune", bucket.batch, share_end - clock[0], run_end))
        clock[0] = share_end
        return BucketSummary(problem, bucket)

    monkeypatch.setattr(S.Search, "tune_bucket", fake_tune_bucket)
    searcher = S.Search.__new__(S.Search)
    searcher.s = S.SearchSettings(time_budget_s=100.0)
    searcher.guide, searcher.ev = Guide(), Ev()
    searcher.run(plan)
    builds = [e for e in events if e[0] == "build_now"]
    assert builds == [("build_now", 1, ("seed-1",))]  # the first bucket only
    assert events.index(builds[0]) < events.index(next(e for e in events if e[0] == "tune"))
    tunes = [e for e in events if e[0] == "tune"]
    weights = [S.bucket_weight(Problem(), b) for b in plan[0][1]]
    assert tunes[0][2] == pytest.approx(91.0 * weights[0] / sum(weights))  # the share of what is left after
    assert tunes[0][3] == pytest.approx(1100.0)  # the run's own end still counts from its start


def test_each_study_is_seeded_with_distinct_neighbour_winners():
    """Default, then the winners of finished buckets nearest first, up to NEIGHBOUR_SEEDS distinct
    configs (a winner equal to the default or to a nearer one is not repeated)."""
    from tuner import search as S

    problem = Problem()
    space = OptunaSpace(problem, ("native",))
    default = default_config(problem, "native")
    a = dataclasses.replace(default, block_t=64, tiles_per_program=32)
    b = dataclasses.replace(default, num_stages=3)
    c = dataclasses.replace(default, num_warps=8)
    d = dataclasses.replace(default, block_t=256)
    searcher = S.Search.__new__(S.Search)
    searcher.s = S.SearchSettings()
    searcher.guide = None  # the model's seeds: tests/test_guide.py
    searcher.winners = {problem.key: {Bucket(32, 8192): a, Bucket(16, 8192): a, Bucket(8, 8192): default,
                                      Bucket(64, 32768): b, Bucket(1, 4096): c, Bucket(256, 1 << 20): d}}
    queued = []

    class Study:
        def enqueue_trial(self, params, user_attrs, skip_if_exists):
            queued.append((space.config(params), user_attrs["source"]))

    searcher._seed(Study(), space, problem, Bucket(64, 8192))
    assert [cfg for cfg, _ in queued] == [default, a, b]
    assert queued[1][1] == "seed:neighbour:b32_c8192" and queued[2][1] == "seed:neighbour:b64_c32768"
    assert S.NEIGHBOUR_SEEDS == 2


def test_studies_get_different_sampler_seeds(tmp_path):
    """The random startup trials differ between buckets (one run seed, one sampler seed per study)."""
    import optuna

    from tuner import search as S

    searcher = S.Search.__new__(S.Search)
    searcher.s = S.SearchSettings(trials=20)
    searcher.optuna = optuna
    searcher.storage = optuna.storages.InMemoryStorage()
    space = OptunaSpace(Problem(), ("native",))
    firsts = []
    for name in ("study_a", "study_b"):
        study = searcher._open_study(name, space)
        firsts.append([tuple(sorted(study.ask(fixed_distributions=space.distributions).params.items())) for _ in range(3)])
    assert firsts[0] != firsts[1]


# ---------------------------------------------------------------------------------------------
# --seed-table: re-time a table's shipped configs.


def test_seed_table_times_each_buckets_shipped_config_first(tmp_path):
    """With --seed-table and --trials 1, each bucket times exactly the config the table ships for
    it (not the default, not another bucket's); a bucket the table lacks gets the default."""
    default = default_config(PROBLEM, DOT[0])
    feasible = [c for c in feasible_points(PROBLEM, None, DOT) if c != default and not c.programs_per_sm]
    ships = {1: feasible[0], 2: feasible[1]}
    assert ships[1] != ships[2]
    modules, entries = {}, []
    for batch, config in ships.items():
        modules[f"v{batch}"] = {"config": json.loads(config.to_json())}
        entries.append({"problem": json.loads(PROBLEM.to_json()), "bucket": {"batch": batch, "context": 64},
                        "variant": f"v{batch}"})
    table = tmp_path / "dispatch.json"
    table.write_text(json.dumps({"entries": entries, "modules": modules}))
    db = tmp_path / "trials.sqlite"
    _tune(["--batch", "1,2,4", "--context", "64", "--trials", "1", "--ask-batch", "1", "--db", str(db),
           "--seed-table", str(table), "--model-seeds", "0"])
    got = {(r["bucket_batch"], r["config_key"], r["source"]) for r in trial_rows(db).values() if r["status"] == "ok"}
    assert got == {(1, ships[1].key, "seed:table"), (2, ships[2].key, "seed:table"), (4, default.key, "seed:default")}


def test_seed_table_seeds_2d_lengths_with_the_1d_twins_entries(tmp_path):
    """A 2-D-lengths problem the table has no entry for starts from its 1-D twin's entry at the
    same bucket (only how a row's length is read differs between the two kernels)."""
    feasible = [c for c in feasible_points(PROBLEM, None, DOT) if c != default_config(PROBLEM, DOT[0])
                and not c.programs_per_sm]
    modules = {"v1": {"config": json.loads(feasible[2].to_json())}}
    entries = [{"problem": json.loads(PROBLEM.to_json()), "bucket": {"batch": 2, "context": 64}, "variant": "v1"}]
    table = tmp_path / "dispatch.json"
    table.write_text(json.dumps({"entries": entries, "modules": modules}))
    db = tmp_path / "trials.sqlite"
    _tune(["--batch", "2", "--context", "64", "--trials", "1", "--ask-batch", "1", "--db", str(db),
           "--lens-mode", "2d", "--seed-table", str(table)])
    got = {(r["bucket_batch"], r["config_key"], r["source"], json.loads(r["problem_json"])["lens_mode"])
           for r in trial_rows(db).values() if r["status"] == "ok"}
    assert got == {(2, feasible[2].key, "seed:table", "2d")}


def test_seed_table_names_the_option_when_missing(tmp_path):
    result = CliRunner().invoke(main, ["tune", *TINY, "--seed-table", "no_such_gpu", "--db", str(tmp_path / "t.sqlite")])
    assert result.exit_code == 2 and "--seed-table" in result.output and "indexer_logits" in result.output


def test_run_sh_cpu_tune_needs_no_interpreter_variable(tmp_path):
    """run.sh's CPU path runs `tune --interpret` with TRITON_INTERPRET unset: the worker and the
    build pool must start interpreted anyway (a worker that imported Triton's own jit helpers
    compiled, then switched, made every trial a compile_error)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    db = tmp_path / "t.sqlite"
    proc = subprocess.run([sys.executable, str(ROOT / "cli.py"), "tune", "--interpret", "--heads", "16",
                           "--head-dim", "32", "--page-size", "32", "--batch", "2", "--context", "128",
                           "--trials", "2", "--ask-batch", "2", "--db", str(db), "--quiet"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statuses = [r["status"] for r in Store(db).trials()]
    assert statuses and set(statuses) == {"ok"}, proc.stdout
