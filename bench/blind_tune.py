"""Does a fresh tune find the best-known table by itself? Issue 25's check, on a GPU that has a
tuned table (the H200), with that table and its trial store set aside.

  python -m bench.blind_tune tune --out DIR
      runs run.sh's GPU tune line exactly (read from run.sh: `cli.py tune --engine ...`) on a fresh
      trial store and Optuna storage under DIR, with no --seed-table (the shipped table never
      seeds it; the model's cross-compile cache, registers and shared memory only, is the
      committed db/xcompile_cache.jsonl), times its wall clock, then emits DIR/tables/<slug>/ from
      that store alone. Writes DIR/blind_tune.json.
  python -m bench.blind_tune compare DIR [--total-s 300] [--contexts 32768,131072,1048576]
      times the fresh tune's fp8 decode choices and the blind predicted table's against the shipped
      table's, alternating in one process (python -m bench.predicted with both candidates).
  python -m bench.blind_tune untuned --out DIR [--dtype bf16 --next-n 2 --batch 1,16,128 --context 8K,128K]
      a problem the shipped table has no entry for: the same guided tune (run.sh's settings,
      without --engine), then a search with 5x its trials per bucket (the model's seeds, the
      local search and TPE, no early stop) as the best known, each in its own store; emits both
      and times the fast one and the blind predicted one against the long one.
  python -m bench.blind_tune plan            (no GPU) prints the commands the phases run

The figures go in the closing note of issue 25 and docs/PERF.md, "The tuner's search".
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from bench._common import ROOT, no_cuda

RUN_SH = ROOT / "run.sh"
BLIND_PREDICTED = ROOT / "docs" / "perf_logs" / "predicted_h200" / "dispatch.json"
XCOMPILE_CACHE = ROOT / "db" / "xcompile_cache.jsonl"
LONG_FACTOR = 5  # the best known of an untuned problem: a search with this many times the trials


def run_sh_tune() -> list[str]:
    """cli.py's arguments of run.sh's GPU tune line (the one line with `cli.py tune --engine`)."""
    lines = [ln.strip() for ln in RUN_SH.read_text().splitlines() if "cli.py tune --engine" in ln]
    if len(lines) != 1:
        raise SystemExit(f"{RUN_SH}: expected one line with `cli.py tune --engine`, found {len(lines)}")
    words = shlex.split(lines[0])
    return words[words.index("cli.py") + 1:]


def fresh(out: Path, name: str) -> list[str]:
    """Store options that put a run's trials and studies under out/name/, away from db/."""
    return ["--db", str(out / name / "trials.sqlite"), "--optuna-db", str(out / name / "optuna.sqlite"),
            "--xcompile-cache", str(XCOMPILE_CACHE)]


