"""Runaway candidates on a real GPU (issue 8.5): a candidate whose kernel writes to an illegal
address (the CUDA context is lost) and one whose kernel never finishes are recorded as 'crash'
and 'timeout', and the search goes on in a fresh worker on the same GPU.

The faults are real device faults (tuner.faults), injected through the worker's test hook when
the tuner asks for those two configs. The CPU twin of this test (host-side faults) is in
test_tune.py. Run on a GPU host: python3 -m pytest -q -s -m gpu tests/test_gpu_runaway.py
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexer_logits._identity import Problem
from tuner.space import default_config, feasible_points
from tuner.worker import FAULTS_ENV

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = Problem()  # fp8, H=64, D=128, page 64, next_n 1: the shipped shape
TIMEOUT_S = 30


@pytest.mark.gpu
def test_gpu_illegal_address_and_hang_are_contained(tmp_path):
    default = default_config(PROBLEM, "native")
    crash, hang = [c for c in feasible_points(PROBLEM, None, ("native",)) if c != default][:2]
    db = tmp_path / "trials.sqlite"
    env = dict(os.environ, **{FAULTS_ENV: json.dumps({"gpu_crash": [crash.slug], "gpu_hang": [hang.slug]})})
    cmd = [sys.executable, "cli.py", "tune", "--batch", "1,2", "--context", "4096", "--trials", "5", "--ask-batch", "5",
           "--timeout", str(TIMEOUT_S), "--replays", "10", "--quiet", "--db", str(db),
           f"--try-config={crash.to_json()}", f"--try-config={hang.to_json()}"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("select * from trials")]
    con.close()
    by_status = {}
    for r in rows:
        by_status.setdefault(r["status"], []).append(r)
    crash_rows = [r for r in rows if r["config_key"] == crash.key]
    hang_rows = [r for r in rows if r["config_key"] == hang.key]
    print(f"\n[runaway] wall {wall:.0f} s; statuses: "
          + ", ".join(f"{k}={len(v)}" for k, v in sorted(by_status.items())))
    for r in crash_rows[:1] + hang_rows[:1]:
        print(f"[runaway] {r['variant']}: {r['status']}: {r['reason'].strip().splitlines()[-1][:200]}")
    assert crash_rows and all(r["status"] == "crash" for r in crash_rows)
    assert any("illegal memory access" in r["reason"] for r in crash_rows), crash_rows[0]["reason"][-500:]
    assert hang_rows and all(r["status"] == "timeout" for r in hang_rows)
    ok = by_status.get("ok", [])
    for batch in (1, 2):  # both buckets measured real candidates after the faults
        timed = [r for r in ok if r["bucket_batch"] == batch]
        assert len(timed) >= 2, f"bucket b{batch}: the search did not go on after the faults"
        assert all(r["p50_ms"] > 0 and r["timer"] == "cuda_graph" for r in timed)
    # and the GPU is still usable by a fresh process
    check = subprocess.run([sys.executable, "-c", "import torch; x = torch.ones(1 << 20, device='cuda'); "
                            "print(float(x.sum()))"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and check.stdout.strip() == str(float(1 << 20)), check.stderr[-2000:]
