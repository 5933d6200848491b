"""The driver for a GPU host: lanes of steps on N GPUs in one call, each step with a time limit and
its own log, one summary line a step, and what should come back in one archive.

    python3 -m bench.host [options] STEP ... [// STEP ...] [then STEP ... [// STEP ...]] ...

The steps come in phases separated by `then`; a phase runs its lanes, separated by `//`, at once,
lane k on the k-th GPU (CUDA_VISIBLE_DEVICES), and ends when all of them have; a phase of one
lane sees all --gpus GPUs. Each STEP is one argument (quote it): a preset name with, optionally,
more arguments for its command (they come last, so they override the preset's), or

    bench.TOOL ARGS...     python3 -m bench.TOOL ARGS (any bench tool)
    cli COMMAND ARGS...    python3 cli.py COMMAND ARGS
    sh 'COMMAND...'        bash -c COMMAND

A failed step does not stop the others (the trial store commits every trial as it is measured).
Presets (`--list` prints their commands):

    tests                      the GPU-marked tests
    tune-decode-fp8[-n1|-n2]   fp8 decode, batch 1..256 in powers of two, context 4K..1M (next_n 1,2 / 1 / 2)
    tune-decode-bf16, tune-prefill-ragged, tune-prefill-paged-fp8, tune-prefill-paged-bf16
    merge                      fold the lane stores into db/trials.sqlite (--store copy / fresh)
    emit, verify               the table of --table
    bench-decode-fp8-n1, bench-decode-fp8-n2, bench-decode-bf16, bench-baselines-8k, bench-baselines-long,
    bench-prefill-ragged, bench-prefill-paged-fp8, bench-prefill-paged-bf16
    ceilings, chunked-prefill, page-stride, ab (+ --alt experiments/NAME and/or --override KEY=VALUE ...), workers

The tune steps get `--quiet`, a --time-budget a little under their limit, --tune-args, and the lane's
store: --store copy (default) gives each lane a copy of db/trials.sqlite (configs measured before
are answered from it), fresh an empty one (a timed campaign), repo db/trials.sqlite itself (one
lane only). The bench steps share one --run-id and write the lane's results file. In --out (default
$OUT or /tmp/out): summary.txt, and results.tgz holding the lanes' logs, stores and results, the
emitted table (table/) and, with --store repo, the store. Back here: `python cli.py merge-db
lane*/trials.sqlite` and `python cli.py emit --gpu SLUG` (the same bytes as on the host).

The carried wheels (--wheels, default .whl/: optuna and friends, which a bare device image lacks)
are installed into /tmp/site first, which goes first on the steps' PYTHONPATH.

Examples (two GPUs; each the one call of what a campaign script used to do):
    # tune every family: the whole fp8 decode table on GPU 0, the rest and the ceilings on GPU 1
    python3 -m bench.host --gpus 2 --store fresh tune-decode-fp8 // tests tune-decode-bf16 \\
        tune-prefill-ragged tune-prefill-paged-fp8 tune-prefill-paged-bf16 ceilings
    # re-time the table's own configs under a changed template, emit, bench the new table
    python3 -m bench.host --gpus 2 --tune-args '--trials 1 --ask-batch 4 --seed-table nvidia_h200' \\
        tune-decode-fp8-n1 tune-prefill-paged-fp8 // tune-decode-fp8-n2 tune-decode-bf16 tune-prefill-paged-bf16 \\
        then merge emit then verify bench-decode-fp8-n1 bench-baselines-8k // bench-decode-fp8-n2 \\
        bench-decode-bf16 bench-prefill-paged-fp8 chunked-prefill page-stride
    # A/B two candidate templates at once
    python3 -m bench.host --gpus 2 'ab --alt experiments/x --buckets 64x8192:full' // 'ab --alt experiments/y'
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench._common import ROOT
from bench._host_plan import Lane, Step, plan
from bench._host_presets import PRESETS, PY, RESERVE_S

@dataclass
class Context:
    """What the placeholders of a step's command are filled with."""

    out: Path
    table: str
    run_id: str
    store: str
    tune_args: list[str]
    gpus: list[str]

    def lane_dir(self, lane: Lane) -> Path:
        return self.out / f"lane{lane.index}"

    def lane_store(self, lane: Lane) -> Path:
        return self.lane_dir(lane) / "trials.sqlite"

    def command(self, step: Step, lane: Lane, limit_s: float) -> list[str]:
        argv = list(step.argv)
        if step.kind == "tune":
            # the preset's own options, then --tune-args, then the step's (the last one wins)
            n = len(PRESETS[step.name].argv)
            margin = min(60, max(10, int(limit_s) // 8))
            argv = [*argv[:n], "--time-budget", str(max(5, int(limit_s) - margin)), *self.tune_args, *argv[n:]]
            if self.store != "repo":
                argv += ["--db", str(self.lane_store(lane))]
        elif step.kind == "bench":
            argv += ["--run-id", self.run_id, "--out", str(self.lane_dir(lane) / "bench.jsonl")]
        out = []
        for a in argv:
            if a == "{lane_stores}":
                # (none yet in a dry run: the pattern; in a run, merge-db then says there is none)
                out += [str(p) for p in sorted(self.out.glob("lane*/trials.sqlite"))] or [
                    str(self.out / "lane*" / "trials.sqlite")]
            else:
                out.append(a.replace("{table}", self.table).replace("{lane_dir}", str(self.lane_dir(lane)))
                           .replace("{gpus}", str(max(2, len(self.gpus)))))
        return out


class Runner:
    def __init__(self, ctx: Context, env: dict, total_s: float | None):
        self.ctx, self.env, self.total_s = ctx, env, total_s
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.summary = ctx.out / "summary.txt"

    def note(self, line: str) -> None:
        with self.lock:
            print(line, flush=True)
            with open(self.summary, "a") as f:
                f.write(line + "\n")

    def run_step(self, step: Step, lane: Lane) -> None:
        limit = float(step.limit_s)
        if self.total_s is not None:
            left = self.total_s - (time.monotonic() - self.t0) - RESERVE_S
            if left < min(limit, 20):
                self.note(f"== {step.log}: skipped, {max(0, left):.0f} s left of --total-s {self.total_s:.0f}")
                return
            limit = min(limit, left)
        argv = self.ctx.command(step, lane, limit)
        env = dict(self.env)
        if lane.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(lane.gpus)
        log = self.ctx.out / f"{step.log}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        if step.kind == "tune" and self.ctx.store == "copy" and not self.ctx.lane_store(lane).exists() \
                and (ROOT / "db" / "trials.sqlite").exists():
            shutil.copy(ROOT / "db" / "trials.sqlite", self.ctx.lane_store(lane))
        t0 = time.monotonic()
        with open(log, "w") as f:
            f.write(f"$ {shlex.join(argv)}\n")
            f.flush()
            try:
                proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            except OSError as exc:
                f.write(f"cannot start: {exc}\n")
                rc = 127
            else:
                try:
                    rc = proc.wait(timeout=limit)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)  # the step's own workers too
                    proc.wait()
                    rc = 124
        self.note(f"== {step.log}: rc={rc}, {time.monotonic() - t0:.1f} s (limit {limit:.0f} s)")

    def run_lane(self, lane: Lane) -> None:
        for step in lane.steps:
            self.run_step(step, lane)

    def run(self, phases: list[list[Lane]]) -> None:
        for lanes in phases:
            threads = [threading.Thread(target=self.run_lane, args=(ln,)) for ln in lanes]
            for t in threads:
                t.start()
            for t in threads:
                t.join()


def visible_gpus(count: int | None) -> list[str]:
    from bench.workers import visible_gpus as found

    ids = found()
    if count is None:
        return ids or ["0"]
    return (ids + [str(i) for i in range(len(ids), count)])[:count] if ids else [str(i) for i in range(count)]


def this_gpu_slug() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not out or not out[0].strip():
        return None
    from indexer_logits._identity import slugify

    return slugify(out[0].strip())


def install_wheels(wheels: Path, env: dict) -> str | None:
    """pip-install the carried wheels into /tmp/site, once per host (a step started by another
    driver that did it already skips it); None, or why it failed."""
    if env.get("WHEELS_INSTALLED") or not wheels.is_dir() or not any(wheels.glob("*.whl")):
        return None
    target = Path("/tmp/site")
    proc = subprocess.run([PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--upgrade", "--target", str(target), *map(str, sorted(wheels.glob("*.whl")))],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return proc.stderr[-2000:]
    env["PYTHONPATH"] = os.pathsep.join([str(target), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["WHEELS_INSTALLED"] = "1"
    return None


def pack(ctx: Context, phases: list[list[Lane]]) -> Path:
    """results.tgz: the lane folders, the emitted table, the repo store if tuned into; then the
    lane folders are removed (what comes back from a device call is a few files)."""
    steps = [s for lanes in phases for ln in lanes for s in ln.steps]
    table = ROOT / "indexer_logits" / "tables" / ctx.table
    archive = ctx.out / "results.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for d in sorted(ctx.out.glob("lane*")):
            tar.add(d, arcname=d.name)
        if any(s.name == "emit" for s in steps) and table.is_dir():
            tar.add(table, arcname="table")
        if ctx.store == "repo" and any(s.kind == "tune" for s in steps) and (ROOT / "db" / "trials.sqlite").exists():
            tar.add(ROOT / "db" / "trials.sqlite", arcname="trials.sqlite")
    for d in ctx.out.glob("lane*"):
        shutil.rmtree(d)
    return archive


def tails(ctx: Context, phases: list[list[Lane]], lines: int) -> None:
    for lanes in phases:
        for lane in lanes:
            for step in lane.steps:
                log = ctx.out / f"{step.log}.log"
                if log.exists():
                    print(f"---- {step.log} (tail)")
                    for ln in log.read_text(errors="replace").splitlines()[-lines:]:
                        print(ln[:200])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.host", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("steps", nargs="*", metavar="STEP", help="steps, `//` between lanes, `then` between phases")
    ap.add_argument("--gpus", type=int, default=None, help="GPUs to use [default: all visible]")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")),
                    help="where summary.txt and results.tgz go [default: $OUT or /tmp/out]")
    ap.add_argument("--table", default=None, help="the GPU slug of the table emit, verify, page-stride and ab use "
                                                  "[default: this GPU's, from nvidia-smi]")
    ap.add_argument("--store", default="copy", choices=["copy", "fresh", "repo"],
                    help="the tune steps' trial store: a copy of db/trials.sqlite per lane, an empty one per lane, "
                         "or db/trials.sqlite itself")
    ap.add_argument("--tune-args", default="", help="more `cli.py tune` options for every tune step (shell-quoted)")
    ap.add_argument("--run-id", default=None, help="the bench steps' run id [default: SLUG-YYYYmmdd-HHMMSS]")
    ap.add_argument("--limit", action="append", default=[], metavar="NAME=SECONDS",
                    help="the time limit of every step of that name (repeatable)")
    ap.add_argument("--total-s", type=float, default=None,
                    help="the whole call's budget: a step gets at most what is left, and is skipped below 20 s")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="folder of wheels to install first")
    ap.add_argument("--tail", type=int, default=8, help="log lines of each step printed at the end")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (GPUs, limits, commands); run nothing")
    ap.add_argument("--list", action="store_true", help="print the presets' commands and limits")
    args = ap.parse_args(argv)
    if args.list:
        for name, p in PRESETS.items():
            print(f"{name:26s} {p.limit_s:4d} s  {shlex.join(p.argv)}")
        return 0
    if not args.steps:
        ap.error("no steps (see --help, --list)")
    limits = {}
    for item in args.limit:
        name, sep, value = item.partition("=")
        try:
            limits[name] = int(float(value))
        except ValueError:
            sep = ""
        if not sep or limits.get(name, 0) <= 0:
            ap.error(f"--limit: expected NAME=SECONDS (SECONDS > 0), got {item!r}")
    try:
        tune_args = shlex.split(args.tune_args)
    except ValueError as exc:
        ap.error(f"--tune-args: {exc}")
    gpus = visible_gpus(args.gpus)
    try:
        phases = plan(args.steps, gpus, limits, args.store)
    except ValueError as exc:
        ap.error(str(exc))
    table = args.table or this_gpu_slug()
    if table is None:
        if not args.dry_run and any(any(a == "{table}" for a in s.argv) for lanes in phases for ln in lanes
                                    for s in ln.steps):
            ap.error("--table: no GPU found to name the table; pass --table SLUG")
        table = "{table}"
    run_id = args.run_id or f"{table.split('_')[-1] if table != '{table}' else 'run'}-{time.strftime('%Y%m%d-%H%M%S')}"
    ctx = Context(args.out.resolve(), table, run_id, args.store, tune_args, gpus)
    if args.dry_run:
        print(f"{len(gpus)} GPU(s) {gpus}; table {table}; store {args.store}; run id {run_id}; out {ctx.out}")
        for i, lanes in enumerate(phases, 1):
            print(f"phase {i}:")
            for lane in lanes:
                print(f"  lane {lane.index} (CUDA_VISIBLE_DEVICES={','.join(lane.gpus)}):")
                for step in lane.steps:
                    print(f"    {step.log} [{step.limit_s} s]: {shlex.join(ctx.command(step, lane, step.limit_s))}")
        return 0
    ctx.out.mkdir(parents=True, exist_ok=True)
    (ctx.out / "summary.txt").write_text("")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    failed = install_wheels(args.wheels, env)
    if failed:
        print(f"--wheels {args.wheels}: pip install failed:\n{failed}", file=sys.stderr)
        return 1
    for d in ctx.out.glob("lane*"):  # a lane store left from an earlier call would be merged again
        shutil.rmtree(d)
    runner = Runner(ctx, env, args.total_s)
    runner.note(f"run id {run_id}; table {table}; store {args.store}; GPUs {','.join(gpus)}")
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,clocks.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        smi = "no nvidia-smi"
    runner.note(smi or "no nvidia-smi output")
    runner.run(phases)
    tails(ctx, phases, args.tail)
    archive = pack(ctx, phases)
    print(f"\n{archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    print((ctx.out / "summary.txt").read_text(), end="")
    bad = [ln for ln in (ctx.out / "summary.txt").read_text().splitlines() if ln.startswith("== ") and "rc=0," not in ln]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
