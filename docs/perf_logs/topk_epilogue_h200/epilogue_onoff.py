"""The decode top-k with its first pass from the logits kernel's epilogue (indexer_logits._topk.EPILOGUE,
as shipped) against the tiles path's own first pass, end to end, on one GPU: one process, alternated
rounds (bench.topk.best_alternated: CUDA graphs of 4 calls), every row of both checked against a
stable sort of the same logits first.

    python3 docs/perf_logs/topk_epilogue_h200/epilogue_onoff.py [--rounds 5] [--cases 64x131072,32x131072n2] [--out FILE]

A case is BATCHxCONTEXT, with nN for next_n N (1-D lengths, every request full). The H200's top-k
table serves 64 x 128K rows by the tiles path; a case it serves otherwise is forced onto tiles (or
--force bound).
--any-store: ask the epilogue of every split-grid logits module, also those that store per tile
(call 1 ran before the runtime asked run-store modules only, so in this form)."""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated, mismatched_rows  # noqa: E402
import dataclasses  # noqa: E402

from indexer_logits import _decode, _topk, _topk_select as S  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402


def _any_store(sel):
    """The selection with the epilogue asked of its module wherever it can write it (a split grid)."""
    g = sel.launch.__globals__
    return dataclasses.replace(sel, tile_max_block=int(g["BLOCK_T"].value) if g.get("SUPPORTS_TILE_MAX") is True else 0)


def case(spec: str, rounds: int, k: int, any_store: bool, force: str = "tiles") -> dict:
    shape, _, n = spec.partition("n")
    batch, ctx = (int(x) for x in shape.split("x"))
    next_n = int(n or 1)
    inp = make_decode_inputs(Problem(next_n=next_n), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    rows = batch * next_n
    forced = not S.tiles_first_pass(rows, ctx, k, "cuda")[0]
    S.PATH = force if forced else "auto"
    lbuf = torch.empty(rows, ctx, device="cuda")
    ibuf = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    written = []
    real = _decode._paged_logits

    def watched(*a):
        r = real(*a)
        written.append(r[1])
        return r
    _decode._paged_logits = watched
    real_selection = _decode._decode_selection
    if any_store:
        _decode._decode_selection = lambda *a: _any_store(real_selection(*a))

    def topk(on):
        def call():
            _topk.EPILOGUE = on
            K.fp8_paged_mqa_topk(*args, k, out=ibuf)
        return call
    fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf), "epilogue": topk(True),
           "own pass": topk(False)}
    ref = K.fp8_paged_mqa_logits(*args, False).clone()
    r = torch.arange(rows, device="cuda")
    hi = (inp.context_lens.long()[r // next_n] - next_n + r % next_n + 1).clamp(0, ctx)
    bad = {}
    for name in ("epilogue", "own pass"):
        written.clear()
        fns[name]()
        bad[name] = mismatched_rows(ibuf.clone(), ref, torch.zeros_like(hi), hi, k)
        bad[name + " wrote maxima"] = written[-1]
    assert not bad["own pass wrote maxima"], bad
    best = best_alternated(fns, rounds)
    _decode._paged_logits, _decode._decode_selection, _topk.EPILOGUE, S.PATH = real, real_selection, True, "auto"
    return {"case": spec, "forced_tiles": forced, "us": best, "checks": bad}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="64x131072,32x131072n2,128x131072")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    ap.add_argument("--any-store", action="store_true")
    ap.add_argument("--force", default="tiles", choices=("tiles", "bound"),
                    help="the path a case is forced onto where the table serves it by neither")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    rows = [case(c, a.rounds, a.k, a.any_store, a.force) for c in a.cases.split(",")]
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    print(f"\n{'case':16s} {'logits us':>10s} {'+ top-k, epilogue':>18s} {'+ top-k, own pass':>18s} {'saved':>7s}  bad rows")
    for row in rows:
        us = row["us"]
        print(f"{row['case'] + ('*' if row['forced_tiles'] else ''):16s} {us['logits']:10.1f} "
              f"{us['epilogue']:10.1f} ({us['epilogue'] / us['logits']:.3f}) {us['own pass']:10.1f} "
              f"({us['own pass'] / us['logits']:.3f}) {us['own pass'] - us['epilogue']:7.1f}  "
              f"{row['checks']['epilogue']} / {row['checks']['own pass']}"
              + ("" if row["checks"]["epilogue wrote maxima"] else "  (the module does not write them)"))
    print(f"(* the table serves it otherwise: {a.force} forced)")
    return 1 if any(r["checks"]["epilogue"] or r["checks"]["own pass"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
