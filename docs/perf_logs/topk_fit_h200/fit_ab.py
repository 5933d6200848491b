"""The tiles path with and without its three newest settings, one process, alternated: FIT (its
first selection stops at the bin that fits the pick, _topk_digits._fit), OWN_PDL (PDL on its own
five kernels, as the four kernels' last three have it) and MERGE (the pick gathers the tiles it
picks: no gather kernel; added 2026-12-05). Variants are
launch settings, so each has its own recorded launches (a module attribute patched between
calls would replay the first variant's: call 1's A/B measured one variant twice).

    python3 docs/perf_logs/topk_fit_h200/fit_ab.py [--rounds 5] [--out FILE]

1. decode 64 x 128K end to end, logits + top-k in CUDA graphs of 4 calls (bench.topk.graph_us), the
   H200 table's tiles settings (tiles of 8, 32 bins, 16 programs an SM) with FIT, OWN_PDL, MERGE on or off,
   best of --rounds alternated rounds; every variant checked against a stable sort first;
2. kernel by kernel (torch.profiler, 10 calls), the selection alone, on those logits and on a
   prefill block of 102 rows x 1M keys (2048 x 1M's block; the built-in settings), with the rows
   that stopped early and the tiles picked a row."""

import argparse
import json

import torch

import indexer_logits as K
from bench._topk_profile import kernel_times
from bench.topk import best_alternated, mismatched_rows
from indexer_logits import _topk_select as S, _topk_tiles as TT
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem

TABLE_64x128K = {"TILE": 8, "BINS": 32, "PROGRAMS_PER_SM": 16}
VARIANTS = {"before": dict(FIT=False, OWN_PDL=False, MERGE=False), "fit": dict(FIT=True, OWN_PDL=False, MERGE=False),
            "pdl": dict(FIT=False, OWN_PDL=True, MERGE=False), "fit+pdl": dict(FIT=True, OWN_PDL=True, MERGE=False),
            "fit+merge": dict(FIT=True, OWN_PDL=False, MERGE=True),
            "fit+pdl+merge": dict(FIT=True, OWN_PDL=True, MERGE=True)}


def serving(settings, fn):
    """fn with the tiles path and `settings` serving every selection (in place of the table)."""
    def call():
        saved = S._serving
        S._serving = lambda rows, width, device: ("tiles", settings)
        try:
            return fn()
        finally:
            S._serving = saved
    return call


def stats(logits, k, lo, hi, settings):
    """(rows that stopped early, mean tiles picked a row) of one call."""
    seen = []
    real = S._tiles_scratch
    S._tiles_scratch = lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1]
    try:
        idx = torch.empty(logits.shape[0], k, dtype=torch.int32, device="cuda")
        S.select_rows(logits, k, S.WINDOW_RAGGED, idx, None, S.workspace(logits.shape[0], "cuda"), lo=lo, hi=hi,
                      path="tiles", settings=settings)
    finally:
        S._tiles_scratch = real
    tau, cand_len = seen[-1][8], seen[-1][5]
    tile = settings.get("TILE") or TT.tile_for(logits.shape[1], k)
    return int(torch.isinf(tau).sum()), float(cand_len.float().mean() / tile)


def profile(name, logits, lo, hi, base, rounds, k=2048):
    rows = logits.shape[0]
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")
    out = {"case": name, "rows": rows}
    for v, extra in VARIANTS.items():
        early, picked = stats(logits, k, lo, hi, {**base, **extra})
        out[f"{v}_early_rows"], out[f"{v}_picked_tiles"] = early, picked
    fns = {v: (lambda st: lambda: S.select_rows(logits, k, S.WINDOW_RAGGED, idx, None, ws, lo=lo, hi=hi,
                                                 path="tiles", settings=st))({**base, **extra})
           for v, extra in VARIANTS.items()}
    graph = best_alternated(fns, rounds)  # the selection alone in CUDA graphs of 4 calls: launch gaps included
    out.update({f"{v}_graph_us": t for v, t in graph.items()})
    prof_rows = {}
    for v in list(VARIANTS) * 2:  # alternated; the second profile of each is kept
        prof_rows[v] = kernel_times(fns[v])
    for v, rows_ in prof_rows.items():
        total = sum(t for _, _, t in rows_)
        out[f"{v}_kernel_us"] = total
        print(f"\n{name}, {v}: {total:.1f} us of kernels a call; {out[f'{v}_early_rows']} of {rows} rows stopped "
              f"early, {out[f'{v}_picked_tiles']:.0f} tiles picked a row")
        for key, count, t in sorted(rows_, key=lambda r: -r[2]):
            print(f"  {key[:40]:40s} {count:3d} a call {t:9.1f} us")
    return out


def end_to_end(rounds, k=2048):
    batch, ctx = 64, 131072
    inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    lbuf = torch.empty(batch, ctx, device="cuda")
    ibuf = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    logits = K.fp8_paged_mqa_logits(*args, False, out=lbuf).clone()
    hi = inp.context_lens.int()
    fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf)}
    for v, extra in VARIANTS.items():
        fns[v] = serving({**TABLE_64x128K, **extra}, lambda: K.fp8_paged_mqa_topk(*args, k, out=ibuf))
    bad = {v: mismatched_rows(fns[v]().clone(), logits, torch.zeros_like(hi), hi, k) for v in VARIANTS}
    best = best_alternated(fns, rounds)
    row = {"case": "decode 64x128K end to end", "bad": bad, **{f"{n}_us": v for n, v in best.items()},
           **{f"{v}_over_logits": best[v] / best["logits"] for v in VARIANTS}}
    print(json.dumps(row), flush=True)
    return row, inp, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    row, inp, logits = end_to_end(a.rounds)
    rows = [row]
    hi = inp.context_lens.int()
    rows.append(profile("decode 64x128K", logits, torch.zeros_like(hi), hi, TABLE_64x128K, a.rounds))
    del inp, logits
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 102, 1 << 20, device="cuda")
    logits = K.fp8_mqa_logits(*pre.args(), False)
    rows.append(profile("prefill block 102x1M", logits, pre.cu_seqlen_ks, pre.cu_seqlen_ke, {}, a.rounds))
    print("\nthe selection alone, us a call: CUDA graphs of 4 calls (best of --rounds) / kernels (torch.profiler)")
    print(f"{'case':24s}" + "".join(f"{v:>18s}" for v in VARIANTS))
    for r in rows[1:]:
        print(f"{r['case']:24s}" + "".join(f"{r[f'{v}_graph_us']:10.1f} /{r[f'{v}_kernel_us']:6.1f}" for v in VARIANTS))
    e = rows[0]
    print(f"decode 64x128K end to end: logits {e['logits_us']:.1f} us; + top-k "
          + ", ".join(f"{v} {e[f'{v}_us']:.1f} ({e[f'{v}_over_logits']:.3f})" for v in VARIANTS)
          + f"; mismatched rows {e['bad']}")
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
