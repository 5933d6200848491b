"""The row path's held write pass in one joined prefix sum (_topk_row at commit 7a7dd65, reverted after call 2)
against a step at a time (the module as of commit f60bb6c, its source from git), launched directly at the decode bar's row-path shapes over the
decode logits, alternated in CUDA graphs, the indices compared. (The device's copy of the tree has no git history: the old
module goes beside this script first, its relative import made absolute, as call2.sh ran it:
`git show f60bb6c:indexer_logits/_topk_row.py | sed 's/from \._topk_kernels/from indexer_logits._topk_kernels/'
> docs/perf_logs/topk_drain/row_f60bb6c.py`. To time the joined form again, check out 7a7dd65's _topk_row.py first.)

    python3 docs/perf_logs/topk_drain/held_ab.py [--cases 128x8192,64x8192] [--rounds 7] [--out FILE]
"""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated  # noqa: E402
from indexer_logits import _topk_row  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

BEFORE = "f60bb6c"


def module_at(rev: str):
    f = Path(__file__).with_name(f"row_{rev}.py")
    spec = importlib.util.spec_from_file_location("held_ab_before", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="128x8192,64x8192")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dev, k = torch.device("cuda"), 2048
    before = module_at(BEFORE)
    rk = _topk_row
    out = {"gpu": torch.cuda.get_device_name(), "before": BEFORE, "cases": {}}
    for case in a.cases.split(","):
        batch, ctx = (int(x) for x in case.split("x"))
        inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device=dev, max_pool_bytes=3 << 30)
        logits = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx,
                                        False)
        lens = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
        hold = rk.holds(rk.HOLD, ctx, rk.BLOCK, rk.NUM_WARPS)
        outs, fns = {}, {}
        for name, mod in (("step_at_a_time", before), ("joined", rk)):
            idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
            cands = torch.empty((batch, rk.CAP), dtype=torch.int64, device=dev)
            fns[name] = (lambda mod=mod, idx=idx, cands=cands: mod.topk_row_kernel[(batch,)](
                logits, logits.stride(0), lens, lens, lens, 1, ctx, k, idx, idx.stride(0), idx, idx.stride(0), cands,
                WINDOW=2, BLOCK_=rk.BLOCK, BINS_=rk.bins_for(ctx), CAP_=rk.CAP, WRITE_VALUES=False, PDL=False,
                HOLD_=hold, num_warps=rk.NUM_WARPS))
            fns[name]()
            outs[name] = idx
        torch.cuda.synchronize()
        ref = torch.sort(torch.topk(logits, k, dim=1).indices.int(), dim=1).values
        exact = {n: bool(torch.equal(torch.sort(i, dim=1).values, ref)) for n, i in outs.items()}
        best = best_alternated(fns, a.rounds)
        out["cases"][case] = {"hold": hold, "exact": exact, "us": best}
        print(json.dumps({case: out["cases"][case]}), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    print("\ncase        step at a time   joined   (us, the selection alone)")
    for case, r in out["cases"].items():
        print(f"{case:10s} {r['us']['step_at_a_time']:10.2f} {r['us']['joined']:10.2f}   exact {r['exact']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
