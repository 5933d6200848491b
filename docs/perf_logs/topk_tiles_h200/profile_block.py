"""Where the selection's device time goes, kernel by kernel (torch.profiler), on one prefill block
(204 rows x 64K keys, causal windows: what fp8_mqa_topk selects per block at 4096 x 64K) and on the
decode logits of 64 x 128K: rounds against tiles of 8 and 16, 10 calls each.

    python3 docs/perf_logs/topk_tiles_h200/profile_block.py"""

import torch

import indexer_logits as K
from bench._topk_profile import kernel_times
from indexer_logits import _topk_select as S, _topk_tiles as TT
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem


def profile(name, logits, lo, hi, k=2048):
    rows = logits.shape[0]
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")
    for path, tile in (("rounds", 0), ("tiles", 8), ("tiles", 16)):
        TT.TILE = tile

        rows_ = kernel_times(lambda: S.select_rows(logits, k, S.WINDOW_RAGGED, idx, None, ws, lo=lo, hi=hi, path=path))
        total = sum(t for _, _, t in rows_)
        print(f"\n{name}, {path}" + (f" (tile {tile})" if tile else "") + f": {total:.1f} us a call")
        for key, count, t in sorted(rows_, key=lambda r: -r[2]):
            print(f"  {key[:40]:40s} {count:3d} a call {t:9.1f} us")
    TT.TILE = 0


def main():
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 204, 65536, device="cuda")
    logits = K.fp8_mqa_logits(*pre.args(), False)
    profile("prefill block 204x64K", logits, pre.cu_seqlen_ks, pre.cu_seqlen_ke)
    del logits, pre
    inp = make_decode_inputs(Problem(), 64, 131072, lens="full", device="cuda", max_pool_bytes=3 << 30)
    logits = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None,
                                    131072, False)
    hi = inp.context_lens.int()
    profile("decode 64x128K", logits, torch.zeros_like(hi), hi)


if __name__ == "__main__":
    main()
