"""Chunked prefill over the paged cache on the GPU: gate, time and measure the memory of the
prefill_paged family default and a few alternatives, fp8 and bf16, H=64, D=128, page 64.

Buckets: 4,096 query rows that are one request's chunk of the last 4,096 positions of a 22K
(22,528) and of a 128K (131,072) table (row r sees t <= context - 4096 + r), and 4,096 rows split
over 4 requests of a 22K table at random chunk starts. For each (bucket, dtype, config): the
time by CUDA-graph replay (p50), TFLOP/s over the valid (row, key) pairs, % of the dense matmul
rate measured in the same run (tuner.timing.measure_matmul_rate), and the peak device memory of
one call beyond its inputs and output (torch.cuda.max_memory_allocated around it) next to the
output's size. The default is also checked against the reference at full size (22K; the last
256 rows at 128K) and called through the public runtime function (its rung and peak memory).

Usage (GPU host, ~2 minutes):  python -m bench.chunked_prefill > $OUT/chunked_prefill.txt
CPU check of the same logic:    python -m bench.chunked_prefill --cpu-smoke
(tiny sizes under TRITON_INTERPRET=1; wall-clock times and a nominal matmul rate, no meaning).
Exits 1 if the family default fails its gates or the reference at full size.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench._common import no_cuda

# Alternatives to the family default (bt64_tp32_w4_s3_m4_kr): the runners-up of the ragged
# prefill sweep (docs/PERF.md) and the q_rows orientation.
ALTERNATIVES = [
    dict(block_t=64, tiles_per_program=32, num_warps=4, num_stages=3, block_m=2, orient="k_rows"),
    dict(block_t=128, tiles_per_program=16, num_warps=4, num_stages=3, block_m=2, orient="k_rows"),
    dict(block_t=64, tiles_per_program=32, num_warps=8, num_stages=3, block_m=4, orient="q_rows"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.chunked_prefill", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on CPU under the Triton interpreter")
    ap.add_argument("--dtypes", default="fp8,bf16")
    ap.add_argument("--replays", type=int, default=10, help="CUDA-graph replays per timing (8 launches each)")
    ap.add_argument("--no-alternatives", action="store_true", help="only the family default")
    args = ap.parse_args(argv)
    dtypes = [d for d in args.dtypes.split(",") if d]
    if not dtypes or any(d not in ("fp8", "bf16") for d in dtypes):
        ap.error(f"--dtypes: expected a comma list of fp8, bf16; got {args.dtypes!r}")
    smoke = args.cpu_smoke
    if smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported

    import torch

    import indexer_logits as K
    from tuner.families import run_all_gates
    from tuner.gates import GateFailure, compare, launch, new_output, reference
    from tuner.inputs import make_prefill_paged_inputs
    from tuner.measure import time_candidate, timing_inputs
    from indexer_logits._identity import Bucket, Config, Problem
    from tuner.render import emit, load_module
    from tuner.roofline import prefill_flops
    from tuner.space import InfeasibleConfig, check, default_config
    from tuner.timing import measure_matmul_rate, warm_up_gpu

    if not smoke and not torch.cuda.is_available():
        return no_cuda("with --cpu-smoke")
    device = "cpu" if smoke else "cuda"
    heads, head_dim, page = 64, 128, 64
    rows = 12 if smoke else 4096
    ctx_small, ctx_large = (128, 256) if smoke else (22528, 131072)
    gate_shape = (10, 192) if smoke else (256, 4096)
    buckets = [  # (label, bucket, lens)
        (f"1 req, last {rows} of {ctx_small}", Bucket(rows, ctx_small), "full"),
        (f"1 req, last {rows} of {ctx_large}", Bucket(rows, ctx_large), "full"),
        ("{n} req, " + f"{rows} rows, {ctx_small} table", Bucket(rows, ctx_small), "split"),
    ]
    sync = (lambda: None) if smoke else torch.cuda.synchronize
    t_start = time.time()
    if not smoke:
        warm_up_gpu()
        print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    gen = Path(tempfile.mkdtemp(prefix="chunked_prefill_"))
    results = []  # (ctx label, dtype, config, us, tflops, pct, extra MB, out MB, note)
    failures = []  # the default rejected by the gates or wrong at full size: exit status 1

    def peak_extra_mb(fn) -> float | None:
        """Device memory one call takes beyond what is allocated before it (inputs, output)."""
        if smoke:
            return None
        sync()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        sync()
        return (torch.cuda.max_memory_allocated() - before) / 2**20

    for dtype in dtypes:
        layout = "page_blocked" if dtype == "fp8" else "none"
        problem = Problem(family="prefill_paged", q_dtype=dtype, cache_dtype=dtype, page_size=page,
                          scale_layout=layout, heads=heads, head_dim=head_dim)
        dot = ("fp16" if dtype == "fp8" else "fp32") if smoke else "native"
        rate = 1e11 if smoke else measure_matmul_rate(dtype)
        print(f"{dtype} matmul rate {rate / 1e12:.0f} TFLOP/s{' (nominal: CPU smoke)' if smoke else ''}", flush=True)
        default = default_config(problem, dot)
        configs = [default] + ([] if args.no_alternatives else [Config(dot_dtype=dot, **a) for a in ALTERNATIVES])
        gate_in = make_prefill_paged_inputs(problem, *gate_shape, num_requests=3, seed=1, device=device)
        modules = {}
        for c in configs:
            try:
                check(problem, c)
                t0 = time.time()
                m = load_module(emit(problem, c, gen))
                err = run_all_gates(m, problem, gate_in, True)
                modules[c] = m
                print(f"gated {dtype} {c.slug}: rel err {err:.1e} ({time.time() - t0:.1f}s with compile)", flush=True)
            except (InfeasibleConfig, GateFailure) as exc:
                print(f"REJECT {dtype} {c.slug}: {exc}", flush=True)
                if c == default:
                    failures.append(f"REJECT {dtype} {c.slug}")
        for label, bucket, lens in buckets:
            x = timing_inputs(problem, bucket, lens, device=device)[0]
            label = label.format(n=x.block_table.shape[0])
            flops = prefill_flops(x)
            out_mb = x.q.shape[0] * x.max_context_len * 4 / 2**20
            for c, m in modules.items():
                note = ""
                out = new_output(x, 0.0)
                extra = peak_extra_mb(lambda: launch(m, x, out, True))
                if c == default:  # the default at full size against the reference
                    try:
                        out.fill_(float("nan"))  # every valid position must be written
                        launch(m, x, out, True)
                        sync()
                        if bucket.context <= ctx_small:
                            err = compare(out, reference(x), x.valid_mask(), True, label)
                        else:
                            k = min(256, rows // 2)  # the last rows: they see the most keys
                            tail = replace(x, q=x.q[-k:], weights=x.weights[-k:], row_request=x.row_request[-k:],
                                           row_limit=x.row_limit[-k:])
                            err = compare(out[-k:], reference(tail), tail.valid_mask(), True, label)
                        note = f"ref ok {err:.0e}"
                    except GateFailure as exc:
                        note = f"REF FAIL {exc}"[:60]
                        failures.append(f"{label} {dtype} {c.slug}: {note}")
                del out
                t = time_candidate(m, [x], True, method="wall_clock" if smoke else "cuda_graph", replays=args.replays)
                tflops = flops / (t.p50_ms * 1e-3) / 1e12
                pct = 100 * flops / (t.p50_ms * 1e-3) / rate
                results.append((label, dtype, c.slug, t.p50_ms * 1e3, tflops, pct, extra, out_mb, note))
                print(f"{label:30s} {dtype:4s} {c.slug:28s} {t.p50_ms * 1e3:10.1f} us {tflops:8.1f} TFLOP/s "
                      f"{pct:5.1f}% of matmul  extra {('-' if extra is None else f'{extra:.1f}')} MB "
                      f"(output {out_mb:.0f} MB) {note}", flush=True)
            # The public runtime function (dispatch ladder) on the same inputs.
            fn = K.fp8_paged_mqa_logits_chunked if dtype == "fp8" else K.bf16_paged_mqa_logits_chunked
            out = new_output(x, 0.0)
            extra = peak_extra_mb(lambda: fn(*x.args(), True, out=out, scale_layout=layout))
            sel = K.chunked_selection(*x.args(), scale_layout=layout)
            results.append((label, dtype, f"api: {sel.rung}", float("nan"), float("nan"), float("nan"), extra, out_mb,
                            (sel.variant or "reference").split("__")[2] if sel.variant else "reference"))
            del x, out
            if not smoke:
                torch.cuda.empty_cache()

    print(f"\nchunked prefill over the paged cache, H={heads} D={head_dim} page={page}, "
          f"{time.time() - t_start:.0f}s in all\n")
    head = ("context", "dtype", "config", "time us", "TFLOP/s", "% matmul", "extra MB", "out MB", "note")
    num = lambda v, fmt: "-" if v is None or v != v else format(v, fmt)
    body = [(a, b, c, num(d, ".1f"), num(e, ".1f"), num(f, ".1f"), num(g, ".1f"), num(h, ".0f"), i)
            for a, b, c, d, e, f, g, h, i in results]
    widths = [max(len(str(v)) for v in col) for col in zip(head, *body)]
    for line in [head, tuple("-" * w for w in widths)] + body:
        print("  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip())
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
