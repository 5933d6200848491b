"""One tuning worker against N on the same small table: the same `cli.py tune` command, first with
--workers 1 (the first GPU), then with --workers N (the first N GPUs), each on a fresh trial store
and a fresh Triton cache (so the second run does not inherit compiled kernels) and without a time
budget (both do the same trials). Prints both wall times and the trials each timed; the logs and
wall_times.txt go to --out.

README.md's "Several GPUs" figures are this tool's (then scripts/two_gpu_tune.sh) on two H200s.

Usage (GPU host; through `python3 -m bench.host` where the image lacks the tuner's wheels):
    python3 -m bench.workers [--workers 2] [--batch 1,64,256] [--context 8K,32K,128K] [--trials 8]
No GPU (CPU workers under the interpreter; the logic, not the figures):
    python3 -m bench.workers --batch 1,2 --context 64 --trials 2 \\
        --tune-args "--interpret --heads 16 --head-dim 32 --page-size 32"
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import ROOT


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES's entries, else 0..(nvidia-smi -L)-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]


def timed_trials(db: Path) -> int | None:
    """Trials with status 'ok' in a trial store (None if it cannot be read)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("select count(*) from trials where status='ok'").fetchone()[0]
    except sqlite3.Error:
        return None


def tune_command(args, workers: int, db: Path) -> list[str]:
    return [sys.executable, str(ROOT / "cli.py"), "tune", "--dtype", "fp8", "--next-n", "1", "--batch", args.batch,
            "--context", args.context, "--trials", str(args.trials), "--ask-batch", str(args.ask_batch), "--quiet",
            *shlex.split(args.tune_args), "--workers", str(workers), "--db", str(db)]


def run_once(args, name: str, workers: int, gpus: list[str], work: Path) -> tuple[int, int | None, float]:
    """(exit status, trials timed, wall seconds) of one tune run; its output in OUT/name.log."""
    (work / name).mkdir(parents=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(work / name / "triton"))
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:workers])
    cmd = tune_command(args, workers, work / name / "trials.sqlite")
    t0 = time.perf_counter()
    with open(args.out / f"{name}.log", "w") as log:
        log.write(f"$ {shlex.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # its build and benchmark workers too
            proc.wait()
            rc = 124
    return rc, timed_trials(work / name / "trials.sqlite"), time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2, help="the second run's workers (GPUs)")
    ap.add_argument("--batch", default="1,64,256")
    ap.add_argument("--context", default="8K,32K,128K")
    ap.add_argument("--trials", type=int, default=8, help="per bucket")
    ap.add_argument("--ask-batch", type=int, default=4)
    ap.add_argument("--limit-s", type=float, default=280.0, help="each run's time limit")
    ap.add_argument("--tune-args", default="", help="more `cli.py tune` options, one shell-quoted string")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")) / "workers",
                    help="where the logs and wall_times.txt go [default: $OUT/workers]")
    args = ap.parse_args(argv)
    if args.workers < 2:
        ap.error("--workers: expected 2 or more (the run compared with one worker)")
    try:
        shlex.split(args.tune_args)
    except ValueError as exc:
        ap.error(f"--tune-args: {exc}")
    interpret = "--interpret" in shlex.split(args.tune_args)
    gpus = [] if interpret else visible_gpus()
    if not interpret and len(gpus) < args.workers:
        print(f"--workers {args.workers}: {len(gpus)} GPU(s) visible ({gpus}); add --tune-args --interpret to run "
              "CPU workers", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="workers_"))
    lines = []
    try:
        for name, workers in (("one_worker", 1), (f"{args.workers}_workers", args.workers)):
            rc, trials, wall = run_once(args, name, workers, gpus, work)
            lines.append(f"{name}: --workers {workers} rc={rc}, {'?' if trials is None else trials} trials timed, "
                         f"wall {wall:.1f} s")
            print(lines[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (args.out / "wall_times.txt").write_text("\n".join(lines) + "\n")
    return 0 if all(" rc=0," in ln for ln in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
