"""`cli.py tune --workers N` and `--storage URL`: several tuners on one search, on the CPU.

What is proved here: two CPU workers (Triton interpreter, wall-clock timing) on one Optuna
study per bucket, through the journal file beside the db and through a real PostgreSQL server,
measure every config once (the per-worker measurement counters add up to the rows, and each row
was written by the worker that claimed it), lose nothing (every COMPLETE trial has its ok row,
nothing is left RUNNING) and a repeated run measures nothing. Underneath: a claim is won by one
process of many, a dead owner's claim is taken over, `merge-db` keeps one row per key.

The PostgreSQL test needs a server: set INDEXER_TEST_PG_URL (`.ci/run` starts one with
`.ci/postgres.sh`); without it the test is skipped and says so.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from _helpers import trial_rows
from click.testing import CliRunner

from cli import main
from tuner.ownership import UNOWNED_GRACE_ENV, claim_once, open_storage, owner_alive, owner_tag
from indexer_logits._identity import Problem
from tuner.optuna_space import OptunaSpace
from tuner.store import Store

PG_ENV = "INDEXER_TEST_PG_URL"
PROBLEM = Problem(heads=16, head_dim=32, page_size=32)  # fp8, page-blocked, next_n 1
DOT = ("fp16",)
TINY = ["--interpret", "--heads", "16", "--head-dim", "32", "--page-size", "32", "--replays", "10", "--quiet"]


def _query(db: Path, sql: str) -> list:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _tune(args, env=None):
    result = CliRunner().invoke(main, ["tune", *TINY, *args], env=env)
    assert result.exit_code == 0, result.output + "".join(__import__("traceback").format_exception(*result.exc_info))
    return result


def _study_trials(storage) -> list:
    import optuna

    out = []
    for summary in optuna.get_all_study_summaries(storage):
        out += optuna.load_study(study_name=summary.study_name, storage=storage).get_trials(deepcopy=False)
    return out


def _check_once_and_nothing_lost(db: Path, output: str, trials, buckets: tuple[int, ...], goal: int) -> None:
    rows = trial_rows(db)
    ok = [r for r in rows.values() if r["status"] == "ok"]
    # Every measurement once: the workers' own counters add up to the stored ok rows ...
    per_worker = [int(n) for n in re.findall(r"worker \d \(CPU, run \S+\): (\d+) trials measured", output)]
    assert len(per_worker) == 2, output
    total = int(re.search(r"this run: (\d+) trials measured", output).group(1))
    assert sum(per_worker) == total == len(ok), output
    # ... every row belongs to one of the two workers, and was written by the one that claimed it.
    runs = {r for (r,) in _query(db, "select run_id from runs")}
    assert len(runs) == 2 and all(r.endswith(("_w0", "_w1")) for r in runs)
    claims = dict(_query(db, "select claim_key, owner from claims"))
    for r in ok:
        assert r["run_id"] in runs
        assert claims[r["trial_key"]].endswith("|" + r["run_id"]), "measured by a worker that did not hold the claim"
    # Nothing lost: each Optuna verdict has its row; no trial is left RUNNING or FAIL.
    states = {t.state.name for t in trials}
    assert "RUNNING" not in states and "FAIL" not in states, states
    space = OptunaSpace(PROBLEM, DOT)
    by_config = {}
    for r in rows.values():
        by_config.setdefault(r["config_key"], []).append(r)
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert complete
    for t in complete:
        stored = [r for r in by_config.get(space.config(t.params).key, ()) if r["status"] == "ok"]
        assert any(r["score_ms"] == pytest.approx(t.value) for r in stored), f"trial {t.number} has no row"
    for batch in buckets:  # --trials verdicts per bucket between the workers
        decided = {r["config_key"] for r in rows.values() if r["bucket_batch"] == batch and r["status"] != "infeasible"}
        assert len(decided) >= goal


# ---------------------------------------------------------------------------------------------
# Two workers, one host, the journal file.


def test_two_workers_on_a_journal_study_measure_each_config_once(tmp_path):
    db = tmp_path / "trials.sqlite"
    args = ["--batch", "1,2", "--context", "64", "--trials", "4", "--ask-batch", "2", "--workers", "2", "--db", str(db)]
    result = _tune(args)
    journal = db.with_name("optuna.journal")
    assert journal.is_file() and not db.with_name("optuna.sqlite").exists()
    assert "2 workers (CPU, interpreter) on journal file" in result.output
    assert "b1_c64" in result.output and "b2_c64" in result.output

    _check_once_and_nothing_lost(db, result.output, _study_trials(open_storage(str(journal))), (1, 2), 4)

    before = trial_rows(db)
    again = _tune(args)
    assert trial_rows(db) == before
    assert "this run: 0 trials measured" in again.output


def test_two_workers_killed_then_resumed_lose_nothing_and_share_the_leftovers(tmp_path):
    """SIGKILL a two-worker run part-way: the resumed workers both find the trials left RUNNING
    (their owners are gone) and take them over; the claims let only one of them measure each."""
    db = tmp_path / "trials.sqlite"
    args = ["--batch", "1,2", "--context", "64", "--trials", "3", "--ask-batch", "2", "--workers", "2", "--db", str(db)]
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, str(root / "cli.py"), "tune", *TINY, *args], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if db.exists() and sum(r["status"] == "ok" for r in trial_rows(db).values()) >= 1:
                    break
            except sqlite3.OperationalError:
                pass  # the tables are being created
            time.sleep(0.1)
        assert proc.poll() is None, "the run finished before it could be killed: " + proc.stderr.read().decode()[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher, its workers and theirs
        proc.wait(30)
    before = trial_rows(db)
    old_runs = {r for (r,) in _query(db, "select run_id from runs")}

    # The kill may land between a trial's ask and the write of its owner. Such a trial has no
    # owner, and under the default grace (60 s) a run resumed at once must take it for one being
    # asked right now and leave it to the next run (test_an_unowned_trial_...). Asking takes
    # milliseconds here, so half a second lets the resumed run take it over too.
    result = _tune(args, env={UNOWNED_GRACE_ENV: "0.5"})
    after = trial_rows(db)
    for key, row in before.items():
        assert after[key] == row, f"stored trial {row['variant']} was changed (re-measured?) by the resumed run"
    new_ok = [r for k, r in after.items() if k not in before and r["status"] == "ok"]
    total = int(re.search(r"this run: (\d+) trials measured", result.output).group(1))
    assert total == len(new_ok), result.output
    assert all(r["run_id"] not in old_runs for r in new_ok)
    trials = _study_trials(open_storage(str(db.with_name("optuna.journal"))))
    assert "RUNNING" not in {t.state.name for t in trials}


def test_an_unowned_trial_waits_out_the_grace_then_is_taken_over(tmp_path):
    """A trial asked but never given its owner (its process was killed in between) is left alone
    while it may still be being asked (UNOWNED_GRACE_S, or $INDEXER_TUNER_UNOWNED_GRACE_S), then
    evaluated by the next run."""
    import optuna

    db = tmp_path / "trials.sqlite"
    args = ["--batch", "1", "--context", "64", "--trials", "2", "--ask-batch", "2", "--workers", "2", "--db", str(db)]
    _tune(args)
    storage = open_storage(str(db.with_name("optuna.journal")))
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    orphan = study.ask(fixed_distributions=study.trials[0].distributions).number  # no owner written

    def state() -> str:
        fresh = optuna.load_study(study_name=summary.study_name, storage=open_storage(str(db.with_name("optuna.journal"))))
        return fresh.trials[orphan].state.name

    more = ["--batch", "1", "--context", "64", "--trials", "3", "--ask-batch", "2", "--workers", "2", "--db", str(db)]
    _tune(more)  # at once, default grace: it may be another process's ask in progress
    assert state() == "RUNNING"
    _tune(more, env={UNOWNED_GRACE_ENV: "0.5"})  # now older than the grace: left behind
    assert state() in ("COMPLETE", "PRUNED")


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan"])
def test_the_unowned_grace_from_the_environment_is_checked(value, tmp_path):
    result = CliRunner().invoke(main, ["tune", *TINY, "--batch", "1", "--context", "64", "--trials", "1",
                                       "--db", str(tmp_path / "t.sqlite")], env={UNOWNED_GRACE_ENV: value})
    assert result.exit_code != 0
    assert f"{UNOWNED_GRACE_ENV}: expected a number of seconds >= 0, got {value!r}" in result.output


def test_a_config_another_host_decided_is_answered_from_the_shared_study(tmp_path):
    """Two hosts = two trial stores on one study: what host A measured, host B takes from the
    study (told the same value) instead of measuring it again."""
    import optuna

    journal = str(tmp_path / "shared.journal")
    # the model's seeds off: host A's enqueued seeds would be asked before the re-proposal on host B
    common = ["--batch", "1", "--context", "64", "--ask-batch", "1", "--storage", journal, "--model-seeds", "0"]
    _tune([*common, "--trials", "1", "--db", str(tmp_path / "a" / "trials.sqlite")])
    (measured,) = [r for r in trial_rows(tmp_path / "a" / "trials.sqlite").values() if r["status"] == "ok"]
    storage = open_storage(journal)
    (name,) = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    done = next(t for t in study.trials if t.state.name == "COMPLETE")
    study.enqueue_trial(done.params)  # as if TPE proposed it again on host B

    result = _tune([*common, "--trials", "2", "--db", str(tmp_path / "b" / "trials.sqlite")])
    assert "1 answered from the shared study" in result.output, result.output
    b_rows = trial_rows(tmp_path / "b" / "trials.sqlite")
    assert measured["trial_key"] not in b_rows, "host B measured what host A had measured"
    again = [t for t in study.trials if t.params == done.params and t.number != done.number]
    assert again and again[0].state.name == "COMPLETE" and again[0].value == done.value


# ---------------------------------------------------------------------------------------------
# Two workers, PostgreSQL (the storage hosts share).


@pytest.fixture
def pg_url():
    """A fresh database on the server INDEXER_TEST_PG_URL names, dropped afterwards."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL server to test against (.ci/run starts one with "
                    ".ci/postgres.sh)")
    try:
        import psycopg2
    except ImportError:
        pytest.skip("psycopg2 is not installed (pip install -e '.[test]')")
    try:
        admin = psycopg2.connect(url, connect_timeout=5)
    except psycopg2.Error as exc:
        pytest.skip(f"no PostgreSQL server reachable at {PG_ENV}: {str(exc).strip().splitlines()[0]}")
    admin.autocommit = True
    name = f"indexer_test_{uuid.uuid4().hex[:10]}"
    try:
        with admin.cursor() as cur:
            cur.execute(f"create database {name}")
    except psycopg2.Error as exc:
        admin.close()
        pytest.skip(f"cannot create a database on {PG_ENV}: {str(exc).strip().splitlines()[0]}")
    base = url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f"drop database if exists {name} with (force)")
        admin.close()


