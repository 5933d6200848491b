"""bench/topk.py: the command line, its refusal without a GPU, and the set comparison it and the GPU
tests trust (a wrong index, a wrong pad, a tie taken against the rule: each is a mismatch)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.topk import best_alternated, mismatched_rows, ref_sets

ROOT = Path(__file__).resolve().parent.parent


def _run(*args):
    return subprocess.run([sys.executable, "-m", "bench.topk", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_help():
    proc = _run("--help")
    assert proc.returncode == 0 and all(o in proc.stdout for o in ("--sweep", "--profile", "--crossover", "--paths"))


@pytest.mark.parametrize("arg", ["--crossover-rows=1,x", "--crossover-widths=0", "--crossover-rows="])
def test_a_bad_crossover_grid_is_refused_naming_the_option(arg):
    proc = _run(arg, "--skip-prefill")
    assert proc.returncode == 2 and arg.split("=")[0] in proc.stderr and "positive integers" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_refuses_without_a_gpu():
    proc = _run("--skip-prefill")
    assert proc.returncode == 2 and "needs a CUDA device" in proc.stderr


def test_best_alternated_times_every_fn_each_round_and_keeps_its_best():
    calls, times = [], {"a": [5.0, 3.0, 4.0], "b": [2.0, 6.0, 1.0]}
    fns = {name: (lambda name=name: name) for name in times}

    def timer(fn):
        calls.append(fn())
        return times[calls[-1]][sum(c == calls[-1] for c in calls) - 1]
    assert best_alternated(fns, 3, timer) == {"a": 3.0, "b": 1.0}
    assert calls == ["a", "b"] * 3


def test_mismatched_rows_sees_each_error():
    logits = torch.tensor([[5.0, 1.0, 3.0, 3.0, 0.0], [2.0, 9.0, 1.0, 0.0, 0.0]])
    lo = torch.tensor([0, 1])
    hi = torch.tensor([5, 3])
    assert ref_sets(logits, lo, hi, 2).tolist() == [[0, 2], [0, 1]]   # row 0: the tie at 3.0 goes to index 2
    good = torch.tensor([[2, 0], [1, 0]], dtype=torch.int32)          # any order
    assert mismatched_rows(good, logits, lo, hi, 2) == 0
    assert mismatched_rows(torch.tensor([[0, 3], [0, 1]], dtype=torch.int32), logits, lo, hi, 2) == 1  # tie rule
    assert mismatched_rows(torch.tensor([[0, 2], [0, -1]], dtype=torch.int32), logits, lo, hi, 2) == 1  # a pad
    short = torch.tensor([[0, 2, 3], [0, 1, -1]], dtype=torch.int32)  # k = 3: row 1 has 2 keys, one pad
    assert mismatched_rows(short, logits, lo, hi, 3) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU run of the cases, under the interpreter")
def test_cases_time_every_path_on_cpu(monkeypatch):
    """decode_cases and prefill_cases at small shapes on CPU (timers replaced by call counters):
    each path is checked exact and timed, its ratio reported, the first path is the +topk column."""
    import bench.topk as T
    from conftest import INTERPRET
    from indexer_logits import _topk_select as S
    if not INTERPRET:
        pytest.skip("needs the interpreter")
    served = []
    real = S.select_rows
    monkeypatch.setattr(S, "select_rows", lambda *a, **kw: served.append(real(*a, **kw)) or served[-1])
    from indexer_logits import _topk
    monkeypatch.setattr(_topk, "select_rows", S.select_rows)
    times = {"fused": 2.0, "rounds": 3.0}
    monkeypatch.setattr(T, "graph_us", lambda fn: (fn(), times.get(served[-1], 1.0) if served else 1.0)[1])
    monkeypatch.setattr(T, "eager_us", lambda fn: (fn(), 1.0)[1])
    monkeypatch.setattr(T, "DEVICE", "cpu")
    monkeypatch.setattr(T, "ROUNDS", 1)  # the timers are call counters: one round tells the paths apart
    monkeypatch.setattr(T, "DECODE", [(2, 4096)])
    monkeypatch.setattr(T, "PREFILL", [(6, 3000)])
    for name in ("synchronize", "reset_peak_memory_stats", "empty_cache"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, **kw: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a, **kw: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a, **kw: 0)
    (row,) = T.decode_cases(512, False, ("fused", "rounds"))
    assert row["mismatched_by_path"] == {"fused": 0, "rounds": 0}
    assert {"fused", "rounds"} <= set(served)
    assert row["topk_fused_us"] < row["topk_rounds_us"] and row["topk_us"] == row["topk_fused_us"]
    assert row["rounds_over_logits"] == row["topk_rounds_us"] / row["logits_us"]
    served.clear()
    (pre,) = T.prefill_cases(256, ("rounds", "fused"))
    assert pre["mismatched_sample_rows"] == 0 and pre["sample_rows"] == 6
    assert served.count("rounds") >= 2 and served.count("fused") >= 2 and "topk_fused_us" in pre
    from indexer_logits import _topk
    budgets = []
    real_rows = _topk.scratch_rows
    monkeypatch.setattr(_topk, "scratch_rows", lambda r, w, m=None, *a: budgets.append(m) or real_rows(r, w, m, *a))
    monkeypatch.setattr(T, "MIN_SCRATCH_ROWS", 7)  # 1 MiB holds all 6 rows: too few to time
    (pre,) = T.prefill_cases(256, ("rounds",), scratch_mib=(1,))
    assert pre["scratch_1_us"] is None and "scratch_1_mismatched_sample_rows" not in pre
    monkeypatch.setattr(T, "MIN_SCRATCH_ROWS", 6)
    budgets.clear()
    (pre,) = T.prefill_cases(256, ("rounds",), scratch_mib=(1,))
    assert pre["scratch_1_mismatched_sample_rows"] == 0 and pre["scratch_1_us"] == 1.0
    assert pre["scratch_1_host_us"] > 0
    assert budgets.count(1 << 20) >= 2  # the timed call's blocks and the exactness check's
