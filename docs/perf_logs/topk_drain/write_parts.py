"""What the row path's write pass waits on (call 1 put it at 4.9 us of the 13.1-us program at 128 x 8K; call 2 found
it is not its block-wide collectives): _topk_row's kernel copied with the write pass's stores taken out, one kind at
a time, timed in CUDA graphs, alternated. (Its store lines are those of _topk_row at commit 63c44fb, which call 3
ran; the stores are inline PTX since, _topk_row.INLINE.) Diagnostic only: without its stores a variant's answer is wrong (the
candidates' sort reads what the buffer held), so only the plain kernel's indices are checked.

    python3 docs/perf_logs/topk_drain/write_parts.py [--cases 128x8192,64x8192] [--rounds 7] [--out FILE]
"""

import argparse
import importlib.util
import inspect
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated  # noqa: E402
from indexer_logits import _topk_row  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

OUT_STORE = "    tl.store(out_idx + slot_gt, t - lo, mask=gt)\n"
CAND_STORE = "    tl.store(cands + n_in + (both >> 16) - 1, packed, mask=inside)\n"
VARIANTS = {"plain": (), "no output stores": (OUT_STORE,), "no candidate stores": (CAND_STORE,),
            "no stores": (OUT_STORE, CAND_STORE)}


def variant(name: str, cut: tuple, tmp: Path):
    src = Path(inspect.getsourcefile(_topk_row)).read_text()
    src = src.replace("from ._topk_kernels import", "from indexer_logits._topk_kernels import")
    for line in cut:
        if src.count(line) != 1:
            raise SystemExit(f"write_parts: expected one {line!r} in _topk_row")
        src = src.replace(line, "")
    f = tmp / f"row_{len(cut)}_{abs(hash(name))}.py"
    f.write_text(src)
    spec = importlib.util.spec_from_file_location(f"write_parts_{f.stem}", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="128x8192,64x8192")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dev, k, rk = torch.device("cuda"), 2048, _topk_row
    tmp = Path(tempfile.mkdtemp(prefix="write_parts_"))
    mods = {name: variant(name, cut, tmp) for name, cut in VARIANTS.items()}
    out = {"gpu": torch.cuda.get_device_name(), "cases": {}}
    for case in a.cases.split(","):
        batch, ctx = (int(x) for x in case.split("x"))
        inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device=dev, max_pool_bytes=3 << 30)
        logits = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx,
                                        False)
        lens = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
        hold = rk.holds(rk.HOLD, ctx, rk.BLOCK, rk.NUM_WARPS)
        idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
        cands = torch.zeros((batch, rk.CAP), dtype=torch.int64, device=dev)
        fns = {name: (lambda mod=mod: mod.topk_row_kernel[(batch,)](
            logits, logits.stride(0), lens, lens, lens, 1, ctx, k, idx, idx.stride(0), idx, idx.stride(0), cands,
            WINDOW=2, BLOCK_=rk.BLOCK, BINS_=rk.bins_for(ctx), CAP_=rk.CAP, WRITE_VALUES=False, PDL=False,
            HOLD_=hold, num_warps=rk.NUM_WARPS)) for name, mod in mods.items()}
        fns["plain"]()
        torch.cuda.synchronize()
        exact = bool(torch.equal(torch.sort(idx, dim=1).values,
                                 torch.sort(torch.topk(logits, k, dim=1).indices.int(), dim=1).values))
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
