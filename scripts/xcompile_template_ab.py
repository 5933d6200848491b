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
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SM90_REGS, SM90_SMEM, SM90_WARPS, SM90_BLOCKS = 65536, 233472, 64, 32

WORKER = r"""
import json, sys, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tuner.problem import Config, Problem
from tuner.render import load_module, render
from tuner.xcompile import _ptxas_report, build_signature
problem = Problem.from_json(sys.argv[1])
config = Config.from_json(sys.argv[2])
template_dir = Path(sys.argv[3]) if sys.argv[3] else None
with tempfile.TemporaryDirectory() as d:
    path = Path(d) / "variant.py"
    path.write_text(render(problem, config, template_dir))
    fn = load_module(path)._decode_paged_kernel
    sig, consts, attrs = build_signature(fn, problem, config=config)
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    report = _ptxas_report(k.asm["ptx"], 90)
    print(json.dumps({**report, "shared": int(k.metadata.shared)}))
"""


def programs_per_sm(registers: int, shared: int, warps: int) -> int:
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = (SM90_REGS // per_warp) // warps
    by_smem = SM90_SMEM // (shared + 1024)
    return min(by_regs, by_smem, SM90_WARPS // warps, SM90_BLOCKS)


def compile_one(problem_json: str, config_json: str, template_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # a real compile
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", WORKER, problem_json, config_json, template_dir],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"compile failed for {config_json} ({template_dir or 'templates/'}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tuner.problem import Config, Problem

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
    with tempfile.TemporaryDirectory(prefix="templates_alt_") as d:
        import shutil

        shutil.copytree(ROOT / "templates", d, dirs_exist_ok=True)
        for f in args.alt.glob("*.jinja"):
            shutil.copy(f, Path(d) / f.name)
        problem = Problem(next_n=args.next_n)
        print(f"{'config':28s} {'template':9s} {'regs':>5s} {'spills':>6s} {'shared':>8s} {'programs/SM':>11s}")
        for config in configs:
            for name, tdir in (("current", ""), ("alt", d)):
                r = compile_one(problem.to_json(), config.to_json(), tdir)
                spills = r["spill_stores"] + r["spill_loads"]
                print(f"{config.slug:28s} {name:9s} {r['registers']:5d} {spills:6d} {r['shared']:8d} "
                      f"{programs_per_sm(r['registers'], r['shared'], config.num_warps):11d}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
