"""bench/checks.py: the sub-commands' command lines (checked before any GPU is looked for), what
`clocks` reads off nvidia-smi's samples, which table entry `page-stride` times; on a GPU, each
sub-command on a small bucket."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import _clocks, checks

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "indexer_logits" / "tables" / "nvidia_h200" / "dispatch.json"
SUBCOMMANDS = ("warmup", "bench-paths", "clocks", "page-stride", "matmul-rate")


def _tool(*args, timeout=300):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.checks", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_read_samples_and_summarise(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("\n".join([
        "2026/11/30 10:00:00.000, 1980, 3201, 120.5, 40, 0x0000000000000000",
        "2026/11/30 10:00:00.020, 1755, 3201, 650.0, 52, 0x0000000000000004",
        "garbage line",
        "2026/11/30 10:00:00.040, 1770, 3201, 640.0, 53, 0x0000000000000004",
        "not a time, 1, 2, 3, 4, 5",
        "2026/11/30 10:00:00.060, 1980, 3201, 130.0, 41, 0x0000000000000000",
    ]) + "\n")
    samples = _clocks.read_samples(str(log))
    assert len(samples) == 4 and samples[1][1] == ["1755", "3201", "650.0", "52", "0x0000000000000004"]
    t = [s[0] for s in samples]
    assert t[1] - t[0] == pytest.approx(0.02)
    busy = _clocks.summarise(samples, t[1], t[2])
    assert busy == "sm 1762 MHz, mem 3201 MHz, 645 W, 52 C, throttle 0x0000000000000004 (2 samples)"
    every = _clocks.summarise(samples, t[0], t[3])
    assert "(4 samples)" in every and "throttle 0x0000000000000000/0x0000000000000004" in every
    assert _clocks.summarise(samples, t[3] + 1, t[3] + 2) == "no samples"
    samples[0][1][0] = "[N/A]"
    assert _clocks.summarise(samples, t[0], t[0]).startswith("sm ? MHz")


def test_smi_gpu_is_the_first_visible(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert _clocks.smi_gpu() == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _clocks.smi_gpu() == "0"


def test_page_stride_times_the_tables_entry():
    table = json.loads(H200.read_text())
    problem, config = checks.shipped(table, "decode_paged", "fp8", 1, 64, 8192)
    entry = next(e for e in table["entries"] if e["problem"] == problem.to_dict()
                 and (e["bucket"]["batch"], e["bucket"]["context"]) == (64, 8192))
    assert config.to_dict() == {k: v for k, v in table["modules"][entry["variant"]]["config"].items()
                                if k != "store" or v != "tile"}
    problem, _ = checks.shipped(table, "prefill_paged", "fp8", 1, 4096, 22528)
    assert problem.family == "prefill_paged" and problem.page_size == 64
    with pytest.raises(SystemExit, match="no table entry for decode_paged fp8 n1 3x8192"):
        checks.shipped(table, "decode_paged", "fp8", 1, 3, 8192)


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: CHECK"),
    (["warmup", "--buckets", "64x8192:half,"], "--buckets"),
    (["page-stride", "--table", "no_such_gpu"], "--table: no table at"),
    (["page-stride", "--prefill-buckets", "4096"], "--prefill-buckets"),
    (["matmul-rate", "--buckets", "1x8192"], "unrecognized arguments"),
    (["clocks", "--warmups", "20,soon"], "--warmups: expected milliseconds >= 0"),
    (["clocks", "--next-n", "5"], "--next-n: invalid choice"),
])
def test_command_line_refusals(args, message):
    proc = _tool(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU refusal")
@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_without_a_gpu(sub):
    proc = _tool(sub, *(["--table", str(H200)] if sub == "page-stride" else []))
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("args, expect", [
    (["warmup", "--buckets", "8x8192:full", "--rounds", "1", "--replays", "3"], "busy, 100 ms"),
    (["bench-paths", "--buckets", "8x8192:full", "--rounds", "1", "--replays", "3"], "api, 100 ms"),
    (["clocks", "--buckets", "8x8192:full", "--replays", "3"], "nvidia-smi samples"),
    (["clocks", "--buckets", "8x8192:full", "--replays", "3", "--next-n", "2", "--deepgemm", "--warmups", "20"],
     "next_n 2"),
    (["page-stride", "--table", str(H200), "--buckets", "64x8192:full", "--prefill-buckets", ""], "decode fp8 64x8192"),
    (["matmul-rate", "--rounds", "1", "--replays", "3"], "bf16: min"),
])
def test_checks_on_a_gpu(args, expect):
    proc = _tool(*args, timeout=600)
    assert proc.returncode == 0 and expect in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
