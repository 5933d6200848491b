"""The served tables under several Tritons, side by side (issue 30's table): the Triton on the host
against others unpacked in folders (--other, repeatable), in alternating processes.

Each process is one `cli.py bench --methods shipped` over a group of the issue's cases: the runtime
picks the table for the Triton it runs (`indexer_logits._versions.pick_table_dir`: the root table
under 3.6, `triton-3.8/` under 3.8 and, nearest, 3.9 until its own exists), so a row is what an
engine on that Triton gets. Each round runs a group under the host's Triton, then under each other
one, then the next group; a case's figure is its best p50 over the rounds (the machine throttles
under sustained load: trust ratios of one round over absolute times). Prints, last, each case's
time under every Triton and its ratio to the host's.

Usage (GPU host, the other Triton unpacked from parts into /tmp/triton-3.9.0):
    python3 -m bench.triton_serve --other /tmp/triton-3.8.0 --other /tmp/triton-3.9.0 --rounds 2 --out $OUT/serve
    python3 -m bench.triton_serve --plan                # the processes it would run (no GPU)
    python3 -m bench.triton_serve --summarise DIR       # the table again, from a run's rows
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench._common import ROOT

# Issue 30's cases, a bench process each: ragged prefill (4096x16K, 4096x64K, 1024x8K), chunked
# prefill, decode next_n 2 (64x8K, 32x32K) and next_n 1 (8 cases from 64x8K to 1x1M).
GROUPS = {
    "ragged": ["--family", "prefill_ragged", "--batch", "4096", "--context", "16384,65536"],
    "ragged_1k": ["--family", "prefill_ragged", "--batch", "1024", "--context", "8192"],
    "chunked": ["--family", "prefill_paged", "--batch", "4096", "--context", "22528"],
    "n2": ["--next-n", "2", "--batch", "32,64", "--context", "8192,32768", "--lens", "full"],
    "n1": ["--next-n", "1", "--batch", "1,64", "--context", "8192,32768,131072,1048576", "--lens", "full"],
}
# Extra environment of a process under the other Triton: a repack without backends/amd must not
# look the backends up through the host Triton's entry points (docs/PERF.md, "What fits a call").
OTHER_ENV = {"TRITON_BACKENDS_IN_TREE": "1"}


def environment(other: str | None, cache: str) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TRITON_CACHE_DIR=cache)
    paths = [p for p in (other, str(ROOT), env.get("PYTHONPATH", "")) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if other:
        env.update(OTHER_ENV)
    return env


def triton_version(env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", "import triton; print(triton.__version__)"], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"--other: this Triton does not import: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout.strip()


def bench_command(group: str, out: Path, run_id: str, replays: int) -> list[str]:
    return [sys.executable, str(ROOT / "cli.py"), "bench", *GROUPS[group], "--methods", "shipped",
            "--replays", str(replays), "--out", str(out), "--run-id", run_id]


def case_key(row: dict) -> tuple:
    problem = row["problem_json"]
    problem = json.loads(problem) if isinstance(problem, str) else problem
    family = problem.get("family")
    head = f"{family} n{problem['next_n']}" if family == "decode_paged" else family
    return head, int(row["bucket_batch"]), int(row["bucket_context"])


def best_times(folder: Path) -> dict:
    """{case: {triton version: best p50 in us}} from the rows of a run's jsonl files."""
    best: dict = collections.defaultdict(dict)
    for path in sorted(folder.glob("serve_*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("method") != "shipped" or not row.get("p50_ms"):
                continue
            version, us = row["triton_version"], row["p50_ms"] * 1e3
            key = case_key(row)
            best[key][version] = min(best[key].get(version, us), us)
    return best


def table(best: dict, host: str, others: list[str]) -> str:
    versions = [host, *others]
    lines = [f"{'case':32s}" + "".join(f"{v + ' us':>12s}" for v in versions)
             + "".join(f"{v + '/' + host:>13s}" for v in others)]
    for (head, batch, context), times in sorted(best.items()):
        base = times.get(host)
        cells = "".join(f"{times[v]:12.1f}" if v in times else f"{'-':>12s}" for v in versions)
        ratios = "".join(f"{times[v] / base:13.3f}" if base and v in times else f"{'-':>13s}" for v in others)
        lines.append(f"{head + f' {batch}x{context}':32s}" + cells + ratios)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.triton_serve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--other", action="append", default=[],
                    help="folder holding another Triton's `triton/` package, put first on PYTHONPATH (repeatable)")
    ap.add_argument("--rounds", type=int, default=2, help="host/other process pairs per group")
    ap.add_argument("--groups", default=",".join(GROUPS), help=f"comma list of {', '.join(GROUPS)}")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--case-s", type=int, default=120, help="time limit of one bench process")
    ap.add_argument("--total-s", type=int, default=0,
                    help="start no process that could end past this many seconds (0: no limit); the table follows")
    ap.add_argument("--out", type=Path, default=Path("triton_serve"))
    ap.add_argument("--plan", action="store_true", help="print the processes, run nothing")
    ap.add_argument("--summarise", type=Path, metavar="DIR", help="print the table of a finished run")
    args = ap.parse_args(argv)
    groups = [g for g in args.groups.split(",") if g]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise SystemExit(f"--groups: unknown {unknown}; known: {', '.join(GROUPS)}")
    if args.rounds < 1:
        raise SystemExit("--rounds: at least 1")
    if args.summarise:
        best = best_times(args.summarise)
        versions = sorted({v for t in best.values() for v in t}, key=lambda v: tuple(map(int, v.split(".")[:2])))
        if len(versions) < 2:
            raise SystemExit(f"--summarise: expected rows of two Tritons or more in {args.summarise}, found {versions}")
        print(table(best, versions[0], versions[1:]))
        return 0
    if args.plan:
        sides = ["host", *(f"other{i}" for i in range(1, max(1, len(args.other)) + 1))]
        for r in range(1, args.rounds + 1):
            for g in groups:
                for side in sides:
                    print(side, " ".join(bench_command(g, Path(f"serve_{side}_r{r}.jsonl"), f"serve_{side}_r{r}",
                                                       args.replays)))
        return 0
    if not args.other:
        raise SystemExit("--other: give at least one folder holding another Triton's triton/")
    for folder in args.other:
        if not (Path(folder) / "triton").is_dir():
            raise SystemExit(f"--other: expected a folder holding triton/, got {folder}")
    envs = {"host": environment(None, "/tmp/tc-serve-host")}
    for i, folder in enumerate(args.other):
        envs[folder] = environment(folder, f"/tmp/tc-serve-other{i}")
    versions = {side: triton_version(env) for side, env in envs.items()}
    if len(set(versions.values())) != len(versions):
        raise SystemExit(f"--other: each Triton once, and none the host's: {versions}")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    for r in range(1, args.rounds + 1):
        for g in groups:
            for side in envs:
                tag = f"serve_{versions[side]}_r{r}"
                cmd = bench_command(g, args.out / f"{tag}.jsonl", tag, args.replays)
                if args.total_s and time.time() - start + args.case_s > args.total_s:
                    print(f"[{time.time() - start:6.0f} s] --total-s: not started: triton {versions[side]} round {r} {g}")
                    continue
                with open(args.out / f"{tag}.log", "a") as log:
                    try:
                        rc = subprocess.run(cmd, env=envs[side], stdout=log, stderr=subprocess.STDOUT,
                                            timeout=args.case_s).returncode
                    except subprocess.TimeoutExpired:
                        rc = "timeout"
                print(f"[{time.time() - start:6.0f} s] triton {versions[side]} round {r} {g}: rc={rc}", flush=True)
    print(table(best_times(args.out), versions["host"], [versions[f] for f in args.other]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
