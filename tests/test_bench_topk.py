"""bench/topk.py: the command line, its refusal without a GPU, and the set comparison it and the GPU
tests trust (a wrong index, a wrong pad, a tie taken against the rule: each is a mismatch)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.topk import mismatched_rows, ref_sets

ROOT = Path(__file__).resolve().parent.parent


def _run(*args):
    return subprocess.run([sys.executable, "-m", "bench.topk", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_help():
    proc = _run("--help")
    assert proc.returncode == 0 and "--sweep" in proc.stdout and "--profile" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_refuses_without_a_gpu():
    proc = _run("--skip-prefill")
    assert proc.returncode == 2 and "needs a CUDA device" in proc.stderr


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