def test_two_workers_on_a_postgresql_study_measure_each_config_once(tmp_path, pg_url):
    db = tmp_path / "trials.sqlite"
    result = _tune(["--batch", "1,2", "--context", "64", "--trials", "3", "--ask-batch", "2", "--workers", "2",
                    "--storage", pg_url, "--db", str(db)])
    assert "on postgresql://" in result.output
    assert not db.with_name("optuna.journal").exists() and not db.with_name("optuna.sqlite").exists()
    _check_once_and_nothing_lost(db, result.output, _study_trials(open_storage(pg_url)), (1, 2), 3)


def test_server_storage_options(tmp_path):
    db = str(tmp_path / "t.sqlite")
    result = CliRunner().invoke(main, ["tune", *TINY, "--storage", "postgresql://u@127.0.0.1:1/x", "--no-resume",
                                       "--db", db])
    assert result.exit_code == 2 and "--no-resume" in result.output
    result = CliRunner().invoke(main, ["tune", *TINY, "--storage", "x.journal", "--optuna-db", "y.sqlite", "--db", db])
    assert result.exit_code == 2 and "--storage" in result.output
    result = CliRunner().invoke(main, ["tune", *TINY, "--storage", "postgresql://u@127.0.0.1:1/x", "--db", db,
                                       "--context", "64", "--batch", "1"])
    assert result.exit_code == 1 and "cannot open the Optuna storage postgresql://u@127.0.0.1:1/x" in result.output
    assert not Path(db).exists(), "nothing starts before the storage is reachable"


