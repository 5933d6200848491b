"""bench/host.py, the GPU host's driver: steps parsed into phases of lanes (a lane a GPU), the
presets' commands with the lane's store, budget and results file, the refusals; and a real run of
small shell steps: lanes at once on their own GPUs, phases one after another, time limits that
kill a step and its children, one summary line a step, one archive of the lanes."""

import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from bench import host

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args, **kw):
    return subprocess.run([sys.executable, "-m", "bench.host", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, **kw)


def _ctx(tmp_path, store="copy", tune_args=(), gpus=("0", "1")):
    return host.Context(tmp_path, "nvidia_h200", "h200-test", store, list(tune_args), list(gpus))


def test_plan_phases_lanes_and_gpus():
    phases = host.plan(["tune-decode-fp8-n1", "//", "tests", "bench.ceilings --buckets 1x8192", "then", "merge", "emit"],
                       ["4", "5"], {"emit": 30}, "copy")
    assert [[ln.gpus for ln in lanes] for lanes in phases] == [[["4"], ["5"]], [["4", "5"]]]
    assert [[[s.log for s in ln.steps] for ln in lanes] for lanes in phases] == [
        [["lane0/01_tune-decode-fp8-n1"], ["lane1/02_tests", "lane1/03_bench.ceilings"]],
        [["lane0/04_merge", "lane0/05_emit"]]]
    assert phases[1][0].steps[1].limit_s == 30 and phases[0][0].steps[0].limit_s == 350
    assert phases[0][1].steps[1].argv[1:] == ["-m", "bench.ceilings", "--buckets", "1x8192"]


@pytest.mark.parametrize("words, message", [
    (["tests", "//", "tests", "//", "tests"], "3 lanes for 2 GPU"),
    (["tests", "then"], "an empty lane"),
    (["//", "tests"], "an empty lane"),
    (["nope"], "'nope' is not a preset"),
    (["sh"], "'sh' is not a preset"),
    (["tests 'unclosed"], "No closing quotation"),
])
def test_plan_refuses(words, message):
    with pytest.raises(ValueError, match=message):
        host.plan(words, ["0", "1"], {}, "copy")


def test_repo_store_is_one_tuner_at_a_time():
    with pytest.raises(ValueError, match="--store repo with tune steps in 2 lanes"):
        host.plan(["tune-decode-bf16", "//", "tune-prefill-ragged"], ["0", "1"], {}, "repo")
    with pytest.raises(ValueError, match="no lane stores to merge"):
        host.plan(["tune-decode-bf16", "then", "merge"], ["0", "1"], {}, "repo")
    host.plan(["tune-decode-bf16", "tune-prefill-ragged", "//", "tests"], ["0", "1"], {}, "repo")  # one lane tunes


def test_tune_step_gets_budget_args_and_lane_store_in_that_order(tmp_path):
    (lane0, lane1), = host.plan(["tune-decode-bf16 --trials 2", "//", "tune-prefill-ragged"], ["0", "1"], {}, "copy")
    cmd = _ctx(tmp_path, tune_args=["--trials", "1", "--seed-table", "nvidia_h200"]).command(lane0.steps[0], lane0, 70)
    assert cmd[1:4] == ["cli.py", "tune", "--quiet"]
    i = cmd.index("--time-budget")
    assert cmd[i + 1] == "60"  # the limit less a margin, so tune stops itself before the limit kills it
    # the preset's --trials 6, then --tune-args' 1, then the step's own 2: click takes the last
    assert [cmd[j + 1] for j, a in enumerate(cmd) if a == "--trials"] == ["6", "1", "2"]
    assert cmd[-2:] == ["--db", str(tmp_path / "lane0" / "trials.sqlite")]
    assert _ctx(tmp_path, store="repo").command(lane1.steps[0], lane1, 60)[-2:] != ["--db", str(tmp_path / "lane1" /
                                                                                                  "trials.sqlite")]
    assert "--db" not in _ctx(tmp_path, store="repo").command(lane1.steps[0], lane1, 60)


def test_bench_and_table_steps_are_filled_in(tmp_path):
    (lane,), = host.plan(["bench-decode-bf16", "verify", "ceilings", "ab --alt experiments/x", "workers", "merge"],
                         ["0", "1"], {}, "fresh")
    ctx = _ctx(tmp_path, store="fresh")
    bench, verify, ceilings, ab, workers, merge = (ctx.command(s, lane, s.limit_s) for s in lane.steps)
    assert bench[-4:] == ["--run-id", "h200-test", "--out", str(tmp_path / "lane0" / "bench.jsonl")]
    assert verify[-3:] == ["--gpu", "nvidia_h200", "--no-defaults"]
    assert ceilings[-2:] == ["--out", str(tmp_path / "lane0" / "ceilings.json")]
    assert ab[1:] == ["-m", "bench.template_ab", "--table", "nvidia_h200", "--alt", "experiments/x"]
    assert workers[1:] == ["-m", "bench.workers", "--workers", "2", "--out", str(tmp_path / "lane0" / "workers")]
    assert merge[-1] == str(tmp_path / "lane*" / "trials.sqlite")  # no lane store yet
    for k in (0, 1):
        (tmp_path / f"lane{k}").mkdir()
        (tmp_path / f"lane{k}" / "trials.sqlite").write_text("")
    assert ctx.command(lane.steps[-1], lane, 60)[-2:] == [str(tmp_path / f"lane{k}" / "trials.sqlite") for k in (0, 1)]


def test_dry_run_and_list_and_refusals():
    proc = _tool("--gpus", "2", "--table", "nvidia_h200", "--dry-run", "tests", "//", "chunked-prefill", "then", "emit")
    assert proc.returncode == 0, proc.stderr
    assert "2 GPU(s) ['0', '1']; table nvidia_h200; store copy" in proc.stdout
    assert "lane 1 (CUDA_VISIBLE_DEVICES=1):\n    lane1/02_chunked-prefill [60 s]: " in proc.stdout
    assert "lane 0 (CUDA_VISIBLE_DEVICES=0,1):\n    lane0/03_emit [120 s]: " in proc.stdout and "emit --gpu nvidia_h200" \
        in proc.stdout
    listed = _tool("--list")
    assert listed.returncode == 0 and all(name in listed.stdout for name in host.PRESETS)
    for args, message in ((["--limit", "tests=0", "tests"], "--limit: expected NAME=SECONDS"),
                          (["--limit", "tests", "tests"], "--limit: expected NAME=SECONDS"),
                          ([], "no steps"),
                          (["--gpus", "1", "tests", "//", "tests"], "2 lanes for 1 GPU(s)")):
        bad = _tool(*args)
        assert bad.returncode == 2 and message in bad.stderr, (args, bad.stderr)


def test_a_run_of_shell_steps(tmp_path):
    """Two lanes at once (each sees its own GPU), then a phase of one lane (both GPUs); a step past
    its limit is killed with its child and counts as failed; the lanes come back in results.tgz."""
    out = tmp_path / "out"
    marker = tmp_path / "child_alive"
    t0 = time.monotonic()
    proc = _tool("--gpus", "2", "--table", "some_gpu", "--out", str(out), "--wheels", str(tmp_path / "none"),
                 "--limit", "sh=4",
                 "sh 'echo lane0 $CUDA_VISIBLE_DEVICES; sleep 2'", "//",
                 "sh 'echo lane1 $CUDA_VISIBLE_DEVICES; sleep 2'", "then",
                 f"sh '(sleep 6; touch {marker}) & echo all $CUDA_VISIBLE_DEVICES; sleep 30'",
                 "cli info")
    wall = time.monotonic() - t0
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the killed step
    summary = (out / "summary.txt").read_text()
    assert "run id gpu-" in summary and "table some_gpu; store copy; GPUs 0,1" in summary
    lines = [ln for ln in summary.splitlines() if ln.startswith("== ")]
    names = [ln.split(":")[0][3:] for ln in lines]
    assert sorted(names[:2]) == ["lane0/01_sh", "lane1/02_sh"] and names[2:] == ["lane0/03_sh", "lane0/04_cli-info"]
    rc = {ln.split(":")[0][3:]: ln.split("rc=")[1].split(",")[0] for ln in lines}
    assert rc == {"lane0/01_sh": "0", "lane1/02_sh": "0", "lane0/03_sh": "124", "lane0/04_cli-info": "0"}
    assert wall < 2 + 4 + 30, wall  # the two lanes ran at once (4 s in a row), the 30 s step was cut at 4
    time.sleep(3)
    assert not marker.exists()  # its child was killed with it
    with tarfile.open(out / "results.tgz") as tar:
        names = tar.getnames()
        logs = {n: tar.extractfile(n).read().decode() for n in names if n.endswith(".log")}
    assert sorted(logs) == ["lane0/01_sh.log", "lane0/03_sh.log", "lane0/04_cli-info.log", "lane1/02_sh.log"]
    assert "lane0 0\n" in logs["lane0/01_sh.log"] and "lane1 1\n" in logs["lane1/02_sh.log"]
    assert "all 0,1\n" in logs["lane0/03_sh.log"] and logs["lane0/04_cli-info.log"].startswith("$ ")
    assert not list(out.glob("lane*"))  # packed, then removed
    assert "---- lane0/04_cli-info (tail)" in proc.stdout


def test_total_budget_skips_what_does_not_fit(tmp_path):
    out = tmp_path / "out"
    proc = _tool("--gpus", "1", "--table", "x", "--out", str(out), "--wheels", str(tmp_path), "--total-s", "33",
                 "sh 'sleep 1'", "sh 'sleep 1'")
    summary = (out / "summary.txt").read_text()
    assert "== lane0/01_sh: rc=0" in summary, summary
    # 33 s less the 10 s kept for packing leaves 23 s, then 22: the second step (limit 300) is cut to that
    assert "== lane0/02_sh: rc=0" in summary and "(limit 2" in summary.splitlines()[-1], summary
    proc = _tool("--gpus", "1", "--table", "x", "--out", str(out), "--wheels", str(tmp_path), "--total-s", "31",
                 "sh 'sleep 6'", "sh 'sleep 1'")  # 21 s for the first, then 15 s left: under 20
    summary = (out / "summary.txt").read_text()
    assert proc.returncode == 1 and "== lane0/02_sh: skipped" in summary, summary
