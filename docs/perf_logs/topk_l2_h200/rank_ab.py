"""One-off A/B: the four-kernel path's last step ranking the final bin's candidates T against T
a step (_topk_kernels.RANK_TILE T; the tiles are argv[1], default 64,0) or one at a time (0: an
L2 round trip per candidate on the row's last program), alternated 5 rounds in one process; decode in CUDA graphs of 4 calls
(bench.topk's graph_us), prefill 4096x64K eager; every setting's answer checked first."""
import json
import sys

import torch

import indexer_logits as K
from bench.topk import eager_us, graph_us, mismatched_rows, sampled_mismatches
from indexer_logits import _topk_kernels as KN
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem

TILES = tuple(int(t) for t in sys.argv[1].split(",")) if len(sys.argv) > 1 else (64, 0)
for batch, ctx in ((64, 32768), (64, 131072), (1, 1 << 20), (32, 16384)):
    inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    out = torch.empty(batch, 2048, dtype=torch.int32, device="cuda")
    logits_buf = torch.empty(batch, ctx, device="cuda")
    logits = K.fp8_paged_mqa_logits(*args, False, out=logits_buf)
    hi = inp.context_lens.int()
    row = {"case": f"decode {batch}x{ctx // 1024}K"}
    for t in TILES:
        KN.RANK_TILE = t
        row[f"bad_{t}"] = mismatched_rows(K.fp8_paged_mqa_topk(*args, 2048), logits, torch.zeros_like(hi), hi, 2048)
    row["logits_us"] = min(graph_us(lambda: K.fp8_paged_mqa_logits(*args, False, out=logits_buf)) for _ in range(3))
    for _ in range(5):
        for t in TILES:
            KN.RANK_TILE = t
            row.setdefault(f"us_{t}", []).append(round(graph_us(lambda: K.fp8_paged_mqa_topk(*args, 2048, out=out)), 1))
    for t in TILES:
        row[f"ratio_{t}"] = round(min(row[f"us_{t}"]) / row["logits_us"], 3)
    print(json.dumps(row), flush=True)
    del inp, logits_buf, logits
    torch.cuda.empty_cache()
pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 4096, 65536, device="cuda")
out = torch.empty(4096, 2048, dtype=torch.int32, device="cuda")
row = {"case": "prefill 4096x64K"}
for t in TILES:
    KN.RANK_TILE = t
    K.fp8_mqa_topk(*pre.args(), 2048, out=out)
    row[f"bad_{t}"], row["checked"] = sampled_mismatches(pre, out.clone(), 2048)
for _ in range(3):
    for t in TILES:
        KN.RANK_TILE = t
        row.setdefault(f"us_{t}", []).append(round(eager_us(lambda: K.fp8_mqa_topk(*pre.args(), 2048, out=out)), 1))
print(json.dumps(row), flush=True)
