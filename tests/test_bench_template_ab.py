"""bench/template_ab.py beyond what tests/test_experiments.py gates with it: the programs-per-SM
arithmetic of --xcompile, the command line's refusals (before any GPU is looked for), configs
from a file, the ragged prefill family under the interpreter, and on a GPU a timed A/B."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import template_ab

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args, timeout=600):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.template_ab", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _copy_of(tmp_path, family):
    folder = tmp_path / f"{family}_copy"
    folder.mkdir()
    shutil.copy(ROOT / "templates" / f"{family}.py.jinja", folder)
    return folder


@pytest.mark.parametrize("regs, shared, warps, programs", [
    (63, 24576, 4, 8),     # 63 x 32 = 2,016 -> 2,048 registers a warp: 32 warps; shared allows 9
    (128, 16384, 4, 4),    # 4,096 a warp: 16 warps = 4 programs
    (32, 0, 1, 32),        # the block limit
    (32, 0, 4, 16),        # the warp limit: 64 / 4
    (40, 110000, 4, 2),    # shared memory: 233,472 // 111,024
])
def test_programs_per_sm(regs, shared, warps, programs):
    assert template_ab.programs_per_sm(regs, shared, warps) == programs


@pytest.mark.parametrize("args, message", [
    (["--cpu-smoke", "--xcompile"], "not allowed with argument"),
    (["--xcompile"], "--xcompile: needs --configs"),
    (["--cpu-smoke", "--configs", "{"], "--configs: not JSON"),
    (["--cpu-smoke", "--configs", '[{"block_tt": 64}]'], "unknown fields"),
    (["--cpu-smoke", "--configs", "@/no/such/file"], "--configs: cannot read"),
    (["--cpu-smoke", "--buckets", "64x"], "--buckets: expected BxCONTEXT"),
])
def test_command_line_refusals(tmp_path, args, message):
    proc = _tool("--alt", str(_copy_of(tmp_path, "decode_paged")), *args, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU refusal")
def test_without_a_gpu_it_points_at_the_cpu_modes(tmp_path):
    proc = _tool("--alt", str(_copy_of(tmp_path, "decode_paged")), timeout=300)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "--cpu-smoke or --xcompile" in proc.stderr


def test_ragged_prefill_candidate_from_a_configs_file(tmp_path):
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps([{"block_t": 32, "tiles_per_program": 2, "block_m": 2, "dot_dtype": "fp16"}]))
    proc = _tool("--alt", str(_copy_of(tmp_path, "prefill_ragged")), "--family", "prefill_ragged", "--cpu-smoke",
                 "--buckets", "40x700:full", "--configs", f"@{configs}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("40x700:full ")]
    # the family default, then the file's config; each gated from both templates
    assert len(rows) == 2 and all(ln.count("gated ok") == 2 for ln in rows), proc.stdout[-2000:]
    assert "bt32_tp2_w4_s2_m2_fp16" in rows[1]


@pytest.mark.gpu
def test_timed_ab_of_a_copy_of_the_current_template(tmp_path):
    """On a GPU: the current decode template against a copy of itself, on the table's config and
    one more: both timed, the ratio near 1."""
    proc = _tool("--alt", str(_copy_of(tmp_path, "decode_paged")), "--buckets", "8x8192:full", "--replays", "5",
                 "--configs", '[{"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":3,"orient":"k_rows"}]')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("8x8192:full ")]
    assert len(rows) >= 1
    for r in rows:
        assert 0.8 < float(r[-1]) < 1.25, r