# ---------------------------------------------------------------------------------------------
# Shared studies: two workers on one trial (no measurement).


def _race_the_other_worker(study, value: float) -> None:
    """Make the next state write of `study` lose to another worker: that worker's tell (value)
    lands between this worker's check of the trial's state and its own write."""
    storage = study._storage
    original = storage.set_trial_state_values

    def other_worker_first(trial_id, state, values=None):
        storage.set_trial_state_values = original
        original(trial_id, state=state.__class__.COMPLETE, values=[value])
        return original(trial_id, state=state, values=values)

    storage.set_trial_state_values = other_worker_first


def test_a_trial_the_other_worker_told_meanwhile_counts_as_told(tmp_path):
    """Both workers of a resumed run take over a trial the killed run left RUNNING; one measures
    it, the other reads the verdict from the store, and both tell it. Optuna's skip_if_finished
    checks the state and then writes it, so the second tell can lose the race in between (CI saw
    "Trial#2 has already finished and can not be updated" under load): tell_once takes that as
    told."""
    import optuna
    from optuna.exceptions import UpdateFinishedTrialError

    from tuner.search import tell_once

    study = optuna.create_study(study_name="s", storage=open_storage(str(tmp_path / "optuna.journal")))
    plain, once = study.ask(), study.ask()
    _race_the_other_worker(study, 1.0)
    with pytest.raises(UpdateFinishedTrialError):
        study.tell(plain.number, 2.0, skip_if_finished=True)
    _race_the_other_worker(study, 1.0)
    tell_once(study, once.number, 2.0)
    assert [(t.state.name, t.value) for t in study.get_trials()] == [("COMPLETE", 1.0), ("COMPLETE", 1.0)]


