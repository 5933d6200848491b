"""bench/sweep.py: configs from JSON, a file or grids (joined in order, without repeats), the
grids that stand for the deleted sweep files, its command line, a sweep under the interpreter
(gates, an infeasible config refused, the best per bucket, the torch fallback), and on a GPU one
small sweep."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import sweep
from indexer_logits._identity import Config

ROOT = Path(__file__).resolve().parent.parent
GRID72 = "block_t=64,128,256 tiles_per_program=1,4,16 num_warps=4,8 num_stages=2,3 orient=k_rows,q_rows"
PREFILL1 = "block_m=2,4 block_t=64,128 tiles_per_program=8,32 num_warps=4,8 num_stages=2,3 orient=k_rows,q_rows"


def test_parse_grid_is_the_product_in_order():
    assert sweep.parse_grid("block_t=64,128 orient=k_rows,q_rows") == [
        Config(block_t=64, orient="k_rows"), Config(block_t=64, orient="q_rows"),
        Config(block_t=128, orient="k_rows"), Config(block_t=128, orient="q_rows")]
    grid72 = sweep.parse_grid(GRID72)
    assert len(grid72) == len(set(grid72)) == 72
    # the order of the old scripts/grid72.json: orient fastest, block_t slowest
    assert grid72[:2] == [Config(block_t=64, tiles_per_program=1, num_warps=4, num_stages=2, orient=o)
                          for o in ("k_rows", "q_rows")]
    assert len(set(sweep.parse_grid(PREFILL1))) == 64 and {c.block_m for c in sweep.parse_grid(PREFILL1)} == {2, 4}


@pytest.mark.parametrize("text, message", [
    ("block_t", "expected knob=v1,v2"), ("block_t=", "expected knob=v1,v2"), ("", "at least one"),
    ("block_tt=64", "unknown fields"), ("block_t=0", "block_t: expected a positive int"),
    ("orient=sideways", "orient"),
])
def test_parse_grid_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        sweep.parse_grid(text)


def test_sweep_configs_joins_without_repeats(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps([{"block_t": 128, "tiles_per_program": 4}, {"block_t": 64}]))
    got = sweep.sweep_configs(f"@{f}", ["block_t=64,32", "block_t=128 tiles_per_program=4,8"])
    assert got == [Config(block_t=128, tiles_per_program=4), Config(block_t=64), Config(block_t=32),
                   Config(block_t=128, tiles_per_program=8)]
    assert sweep.sweep_configs("", []) == sweep.parse_grid(sweep.DEFAULT_GRID) and len(sweep.sweep_configs("", [])) == 16
    assert sweep.sweep_configs('[{"num_warps": 8}]', []) == [Config(num_warps=8)]  # no default added


def _tool(*args, timeout=600):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.sweep", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("args, message", [
    (["--grid", "block_t"], "--grid: expected knob=v1,v2"),
    (["--configs", "{}"], "--configs: expected a JSON list"),
    (["--buckets", "8x"], "--buckets"),
    (["--next-n", "one"], "invalid literal"),
])
def test_command_line_refusals(args, message):
    proc = _tool(*args, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


def test_cpu_smoke_sweep():
    """Under the interpreter: two feasible configs and one the space refuses (3 warps); per bucket
    both timed and the best named, with the fallback beside it."""
    proc = _tool("--cpu-smoke", "--grid", "block_t=32,64 tiles_per_program=2 orient=k_rows", "--configs",
                 '[{"block_t":64,"num_warps":3}]', "--fallback", "--replays", "3", "--warmup-ms", "5", "--buckets", "2x256:full,3x300:random")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "REJECT bt64_tp4_w3_s2_fp16 n1:" in proc.stdout
    assert proc.stdout.count("gated bt") == 2
    for spec in ("2x256:full", "3x300:random"):
        rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("fp8_pg64_h16_d32_n1") and f" {spec} " in ln]
        assert len(rows) == 2, proc.stdout[-2000:]
        best = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"BEST fp8_pg64_h16_d32_n1 {spec}: bt")]
        assert best and "full-width torch fallback" in best[-1], proc.stdout[-2000:]


def test_cpu_smoke_sweep_with_every_config_refused_fails():
    proc = _tool("--cpu-smoke", "--configs", '[{"block_t":64,"num_warps":3}]', "--buckets", "2x256:full",
                 "--family", "prefill_ragged")
    assert proc.returncode == 1 and "BEST fp8_h16_d32 2x256:full: no config passed the gates" in proc.stdout, \
        proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.gpu
def test_sweep_on_a_gpu():
    proc = _tool("--grid", "block_t=64 tiles_per_program=8,16 num_stages=3 orient=k_rows", "--buckets",
                 "8x8192:full,64x8192:full", "--replays", "5", "--fallback")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("BEST fp8_pg64_h64_d128_n1") >= 2 and "full-width torch fallback" in proc.stdout
