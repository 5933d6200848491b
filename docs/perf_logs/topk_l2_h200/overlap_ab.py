"""One-off A/B: prefill top-k with each block's selection on a side stream while the next block's
logits are scored (indexer_logits._topk.OVERLAP True: two buffers of half the scratch budget
each) against one stream (False: one buffer, the whole budget), alternated 3 rounds in one
process, eager; every setting's answer checked on sampled blocks first; peak extra memory."""
import json

import torch

import indexer_logits as K
from bench.topk import eager_us, sampled_mismatches
from indexer_logits import _topk
from tuner.inputs import make_prefill_inputs
from tuner.space import Problem

for rows, keys in ((4096, 65536), (2048, 1 << 20)):
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    args = inp.args()
    out = torch.empty(rows, 2048, dtype=torch.int32, device="cuda")
    row = {"case": f"prefill {rows}x{keys // 1024}K"}
    for flag in (True, False):
        _topk.OVERLAP = flag
        K.fp8_mqa_topk(*args, 2048, out=out)
        row[f"bad_{flag}"], row["checked"] = sampled_mismatches(inp, out.clone(), 2048)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        K.fp8_mqa_topk(*args, 2048, out=out)
        torch.cuda.synchronize()
        row[f"extra_{flag}"] = (torch.cuda.max_memory_allocated() - base) / (rows * keys * 4)
    logits_buf = torch.empty(rows, keys, device="cuda")
    row["logits_us"] = eager_us(lambda: K.fp8_mqa_logits(*args, False, out=logits_buf))
    del logits_buf
    for r in range(3):
        for flag in (True, False):
            _topk.OVERLAP = flag
            row.setdefault(f"us_{flag}", []).append(round(eager_us(lambda: K.fp8_mqa_topk(*args, 2048, out=out)), 1))
    row["overlap_over_logits"] = min(row["us_True"]) / row["logits_us"]
    row["one_stream_over_logits"] = min(row["us_False"]) / row["logits_us"]
    print(json.dumps(row), flush=True)
    del inp
    torch.cuda.empty_cache()
