"""bench/blind_tune.py: it runs run.sh's GPU tune line itself (read from run.sh, so the check and
the main job cannot drift apart), on a store of its own, away from the shipped table and store;
the phases' commands without a GPU; the refusal without one."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bench import blind_tune as tool

ROOT = Path(__file__).resolve().parent.parent


def test_it_runs_run_sh_s_tune_line():
    args = tool.run_sh_tune()
    assert args[:2] == ["tune", "--engine"] and "--time-budget" in args
    line = next(ln for ln in (ROOT / "run.sh").read_text().splitlines() if "cli.py tune --engine" in ln)
    assert shlex.split(line)[-len(args):] == args


def test_fresh_stores_stay_out_of_db(tmp_path):
    opts = tool.fresh(tmp_path, "fresh")
    assert opts[opts.index("--db") + 1] == str(tmp_path / "fresh" / "trials.sqlite")
    assert opts[opts.index("--optuna-db") + 1] == str(tmp_path / "fresh" / "optuna.sqlite")
    assert opts[opts.index("--xcompile-cache") + 1] == str(tool.XCOMPILE_CACHE)  # compile facts only, no timings
    assert "--seed-table" not in tool.run_sh_tune()


def test_plan_and_refusal_without_a_gpu():
    plan = subprocess.run([sys.executable, "-m", "bench.blind_tune", "plan"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert plan.returncode == 0 and "cli.py tune --engine" in plan.stdout and "bench.predicted" in plan.stdout
    import torch

    if torch.cuda.is_available():
        pytest.skip("the refusal is for machines without a GPU")
    proc = subprocess.run([sys.executable, "-m", "bench.blind_tune", "tune", "--out", "/tmp/none"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr


def test_emitted_table_wants_one_gpu(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "dispatch.json").write_text("{}")
    with pytest.raises(SystemExit, match="expected one GPU's table"):
        tool.emitted_table(tmp_path)
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "dispatch.json").write_text("{}")
    assert tool.emitted_table(tmp_path) == tmp_path / "gpu" / "dispatch.json"


@pytest.mark.gpu
@pytest.mark.slow
def test_untuned_on_one_bucket(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.blind_tune", "untuned", "--out", str(tmp_path), "--batch", "8",
                           "--context", "4K", "--total-s", "30"], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all: geo-mean fast / shipped" in proc.stdout


def test_untuned_resumes_after_a_cut(tmp_path, monkeypatch):
    """A call cut during the 5x search keeps the fast tune's record; the same command again runs
    only what is left (a missing --out folder is made, not an error)."""
    import sqlite3

    calls = []

    def fake_cli(args, log=None):
        calls.append(args[0])
        if args[0] == "tune" and "fast" in args[args.index("--db") + 1]:
            db = Path(args[args.index("--db") + 1])
            db.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(db)
            con.execute("create table trials (status, problem_key, bucket_batch, bucket_context)")
            con.executemany("insert into trials values ('ok', 'p', 1, 4096)", [()] * 12)
            con.commit()
            return 0, 70.0
        if args[0] == "tune":  # the 5x search, cut the first time
            return (137, 300.0) if calls.count("tune") == 2 else (0, 280.0)
        return 0, 1.0

    monkeypatch.setattr(tool, "cli", fake_cli)
    monkeypatch.setattr("bench.predicted.main", lambda argv: 0)
    monkeypatch.setattr(tool, "emitted_table", lambda tables: tables / "gpu" / "dispatch.json")
    out = tmp_path / "not-yet"
    args = (out, "bf16", "2", "1", "8K", 10.0)
    assert tool.phase_untuned(*args) == 137
    assert json.loads((out / "untuned.json").read_text())["long_trials"] == 5 * 12
    calls.clear()
    assert tool.phase_untuned(*args) == 0
    assert calls == ["tune", "emit", "emit", "predict"]  # the fast tune is not run again
    record = json.loads((out / "untuned.json").read_text())
    assert record["fast_s"] == 70.0 and record["long_s"] == 280.0
