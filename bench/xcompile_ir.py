"""What the compiler made of a decode config's main loop, without a GPU: the layout conversions
inside the tile loop (each one a shared-memory round trip with a barrier between the warps), the
barriers and the global stores by width in the PTX. Writes each variant's TTGIR and PTX to --out.

What it showed (docs/PERF.md, "Next ideas"): both logits stores (Config.store "tile" and "run")
convert the head sum's layout once per tile inside the loop; the Gluon kernel, which does not,
runs at the same speed, so that conversion is not where the time goes.

Usage: python -m bench.xcompile_ir --configs '[{"block_t":64,"tiles_per_program":16,"num_warps":4,
           "num_stages":3,"orient":"k_rows","store":"run"}]' [--next-n 1] [--target sm_90] [--out DIR]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
from pathlib import Path

from bench._common import parse_configs


def loop_conversions(ttgir: str) -> int:
    """ttg.convert_layout ops inside the kernel's scf.for loops (by brace depth: a loop's body
    ends where the depth falls back to the loop's own line; nested loops are counted once)."""
    count, depth, loop_at = 0, 0, None
    for line in ttgir.splitlines():
        code = line.split(" loc(")[0]  # braces in location strings are not structure
        if loop_at is None and "scf.for" in code and code.rstrip().endswith("{"):
            loop_at = depth
        elif loop_at is not None and "ttg.convert_layout" in code:
            count += 1
        depth += code.count("{") - code.count("}")
        if loop_at is not None and depth <= loop_at:
            loop_at = None
    return count


def ptx_counts(ptx: str) -> dict[str, int]:
    """Global stores by instruction and the CTA barriers."""
    counts = collections.Counter(re.findall(r"\b(st\.global[\w.]*)", ptx))
    counts["bar.sync"] = len(re.findall(r"\b(?:bar\.sync|barrier\.sync)\b", ptx))
    return dict(sorted(counts.items()))


def main(argv=None) -> int:
    os.environ.pop("TRITON_INTERPRET", None)  # real compiles: before Triton's modules are first imported
    from indexer_logits._identity import Problem
    from tuner.space import TARGETS, InfeasibleConfig, check
    from tuner.xcompile import compile_kernel

    ap = argparse.ArgumentParser(prog="python -m bench.xcompile_ir", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", required=True, help="JSON list (or @FILE) of decode configs")
    ap.add_argument("--next-n", type=int, default=1)
    ap.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    ap.add_argument("--target", default="sm_90", choices=sorted(TARGETS))
    ap.add_argument("--out", type=Path, default=None, help="folder for the TTGIR and PTX (default: a temporary one)")
    args = ap.parse_args(argv)
    try:
        configs = parse_configs(args.configs)
        problem = Problem(next_n=args.next_n, q_dtype=args.dtype, cache_dtype=args.dtype,
                          scale_layout="page_blocked" if args.dtype == "fp8" else "none")
    except (ValueError, TypeError) as exc:
        ap.error(f"--configs / --next-n / --dtype: {exc}")
    out = args.out or Path(tempfile.mkdtemp(prefix="xcompile_ir_"))
    out.mkdir(parents=True, exist_ok=True)
    target = TARGETS[args.target]
    for config in configs:
        try:
            check(problem, config, target)
        except InfeasibleConfig as exc:
            print(f"{config.slug}: {exc}")
            continue
        asm = compile_kernel(problem, config, target).asm
        for kind in ("ttgir", "ptx"):
            (out / f"{config.slug}.{kind}").write_text(asm[kind])
        print(f"{config.slug}: layout conversions in the loop {loop_conversions(asm['ttgir'])}, "
              f"PTX {ptx_counts(asm['ptx'])}", flush=True)
    print(f"TTGIR and PTX in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
