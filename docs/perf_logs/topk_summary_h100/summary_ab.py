"""The bound path's maxima summarized by one program a row (indexer_logits._topk_bound.SUMMARY, one
launch) against the range and histogram kernels' chunks (two launches, the count's programs each
finding the mapping), end to end on one GPU: one process, alternated rounds, every row of both
checked against a stable sort of the same logits first. Decode: CUDA graphs of 4 calls
(bench.topk.best_alternated); prefill: eager calls (fp8_mqa_topk's blocks), sampled blocks checked.
Each case is served as the runtime serves it (the GPU's table, else pick_path); a case the bound
path does not serve there is forced onto it (marked *). Then, with --profile, per-kernel device time
at 64 x 32K with PDL off (under PDL a kernel's time includes its wait for the one before).

    python3 docs/perf_logs/topk_summary_h100/summary_ab.py [--rounds 7] [--cases 64x32768,1x1048576]
        [--prefill 4096x65536] [--profile] [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated, eager_us, mismatched_rows, sampled_mismatches  # noqa: E402
from bench._topk_profile import kernel_times  # noqa: E402
from indexer_logits import _topk_bound as B, _topk_select as S  # noqa: E402
from tuner.inputs import make_decode_inputs, make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402


def with_summary(on: bool, fn):
    """fn with SUMMARY `on` while it runs (read at each call: at capture, in a graph)."""
    def call():
        saved, B.SUMMARY = B.SUMMARY, on
        try:
            return fn()
        finally:
            B.SUMMARY = saved
    return call


def serving(rows: int, width: int, kind: str) -> tuple:
    """(path served, whether bound was forced, the path the runtime would take)."""
    path, settings = S._serving(rows, width, torch.device("cuda"), kind)
    path = S.pick_path(rows, width, torch.device("cuda"), kind) if path in (None, "auto") else path
    return path, path != "bound"


def decode_case(batch: int, ctx: int, k: int, rounds: int) -> dict:
    inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    served, forced = serving(batch, ctx, "decode")
    S.PATH = "bound" if forced else "auto"
    lbuf = torch.empty(batch, ctx, device="cuda")
    ibuf = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    ref = K.fp8_paged_mqa_logits(*args, False).clone()
    hi = inp.context_lens.int()
    fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf),
           "summary": with_summary(True, lambda: K.fp8_paged_mqa_topk(*args, k, out=ibuf)),
           "kernels": with_summary(False, lambda: K.fp8_paged_mqa_topk(*args, k, out=ibuf))}
    bad = {}
    for name in ("summary", "kernels"):
        fns[name]()
        bad[name] = mismatched_rows(ibuf.clone(), ref, torch.zeros_like(hi), hi, k)
    best = best_alternated(fns, rounds)
    S.PATH = "auto"
    return {"case": f"decode {batch}x{ctx}", "served": served, "forced_bound": forced, "us": best, "bad": bad}


def prefill_case(rows: int, keys: int, k: int, rounds: int) -> dict:
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    args = inp.args()
    block = K._topk.scratch_rows(rows, keys, None, k, "cuda")
    served, forced = serving(block, keys, "prefill")
    S.PATH = "bound" if forced else "auto"
    ibuf = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    lbuf = torch.empty(rows, keys, device="cuda")
    fns = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf),
           "summary": with_summary(True, lambda: K.fp8_mqa_topk(*args, k, out=ibuf)),
           "kernels": with_summary(False, lambda: K.fp8_mqa_topk(*args, k, out=ibuf))}
    bad = {name: sampled_mismatches(inp, fns[name]().clone(), k)[0] for name in ("summary", "kernels")}
    best = best_alternated(fns, rounds, timer=eager_us)
    S.PATH = "auto"
    return {"case": f"prefill {rows}x{keys}", "block_rows": block, "served": served, "forced_bound": forced,
            "us": best, "bad": bad}


def profile(k: int) -> dict:
    """Per-kernel device us a call at 64 x 32K, both ways, PDL off (each kernel's own time)."""
    inp = make_decode_inputs(Problem(), 64, 32768, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, 32768)
    out = torch.empty(64, k, dtype=torch.int32, device="cuda")
    saved, S.PDL = S.PDL, False
    try:
        return {name: kernel_times(with_summary(on, lambda: K.fp8_paged_mqa_topk(*args, k, out=out)))
                for name, on in (("summary", True), ("kernels", False))}
    finally:
        S.PDL = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cases", default="64x32768,64x131072,1x1048576,16x262144")
    ap.add_argument("--prefill", default="4096x65536")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    rows = []
    for spec in filter(None, a.cases.split(",")):
        rows.append(decode_case(*(int(x) for x in spec.split("x")), a.k, a.rounds))
        print(json.dumps(rows[-1]), flush=True)
    for spec in filter(None, a.prefill.split(",")):
        rows.append(prefill_case(*(int(x) for x in spec.split("x")), a.k, max(3, a.rounds // 2)))
        print(json.dumps(rows[-1]), flush=True)
    prof = profile(a.k) if a.profile else {}
    if a.out:
        Path(a.out).write_text(json.dumps({"cases": rows, "profile_64x32K_no_pdl": prof}, indent=1))
    for name, kernels in prof.items():
        print(f"\n64x32K, PDL off, {name}: " + ", ".join(f"{n} {us:.1f}" for n, c, us in kernels))
    print(f"\n{'case':22s} {'served':7s} {'logits us':>10s} {'+ top-k, summary':>18s} {'+ top-k, kernels':>18s}"
          f" {'saved':>7s}  bad rows")
    for row in rows:
        us = row["us"]
        print(f"{row['case'] + ('*' if row['forced_bound'] else ''):22s} {row['served']:7s} {us['logits']:10.1f} "
              f"{us['summary']:10.1f} ({us['summary'] / us['logits']:.3f}) {us['kernels']:10.1f} "
              f"({us['kernels'] / us['logits']:.3f}) {us['kernels'] - us['summary']:7.1f}  "
              f"{row['bad']['summary']} / {row['bad']['kernels']}")
    print("(* bound forced: the runtime serves it by the path named)")
    return 1 if any(r["bad"]["summary"] or r["bad"]["kernels"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
