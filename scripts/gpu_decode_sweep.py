"""Sweep decode configs over a few buckets on the GPU: gate, time by graph replay, % of floor.

Usage (on the GPU host): python scripts/gpu_decode_sweep.py [--quick] > $OUT/sweep.txt
A lab-notebook tool for docs/PERF.md; the product's path is `cli.py tune` / `cli.py bench`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from tuner.gates import GateFailure, run_all_gates
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.measure import time_candidate, timing_inputs
from indexer_logits._identity import Bucket, Config, Problem
from tuner.render import emit, load_module
from tuner.roofline import floor_ms
from tuner.space import InfeasibleConfig, check
from tuner.timing import measure_copy_bandwidth, measure_matmul_rate


def torch_fullwidth_fallback(x):
    """What SGLang runs without DeepGEMM: gather the whole table width, score every position."""
    q, kv, w, lens, bt, width = x.args()
    b, n, h, d = q.shape
    page = kv.shape[1]
    raw = kv.as_strided((kv.shape[0], page * (d + 4)), (kv.stride(0), 1))
    pages = raw[bt.long()]  # [B, P, page bytes]
    vals = pages[..., : page * d].reshape(b, -1, d).view(torch.float8_e4m3fn).float()
    sc = pages[..., page * d:].contiguous().view(torch.float32).reshape(b, -1)
    s = torch.einsum("bnhd,btd->bnht", q.float(), vals).relu_()
    logits = (s * w.view(b, n, h, 1)).sum(2) * sc[:, None, :]
    t = torch.arange(logits.shape[-1], device=q.device)
    lim = lens.long()[:, None] - n + 1 + torch.arange(n, device=q.device)[None, :]
    return logits.masked_fill(t[None, None, :] >= lim[:, :, None], float("-inf")).reshape(b * n, -1)[:, :width]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="", help="JSON list of config dicts; default: a built-in sweep")
    ap.add_argument("--buckets", default="64x8192:full,64x8192:quarter,64x32768:full,8x131072:full,2x1048576:full")
    ap.add_argument("--next-n", default="1")
    ap.add_argument("--dtype", default="fp8")
    ap.add_argument("--fallback", action="store_true")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--family", default="decode_paged", choices=["decode_paged", "prefill_ragged"])
    args = ap.parse_args()
    figures = {}
    copy_bw = measure_copy_bandwidth(report=figures)
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s  ({', '.join(f'{k} {v / 1e12:.3f}' for k, v in figures.items())})", flush=True)
    configs = [Config(**c) for c in json.loads(args.configs)] if args.configs else [
        Config(block_t=bt, tiles_per_program=tp, num_warps=w, num_stages=s)
        for bt in (64, 128) for tp in (4, 16) for w in (4, 8) for s in (2, 3)]
    gen = Path(tempfile.mkdtemp())
    rows = []
    for nn in [int(v) for v in args.next_n.split(",")]:
        dt = dict(q_dtype=args.dtype, cache_dtype=args.dtype, scale_layout="none" if args.dtype == "bf16" else "page_blocked")
        if args.family == "prefill_ragged":
            problem = Problem(family="prefill_ragged", page_size=0, **dt)
            gate_inputs = make_prefill_inputs(problem, 300, 2000, "random", seed=1, device="cuda")
            matmul_rate = measure_matmul_rate(args.dtype)
            print(f"{args.dtype} matmul rate {matmul_rate / 1e12:.0f} TFLOP/s", flush=True)
        else:
            problem = Problem(next_n=nn, **dt)
            gate_inputs = make_decode_inputs(problem, 4, 4096, "random", seed=1, device="cuda")
            matmul_rate = None
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
        for spec in args.buckets.split(","):
            shape, lens = spec.split(":")
            b, ctx = (int(v) for v in shape.split("x"))
            sets = timing_inputs(problem, Bucket(b, ctx), lens, device="cuda")
            fl = floor_ms(sets[0], False, copy_bw=copy_bw, matmul_rate=matmul_rate)
            best = None
            for c, m in modules.items():
                t = time_candidate(m, sets, False, replays=args.replays)
                rows.append((problem.slug, spec, c.slug, t.p50_ms, fl / t.p50_ms))
                print(f"{problem.slug:22s} {spec:18s} {c.slug:24s} {t.p50_ms * 1e3:9.1f} us  {100 * fl / t.p50_ms:5.1f}% of floor", flush=True)
                if best is None or t.p50_ms < best[1]:
                    best = (c.slug, t.p50_ms)
            line = f"BEST {problem.slug} {spec}: {best[0]} {best[1] * 1e3:.1f} us = {100 * fl / best[1]:.1f}% of floor {fl * 1e3:.1f} us"
            if args.fallback and args.dtype == "fp8" and b * ctx <= 64 * 8192:
                from tuner.timing import time_cuda_graph
                tf = time_cuda_graph([lambda: torch_fullwidth_fallback(sets[0])], replays=10, min_launches=2)
                line += f"; full-width torch fallback {tf.p50_ms * 1e3:.0f} us ({tf.p50_ms / best[1]:.1f}x slower)"
            print(line, flush=True)
            del sets
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
