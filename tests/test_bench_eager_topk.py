"""bench/eager_topk.py: its alternation and the environment switch on CPU, its refusal without a
GPU, and on a GPU one run whose recorded top-k calls took less host time than their launch code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import eager_topk as E
from bench.eager import _alternated

ROOT = Path(__file__).resolve().parent.parent


def _run(*args):
    return subprocess.run([sys.executable, "-m", "bench.eager_topk", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_the_calls_alternate_and_the_switch_holds_only_during_a_call(monkeypatch):
    monkeypatch.delenv("X_SWITCH", raising=False)
    seen = []
    fns = {"a": lambda: seen.append(("a", os.environ.get("X_SWITCH"))),
           "b": E._with_env(lambda: seen.append(("b", os.environ.get("X_SWITCH"))), "X_SWITCH", "0")}
    times = iter(range(1, 100))
    got = _alternated(fns, 10, E.ROUNDS, batch=100, timer=lambda fn, calls, batch: (fn(), next(times))[1])
    assert seen == [("a", None), ("b", "0")] * E.ROUNDS and "X_SWITCH" not in os.environ
    assert got == {"a": (5, 1), "b": (6, 2)}  # median and best of rounds 1,3,5,7,9 and 2,4,6,8,10


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_refuses_without_a_gpu():
    proc = _run("--calls", "10")
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr


@pytest.mark.gpu
def test_recorded_top_k_calls_cost_the_host_less_than_their_launch_code(tmp_path):
    proc = _run("--calls", "200", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads((tmp_path / "eager_topk.json").read_text())
    assert got["replayed_sequences"] > 0
    for r in got["rows"]:
        assert 0 < r["logits_us"] < r["topk_us"] < r["topk_launch_code_us"], r
