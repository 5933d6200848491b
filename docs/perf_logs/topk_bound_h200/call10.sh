# Device call 10 (2026-12-05, tenth session; the H100 of call 9, warm, 80 s of device time left): the
# selection alone at 128 x 8K and 64 x 32K (call 9's tune ran out of time after 1 x 1M), the serving
# choice (the H100's committed table: row, bound) beside the resident path at 8,192 keys a step, 16 and
# 8 warps; every row checked against a stable sort. Predicted: none written (run to fill the tune's gap).
timeout 65 python3 - <<'PY' 2>&1 | tail -12
import torch
from indexer_logits import _topk_select as S
from tuner.timing import time_cuda_graph
from tuner.topk_tune import bucket_inputs, mismatched_rows
for rows, width in ((128, 8192), (64, 32768)):
    args, logits, lens = bucket_inputs(rows, width, "cuda")
    idx = torch.empty(rows, 2048, dtype=torch.int32, device="cuda"); ws = S.workspace(rows, "cuda")
    V = {"served": (None, None), "resident 8192 w16": ("resident", dict(STEP=8192, NUM_WARPS=16)),
         "resident 8192 w8": ("resident", dict(STEP=8192, NUM_WARPS=8))}
    res = {}
    for n, (p, st) in V.items():
        f = lambda p=p, st=st: S.select_rows(logits, 2048, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path=p, settings=st)
        ran = f(); bad = mismatched_rows(idx, logits, torch.zeros_like(lens), lens, 2048)
        res[n] = (ran, bad, time_cuda_graph([f]).p50_ms * 1e3)
    for n, (ran, bad, us) in res.items(): print(f"{rows}x{width} {n:<20} {ran:<9} bad {bad} {us:.1f} us (selection alone)", flush=True)
PY
