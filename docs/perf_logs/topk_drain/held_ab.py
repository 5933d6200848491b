"""The row path's held write pass in one joined prefix sum (_topk_row at commit 7a7dd65, reverted after call 2)
against a step at a time (the module as of commit f60bb6c, its source from git), launched directly at the decode bar's row-path shapes over the
decode logits, alternated in CUDA graphs, the indices compared. (The device's copy of the tree has no git history: the old
module goes beside this script first, its relative import made absolute, as call2.sh ran it:
`git show f60bb6c:indexer_logits/_topk_row.py | sed 's/from \._topk_kernels/from indexer_logits._topk_kernels/'
> docs/perf_logs/topk_drain/row_f60bb6c.py`. To time the joined form again, check out 7a7dd65's _topk_row.py first.)

    python3 docs/perf_logs/topk_drain/held_ab.py [--cases 128x8192,64x8192] [--rounds 7] [--out FILE]
"""

import json
from pathlib import Path

import torch

from _probe import K_BEST, ab_arguments, decode_case, module_from_source, row_launch, row_source
from bench.topk import best_alternated
from indexer_logits import _topk_row

BEFORE = "f60bb6c"


def main() -> int:
    a = ab_arguments(__doc__)
    dev, k, rk = torch.device("cuda"), K_BEST, _topk_row
    before = module_from_source(row_source(Path(__file__).with_name(f"row_{BEFORE}.py")), "held_ab_before")
    out = {"gpu": torch.cuda.get_device_name(), "before": BEFORE, "cases": {}}
    for case in a.cases.split(","):
        batch, ctx, _, logits, lens = decode_case(case, dev)
        hold = rk.holds(rk.HOLD, ctx, rk.BLOCK, rk.NUM_WARPS)
        outs, fns = {}, {}
        for name, mod in (("step_at_a_time", before), ("joined", rk)):
            idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
            cands = torch.empty((batch, rk.CAP), dtype=torch.int64, device=dev)
            fns[name] = row_launch(mod.topk_row_kernel, logits, lens, idx, cands)
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
