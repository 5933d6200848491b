"""bench/timeline.py beyond the probes' anchors and compile (tests/test_experiments.py): what it
reads off the probes (per launch and the medians over the launches with a neighbour each side),
its command line, and on a GPU a probed run of one bucket."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import timeline

ROOT = Path(__file__).resolve().parent.parent
BLOCK_T = 4


def _probes(launches=4, period_ns=10_000):
    """Launch k starts at t0 = 1 ms + k periods; its program i starts i us after t0, has its
    length 0.5 us later, its first page 0.8, its first tile 1.5, its last 3, ends at 4; runs on SM
    i % 2 with [2, 1, 0][i] tiles (program 2 has none: no bt, loop or first-tile time)."""
    out = []
    for k in range(launches):
        p = torch.zeros(3, timeline.SCALARS + BLOCK_T, dtype=torch.int64)
        for i in range(3):
            start = 1_000_000 + k * period_ns + i * 1000
            n_tiles = [2, 1, 0][i]
            slot = timeline.SLOT
            p[i, slot["start"]], p[i, slot["lens"]], p[i, slot["end"]] = start, start + 500, start + 4000
            p[i, slot["sm"]], p[i, slot["n_tiles"]] = i % 2, n_tiles
            if n_tiles:
                p[i, slot["bt"]], p[i, slot["loop"]] = start + 800, start + 3000
                p[i, timeline.SCALARS:] = start + 1500
                p[i, timeline.SCALARS + 1] = start + 1400  # the tile's latest thread counts
        out.append(p)
    return out


def test_analyse_per_launch():
    res = timeline.analyse(_probes())
    first, last = res["launches"][0], res["launches"][-1]
    assert first["programs"] == 3 and first["with_tiles"] == 2
    assert first["start"] == [0.0, 1.0, 2.0] and first["lens"] == [0.5, 1.5, 2.5] and first["end"] == [4.0, 5.0, 6.0]
    assert first["bt"] == [0.8, 1.8] and first["loop"] == [3.0, 4.0] and first["first"] == [1.5, 2.5]
    assert first["sm"] == [0, 1, 0] and first["n_tiles"] == [2, 1, 0] and first["last_end"] == 6.0
    assert first["period"] == 10.0 and first["gap_to_next"] == 4.0  # next t0 at 10 us, last end at 6
    assert "period" not in last  # no next launch


def test_summary_medians_over_the_inner_launches():
    s = timeline.summary(timeline.analyse(_probes()))
    assert s["period_us"] == 10.0 and s["gap_us"] == 4.0 and s["all_started_us"] == 2.0
    assert s["start_p50_us"] == 1.0 and s["lens_after_start_p50_us"] == 0.5 and s["bt_p50_us"] == 1.8
    assert (s["first_p10_us"], s["first_p50_us"], s["first_p90_us"]) == (1.5, 2.5, 2.5)
    assert s["loop_p50_us"] == 4.0 and (s["end_p10_us"], s["end_p50_us"], s["end_max_us"]) == (4.0, 5.0, 6.0)
    # SM 0 ran programs 0 and 2 (last end 6), SM 1 program 1 (5)
    assert s["sm_last_end_min_us"] == 5.0 and s["sm_last_end_p50_us"] == 6.0
    assert (s["programs_per_sm_max"], s["programs_per_sm_min"]) == (2, 1)
    # a launch that came late moves the period and gap of its neighbour only, and the median holds
    probes = _probes(launches=6)
    for p in probes[3:]:
        p[:, :5] += 5000 * (p[:, :5] > 0)  # start, lens, bt, loop, end
        p[:, timeline.SCALARS:] += 5000 * (p[:, timeline.SCALARS:] > 0)
    assert timeline.summary(timeline.analyse(probes))["period_us"] == 10.0


def _tool(*args):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.timeline", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_command_line():
    assert _tool("--xcompile").returncode == 2 and "--xcompile needs --configs" in _tool("--xcompile").stderr
    bad = _tool("--configs", "[1]")
    assert bad.returncode == 2 and "--configs: expected a JSON list of config objects" in bad.stderr
    if not torch.cuda.is_available():
        proc = _tool("--buckets", "1x8192:full")
        assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "--xcompile" in proc.stderr


@pytest.mark.gpu
def test_timeline_of_one_bucket(tmp_path):
    """On a GPU: the table's module and one config probed at 8 x 8K; the probed launch period
    matches the probed graph's time per launch, the probes cost a little."""
    proc = _tool("--buckets", "8x8192:full", "--out", str(tmp_path),
                 "--configs", '[{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows",'
                 '"store":"run"}]')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "timeline.json").read_text())
    assert len(rows) == 2
    for r in rows:
        # >= 0: at 8 x 8K the grid is one wave, every program starts at once, and %globaltimer's
        # step (~1 us on the H200) gives them all the same start (the H200 read 0.0 here)
        assert len(r["launches"]) == 8 and r["end_max_us"] > r["all_started_us"] >= 0
        assert r["plain_us"] <= 1.5 * r["probed_us"] and abs(r["period_us"] - r["probed_us"]) < 0.5 * r["probed_us"]
