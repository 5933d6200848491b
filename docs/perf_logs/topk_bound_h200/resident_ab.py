"""The resident path's settings against the serving choice, one process, alternated: per decode shape,
the selection alone over the bucket's logits (select_rows, CUDA graphs of 8 calls) and the decode
top-k end to end (logits + selection), less the logits alone; each row checked against a stable sort.
Run on the GPU host: python3 docs/perf_logs/topk_bound_h200/resident_ab.py"""

import json
import sys

import torch

import indexer_logits as K
from indexer_logits import _topk_select as S
from tuner.timing import time_cuda_graph
from tuner.topk_tune import as_served, bucket_inputs, mismatched_rows

K_ = 2048
SHAPES = [(1, 1 << 20), (128, 8192), (64, 32768), (64, 131072)]
VARIANTS = {
    "served": (None, None),
    "res step 2048 w8": ("resident", dict(STEP=2048, NUM_WARPS=8)),
    "res step 4096 w16": ("resident", dict(STEP=4096, NUM_WARPS=16)),
    "res step 8192 w16": ("resident", dict(STEP=8192, NUM_WARPS=16)),
    "res step 8192 w16 no PDL": ("resident", dict(STEP=8192, NUM_WARPS=16, PDL=False)),
    "res step 8192 w16 scan": ("resident", dict(STEP=8192, NUM_WARPS=16, SCAN_SLOTS=True)),
    "res step 4096 w16 no PDL": ("resident", dict(STEP=4096, NUM_WARPS=16, PDL=False)),
}


def us(fn) -> float:
    return time_cuda_graph([fn]).p50_ms * 1e3


def main() -> int:
    out = []
    for rows, width in SHAPES:
        args, logits, lens = bucket_inputs(rows, width, "cuda")
        zeros = torch.zeros_like(lens)
        idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
        dec = torch.empty_like(idx)
        ws = S.workspace(rows, "cuda")
        logits_out = torch.empty_like(logits)
        sel, e2e, bad, ran = {}, {}, {}, {}
        for name, (path, settings) in VARIANTS.items():
            ran[name] = S.select_rows(logits, K_, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path=path,
                                      settings=settings)
            bad[name] = mismatched_rows(idx, logits, zeros, lens, K_)
            as_served(path, settings, lambda: K.fp8_paged_mqa_topk(*args, K_, out=dec))() if path else \
                K.fp8_paged_mqa_topk(*args, K_, out=dec)
            bad[name] += mismatched_rows(dec, logits, zeros, lens, K_)
        for _ in range(3):  # alternated: the GPU's clock drifts between timings of one setting
            base = us(lambda: K.fp8_paged_mqa_logits(*args, False, out=logits_out))
            for name, (path, settings) in VARIANTS.items():
                f = (lambda p=path, st=settings: S.select_rows(logits, K_, S.WINDOW_LIMIT, idx, None, ws, lens=lens,
                                                              path=p, settings=st))
                sel[name] = min(sel.get(name, 1e9), us(f))
                call = (lambda: K.fp8_paged_mqa_topk(*args, K_, out=dec))
                e = us(as_served(path, settings, call) if path else call)
                e2e[name] = min(e2e.get(name, 1e9), e - base)
        row = {"shape": f"{rows}x{width}", "logits_us": base, "selection_us": sel, "e2e_extra_us": e2e,
               "path_ran": ran, "mismatched_rows": bad}
        out.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'shape':<12}{'variant':<28}{'ran':<10}{'sel us':>8}{'e2e+ us':>9}{'ratio':>7}{'bad':>5}")
    for r in out:
        for name in VARIANTS:
            print(f"{r['shape']:<12}{name:<28}{r['path_ran'][name]:<10}{r['selection_us'][name]:>8.1f}"
                  f"{r['e2e_extra_us'][name]:>9.1f}{1 + r['e2e_extra_us'][name] / r['logits_us']:>7.3f}"
                  f"{r['mismatched_rows'][name]:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
