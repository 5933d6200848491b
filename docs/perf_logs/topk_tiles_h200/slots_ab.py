"""Output slots claimed per score (SCAN_SLOTS False, the built-in) against one atomic per block and
a prefix sum (True), the selection alone in CUDA graphs (bench.topk.graph_us), alternated rounds,
each answer checked: a prefill block (204 x 64K, causal windows) by rounds and tiles of 8, and the
issue's decode shapes by rounds. call 6's profile: the compaction took 61 of the block's 141 us.

    python3 docs/perf_logs/topk_tiles_h200/slots_ab.py"""

import torch

import indexer_logits as K
from bench.topk import graph_us, mismatched_rows
from indexer_logits import _topk_select as S
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem


def ab(name, logits, lo, hi, paths, k=2048, rounds=5):
    rows = logits.shape[0]
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")
    fns = {}
    for path, tile in paths:
        for scan in (False, True):
            settings = {"SCAN_SLOTS": scan, **({"TILE": tile} if path == "tiles" else {})}
            fns[(path, tile, scan)] = (lambda p=path, s=settings: S.select_rows(
                logits, k, S.WINDOW_RAGGED, idx, None, ws, lo=lo, hi=hi, path=p, settings=s))
    bad = {}
    for key, fn in fns.items():
        fn()
        bad[key] = mismatched_rows(idx, logits, lo, hi, k)
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for key, fn in fns.items():
            best[key] = min(best[key], graph_us(fn))
    for (path, tile, scan), us in best.items():
        print(f"{name:24s} {path:7s} tile {tile:2d} SCAN_SLOTS {scan!s:5s} {us:8.1f} us"
              + ("  INEXACT" if bad[(path, tile, scan)] else ""), flush=True)


def main():
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 204, 65536, device="cuda")
    logits = K.fp8_mqa_logits(*pre.args(), False)
    ab("prefill block 204x64K", logits, pre.cu_seqlen_ks, pre.cu_seqlen_ke, [("rounds", 0), ("tiles", 8)])
    del logits, pre
    for rows, width in ((64, 32768), (64, 131072), (1, 1 << 20), (128, 8192)):
        inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=3 << 30)
        logits = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None,
                                        width, False)
        hi = inp.context_lens.int()
        ab(f"decode {rows}x{width // 1024}K", logits, torch.zeros_like(hi), hi, [("rounds", 0)])
        del inp, logits
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
