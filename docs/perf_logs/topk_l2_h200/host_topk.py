"""One-off: host microseconds to enqueue one eager top-k call against its logits call alone
(fp8, decode 1x4K and 64x8K, prefill 128x8K), using bench.eager's timer (batches of 200 calls,
the queue never full). Prints a JSON line per case."""
import json
import sys

import torch

import indexer_logits as il
from bench.eager import _us, decode_inputs, prefill_inputs

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
for b, ctx in ((1, 4096), (64, 8192)):
    q, kv, w, lens, bt, out = decode_inputs(b, ctx)
    idx = torch.empty(b, 2048, dtype=torch.int32, device="cuda")
    logits = lambda: il.fp8_paged_mqa_logits(q, kv, w, lens, bt, None, ctx, False, out=out)
    topk = lambda: il.fp8_paged_mqa_topk(q, kv, w, lens, bt, None, ctx, 2048, out=idx)
    row = {"case": f"decode {b}x{ctx // 1024}K"}
    for _ in range(3):
        for name, fn in (("logits", logits), ("topk", topk)):
            row.setdefault(name, []).append(round(_us(fn, calls), 1))
    print(json.dumps(row), flush=True)
q, kv, w, ks, ke, out = prefill_inputs(128, 8192)
idx = torch.empty(128, 2048, dtype=torch.int32, device="cuda")
row = {"case": "prefill 128x8K"}
for _ in range(3):
    for name, fn in (("logits", lambda: il.fp8_mqa_logits(q, kv, w, ks, ke, False, out=out)),
                     ("topk", lambda: il.fp8_mqa_topk(q, kv, w, ks, ke, 2048, out=idx))):
        row.setdefault(name, []).append(round(_us(fn, calls), 1))
print(json.dumps(row), flush=True)
if len(sys.argv) > 2 and sys.argv[2] == "--profile":  # where a decode top-k call's host time goes
    import cProfile
    import io
    import pstats
    q, kv, w, lens, bt, out = decode_inputs(64, 8192)
    idx = torch.empty(64, 2048, dtype=torch.int32, device="cuda")
    fn = lambda: il.fp8_paged_mqa_topk(q, kv, w, lens, bt, None, 8192, 2048, out=idx)
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    print(s.getvalue())
