"""The one-program-a-row path's step (`_topk_row.BLOCK`), 4,096 keys (now) against 8,192 (before),
under whichever Triton the interpreter imports, one process, alternated.

Cross-compiled, a step of 8,192 keys at 16 warps spills 36-76 bytes a thread under Triton 3.8 and 3.9
(sm_90 and sm_120) and none under 3.6; 4,096 spills under none. This times both where the row path
serves (one wave of programs: 128 rows) at the widths it serves (4K-32K keys):

    python3 docs/perf_logs/topk_row_block_h200/row_block_ab.py [--rounds 5] [--out FILE]

1. the selection alone on fp8 decode logits (bench.topk.graph_us: CUDA graphs of 4 calls), the
   built-in settings but the step, every variant checked against a stable sort first;
2. at 128 x 8K (the issue's shape) logits + top-k end to end, the same two steps."""

import argparse
import json
import sys

import torch
import triton

import indexer_logits as K
from bench.topk import best_alternated, mismatched_rows
from indexer_logits import _topk_select as S
from tuner.inputs import make_decode_inputs
from tuner.space import Problem

STEPS = (4096, 8192)
WIDTHS = (4096, 8192, 16384, 32768)
ROWS = 128


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    k = a.k
    print(f"triton {triton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    out = []
    for width in WIDTHS:
        inp = make_decode_inputs(Problem(), ROWS, width, lens="full", device="cuda", max_pool_bytes=2 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
        logits = K.fp8_paged_mqa_logits(*args, False)
        hi = inp.context_lens.int()
        idx = torch.empty(ROWS, k, dtype=torch.int32, device="cuda")
        ws = S.workspace(ROWS, "cuda")
        fns, bad = {}, {}
        for step in STEPS:
            settings = {"BLOCK": step}
            fns[step] = (lambda st: lambda: S.select_rows(logits, k, S.WINDOW_CAUSAL, idx, None, ws, lens=hi,
                                                           path="row", settings=st))(settings)
            fns[step]()
            bad[step] = mismatched_rows(idx.clone(), logits, torch.zeros_like(hi), hi, k)
        best = best_alternated(fns, a.rounds)
        row = {"case": f"{ROWS}x{width // 1024}K selection", "mismatched_rows": bad,
               **{f"step{s}_us": best[s] for s in STEPS}, "ratio_4096_over_8192": best[4096] / best[8192]}
        if width == 8192:  # end to end: the logits, then the top-k call with each step serving
            buf = torch.empty(ROWS, k, dtype=torch.int32, device="cuda")
            e2e = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False)}
            for step in STEPS:
                e2e[step] = (lambda st: lambda: _serving_row(st, lambda: K.fp8_paged_mqa_topk(*args, k, out=buf)))(step)
            t = best_alternated(e2e, a.rounds)
            row.update({"logits_us": t["logits"], **{f"e2e_step{s}_us": t[s] for s in STEPS},
                        **{f"e2e_step{s}_over_logits": t[s] / t["logits"] for s in STEPS}})
        out.append(row)
        print(json.dumps(row), flush=True)
        del inp, logits
        torch.cuda.empty_cache()
    print(f"\n{'case':<22}{'4096 us':>10}{'8192 us':>10}{'4096/8192':>11}  exact")
    for r in out:
        print(f"{r['case']:<22}{r['step4096_us']:>10.2f}{r['step8192_us']:>10.2f}{r['ratio_4096_over_8192']:>11.3f}  "
              f"{'yes' if not any(r['mismatched_rows'].values()) else r['mismatched_rows']}")
        if "logits_us" in r:
            print(f"  end to end: logits {r['logits_us']:.1f} us, + top-k {r['e2e_step4096_us']:.1f} "
                  f"({r['e2e_step4096_over_logits']:.3f}) / {r['e2e_step8192_us']:.1f} ({r['e2e_step8192_over_logits']:.3f})")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"triton": triton.__version__, "rows": out}, f, indent=1)
    return 1 if any(any(r["mismatched_rows"].values()) for r in out) else 0


def _serving_row(step, fn):
    """fn with the row path and this step serving every selection (in place of the table)."""
    saved = S._serving
    S._serving = lambda rows, width, device: ("row", {"BLOCK": step})
    try:
        return fn()
    finally:
        S._serving = saved


if __name__ == "__main__":
    sys.exit(main())