def test_an_interrupted_seed_is_queued_again_without_its_dead_owner(tmp_path):
    """A trial left RUNNING with its params half-written is told FAIL and its seed queued again.
    The copy must not inherit the dead run's owner: once a live worker pops it, the others would
    take it for left behind until its new owner is written, and fail it under that worker."""
    import optuna

    from tuner.search import Search, SearchSettings
    from tuner.space import default_config

    study = optuna.create_study(study_name="s", storage=open_storage(str(tmp_path / "optuna.journal")))
    space = OptunaSpace(PROBLEM, DOT)
    params = space.params_of(default_config(PROBLEM, DOT[0]))
    study.enqueue_trial(params, user_attrs={"source": "seed:user"})
    killed = study.ask()  # popped, its params not written yet: the run is killed here
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed.set_user_attr("owner", f"{socket.gethostname()}|{dead.pid}|-|old")
    search = Search.__new__(Search)  # only the study bookkeeping: no evaluator, no storage of its own
    search.optuna, search.s = optuna, SearchSettings(shared=True, owner=owner_tag("me"), dot_dtypes=DOT)
    assert search._unfinished(study, space) == []
    trials = study.get_trials()
    assert trials[killed.number].state.name == "FAIL"
    (again,) = [t for t in trials if t.state.name == "WAITING"]
    assert again.system_attrs["fixed_params"] == params
    assert again.user_attrs == {"source": "seed:user"}, again.user_attrs


# ---------------------------------------------------------------------------------------------
# Claims and merging (no tuner).


