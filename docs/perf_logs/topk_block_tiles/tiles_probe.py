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

from _probe import checked_and_timed, module_from_source, prefill_case, ragged_replica  # noqa: E402
import indexer_logits as K  # noqa: E402
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

    outs = {"served": torch.empty(rows, k, dtype=torch.int32, device=dev)}
    outs.update({f"topk tp{tp}": torch.empty(rows, k, dtype=torch.int32, device=dev) for tp in TILES})
    fns = {"served": lambda: K.fp8_mqa_topk(q, kv, w, ks, ke, k, out=outs["served"])}
    logits_buf = torch.empty(rows, keys, dtype=torch.float32, device=dev)
    more = {"logits": lambda: K.fp8_mqa_logits(q, kv, w, ks, ke, False, out=logits_buf)}  # (bench.topk's baseline)
    for tp in TILES:
        fns[f"topk tp{tp}"] = ragged_replica((q, kv, w, ks, ke), (kk, ksc), keys, k, blocks, scratch,
                                             mods[tp], "tiles_probe")(outs[f"topk tp{tp}"])
        more[f"logits tp{tp}"] = (lambda m: lambda: m.launch(q, kk, ksc, w, ks, ke, logits_buf, False))(mods[tp])
    return checked_and_timed(fns, outs, info, a.rounds, a.out, more)


if __name__ == "__main__":
    raise SystemExit(main())
