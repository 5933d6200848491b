"""bench/chunked_prefill.py: under the interpreter (--cpu-smoke) the family default is gated, run
on every bucket, checked against the reference at full size and called through the public
function; the command line is checked first; on a GPU, the fp8 default at full size."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args, timeout=600):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.chunked_prefill", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_cpu_smoke_checks_the_default_on_every_bucket():
    proc = _tool("--cpu-smoke", "--dtypes", "fp8", "--no-alternatives")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "gated fp8 bt64_tp32_w4_s3_m4_fp16_kr" in proc.stdout
    table = proc.stdout[proc.stdout.index("\ncontext "):]
    kernel = [ln for ln in table.splitlines() if " fp8 " in ln and "api:" not in ln]
    api = [ln for ln in table.splitlines() if "api: " in ln]
    # three buckets: the last rows of a 128 and of a 256 table, and rows split over requests
    assert len(kernel) == 3 and all("ref ok" in ln for ln in kernel), table
    assert len(api) == 3 and all(ln.rstrip().endswith("bt64_tp32_w4_s3_m4_fp16_kr") for ln in api), table


def test_command_line():
    bad = _tool("--dtypes", "fp16")
    assert bad.returncode == 2 and "--dtypes: expected a comma list of fp8, bf16" in bad.stderr
    if not torch.cuda.is_available():
        proc = _tool()
        assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "--cpu-smoke" in proc.stderr


@pytest.mark.gpu
def test_chunked_prefill_on_a_gpu():
    proc = _tool("--dtypes", "fp8", "--no-alternatives", "--replays", "3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = proc.stdout[proc.stdout.index("\ncontext "):]
    assert sum("ref ok" in ln for ln in table.splitlines()) == 3 and "TFLOP/s" in proc.stdout, table
