"""bench/topk_xcompile.py: the selection kernels of every path (S.PATHS) really compile for sm_90
on the CPU without spills, and the two-kernel path's compaction keeps the register budget its
design rests on (candidates read in blocks: few enough registers for 8 programs of 4 warps per SM)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.topk_xcompile", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_every_path_compiles_for_sm90_without_spills():
    proc = _run("--target", "sm_90", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["kernel"]: r for r in json.loads(proc.stdout)}
    # the tiles path's own five kernels (and MERGE's two forms) and its first selection's two that stop
    # early (fit_cap); the bound path's own two, each with and without SEGMENTS, its count at four more
    # of its settings (COUNT_STEP, COUNT_PREFETCH) and by rows (COUNT_LANES) at two steps, each with its
    # sub-segments packed through 64 slots a row and through the most it takes, and with SEGMENTS letting its
    # dependent launch at its start (TRIGGER), and claiming its segment slots (COUNT_BALLOT) at two steps and
    # ahead, and its atomics and stores inline (COUNT_INLINE), and its loads early (COUNT_EARLY: the count in two
    # forms and round 1 over the maxima; COMPACT_EARLY: the compaction), and filling a sub-segment a warp by votes
    # (COUNT_VOTE) at two steps and early, with the compaction reading them; the row path's held (HOLD), and its stores
    # inline (INLINE) held and not, the latter writing the scores too; the resident
    # path's one, at the tuner's three settings, its chunk read a step a phase or held in registers
    assert len(rows) == 52 and {name.split(":")[0] for name in rows} == {"rounds", "fused", "row", "tiles", "bound",
                                                                         "resident"}
    for name, r in rows.items():
        assert r["target"] == "sm_90" and r["registers"] > 0 and len(r["ptx_sha1"]) == 12, name
        assert r["spill_stores"] == r["spill_loads"] == 0, (name, r)
    # 65,536 registers per SM / (8 programs x 128 threads) = 64: the launcher's 8 programs per SM fit
    assert rows["fused: compaction + selection"]["registers"] <= 64, rows["fused: compaction + selection"]


def test_refuses_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.topk_xcompile"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "unset TRITON_INTERPRET" in proc.stderr
