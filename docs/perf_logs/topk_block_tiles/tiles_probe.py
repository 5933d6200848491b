"""The ragged prefill top-k's blocks scored by logits modules of fewer tiles a program than the serving one: the
serving module's config re-rendered (tuner.render) with tiles_per_program 32 (as served), 16 and 8, each in a replica
of the call (indexer_logits._topk._ragged_topk's blocks, as topk_gaps/pdl_probe.py replicates it), and each module's
logits alone over all rows. Why: the blocks' logits cost ~380-480 us more than one launch at 4096 x 64K on an H100
(topk_gaps call 1, topk_vote call 3), and a block's tail (its SMs idle while its last programs finish) scales with a
program's length. Every variant's indices are checked against the served call's (each row's set). Eager calls,
alternated.

    python3 docs/perf_logs/topk_block_tiles/tiles_probe.py [--shape 4096x65536] [--rounds 4] [--out FILE]
"""

import dataclasses
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_drain"))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from _probe import module_from_source, prefill_case  # noqa: E402
import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated, eager_us  # noqa: E402
from indexer_logits import _prefill, _topk as T  # noqa: E402
from tuner.render import render  # noqa: E402
from tuner.space import Config, Problem  # noqa: E402

TILES = (32, 16, 8)


def main() -> int:
    a, rows, keys, dev, (q, kv, w, ks, ke), (kk, ksc) = prefill_case(__doc__)
    k = 2048
    step, blocks = T._blocks(rows, keys, None, k, dev)
    sel = _prefill.ragged_selection(q[:step], kv, w[:step], ks[:step], ke[:step])
    served = sys.modules[sel.launch.__module__]
    problem, config = Problem(**served.PROBLEM), Config(**served.CONFIG)
    info = {"gpu": torch.cuda.get_device_name(), "shape": a.shape, "block_rows": step, "blocks": len(blocks),
            "module": sel.variant, "tile_max_block": sel.tile_max_block}
    print(json.dumps(info), flush=True)
    mods = {tp: module_from_source(render(problem, dataclasses.replace(config, tiles_per_program=tp)), f"tiles_{tp}")
            for tp in TILES}
    scratch = torch.empty((step, keys), dtype=torch.float32, device=dev)

    def replica(mod, idx):
        def run():
            ws, kept = T.call_workspace([i1 - i0 for i0, i1 in blocks], keys, dev, "prefill")
            maxima, tile, words = T._ragged_epilogue(q, step, keys, k, ws)
            if not maxima:
                raise SystemExit("tiles_probe: the block's selection takes no tile maxima from the logits kernel")
            plans = {} if T.SHARE_PLANS else None
            for i0, i1 in blocks:
                n = i1 - i0
                tm = (maxima[0][:n], maxima[1][:n], tile, ws, n * words, words)
                mod.launch(q[i0:i1], kk, ksc, w[i0:i1], ks[i0:i1], ke[i0:i1], scratch[:n], False, tile_max=tm)
                T._select(scratch[:n], k, T.WINDOW_RAGGED, idx[i0:i1], None, ws, lo=ks[i0:i1], hi=ke[i0:i1],
                          tile_maxima=(tm[0], tm[1], True), plans=plans)
            T.give_back(kept, ws)
        return run

    outs = {"served": torch.empty(rows, k, dtype=torch.int32, device=dev)}
    outs.update({f"topk tp{tp}": torch.empty(rows, k, dtype=torch.int32, device=dev) for tp in TILES})
    fns = {"served": lambda: K.fp8_mqa_topk(q, kv, w, ks, ke, k, out=outs["served"])}
    fns.update({f"topk tp{tp}": replica(mods[tp], outs[f"topk tp{tp}"]) for tp in TILES})
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    ref = outs["served"].sort(1).values
    bad = {name: int((o.sort(1).values != ref).any(1).sum()) for name, o in outs.items()}
    print(json.dumps({"rows_unlike_served": bad}), flush=True)
    logits_buf = torch.empty(rows, keys, dtype=torch.float32, device=dev)
    fns["logits"] = lambda: K.fp8_mqa_logits(q, kv, w, ks, ke, False, out=logits_buf)  # (bench.topk's baseline)
    for tp in TILES:
        fns[f"logits tp{tp}"] = (lambda m: lambda: m.launch(q, kk, ksc, w, ks, ke, logits_buf, False))(mods[tp])
    best = best_alternated(fns, a.rounds, timer=eager_us)
    res = {**info, "rows_unlike_served": bad, "us": best,
           "over_logits": {n: v / best["logits"] for n, v in best.items()}}
    for n, v in best.items():
        print(f"{n:14s} {v:9.1f} us  {v / best['logits']:.3f} of the logits", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    return 0 if not any(bad.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
