"""The top-k's tile maxima written by the decode logits kernel's epilogue (this folder's candidate
template) against the tiles path's own first pass, on the GPU, one process, alternated:

    python3 experiments/topk_epilogue/ab.py [--rounds 5] [--batch 64] [--context 131072] [--out FILE]

The H200 table's config for the bucket, rendered from the current template (the shipped module)
and from the candidate; then, in CUDA graphs of 4 calls (bench.topk.graph_us), best of --rounds:
  logits               the shipped logits call
  logits+max           the candidate's kernel writing the tile maxima beside the logits
  topk                 fp8_paged_mqa_topk as shipped (the table's tiles settings)
  topk+epilogue        the candidate's logits + maxima, then select_rows(tile_maxima=...): no
                       maxima kernel
  topk+epilogue+range  the same with the maxima's range merged by the epilogue too: no range
                       kernel for the first selection either
  and the top-k rows again with MERGE on (the pick gathers, the last compaction remaps).
Every top-k variant is checked against a stable sort of the same logits first; the maxima and tile
counts against the path's own kernel's."""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

import indexer_logits as K
from bench._common import overlay
from bench.template_ab import shipped_config
from bench.topk import best_alternated, mismatched_rows
from indexer_logits import _topk_select as S
from tuner.inputs import make_decode_inputs
from tuner.render import load_module, render
from tuner.space import Problem

ROOT = Path(__file__).resolve().parent.parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=131072)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    B, ctx, k = a.batch, a.context, a.k
    problem = Problem()
    table = json.loads((ROOT / "indexer_logits/tables/nvidia_h200/dispatch.json").read_text())
    config = shipped_config(table, problem, B, ctx)
    path = Path(tempfile.mkdtemp()) / f"candidate__{config.slug}.py"
    path.write_text(render(problem, config, overlay(ROOT / "experiments/topk_epilogue")))
    cand = load_module(path)
    tile = S.tiles_tile(B, ctx, k, "cuda")
    entry = S._serving(B, ctx, torch.device("cuda"))
    print(f"{torch.cuda.get_device_name()}, config {config.slug}, top-k served by {entry}, tile {tile}", flush=True)
    if not tile:
        print("the tiles path does not serve this shape: nothing to compare")
        return 1
    inp = make_decode_inputs(problem, B, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table)
    lbuf = torch.empty(B, ctx, device="cuda")
    ibuf = torch.empty(B, k, dtype=torch.int32, device="cuda")
    nt = -(-ctx // tile)
    maxima = torch.empty(B, nt, device="cuda")
    ntiles = torch.empty(B, dtype=torch.int32, device="cuda")
    ws = S.workspace(B, "cuda")
    lens = inp.context_lens

    def logits():
        return K.fp8_paged_mqa_logits(*args, None, ctx, False, out=lbuf)

    settings0 = S.path_settings("tiles", entry[1])
    per_row = S.kernels().STATE + 2 * settings0["BINS"]  # the first selection's state: ws's second half
    first_state = ws.view(-1)[B * per_row:2 * B * per_row]

    def logits_max(merge_range=False):
        extra = (first_state, per_row) if merge_range else ()
        return cand.launch(*args, lbuf, ctx, False, tile_max=(maxima, ntiles, tile, *extra))

    def shipped_topk(merge):
        settings = dict(entry[1] or {}, MERGE=merge)
        return lambda: S.select_rows(logits(), k, S.WINDOW_CAUSAL, ibuf, None, ws, lens=lens, path="tiles",
                                     settings=settings)

    def epilogue_topk(merge, merge_range=False):
        settings = dict(entry[1] or {}, MERGE=merge)
        given = (maxima, ntiles, True) if merge_range else (maxima, ntiles)

        def call():
            logits_max(merge_range)
            S.select_rows(lbuf, k, S.WINDOW_CAUSAL, ibuf, None, ws, lens=lens, path="tiles", settings=settings,
                          tile_maxima=given)
        return call

    ref = logits().clone()
    logits_max()
    assert torch.equal(lbuf, ref), "the candidate's logits differ from the shipped kernel's"
    # the maxima against the path's own first pass (its kernel, run through the path's scratch)
    tk = S.tiles_kernels()
    want_max = torch.full_like(maxima, float("-inf"))
    want_nt = torch.empty_like(ntiles)
    win = S._window_args(ref, ibuf, None, None, lens, 1)
    tk.topk_tile_max_kernel[(B, 1)](*win, want_max, want_max.stride(0), want_nt, nt * tile, WINDOW=S.WINDOW_CAUSAL,
                                    TILE_=tile, STEP=max(1, 2048 // tile))
    assert torch.equal(want_nt, ntiles), "tile counts differ"
    for r in range(B):
        n = int(ntiles[r])
        assert torch.equal(want_max[r, :n], maxima[r, :n]), f"row {r}: tile maxima differ"
    fns = {"logits": logits, "logits+max": logits_max, "topk": shipped_topk(False),
           "topk+epilogue": epilogue_topk(False), "topk+epilogue+range": epilogue_topk(False, True),
           "topk merge": shipped_topk(True), "topk+epilogue merge": epilogue_topk(True),
           "topk+epilogue+range merge": epilogue_topk(True, True)}
    zeros = torch.zeros_like(lens)
    bad = {}
    for name, fn in fns.items():
        if name.startswith("topk"):
            fn()
            bad[name] = mismatched_rows(ibuf.clone(), ref, zeros, lens, k)
    best = best_alternated(fns, a.rounds)
    print(f"\n{B}x{ctx // 1024}K, k {k}, tiles of {tile}: us a call (CUDA graphs of 4 calls, best of {a.rounds} "
          f"alternated rounds)")
    for name, t in best.items():
        print(f"  {name:26s} {t:9.1f}  {t / best['logits']:.3f} of the logits"
              + (f"   mismatched rows {bad[name]}" if name in bad else ""))
    if a.out:
        json.dump({"config": config.slug, "tile": tile, "us": best, "mismatched_rows": bad}, open(a.out, "w"), indent=1)
    return 1 if any(bad.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
