"""Sweep configs over a few buckets: gate each, time it by graph replay, % of the floor.

A lab-notebook tool for docs/PERF.md (the product's path is `cli.py tune` / `cli.py bench`). The
configs are a JSON list (--configs '[...]' or --configs @FILE), one or more grids (--grid, each
the product of its knobs' values; several grids are joined, in order, without repeats), or both;
without either, a built-in 16-point decode sweep. Each config is gated once per problem (the
reference, the CUDA-graph rule, the poisoned block table), then timed in every bucket; the best
per bucket is printed last, with --fallback also the full-width torch fallback SGLang runs without
DeepGEMM (fp8 decode, buckets up to 64 x 8K).

Grids that reproduce earlier sweep files (git history: scripts/*.json before bench/):
  grid72.json:   --grid 'block_t=64,128,256 tiles_per_program=1,4,16 num_warps=4,8 num_stages=2,3 orient=k_rows,q_rows'
  prefill1.json: --family prefill_ragged --grid 'block_m=2,4 block_t=64,128 tiles_per_program=8,32 num_warps=4,8
                 num_stages=2,3 orient=k_rows,q_rows'

Usage (GPU host): python -m bench.sweep [--configs JSON|@FILE] [--grid SPEC ...] [--buckets 64x8192:full,...]
                      [--next-n 1,2] [--dtype fp8] [--family decode_paged] [--fallback] > $OUT/sweep.txt
No GPU:           python -m bench.sweep --cpu-smoke ...  (tiny shapes under the Triton interpreter;
                  wall-clock times and a nominal bandwidth: the logic, not the figures)
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

from bench._common import no_cuda, parse_configs

DEFAULT_GRID = "block_t=64,128 tiles_per_program=4,16 num_warps=4,8 num_stages=2,3"
DEFAULT_BUCKETS = "64x8192:full,64x8192:quarter,64x32768:full,8x131072:full,2x1048576:full"
SMOKE_BUCKETS = {"decode_paged": "2x256:full,3x512:random", "prefill_ragged": "16x128:full"}
NOMINAL_COPY_BW, NOMINAL_MATMUL_RATE = 1e11, 1e11  # --cpu-smoke: some number, no meaning


def parse_grid(text: str) -> list:
    """`knob=v1,v2 knob=v3 ...` as the Configs of its product, in order (ValueError if a token is
    not knob=values or a point is not a Config)."""
    from indexer_logits._identity import Config

    axes = []
    for token in text.split():
        name, sep, values = token.partition("=")
        if not sep or not name or not values:
            raise ValueError(f"--grid: expected knob=v1,v2,... items separated by spaces, got {token!r}")
        axes.append((name, [int(v) if v.lstrip("-").isdigit() else v for v in values.split(",")]))
    if not axes:
        raise ValueError("--grid: expected at least one knob=values item")
    try:
        return [Config.from_dict(dict(zip([n for n, _ in axes], point)))
                for point in itertools.product(*[vs for _, vs in axes])]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--grid {text!r}: {exc}") from None


def sweep_configs(configs_text: str, grids: list[str]) -> list:
    """The configs of --configs and each --grid, in order, once each; the default grid if none."""
    configs = parse_configs(configs_text)
    for g in grids:
        configs += parse_grid(g)
    if not configs_text and not grids:
        configs = parse_grid(DEFAULT_GRID)
    return list(dict.fromkeys(configs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="", help="JSON list of config objects, or @FILE holding one")
    ap.add_argument("--grid", action="append", default=[], metavar="SPEC",
                    help="'knob=v1,v2 knob=v3 ...': every combination (repeatable: the grids are joined)")
    ap.add_argument("--buckets", default=None,
                    help=f"BxCONTEXT[:lens], comma-separated (prefill_ragged: ROWSxKEYS) [default: {DEFAULT_BUCKETS}]")
    ap.add_argument("--next-n", default="1", help="decode draft tokens, a comma list")
    ap.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    ap.add_argument("--family", default="decode_paged", choices=["decode_paged", "prefill_ragged"])
    ap.add_argument("--fallback", action="store_true",
                    help="also time the full-width torch fallback (fp8 decode, B x context <= 64 x 8K)")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--warmup-ms", type=float, default=None,
                    help="replays before each timing [default: the tuner's, tuner.timing.DEFAULT_WARMUP_MS]; "
                         "the bench warms up 100 ms, and the power cap takes over within ~500 ms")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help=f"no GPU: H=16, D=32 under the Triton interpreter (default buckets {SMOKE_BUCKETS['decode_paged']})")
    args = ap.parse_args(argv)
    smoke = args.cpu_smoke
    if smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    if args.buckets is None:
        args.buckets = SMOKE_BUCKETS[args.family] if smoke else DEFAULT_BUCKETS

    import torch

    from indexer_logits._identity import Problem
    from tuner.bench import torch_fullwidth_fallback
    from tuner.buckets import parse_bucket_specs
    from tuner.families import run_all_gates
    from tuner.gates import GateFailure, new_output
    from tuner.inputs import make_decode_inputs, make_prefill_inputs
    from tuner.measure import time_candidate, timing_inputs
    from tuner.render import emit, load_module
    from tuner.roofline import floor_ms
    from tuner.space import InfeasibleConfig, check

    try:
        configs = sweep_configs(args.configs, args.grid)
        buckets = parse_bucket_specs(args.buckets)
        next_ns = [int(v) for v in args.next_n.split(",")]
    except ValueError as exc:
        ap.error(str(exc))
    if not smoke and not torch.cuda.is_available():
        return no_cuda("with --cpu-smoke")
    device = "cpu" if smoke else "cuda"
    if smoke:
        from dataclasses import replace

        dot = "fp16" if args.dtype == "fp8" else "fp32"  # the interpreter's bf16 tl.dot is wrong
        configs = list(dict.fromkeys(replace(c, dot_dtype=dot) for c in configs))
        copy_bw = NOMINAL_COPY_BW
        print(f"CPU smoke: H=16, D=32, nominal copy bandwidth {copy_bw / 1e12:.1f} TB/s", flush=True)
    else:
        from tuner.timing import measure_copy_bandwidth

        figures = {}
        copy_bw = measure_copy_bandwidth(report=figures)
        print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s  ({', '.join(f'{k} {v / 1e12:.3f}' for k, v in figures.items())})",
              flush=True)
    shape = dict(heads=16, head_dim=32) if smoke else {}
    gen = Path(tempfile.mkdtemp(prefix="sweep_"))
    best_lines = []
    for nn in next_ns if args.family == "decode_paged" else [1]:
        dt = dict(q_dtype=args.dtype, cache_dtype=args.dtype, scale_layout="none" if args.dtype == "bf16" else "page_blocked")
        if args.family == "prefill_ragged":
            problem = Problem(family="prefill_ragged", page_size=0, **dt, **shape)
            gate_inputs = make_prefill_inputs(problem, *((20, 200) if smoke else (300, 2000)), "random", seed=1,
                                              device=device)
            if smoke:
                matmul_rate = NOMINAL_MATMUL_RATE
            else:
                from tuner.timing import measure_matmul_rate

                matmul_rate = measure_matmul_rate(args.dtype)
            print(f"{args.dtype} matmul rate {matmul_rate / 1e12:.0f} TFLOP/s", flush=True)
        else:
            problem = Problem(next_n=nn, **dt, **shape)
            gate_inputs = make_decode_inputs(problem, *((3, 300) if smoke else (4, 4096)), "random", seed=1,
                                             device=device)
            matmul_rate = None
        prefill = problem.family != "decode_paged"
        modules = {}
        for c in configs:
            try:
                check(problem, c)
                m = load_module(emit(problem, c, gen))
                t0 = time.time()
                run_all_gates(m, problem, gate_inputs, True)
                modules[c] = m
                print(f"gated {c.slug} n{nn} in {time.time() - t0:.1f}s", flush=True)
            except (InfeasibleConfig, GateFailure) as e:
                print(f"REJECT {c.slug} n{nn}: {e}", flush=True)
        for bucket, lens in buckets:
            spec = f"{bucket.batch}x{bucket.context}:{lens}"
            # (on the CPU, a small pool: there is no L2 to defeat)
            sets = timing_inputs(problem, bucket, lens, device=device, **({"min_pool_bytes": 1 << 20} if smoke else {}))
            fl = floor_ms(sets[0], prefill, copy_bw=copy_bw, matmul_rate=matmul_rate)
            best = None
            for c, m in modules.items():
                t = time_candidate(m, sets, prefill, method="wall_clock" if smoke else "cuda_graph",
                                   replays=args.replays,
                                   **({"warmup_ms": args.warmup_ms} if args.warmup_ms is not None else {}))
                print(f"{problem.slug:22s} {spec:18s} {c.slug:24s} {t.p50_ms * 1e3:9.1f} us  {100 * fl / t.p50_ms:5.1f}% "
                      "of floor", flush=True)
                if best is None or t.p50_ms < best[1]:
                    best = (c.slug, t.p50_ms)
            if best is None:
                best_lines.append(f"BEST {problem.slug} {spec}: no config passed the gates")
                continue
            line = (f"BEST {problem.slug} {spec}: {best[0]} {best[1] * 1e3:.1f} us = {100 * fl / best[1]:.1f}% of floor "
                    f"{fl * 1e3:.1f} us")
            if args.fallback and args.dtype == "fp8" and not prefill and bucket.batch * bucket.context <= 64 * 8192:
                from tuner.timing import time_cuda_graph, time_wall_clock

                out = new_output(sets[0], 0.0)
                fns = [lambda: torch_fullwidth_fallback(sets[0], out)]
                tf = time_wall_clock(fns, reps=3) if smoke else time_cuda_graph(fns, replays=10, min_launches=2)
                line += f"; full-width torch fallback {tf.p50_ms * 1e3:.0f} us ({tf.p50_ms / best[1]:.1f}x slower)"
            print(line, flush=True)
            best_lines.append(line)
            del sets
            if not smoke:
                torch.cuda.empty_cache()
    print("\n" + "\n".join(best_lines))
    return 0 if all("no config passed" not in ln for ln in best_lines) else 1


if __name__ == "__main__":
    sys.exit(main())
