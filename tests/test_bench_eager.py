"""bench/eager.py: the command line, its refusal without a GPU, and on a GPU one run whose rows name
the kernel that served each case (never the reference) and whose phases are positive, each case
followed by DeepGEMM's row (its times where deep_gemm imports, else why not)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "bench.eager", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=600)


def test_help_names_the_phases():
    proc = _run("--help")
    assert proc.returncode == 0
    assert "--calls" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_refuses_without_a_gpu():
    proc = _run("--calls", "10")
    assert proc.returncode == 2
    assert "no CUDA device" in proc.stderr


@pytest.mark.gpu
def test_rows_name_a_kernel_and_positive_phases(tmp_path):
    proc = _run("--calls", "50", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((tmp_path / "eager.json").read_text())
    assert [r["impl"] for r in rows] == ["indexer_logits", "deep_gemm"] * 4
    ours, theirs = rows[0::2], rows[1::2]
    assert [r["case"].split()[0] for r in ours] == ["decode", "decode", "prefill", "prefill"]
    assert [r["case"] for r in theirs] == [r["case"] for r in ours]
    from tuner import baselines
    dg = baselines.deepgemm("cuda")
    for r in theirs:  # DeepGEMM's row per case: its figures where it imports, else why not
        if dg:
            assert "absent" not in r, r["absent"]
            assert r["alternated_us"] > 0
            assert r["version"] == dg.version and r["diff"] < baselines.MAX_DIFF
            assert 0 < r["call_us"] and 0 < r["eager_us"] and (r["case"].startswith("prefill") or r["metadata_us"] > 0)
        else:
            assert r["absent"] == dg.reason
    for r in ours:
        assert r["rung"] != "reference" and r["variant"]
        assert r["replayed"] is True  # the timed calls were the recorded launch
        if r["direct"]:  # Triton 3.6.0: the same call through the direct launch's two alternatives too
            assert r["tensors_us"] > 0 and r["tritons_launcher_us"] > 0
        assert 0 < r["call_us"] < r["full_path_us"] and 0 < r["alloc_us"]
        assert 0 < r["alternated_us"] and 0 < r["alternated_alloc_us"]  # alternated with DeepGEMM's call
        if r["guards"]:  # the guard index against the exact key, alternated
            assert 0 < r["guarded_us"] and 0 < r["exact_key_us"]
        assert 0 < r["checks_us"] < r["full_path_us"] and 0 < r["launch_us"] < r["full_path_us"]
