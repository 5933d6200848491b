"""Cross-compile a candidate template beside the current one, without a GPU: registers, spills,
shared memory and the programs an SM can hold, per config (the resource side of an A/B that
scripts/gpu_template_ab.py times on the GPU).

Programs per SM on sm_90 (H100 / H200): registers are allocated per warp in units of 256
(65,536 a SM); shared memory is 233,472 bytes a SM, plus 1 KB reserved per block; at most 64 warps
and 32 blocks a SM.

Usage: python scripts/xcompile_template_ab.py --alt experiments/decode_deferred_store \\
           --configs '[{"block_t":64,"tiles_per_program":12,"num_warps":4,"num_stages":3,"orient":"k_rows"}]'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SM90_REGS, SM90_SMEM, SM90_WARPS, SM90_BLOCKS = 65536, 233472, 64, 32


def programs_per_sm(registers: int, shared: int, warps: int) -> int:
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = (SM90_REGS // per_warp) // warps
    by_smem = SM90_SMEM // (shared + 1024)
    return min(by_regs, by_smem, SM90_WARPS // warps, SM90_BLOCKS)


def main() -> int:
    from gpu_template_ab import overlay  # templates/ with the candidate's files over it

    from indexer_logits._identity import Config, Problem
    from tuner.space import TARGETS
    from tuner.xcompile import compile_variant

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alt", required=True, type=Path, help="folder of candidate templates (decode_paged)")
    ap.add_argument("--next-n", type=int, default=1)
    ap.add_argument("--configs", required=True, help="JSON list of decode configs")
    args = ap.parse_args()
    if not (args.alt / "decode_paged.py.jinja").is_file():
        ap.error(f"--alt: expected a folder with decode_paged.py.jinja, got {args.alt}")
    try:
        configs = [Config(**c) for c in json.loads(args.configs)]
    except (ValueError, TypeError) as exc:
        ap.error(f"--configs: expected a JSON list of decode configs ({exc})")
    os.environ.pop("TRITON_INTERPRET", None)  # real compiles (set before triton.jit reads it)
    alt = overlay(args.alt)
    try:
        problem = Problem(next_n=args.next_n)
        print(f"{'config':28s} {'template':9s} {'regs':>5s} {'spills':>6s} {'shared':>8s} {'programs/SM':>11s}")
        for config in configs:
            for name, template_dir in (("current", None), ("alt", alt)):
                r = compile_variant(problem, config, TARGETS["sm_90"], template_dir=template_dir)
                if r.status == "error":
                    print(f"compile failed for {config.slug} ({name}): {r.reason}: {r.detail[-2000:]}", file=sys.stderr)
                    return 1
                if r.registers is None:  # refused by the space before compiling
                    print(f"{config.slug:28s} {name:9s} {r.status}: {r.reason}: {r.detail}", flush=True)
                    continue
                print(f"{config.slug:28s} {name:9s} {r.registers:5d} {r.spills:6d} {r.shared_bytes:8d} "
                      f"{programs_per_sm(r.registers, r.shared_bytes, config.num_warps):11d}"
                      + (f"  ({r.status}: {r.reason})" if r.status != "ok" else ""), flush=True)
    finally:
        shutil.rmtree(alt, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
