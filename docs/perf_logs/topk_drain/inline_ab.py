"""The row path's write pass storing by inline PTX (_topk_row.INLINE) against tl.store, in one process: the kernel
launched directly over the decode logits (the selection alone) and fp8_paged_mqa_topk end to end (logits + top-k),
each alternated in CUDA graphs, the indices compared with torch.topk's.

    python3 docs/perf_logs/topk_drain/inline_ab.py [--cases 128x8192,64x8192] [--rounds 7] [--out FILE]
"""

import json
from pathlib import Path

import torch

from _probe import K_BEST, ab_arguments, decode_case, row_launch, same_as_torch
import indexer_logits as K
from bench.topk import best_alternated
from indexer_logits import _topk_row


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
    a = ab_arguments(__doc__)
    dev, k, rk = torch.device("cuda"), K_BEST, _topk_row
    out = {"gpu": torch.cuda.get_device_name(), "cases": {}}
    for case in a.cases.split(","):
        batch, ctx, args, logits, lens = decode_case(case, dev)
        hold = rk.holds(rk.HOLD, ctx, rk.BLOCK, rk.NUM_WARPS)
        fns, exact = {}, {}
        for on in (False, True):
            idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
            cands = torch.empty((batch, rk.CAP), dtype=torch.int64, device=dev)
            kern = row_launch(rk.topk_row_kernel, logits, lens, idx, cands, INLINE_=on)
            kern()
            torch.cuda.synchronize()
            exact[f"kernel_inline_{on}"] = same_as_torch(idx, logits, k)
            idx2 = torch.empty((batch, k), dtype=torch.int32, device=dev)
            e2e = with_inline(on, lambda idx2=idx2: K.fp8_paged_mqa_topk(*args, k, out=idx2))
            e2e()
            torch.cuda.synchronize()
            exact[f"topk_inline_{on}"] = same_as_torch(idx2, logits, k)
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