def _claimer(db: str, keys: list, log: str, results: str) -> None:
    """One process working through `keys`: each computed once among all processes."""
    store = Store(db)
    owner = owner_tag(f"test_{os.getpid()}")
    table = store.db["results"]

    def compute(key):
        def run():
            with open(log, "a") as f:  # O_APPEND: one line per computation, whoever makes it
                f.write(f"{key}\n")
            time.sleep(0.01)
            table.insert({"k": key, "v": f"{key}:{os.getpid()}"}, pk="k", replace=True)
            return f"{key}:{os.getpid()}", True
        return run

    def lookup(key):
        def find(holder):
            try:
                return table.get(key)["v"]
            except Exception:  # noqa: BLE001 - not there yet
                return None
        return find

    got = [claim_once(store, k, owner, compute(k), lookup(k), wait_cap_s=60) for k in keys]
    Path(results).write_text("\n".join(got))


def test_each_claimed_key_is_computed_once_among_processes(tmp_path):
    db, log = tmp_path / "c.sqlite", tmp_path / "log"
    Store(db).db["results"].create({"k": str, "v": str}, pk="k")
    keys = [f"k{i}" for i in range(40)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_claimer, args=(str(db), keys, str(log), str(tmp_path / f"r{i}"))) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    computed = log.read_text().split()
    assert sorted(computed) == sorted(keys), "a key was computed twice or never"
    answers = [(tmp_path / f"r{i}").read_text().split("\n") for i in range(3)]
    assert answers[0] == answers[1] == answers[2], "every process got the one result"


def test_a_dead_owners_claim_is_taken_over(tmp_path):
    store = Store(tmp_path / "c.sqlite")
    me = owner_tag("me")
    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert store.claim("a", f"{host}|{dead.pid}|-|old") == (True, f"{host}|{dead.pid}|-|old")
    assert store.claim("a", me) == (True, me), "the dead owner's claim is taken over"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holder = f"{host}|{live.pid}|-|other"
        assert owner_alive(holder)
        assert store.claim("b", holder)[0]
        assert store.claim("b", me) == (False, holder)
    finally:
        live.kill()
        live.wait()
    assert store.claim("b", me) == (True, me)
    remote = "elsewhere.example|1|-|run"
    assert store.claim("c", remote)[0] and store.claim("c", me) == (False, remote)  # other hosts: held
    store.release("c", remote)
    assert store.claim("c", me) == (True, me)


def test_merge_db_keeps_one_row_per_key(tmp_path):
    from tuner.store import TrialRow

    def row(key, status, run):
        return TrialRow(trial_key=key, run_id=run, created_at="t", gpu_slug="cpu", family="decode_paged",
                        problem_json="{}", problem_key="p", bucket_batch=1, bucket_context=64, config_json="{}",
                        config_key=key, variant="v", status=status)

    a, b = Store(tmp_path / "a.sqlite"), Store(tmp_path / "b.sqlite")
    for key, status in (("k1", "ok"), ("k2", "error")):
        a.record(row(key, status, "host_a"))
    for key, status in (("k1", "ok"), ("k2", "ok"), ("k3", "crash")):
        b.record(row(key, status, "host_b"))
    b.record_run("host_b", "{}", "{}", None, None)
    mtime_before = (tmp_path / "b.sqlite").stat().st_mtime_ns
    result = CliRunner().invoke(main, ["merge-db", "--into", str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")])
    assert result.exit_code == 0, result.output
    assert "1 rows added, 1 replaced" in result.output and "1 already there" in result.output
    merged = trial_rows(tmp_path / "a.sqlite")
    assert {k: (r["status"], r["run_id"]) for k, r in merged.items()} == {
        "k1": ("ok", "host_a"), "k2": ("ok", "host_b"), "k3": ("crash", "host_b")}
    assert _query(tmp_path / "a.sqlite", "select run_id from runs") == [("host_b",)]
    assert (tmp_path / "b.sqlite").stat().st_mtime_ns == mtime_before, "the source is only read"
