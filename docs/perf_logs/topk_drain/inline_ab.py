"""The row path's write pass storing by inline PTX (_topk_row.INLINE) against tl.store, in one process: the kernel
launched directly over the decode logits (the selection alone) and fp8_paged_mqa_topk end to end (logits + top-k),
each alternated in CUDA graphs, the indices compared with torch.topk's.

    python3 docs/perf_logs/topk_drain/inline_ab.py [--cases 128x8192,64x8192] [--rounds 7] [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated  # noqa: E402
from indexer_logits import _topk_row  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402


def with_inline(on: bool, fn):
    def call():
        saved = _topk_row.INLINE
        _topk_row.INLINE = on
        try:
            return fn()
        finally:
            _topk_row.INLINE = saved
    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="128x8192,64x8192")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dev, k, rk = torch.device("cuda"), 2048, _topk_row
    out = {"gpu": torch.cuda.get_device_name(), "cases": {}}
    for case in a.cases.split(","):
        batch, ctx = (int(x) for x in case.split("x"))
        inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device=dev, max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
        logits = K.fp8_paged_mqa_logits(*args, False)
        ref = torch.sort(torch.topk(logits, k, dim=1).indices.int(), dim=1).values
        lens = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
        hold = rk.holds(rk.HOLD, ctx, rk.BLOCK, rk.NUM_WARPS)
        fns, exact = {}, {}
        for on in (False, True):
            idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
            cands = torch.empty((batch, rk.CAP), dtype=torch.int64, device=dev)
            kern = (lambda idx=idx, cands=cands, on=on: rk.topk_row_kernel[(batch,)](
                logits, logits.stride(0), lens, lens, lens, 1, ctx, k, idx, idx.stride(0), idx, idx.stride(0), cands,
                WINDOW=2, BLOCK_=rk.BLOCK, BINS_=rk.bins_for(ctx), CAP_=rk.CAP, WRITE_VALUES=False, PDL=False,
                HOLD_=hold, INLINE_=on, num_warps=rk.NUM_WARPS))
            kern()
            torch.cuda.synchronize()
            exact[f"kernel_inline_{on}"] = bool(torch.equal(torch.sort(idx, dim=1).values, ref))
            idx2 = torch.empty((batch, k), dtype=torch.int32, device=dev)
            e2e = with_inline(on, lambda idx2=idx2: K.fp8_paged_mqa_topk(*args, k, out=idx2))
            e2e()
            torch.cuda.synchronize()
            exact[f"topk_inline_{on}"] = bool(torch.equal(torch.sort(idx2, dim=1).values, ref))
            fns[f"kernel_inline_{on}"], fns[f"topk_inline_{on}"] = kern, e2e
        fns["logits"] = lambda: K.fp8_paged_mqa_logits(*args, False)
        best = best_alternated(fns, a.rounds)
        out["cases"][case] = {"hold": hold, "exact": exact, "us": best}
        print(json.dumps({case: out["cases"][case]}), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    print("\ncase        kernel: tl.store  inline   logits + top-k: tl.store  inline   (/ logits)")
    for case, r in out["cases"].items():
        u = r["us"]
        print(f"{case:10s} {u['kernel_inline_False']:14.2f} {u['kernel_inline_True']:8.2f} {u['topk_inline_False']:18.2f} "
              f"({u['topk_inline_False'] / u['logits']:.3f}) {u['topk_inline_True']:8.2f} ({u['topk_inline_True'] / u['logits']:.3f})"
              f"   exact {all(r['exact'].values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
