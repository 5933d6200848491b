"""The bound path at several values of its module's settings (indexer_logits._topk_bound: COUNT_STEP,
the keys' count's step, 0 for the path's BLOCK; COUNT_PREFETCH, its loads a step ahead), end to end
on one GPU: one process, alternated rounds, every row of every variant checked against a stable sort
of the same logits first. Decode: CUDA graphs of 4 calls (bench.topk.best_alternated); prefill: eager
calls (fp8_mqa_topk's blocks), sampled blocks checked. Each case is served as the runtime serves it
(the GPU's table, else pick_path; the table's entries name none of these settings, so the module's
values serve); a case the bound path does not serve there is forced onto it (marked *). With
--profile, per-kernel device time at 64 x 32K per variant, PDL off (under PDL a kernel's time
includes its wait for the one before).

    python3 docs/perf_logs/topk_count_step_h100/count_ab.py [--variants COUNT_STEP=0,COUNT_STEP=1024+COUNT_PREFETCH=1]
        [--rounds 7] [--cases 64x32768,1x1048576] [--prefill 4096x65536] [--profile] [--out FILE]

(Call 2 ran this script as count_step_ab.py, its variants COUNT_STEP=0,1024,2048,4096: commit 43076f9.)
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


def parse_variant(text: str) -> dict:
    """"COUNT_STEP=1024+COUNT_PREFETCH=1" -> {"COUNT_STEP": 1024, "COUNT_PREFETCH": 1}."""
    out = {}
    for part in text.split("+"):
        name, _, value = part.partition("=")
        if not hasattr(B, name) or not value.lstrip("-").isdigit():
            raise SystemExit(f"--variants: {part!r} is not NAME=INT of a setting of indexer_logits._topk_bound")
        out[name] = int(value)
    return out


def with_settings(values: dict, fn):
    """fn with the bound module's `values` while it runs (read at each call: at capture, in a graph)."""
    def call():
        saved = {n: getattr(B, n) for n in values}
        try:
            for n, v in values.items():
                setattr(B, n, bool(v) if saved[n] is None else type(saved[n])(v))  # (None: a model's choice)
            return fn()
        finally:
            for n, v in saved.items():
                setattr(B, n, v)
    return call


def forced(rows: int, width: int, kind: str) -> tuple:
    """(the path the runtime serves, whether bound must be forced)."""
    path, _ = S._serving(rows, width, torch.device("cuda"), kind)
    return path, path != "bound"


def decode_case(batch: int, ctx: int, k: int, variants: dict, rounds: int) -> dict:
    inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    served, force = forced(batch, ctx, "decode")
    S.PATH = "bound" if force else "auto"
    lbuf = torch.empty(batch, ctx, device="cuda")
    ibuf = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    ref = K.fp8_paged_mqa_logits(*args, False).clone()
    hi = inp.context_lens.int()
    fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf)}
    for name, values in variants.items():
        fns[name] = with_settings(values, lambda: K.fp8_paged_mqa_topk(*args, k, out=ibuf))
    bad = {}
    for name in fns:
        if name != "logits":
            fns[name]()
            bad[name] = mismatched_rows(ibuf.clone(), ref, torch.zeros_like(hi), hi, k)
    best = best_alternated(fns, rounds)
    S.PATH = "auto"
    return {"case": f"decode {batch}x{ctx}", "served": served, "forced_bound": force, "us": best, "bad": bad}


def prefill_case(rows: int, keys: int, k: int, variants: dict, rounds: int) -> dict:
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    args = inp.args()
    block = K._topk.scratch_rows(rows, keys, None, k, "cuda")
    served, force = forced(block, keys, "prefill")
    S.PATH = "bound" if force else "auto"
    ibuf = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    lbuf = torch.empty(rows, keys, device="cuda")
    fns = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf)}
    for name, values in variants.items():
        fns[name] = with_settings(values, lambda: K.fp8_mqa_topk(*args, k, out=ibuf))
    bad = {name: sampled_mismatches(inp, fn().clone(), k)[0] for name, fn in fns.items() if name != "logits"}
    best = best_alternated(fns, rounds, timer=eager_us)
    S.PATH = "auto"
    return {"case": f"prefill {rows}x{keys}", "block_rows": block, "served": served, "forced_bound": force,
            "us": best, "bad": bad}


def profile(k: int, variants: dict) -> dict:
    """Per-kernel device us a call at 64 x 32K per variant, PDL off (each kernel's own time)."""
    inp = make_decode_inputs(Problem(), 64, 32768, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, 32768)
    out = torch.empty(64, k, dtype=torch.int32, device="cuda")
    saved, S.PDL = S.PDL, False
    try:
        return {name: kernel_times(with_settings(values, lambda: K.fp8_paged_mqa_topk(*args, k, out=out)))
                for name, values in variants.items()}
    finally:
        S.PDL = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="COUNT_STEP=0,COUNT_STEP=1024",
                    help="comma-separated; each NAME=INT[+NAME=INT] of indexer_logits._topk_bound")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cases", default="64x32768,64x131072,1x1048576,16x262144")
    ap.add_argument("--prefill", default="4096x65536")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    variants = {v: parse_variant(v) for v in a.variants.split(",")}
    print(torch.cuda.get_device_name(), flush=True)
    rows = []
    for spec in filter(None, a.cases.split(",")):
        rows.append(decode_case(*(int(x) for x in spec.split("x")), a.k, variants, a.rounds))
        print(json.dumps(rows[-1]), flush=True)
    for spec in filter(None, a.prefill.split(",")):
        rows.append(prefill_case(*(int(x) for x in spec.split("x")), a.k, variants, max(3, a.rounds // 2)))
        print(json.dumps(rows[-1]), flush=True)
    prof = profile(a.k, variants) if a.profile else {}
    if a.out:
        Path(a.out).write_text(json.dumps({"cases": rows, "profile_64x32K_no_pdl": prof}, indent=1))
    for name, kernels in prof.items():
        print(f"\n64x32K, PDL off, {name}: " + ", ".join(f"{n.split('(')[0][-40:]} {us:.1f}" for n, c, us in kernels))
    names = list(variants)
    print("\n" + "\n".join(f"v{i + 1}: {n}" for i, n in enumerate(names)))
    print(f"{'case':22s} {'served':7s} {'logits us':>10s} " + " ".join(f"{'v' + str(i + 1):>18s}" for i in range(len(names)))
          + "  bad rows")
    for row in rows:
        us = row["us"]
        print(f"{row['case'] + ('*' if row['forced_bound'] else ''):22s} {row['served']:7s} {us['logits']:10.1f} "
              + " ".join(f"{us[n]:10.1f} ({us[n] / us['logits']:.3f})" for n in names)
              + "  " + " / ".join(str(row["bad"][n]) for n in names))
    print("(* bound forced: the runtime serves it by the path named; COUNT_STEP 0: the path's BLOCK)")
    return 1 if any(any(r["bad"].values()) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