def cli(args: list[str], log: Path | None = None) -> tuple[int, float]:
    """Run `python cli.py ARGS` from the repository root, its output through to ours (and `log`)."""
    start = time.perf_counter()
    with subprocess.Popen([sys.executable, "cli.py", *args], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        sink = open(log, "a") if log else None
        for line in proc.stdout:
            sys.stdout.write(line)
            if sink:
                sink.write(line)
        if sink:
            sink.close()
    return proc.returncode, time.perf_counter() - start


def emitted_table(tables: Path) -> Path:
    found = [p for p in sorted(tables.glob("*/dispatch.json")) if p.parent.name != "default"]
    if len(found) != 1:
        raise SystemExit(f"{tables}: expected one GPU's table, found {[str(p) for p in found]}")
    return found[0]


def trial_counts(db: Path) -> dict:
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("select family, status, coalesce(fidelity, 'full'), count(*) from trials group by 1, 2, 3")
    return {f"{f} {s} {fid}": n for f, s, fid, n in rows}


def phase_tune(out: Path) -> int:
    args = run_sh_tune() + fresh(out, "fresh")
    out.mkdir(parents=True, exist_ok=True)
    print("tune: python cli.py " + shlex.join(args), flush=True)
    code, wall = cli(args, out / "tune.log")
    record = {"command": "python cli.py " + shlex.join(args), "exit_code": code, "wall_s": round(wall, 1)}
    if code == 0:
        emit_code, _ = cli(["emit", "--db", str(out / "fresh" / "trials.sqlite"), "--out", str(out / "tables")],
                           out / "emit.log")
        record.update(emit_exit_code=emit_code, counts=trial_counts(out / "fresh" / "trials.sqlite"))
    (out / "blind_tune.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"\nrun.sh's tune: {wall:.0f} s wall (goal <= 600 s), exit {code}; {out / 'blind_tune.json'}")
    return code


def phase_compare(out: Path, total_s: float, lens: str = "score", contexts: str = "", adopt: bool = False) -> int:
    """adopt: also write DIR/adopt_seed.json, the buckets where the fresh or the blind table read
    faster than the shipped config, and print the tune commands that time them into db/ (bench.predicted --adopt)."""
    tuned = emitted_table(out / "tables")
    from bench import predicted

    return predicted.main(["--predicted", f"tuned={tuned}", "--predicted", f"predicted={BLIND_PREDICTED}",
                           "--total-s", str(total_s), "--lens", lens, "--contexts", contexts]
                          + (["--adopt", str(out / "adopt_seed.json")] if adopt else []))


def phase_untuned(out: Path, dtype: str, next_n: str, batch: str, context: str, total_s: float) -> int:
    """The fast tune and a 5x search of a problem the shipped table lacks, each emitted, then timed.
    Each finished tune is recorded in DIR/untuned.json at once, so a call cut short (the H200's
    10-minute limit) resumes with the next phase: run the same command again."""
    problem = ["--dtype", dtype, "--next-n", next_n, "--batch", batch, "--context", context]
    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "untuned.json"
    record = json.loads(done_path.read_text()) if done_path.exists() else {}
    if record.get("problem", problem) != problem:
        raise SystemExit(f"{done_path} is another problem's ({record['problem']}); use another --out")
    record["problem"] = problem

    def save() -> None:
        done_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")

    if "fast_s" not in record:
        fast = [a for a in run_sh_tune() if a not in ("--engine",)]
        code, wall = cli(fast[:1] + problem + fast[1:] + fresh(out, "fast"), out / "untuned_fast.log")
        if code:
            return code
        import sqlite3

        con = sqlite3.connect(out / "fast" / "trials.sqlite")
        per_bucket = con.execute("select max(n) from (select count(*) n from trials where status != 'infeasible' "
                                 "group by problem_key, bucket_batch, bucket_context)").fetchone()[0]
        record.update(fast_s=round(wall, 1), fast_max_trials=per_bucket, long_trials=LONG_FACTOR * int(per_bucket or 1))
        save()
    else:
        print(f"untuned: the fast tune is done ({record['fast_s']} s); resuming", flush=True)
    if "long_s" not in record:
        long_args = ["tune", *problem, "--trials", str(record["long_trials"]), "--no-stop-at-optimum",
                     "--no-short-first", *fresh(out, "long")]
        code, long_wall = cli(long_args, out / "untuned_long.log")
        if code:
            return code
        record["long_s"] = round(long_wall, 1)
        save()
    else:
        print(f"untuned: the 5x search is done ({record['long_s']} s); resuming", flush=True)
    for name in ("fast", "long"):
        cli(["emit", "--db", str(out / name / "trials.sqlite"), "--out", str(out / f"tables_{name}")])
    pred = out / "predicted"
    cli(["predict", "--gpu", "h200", "--family", "decode_paged", "--dtype", dtype, "--next-n", next_n, "--lens-mode",
         "1d", "--batch", batch, "--context", context, "--cache", str(XCOMPILE_CACHE), "--out", str(pred)])
    from bench import predicted

    return predicted.main(["--shipped", str(emitted_table(out / "tables_long")), "--dtype", dtype,
                           "--next-n", next_n, "--predicted", f"fast={emitted_table(out / 'tables_fast')}",
                           "--predicted", f"predicted={pred / 'nvidia_h200' / 'predicted' / 'dispatch.json'}",
                           "--total-s", str(total_s), "--lens", "score"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.blind_tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="phase", required=True)
    t = sub.add_parser("tune", help="run.sh's tune on a fresh store, then emit")
    t.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare", help="the fresh tune's and the blind predicted choices against the shipped")
    c.add_argument("out", type=Path)
    c.add_argument("--total-s", type=float, default=300.0)
    c.add_argument("--lens", default="score", choices=["full", "quarter", "score"],
                   help="score: full and quarter-filled lengths summed, the objective both tables were tuned for")
    c.add_argument("--contexts", default="", help="only these bucket contexts, a comma list (what a cut run skipped)")
    c.add_argument("--adopt", action="store_true",
                   help="write DIR/adopt_seed.json (the buckets a candidate won) and print the tune commands that adopt them")
    u = sub.add_parser("untuned", help="a problem nobody tuned: the fast tune against a 5x search")
    u.add_argument("--out", type=Path, required=True)
    u.add_argument("--dtype", default="bf16")
    u.add_argument("--next-n", default="2")
    u.add_argument("--batch", default="1,16,128")
    u.add_argument("--context", default="8K,128K")
    u.add_argument("--total-s", type=float, default=120.0)
    sub.add_parser("plan", help="print the commands (no GPU)")
    args = ap.parse_args(argv)
    if args.phase == "plan":
        print("tune:    python cli.py " + shlex.join(run_sh_tune() + fresh(Path("DIR"), "fresh")))
        print("emit:    python cli.py emit --db DIR/fresh/trials.sqlite --out DIR/tables")
        print(f"compare: python -m bench.predicted --predicted tuned=DIR/tables/<slug>/dispatch.json "
              f"--predicted predicted={BLIND_PREDICTED.relative_to(ROOT)}")
        return 0
    import torch

    if not torch.cuda.is_available():
        return no_cuda("`python -m bench.blind_tune plan` to see the commands")
    if args.phase == "tune":
        return phase_tune(args.out)
    if args.phase == "compare":
        return phase_compare(args.out, args.total_s, args.lens, args.contexts, args.adopt)
    return phase_untuned(args.out, args.dtype, args.next_n, args.batch, args.context, args.total_s)


if __name__ == "__main__":
    sys.exit(main())
