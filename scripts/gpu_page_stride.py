"""Does the page stride of the timing inputs matter, and does a scalar page id per tile help?

The timing inputs put a 64-byte gap between pages (page stride 8,512 bytes for fp8, 16,448 for
bf16), so that a kernel assuming stride == page bytes fails the gates; it also starts every other
page off a 128-byte line. Engines allocate the pages back to back (fp8: 8,448 bytes = 66 lines,
bf16: 16,384), so every page starts on a line. This script times the shipped H200 kernels, on the
same buckets, with the gap (64) and without it (0), and for chunked prefill also a variant of the
shipped config whose tile loop reads one block-table entry per tile (a scalar: BLOCK_T <= page)
instead of one per token, gated against the reference first.
Measured once on the template before the scalar page id became the chunked-prefill default
(commit "timing inputs take page_gap_bytes"; log docs/perf_logs/page_stride.log); on the template
since, the shipped kernel already reads one entry per tile and only the gap comparison runs.
Usage (GPU host): python scripts/gpu_page_stride.py
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from tuner.gates import run_all_gates
from tuner.inputs import make_prefill_paged_inputs
from tuner.measure import time_candidate, timing_inputs
from tuner.problem import Bucket, Config, Problem
from tuner.render import load_module, render
from tuner.roofline import floor_ms
from tuner.timing import measure_copy_bandwidth, measure_matmul_rate, warm_up_gpu

ROOT = Path(__file__).resolve().parent.parent
GAPS = (64, 0)
# The flat (single-request) tile loop of the chunked-prefill template, per-token page ids...
PER_TOKEN = """        t_next = chunk_start + offs_t
        page_next = tl.load(bt_row + t_next // PAGE, mask=t_next < top, other=0).to(tl.int64)
        for i in range(0, n_tiles):
            page_id = page_next
            t_next = chunk_start + (i + 1) * BLOCK_T + offs_t
            page_next = tl.load(bt_row + t_next // PAGE, mask=t_next < top, other=0).to(tl.int64)
            t = chunk_start + i * BLOCK_T + offs_t
            readable = t < top
            slot = t % PAGE
            k = tl.load(kv_ptr + page_id[:, None] * page_stride + slot[:, None] * HEAD_DIM + offs_d[None, :],
                        mask=readable[:, None], other=0.0)
            k_scale = tl.load(scale_ptr + page_id * scale_page_stride + (PAGE * HEAD_DIM // 4) + slot,
                              mask=readable, other=0.0)
"""
# ... and with one (scalar) page id per tile: a tile of BLOCK_T <= PAGE tokens starting at a
# multiple of BLOCK_T lies inside one page.
SCALAR = """        p_next = tl.load(bt_row + chunk_start // PAGE, mask=chunk_start < top, other=0).to(tl.int64)
        for i in range(0, n_tiles):
            p_cur = p_next
            t0n = chunk_start + (i + 1) * BLOCK_T
            p_next = tl.load(bt_row + t0n // PAGE, mask=t0n < top, other=0).to(tl.int64)
            t = chunk_start + i * BLOCK_T + offs_t
            readable = t < top
            slot = t % PAGE
            k = tl.load(kv_ptr + p_cur * page_stride + slot[:, None] * HEAD_DIM + offs_d[None, :],
                        mask=readable[:, None], other=0.0)
            k_scale = tl.load(scale_ptr + p_cur * scale_page_stride + (PAGE * HEAD_DIM // 4) + slot,
                              mask=readable, other=0.0)
"""


def shipped(family: str, dtype: str, next_n: int | None, batch: int, context: int):
    d = json.loads((ROOT / "kernels_generated/nvidia_h200/dispatch.json").read_text())
    for e in d["entries"]:
        p, b = e["problem"], e["bucket"]
        if (p["family"], p["cache_dtype"], p.get("next_n", 1) if next_n else 1, p.get("lens_mode", "1d"),
                b["batch"], b["context"]) == (family, dtype, next_n or 1, "1d", batch, context):
            return Problem(**p), Config(**d["modules"][e["variant"]]["config"])
    raise SystemExit(f"no shipped entry for {family} {dtype} n{next_n} {batch}x{context}")


def module_from(text: str, name: str):
    # load_module caches modules by file stem: the name must be unique per rendered text (the run
    # logged in docs/perf_logs/page_stride.log predates this, see docs/PERF.md)
    name = f"{name}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"
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
    for ctx in (22528, 131072):  # chunked prefill, fp8: shipped and the scalar-page variant
        problem, config = shipped("prefill_paged", "fp8", None, 4096, ctx)
        text = render(problem, config)
        variants = {"shipped": module_from(text, "shipped")}
        if PER_TOKEN in text:  # the template before the scalar page id became its default (BLOCK_T <= PAGE)
            variants["scalar_page"] = module_from(text.replace(PER_TOKEN, SCALAR), "scalar")
            gate_in = make_prefill_paged_inputs(problem, 256, 4096, num_requests=1, seed=1, device="cuda")
            err = run_all_gates(variants["scalar_page"], problem, gate_in, True)
            print(f"scalar_page gated at {ctx}: rel err {err:.1e}", flush=True)
        for gap in GAPS:
            xs = timing_inputs(problem, Bucket(4096, ctx), "full", page_gap_bytes=gap)
            for name, m in variants.items():
                t = time_candidate(m, xs, True, replays=5)
                pct = 100 * floor_ms(xs[0], True, copy_bw, rate) / t.p50_ms
                rows.append((f"prefill_paged fp8 4096x{ctx}", config.slug, name, gap, t.p50_ms * 1e3, pct))
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
