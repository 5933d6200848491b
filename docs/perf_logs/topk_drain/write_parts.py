"""What the row path's write pass waits on (call 1 put it at 4.9 us of the 13.1-us program at 128 x 8K; call 2 found
it is not its block-wide collectives): _topk_row's kernel copied with the write pass's stores taken out, one kind at
a time, timed in CUDA graphs, alternated. The kernel is launched without INLINE_: its tl.store form, the only one
when call 3 ran (at commit 63c44fb). Diagnostic only: without its stores a variant's answer is wrong (the
candidates' sort reads what the buffer held), so only the plain kernel's indices are checked.

    python3 docs/perf_logs/topk_drain/write_parts.py [--cases 128x8192,64x8192] [--rounds 7] [--out FILE]
"""

import json
from pathlib import Path

import torch

from _probe import K_BEST, ab_arguments, decode_case, module_from_source, row_launch, row_source, same_as_torch
from bench.topk import best_alternated
from indexer_logits import _topk_row

OUT_STORE = "        tl.store(out_idx + slot_gt, t - lo, mask=gt)\n"
CAND_STORE = "        tl.store(cands + n_in + (both >> 16) - 1, packed, mask=inside)\n"
VARIANTS = {"plain": (), "no output stores": (OUT_STORE,), "no candidate stores": (CAND_STORE,),
            "no stores": (OUT_STORE, CAND_STORE)}


def variant(i: int, cut: tuple):
    src = row_source()
    for line in cut:
        if src.count(line) != 1:
            raise SystemExit(f"write_parts: expected one {line!r} in _topk_row")
        src = src.replace(line, "")
    return module_from_source(src, f"write_parts_{i}")


def main() -> int:
    a = ab_arguments(__doc__)
    dev, k, rk = torch.device("cuda"), K_BEST, _topk_row
    mods = {name: variant(i, cut) for i, (name, cut) in enumerate(VARIANTS.items())}
    out = {"gpu": torch.cuda.get_device_name(), "cases": {}}
    for case in a.cases.split(","):
        batch, ctx, _, logits, lens = decode_case(case, dev)
        hold = rk.holds(rk.HOLD, ctx, rk.BLOCK, rk.NUM_WARPS)
        idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
        cands = torch.zeros((batch, rk.CAP), dtype=torch.int64, device=dev)
        fns = {name: row_launch(mod.topk_row_kernel, logits, lens, idx, cands) for name, mod in mods.items()}
        fns["plain"]()
        torch.cuda.synchronize()
        exact = same_as_torch(idx, logits, k)
        for fn in fns.values():
            fn()
        best = best_alternated(fns, a.rounds)
        out["cases"][case] = {"hold": hold, "plain_exact": exact, "us": best}
        print(json.dumps({case: out["cases"][case]}), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    print("\ncase       " + "".join(f"{n:>22s}" for n in VARIANTS))
    for case, r in out["cases"].items():
        print(f"{case:10s} " + "".join(f"{r['us'][n]:22.2f}" for n in VARIANTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
