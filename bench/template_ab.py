"""A/B a candidate template change, or a knob, on the shipped configs, before paying for a re-tune.

A template change makes every stored trial of its family stale (emit takes only trials of the
current template), so the whole table must be re-tuned before it can ship. This tool says first
whether the change is worth that: for each bucket it renders the shipped config (or --configs)
with the current templates and with the candidate (--alt: a folder whose files replace those of
templates/, e.g. experiments/decode_scalar_page/), gates the candidate against the reference (and
the CUDA-graph and poisoned-block-table rules), and times both on the same inputs by graph replay.
--override '{"head_sum":"chain"}' sets config fields on the candidate side (with or without
--alt): e.g. the shipped config with the chained head sum against itself with the tree, under
the current templates, in one process under one Triton; or as KEY=VALUE pairs, e.g.
--override k_load=tma,head_sum=chain (ragged prefill's key tile by TMA with the chain). Exits 1 if
the candidate was rejected anywhere.

--cpu-smoke: gates only, tiny shapes, under the Triton interpreter (no GPU).
--xcompile:  no GPU: each of --configs compiled for sm_90 from both templates: registers, spills,
             shared memory and the programs an SM can hold (registers are allocated per warp in
             units of 256, 65,536 a SM; shared memory is 233,472 bytes a SM, plus 1 KB reserved per
             block; at most 64 warps and 32 blocks a SM).

Usage (GPU host):  python -m bench.template_ab --alt experiments/decode_scalar_page \\
                       --buckets 64x8192:full,64x8192:quarter,64x32768:full,64x131072:full
                   python -m bench.template_ab --override '{"head_sum":"chain"}' --family prefill_ragged \\
                       --buckets 4096x16384:causal,4096x65536:causal
No GPU:            python -m bench.template_ab --alt experiments/<name> --cpu-smoke
                   python -m bench.template_ab --alt experiments/<name> --xcompile --configs '[{...}]'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bench._common import no_cuda, overlay, parse_configs, parse_override

SM90_REGS, SM90_SMEM, SM90_WARPS, SM90_BLOCKS = 65536, 233472, 64, 32


def programs_per_sm(registers: int, shared: int, warps: int) -> int:
    """Programs of `warps` warps an sm_90 SM holds at these registers a thread and shared bytes."""
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = (SM90_REGS // per_warp) // warps
    by_smem = SM90_SMEM // (shared + 1024)
    return min(by_regs, by_smem, SM90_WARPS // warps, SM90_BLOCKS)


def candidate(problem, config, override: dict):
    """The candidate side's config: `config` with --override's fields, its unused knobs tied
    (tuner.space.tied: e.g. head_sum 'chain' on a q_rows config stays 'tree')."""
    from tuner.space import tied

    return tied(problem, replace(config, **override)) if override else config


def xcompile_ab(problem, configs, alt_dir, override: dict) -> int:
    """--xcompile: the resources of each config from the current and the candidate templates."""
    from tuner.space import TARGETS
    from tuner.xcompile import compile_variant

    print(f"{'config':28s} {'template':9s} {'regs':>5s} {'spills':>6s} {'shared':>8s} {'programs/SM':>11s}")
    for config in configs:
        for name, template_dir in (("current", None), ("alt", alt_dir)):
            built = candidate(problem, config, override) if name == "alt" else config
            r = compile_variant(problem, built, TARGETS["sm_90"], template_dir=template_dir)
            if r.status == "error":
                print(f"compile failed for {config.slug} ({name}): {r.reason}: {r.detail[-2000:]}", file=sys.stderr)
                return 1
            if r.registers is None:  # refused by the space before compiling
                print(f"{config.slug:28s} {name:9s} {r.status}: {r.reason}: {r.detail}", flush=True)
                continue
            print(f"{config.slug:28s} {name:9s} {r.registers:5d} {r.spills:6d} {r.shared_bytes:8d} "
                  f"{programs_per_sm(r.registers, r.shared_bytes, config.num_warps):11d}"
                  + (f"  ({r.status}: {r.reason})" if r.status != "ok" else ""), flush=True)
    return 0


def shipped_config(table: dict, problem, batch: int, context: int):
    from indexer_logits._identity import Config, Problem

    for e in table["entries"]:
        if Problem(**e["problem"]) == problem and (e["bucket"]["batch"], e["bucket"]["context"]) == (batch, context):
            return Config(**table["modules"][e["variant"]]["config"])
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.template_ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alt", type=Path, default=None,
                    help="folder of candidate templates [default: the current templates, with --override]")
    ap.add_argument("--override", default="",
                    help='JSON object of config fields set on the candidate side, e.g. \'{"head_sum":"chain"}\'')
    ap.add_argument("--family", default="decode_paged", choices=["decode_paged", "prefill_paged", "prefill_ragged"])
    ap.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    ap.add_argument("--next-n", type=int, default=1)
    ap.add_argument("--buckets", default="64x8192:full,64x8192:quarter,64x32768:full,64x131072:full,256x131072:full",
                    help="BATCHxCONTEXT:LENS, comma-separated")
    ap.add_argument("--configs", default="",
                    help="JSON list (or @FILE) of extra configs to compare in every bucket; with --xcompile, the configs")
    ap.add_argument("--table", default=None,
                    help="the table (GPU slug under indexer_logits/tables/) whose configs are shipped "
                         "[default: this GPU's]")
    ap.add_argument("--replays", type=int, default=20)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--cpu-smoke", action="store_true", help="gates only, tiny shapes, Triton interpreter on CPU")
    mode.add_argument("--xcompile", action="store_true",
                      help="no GPU: registers, spills, shared memory, programs per SM on sm_90 (needs --configs)")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    elif args.xcompile:
        os.environ.pop("TRITON_INTERPRET", None)  # real compiles (set before triton.jit reads it)

    import torch

    from tuner.buckets import parse_bucket_specs
    from tuner.families import run_all_gates
    from tuner.gates import GateFailure
    from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
    from tuner.measure import time_candidate, timing_inputs
    from indexer_logits._identity import Problem
    from tuner.render import TEMPLATE_DIR, load_module, render
    from tuner.roofline import floor_ms
    from tuner.space import InfeasibleConfig, default_config

    try:
        buckets = parse_bucket_specs(args.buckets)
        extra = parse_configs(args.configs)
        override = parse_override(args.override)
    except ValueError as exc:
        ap.error(str(exc))
    if args.alt is None and not override:
        ap.error("nothing to compare: give --alt (candidate templates), --override (config fields) or both")
    if args.xcompile and not extra:
        ap.error("--xcompile: needs --configs (the configs to compile)")
    if not (args.cpu_smoke or args.xcompile) and not torch.cuda.is_available():
        return no_cuda("with --cpu-smoke or --xcompile")
    device = "cpu" if args.cpu_smoke else "cuda"
    alt_dir = overlay(args.alt) if args.alt else TEMPLATE_DIR
    layout = "page_blocked" if args.dtype == "fp8" else "none"
    kw = dict(q_dtype=args.dtype, cache_dtype=args.dtype, heads=64, head_dim=128)
    if args.family == "decode_paged":
        problem = Problem(family="decode_paged", page_size=64, scale_layout=layout, next_n=args.next_n, **kw)
    elif args.family == "prefill_paged":
        problem = Problem(family="prefill_paged", page_size=64, scale_layout=layout, **kw)
    else:
        problem = Problem(family="prefill_ragged", page_size=0, scale_layout=layout, **kw)
    if args.xcompile:
        try:
            return xcompile_ab(problem, extra, alt_dir, override)
        finally:
            if args.alt:
                shutil.rmtree(alt_dir, ignore_errors=True)
    if args.cpu_smoke:
        problem = replace(problem, heads=16, head_dim=32)
    table = {"entries": [], "modules": {}}
    if not args.cpu_smoke:
        from indexer_logits._dispatch import TABLES_DIR
        from indexer_logits._identity import slugify

        table_path = TABLES_DIR / (args.table or slugify(torch.cuda.get_device_name())) / "dispatch.json"
        if table_path.exists():
            table = json.loads(table_path.read_text())
        else:
            print(f"no table at {table_path}: the family default stands in for the shipped config", flush=True)
    print(f"candidate: templates {args.alt or 'current'}, config fields {override or 'as shipped'}", flush=True)
    gen = Path(tempfile.mkdtemp(prefix="template_ab_"))
    modules: dict = {}

    def module(config, which: str):
        key = (config, which)
        if key not in modules:
            built = config if which == "current" else candidate(problem, config, override)
            text = render(problem, built, TEMPLATE_DIR if which == "current" else alt_dir)
            # load_module caches by file stem: the two templates' modules need different names
            path = gen / f"{which}__{built.slug}.py"
            path.write_text(text)
            modules[key] = load_module(path)
        return modules[key]

    if problem.family == "decode_paged":
        gate_in = make_decode_inputs(problem, 3, 700, "random", seed=1, device=device)
    elif problem.family == "prefill_paged":
        gate_in = make_prefill_paged_inputs(problem, 40, 700, num_requests=3, seed=1, device=device)
    else:
        gate_in = make_prefill_inputs(problem, 40, 700, seed=1, device=device)
    gated: dict = {}
    rows = []
    copy_bw = rate = None
    if not args.cpu_smoke:
        from tuner.timing import measure_copy_bandwidth, measure_matmul_rate, warm_up_gpu

        warm_up_gpu()
        copy_bw = measure_copy_bandwidth() if problem.is_decode else None
        rate = None if problem.is_decode else measure_matmul_rate(args.dtype)
    for bucket, lens in buckets:
        batch, context = bucket.batch, bucket.context
        base = shipped_config(table, problem, batch, context) if not args.cpu_smoke else None
        smoke_dot = "fp16" if args.dtype == "fp8" else "fp32"  # the interpreter's bf16 tl.dot is wrong
        configs = [base or default_config(problem, smoke_dot if args.cpu_smoke else "native")] + extra
        if args.cpu_smoke:
            configs = [replace(c, dot_dtype=smoke_dot) for c in configs]
        for config in dict.fromkeys(configs):
            result = {}
            for which in ("current", "alt"):
                try:
                    if (config, which) not in gated:
                        gated[(config, which)] = run_all_gates(module(config, which), problem, gate_in, True)
                except (GateFailure, InfeasibleConfig) as exc:
                    print(f"REJECT {which} {config.slug}: {exc}", flush=True)
                    gated[(config, which)] = None
                if gated[(config, which)] is None:
                    continue
                if args.cpu_smoke:
                    result[which] = None
                    continue
                xs = timing_inputs(problem, bucket, lens)
                t = time_candidate(module(config, which), xs, problem.family != "decode_paged", replays=args.replays)
                pct = 100 * floor_ms(xs[0], problem.family != "decode_paged", copy_bw, rate) / t.p50_ms
                result[which] = (t.p50_ms * 1e3, pct)
                del xs
                torch.cuda.empty_cache()
            rows.append((f"{batch}x{context}:{lens}", config.slug, result))
            print(rows[-1], flush=True)
    print(f"\n{'bucket':22s} {'config':26s} {'current':>20s} {'alt':>20s} {'alt/current':>12s}")
    bad = 0
    for bucket, slug, result in rows:
        cur, alt = result.get("current", "REJECTED"), result.get("alt", "REJECTED")
        bad += alt == "REJECTED"
        fmt = lambda v: v if isinstance(v, str) else ("gated ok" if v is None else f"{v[0]:9.1f} us {v[1]:5.1f}%")
        ratio = f"{alt[0] / cur[0]:.3f}" if isinstance(cur, tuple) and isinstance(alt, tuple) else "-"
        print(f"{bucket:22s} {slug:26s} {fmt(cur):>20s} {fmt(alt):>20s} {ratio:>12s}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
