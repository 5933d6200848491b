"""Does the page stride of the timing inputs matter?

The timing inputs put a 64-byte gap between pages (page stride 8,512 bytes for fp8, 16,448 for
bf16), so that a kernel assuming stride == page bytes fails the gates; it also starts every other
page off a 128-byte line. Engines allocate the pages back to back (fp8: 8,448 bytes = 66 lines,
bf16: 16,384), so every page starts on a line. This script times the shipped H200 kernels, on the
same buckets, with the gap (64) and without it (0).

The run logged in docs/perf_logs/page_stride.log used the first version of this script (commit
5e04350), which also timed a scalar-page-id variant of chunked prefill (since made the template's
default; candidate template changes are now timed by scripts/gpu_template_ab.py) and, through a
module-cache slip since fixed in tuner.render.load_module, the 64x8K decode config in every decode
bucket (see docs/PERF.md).
Usage (GPU host): python scripts/gpu_page_stride.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from tuner.measure import time_candidate, timing_inputs
from indexer_logits._identity import Bucket, Config, Problem
from tuner.render import load_module, render
from tuner.roofline import floor_ms
from tuner.timing import measure_copy_bandwidth, measure_matmul_rate, warm_up_gpu

ROOT = Path(__file__).resolve().parent.parent
GAPS = (64, 0)


def shipped(family: str, dtype: str, next_n: int | None, batch: int, context: int):
    d = json.loads((ROOT / "indexer_logits/tables/nvidia_h200/dispatch.json").read_text())
    for e in d["entries"]:
        p, b = e["problem"], e["bucket"]
        if (p["family"], p["cache_dtype"], p.get("next_n", 1) if next_n else 1, p.get("lens_mode", "1d"),
                b["batch"], b["context"]) == (family, dtype, next_n or 1, "1d", batch, context):
            return Problem(**p), Config(**d["modules"][e["variant"]]["config"])
    raise SystemExit(f"no shipped entry for {family} {dtype} n{next_n} {batch}x{context}")


def module_from(text: str, name: str):
    path = Path(tempfile.mkdtemp(prefix="page_stride_")) / f"{name}.py"
    path.write_text(text)
    return load_module(path)


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: run on the GPU host", file=sys.stderr)
        return 2
    warm_up_gpu()
    copy_bw = measure_copy_bandwidth()
    rate = measure_matmul_rate("fp8")
    print(f"{torch.cuda.get_device_name()}: copy {copy_bw / 1e12:.2f} TB/s, fp8 matmul {rate / 1e12:.0f} TFLOP/s",
          flush=True)
    rows = []
    for ctx in (22528, 131072):  # chunked prefill, fp8
        problem, config = shipped("prefill_paged", "fp8", None, 4096, ctx)
        m = module_from(render(problem, config), "prefill")
        for gap in GAPS:
            xs = timing_inputs(problem, Bucket(4096, ctx), "full", page_gap_bytes=gap)
            t = time_candidate(m, xs, True, replays=5)
            pct = 100 * floor_ms(xs[0], True, copy_bw, rate) / t.p50_ms
            rows.append((f"prefill_paged fp8 4096x{ctx}", config.slug, "shipped", gap, t.p50_ms * 1e3, pct))
            print(*rows[-1], flush=True)
    for batch, ctx, lens in ((64, 8192, "full"), (64, 8192, "quarter"), (64, 131072, "full"), (64, 1048576, "full")):
        problem, config = shipped("decode_paged", "fp8", 1, batch, ctx)
        m = module_from(render(problem, config), "decode")
        for gap in GAPS:
            xs = timing_inputs(problem, Bucket(batch, ctx), lens, page_gap_bytes=gap)
            t = time_candidate(m, xs, False, replays=20)
            pct = 100 * floor_ms(xs[0], False, copy_bw, rate) / t.p50_ms
            rows.append((f"decode fp8 {batch}x{ctx} {lens}", config.slug, "shipped", gap, t.p50_ms * 1e3, pct))
            print(*rows[-1], flush=True)
            del xs
            torch.cuda.empty_cache()
    print(f"\n{'bucket':34s} {'config':24s} {'variant':12s} {'gap':>4s} {'p50 us':>10s} {'% floor':>8s}")
    for r in rows:
        print(f"{r[0]:34s} {r[1]:24s} {r[2]:12s} {r[3]:4d} {r[4]:10.1f} {r[5]:7.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
