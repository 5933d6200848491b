"""bench/runs.py reads bench runs' stored rows. `goals`: each verdict follows the goal's threshold,
a bucket timed in two steps counts its slower row, and the fallback ratio compares rows of one
step. `compare`: B over A per group. `fixed-cost`: the least-squares fit of time against tiles."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import runs

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args):
    return subprocess.run([sys.executable, "-m", "bench.runs", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def _row(run, method, batch, context, pct, p50_ms, *, dtype="fp8", next_n=1, lens="full", step="s1",
         family="decode_paged", rate=None, floor_ms=None):
    problem = {"cache_dtype": dtype, "q_dtype": dtype, "family": family, "head_dim": 128, "heads": 64}
    if family == "decode_paged":
        problem.update(lens_mode="1d", next_n=next_n, page_size=64,
                       scale_layout="page_blocked" if dtype == "fp8" else "none")
    return {"run_id": run, "method": method, "bucket_batch": batch, "bucket_context": context, "lens": lens,
            "frac_of_floor": pct / 100, "p50_ms": p50_ms, "created_at": step, "family": family,
            "matmul_rate": rate, "floor_ms": p50_ms * pct / 100 if floor_ms is None else floor_ms,
            "problem_json": json.dumps(problem)}


def _run(tmp_path, rows, run="r1"):
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return _tool("goals", run, "--results", str(path))


def _verdicts(stdout):
    return {ln.split(" | ")[0].lstrip("| "): ln.rstrip(" |").split(" | ")[-1]
            for ln in stdout.splitlines() if ln.startswith("| ") and not ln.startswith("| goal")}


def test_goals_verdicts(tmp_path):
    rows = [
        # >= 32K: one bucket at 90%, one timed twice (89% and 84%: the slower row counts)
        _row("r1", "shipped", 64, 32768, 90.0, 0.075), _row("r1", "shipped", 8, 131072, 89.0, 0.038),
        _row("r1", "shipped", 8, 131072, 84.0, 0.040, step="s2"),
        # 64x8K in the sweep and in the baselines step, with the fallback only in the latter
        _row("r1", "shipped", 64, 8192, 77.6, 0.02169), _row("r1", "shipped", 64, 8192, 76.7, 0.02195, step="s2"),
        _row("r1", "torch_fullwidth", 64, 8192, 1.9, 0.8670, step="s2"),
        _row("r1", "shipped_pdl", 64, 8192, 78.0, 0.02160, step="s2"),
        _row("r1", "shipped", 64, 8192, 48.6, 0.0090, lens="quarter"),
        # next_n = 2: 0.6 of n1 per row
        _row("r1", "shipped", 64, 32768, 80.0, 0.090, next_n=2),
        _row("r1", "shipped", 64, 32768, 90.0, 0.1428, dtype="bf16"), _row("r1", "shipped", 1, 32768, 30.0, 0.0066, dtype="bf16"),
        _row("r1", "shipped", 4096, 16384, 64.3, 1.107, family="prefill_ragged", lens="causal", rate=1.351e15),
        _row("other", "shipped", 64, 8192, 99.0, 0.017),  # another run: ignored
    ]
    proc = _run(tmp_path, rows)
    assert proc.returncode == 0, proc.stderr
    v = _verdicts(proc.stdout)
    assert v["fp8 decode >= 85% at >= 32K"] == "not met" and "1 of 2 buckets; under: 8x128K 84.0%" in proc.stdout
    assert v["fp8 decode >= 75% at 64x8K"] == "met" and "76.7% / 77.6%" in proc.stdout
    assert v["fp8 decode >= 60% at 64x8K, a quarter full"] == "not met"
    assert v[">= 40x the full-width fallback at 64x8K"] == "not met" and "867.0 us / 21.95 us = 39.50x" in proc.stdout
    assert v[">= 40x the full-width fallback at 64x8K (shipped_pdl)"] == "met"  # 867.0 / 21.60 = 40.14x
    assert v["next_n = 2 no slower per query row"] == "met" and "0.60-0.60 in 1 buckets" in proc.stdout
    assert v["bf16 decode >= 80% at >= 32K"] == "met from B=64"
    assert v["fp8 prefill (ragged K) >= 60% of the matmul rate"] == "met" and "of 1351 TFLOP/s" in proc.stdout


def test_goals_names_a_missing_run(tmp_path):
    proc = _run(tmp_path, [_row("r1", "shipped", 64, 8192, 77.0, 0.022)], run="nope")
    assert proc.returncode != 0 and "run_id: no rows of 'nope'" in proc.stderr and "r1" in proc.stderr


def test_compare_runs_geo_mean_uses_each_buckets_slower_row(tmp_path):
    """compare: B over A per group, a bucket timed twice in a run counts its slower
    row, and only buckets both runs timed are compared."""
    rows = [
        _row("a", "shipped", 64, 8192, 78.0, 0.020), _row("a", "shipped", 1, 1048576, 86.0, 0.040),
        _row("a", "shipped", 2, 4096, 8.0, 0.003),  # only in run a
        _row("b", "shipped", 64, 8192, 79.0, 0.018), _row("b", "shipped", 64, 8192, 78.0, 0.019, step="s2"),
        _row("b", "shipped", 1, 1048576, 84.0, 0.044),
        _row("b", "shipped", 1, 1048576, 84.0, 0.050, next_n=2),  # another group
    ]
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = _tool("--results", str(path), "compare", "a", "b", "--list", "fp8,1,full")
    assert proc.returncode == 0, proc.stderr
    geo = (0.019 / 0.020 * 0.044 / 0.040) ** 0.5
    assert f"fp8   n1 full       2 buckets  geo-mean {geo:.3f}  min 0.950 (64x8K)  max 1.100 (1x1024K)" in proc.stdout
    assert "64x8K  20.00 -> 19.00 us  0.950" in proc.stdout
    assert "n2" not in proc.stdout  # run a has no next_n = 2 rows


def test_compare_runs_refuses_a_bad_list_and_an_unknown_run(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps(_row("a", "shipped", 64, 8192, 78.0, 0.020)) + "\n")
    bad = _tool("compare", "a", "a", "--results", str(path), "--list", "fp8")
    assert bad.returncode == 2 and "--list: expected DTYPE,NEXT_N,LENS" in bad.stderr
    missing = _tool("compare", "a", "zz", "--results", str(path))
    assert missing.returncode != 0 and "run_id: no rows of 'zz'" in missing.stderr
    nothing = _tool("compare", "a", "a", "--results", str(path), "--method", "shipped_pdl")
    assert nothing.returncode == 1 and "no decode bucket timed by method 'shipped_pdl'" in nothing.stdout


def _fit_rows(run, fixed_us, us_per_tile, floor_us_per_tile):
    """Shipped full-length fp8 next_n=1 rows whose time is exactly fixed + per-tile x tiles, at
    tile counts in and out of the fit's range (1x64K: 1,024 tiles), two tile counts timed in two
    buckets each (8,192 and 131,072)."""
    rows = []
    for batch, context in ((1, 65536), (64, 8192), (2, 262144), (16, 131072), (8, 1048576), (64, 131072), (256, 4096)):
        tiles = batch * context // 64
        ms = (fixed_us + us_per_tile * tiles + (0 if 8192 <= tiles <= 131072 else 3.0)) / 1e3  # off the line outside
        floor = floor_us_per_tile * tiles / 1e3
        rows.append(_row(run, "shipped", batch, context, 100 * floor / ms, ms, floor_ms=floor))
    # not in the fit: another method, a quarter-full table, next_n 2, bf16
    rows += [_row(run, "default", 64, 32768, 50.0, 1.0), _row(run, "shipped", 64, 32768, 50.0, 1.0, lens="quarter"),
             _row(run, "shipped", 64, 32768, 50.0, 1.0, next_n=2), _row(run, "shipped", 64, 32768, 50.0, 1.0, dtype="bf16")]
    return rows


def test_fixed_cost_fits_the_fixed_cost_and_the_streaming_rate(tmp_path):
    rows = _fit_rows("r1", 4.0, 2.2 / 1024, 2.0 / 1024)
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = runs.load_run(path, "r1")
    a, b, floor_per_tile = runs.fit_fixed_cost(runs.tile_points(loaded))
    assert a == pytest.approx(4.0) and b * 1024 == pytest.approx(2.2) and floor_per_tile * 1024 == pytest.approx(2.0)
    proc = _tool("fixed-cost", "r1", "--results", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "fit over 8K-128K tiles: fixed 4.00 us + 2.200 us per 1024 tiles (the floor's 2.000: streaming at 90.9%" \
        in proc.stdout
    # 0.85 a / (1 - 0.85 b / f) with b / f = 1.1: a floor of 3.4 / 0.065 = 52.3 us
    assert "85% of the floor needs a floor of >= 52.3 us (>= 26782 tiles)" in proc.stdout
    assert "     8192       2" in proc.stdout and "   131072       2" in proc.stdout  # two buckets a tile count
    out_of_reach = _tool("fixed-cost", "r1", "--results", str(path), "--goal", "0.95")
    assert out_of_reach.returncode == 0 and "95% of the floor is out of reach" in out_of_reach.stdout


def test_fixed_cost_refuses_a_run_without_the_rows_it_fits(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps(_row("r1", "shipped", 64, 8192, 78.0, 0.020, dtype="bf16")) + "\n"
                    + json.dumps(_row("r2", "shipped", 64, 8192, 78.0, 0.020)) + "\n")
    none = _tool("fixed-cost", "r1", "--results", str(path))
    assert none.returncode == 2 and "no shipped full-length fp8 next_n=1 decode rows" in none.stderr
    one = _tool("fixed-cost", "r2", "--results", str(path))  # one tile count only
    assert one.returncode == 2 and "fewer than two tile counts" in one.stderr


def test_runs_refuses_a_missing_results_file(tmp_path):
    proc = _tool("goals", "r1", "--results", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2 and "--results: no such file" in proc.stderr
