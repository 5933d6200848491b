"""The tiles path's first selection stopping at the bin that fits (_topk_digits._fit, fit_cap 2k)
against it finding tau in every row (fit_cap k - 1: no bin can fit, so every row takes the
compaction, as before the change), one process, alternated.

    python3 docs/perf_logs/topk_fit_h200/fit_ab.py [--rounds 5]

1. kernel by kernel (torch.profiler, 10 calls), the selection alone, on the decode logits of
   64 x 128K (the H200 table's settings there: tiles of 8, 32 bins, 16 programs an SM) and on a
   prefill block of 102 rows x 1M keys (2048 x 1M's block; the built-in settings), with the share
   of rows that stopped early and the tiles picked a row;
2. decode 64 x 128K end to end, logits + top-k in CUDA graphs of 4 calls (bench.topk.graph_us),
   best of --rounds alternated rounds, both variants checked against a stable sort first."""

import argparse
import json

import torch

import indexer_logits as K
from bench.topk import graph_us, mismatched_rows
from indexer_logits import _topk_select as S, _topk_tiles as TT
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem

CAPS = {"fit": lambda k: 2 * k, "tau": lambda k: k - 1}
TABLE_64x128K = {"TILE": 8, "BINS": 32, "PROGRAMS_PER_SM": 16}


def with_cap(name, fn):
    def call():
        saved, TT.fit_cap = TT.fit_cap, CAPS[name]
        try:
            return fn()
        finally:
            TT.fit_cap = saved
    return call


def stats(logits, k, lo, hi, settings):
    """(rows that stopped early, mean tiles picked a row) of one call of the fit variant."""
    seen = []
    real = S._tiles_scratch
    S._tiles_scratch = lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1]
    try:
        idx = torch.empty(logits.shape[0], k, dtype=torch.int32, device="cuda")
        with_cap("fit", lambda: S.select_rows(logits, k, S.WINDOW_RAGGED, idx, None, S.workspace(logits.shape[0], "cuda"),
                                              lo=lo, hi=hi, path="tiles", settings=settings))()
    finally:
        S._tiles_scratch = real
    tau, cand_len = seen[-1][8], seen[-1][5]
    tile = settings.get("TILE") or TT.tile_for(logits.shape[1], k)
    return int(torch.isinf(tau).sum()), float(cand_len.float().mean() / tile)


def profile(name, logits, lo, hi, settings, k=2048):
    rows = logits.shape[0]
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")
    early, picked = stats(logits, k, lo, hi, settings)
    print(f"\n{name}: {early} of {rows} rows stopped early (fit), {picked:.0f} tiles picked a row")
    out = {}
    for cap in ("fit", "tau", "fit", "tau"):
        fn = with_cap(cap, lambda: S.select_rows(logits, k, S.WINDOW_RAGGED, idx, None, ws, lo=lo, hi=hi,
                                                 path="tiles", settings=settings))
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
        rows_ = [(e.key, e.count, e.device_time_total / 10) for e in prof.key_averages() if e.device_time_total > 0]
        out[cap] = rows_
    for cap, rows_ in out.items():
        total = sum(t for _, _, t in rows_)
        print(f"{name}, {cap}: {total:.1f} us a call (second of two alternated profiles)")
        for key, count, t in sorted(rows_, key=lambda r: -r[2]):
            print(f"  {key[:40]:40s} {count // 10:3d} a call {t:9.1f} us")
    return {"case": name, "early_rows": early, "rows": rows, "picked_tiles": picked,
            **{f"{cap}_us": sum(t for _, _, t in r) for cap, r in out.items()}}


def end_to_end(rounds, k=2048):
    batch, ctx = 64, 131072
    inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    lbuf = torch.empty(batch, ctx, device="cuda")
    ibuf = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    logits = K.fp8_paged_mqa_logits(*args, False, out=lbuf).clone()
    hi = inp.context_lens.int()
    topk = lambda: K.fp8_paged_mqa_topk(*args, k, out=ibuf)  # noqa: E731 (the table serves tiles here)
    fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf),
           "fit": with_cap("fit", topk), "tau": with_cap("tau", topk)}
    bad = {n: mismatched_rows(fns[n]().clone(), logits, torch.zeros_like(hi), hi, k) for n in ("fit", "tau")}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for n, fn in fns.items():
            best[n] = min(best[n], graph_us(fn))
    row = {"case": "decode 64x128K end to end", "bad": bad, **{f"{n}_us": v for n, v in best.items()},
           "fit_over_logits": best["fit"] / best["logits"], "tau_over_logits": best["tau"] / best["logits"]}
    print(json.dumps(row), flush=True)
    return row, inp, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    rows = []
    row, inp, logits = end_to_end(a.rounds)
    rows.append(row)
    hi = inp.context_lens.int()
    rows.append(profile("decode 64x128K", logits, torch.zeros_like(hi), hi, TABLE_64x128K))
    del inp, logits
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 102, 1 << 20, device="cuda")
    logits = K.fp8_mqa_logits(*pre.args(), False)
    rows.append(profile("prefill block 102x1M", logits, pre.cu_seqlen_ks, pre.cu_seqlen_ke, {}))
    print("\ncase                          rows early  tiles a row   fit us   tau us  fit/tau")
    for r in rows[1:]:
        print(f"{r['case']:28s} {r['rows']:5d} {r['early_rows']:5d} {r['picked_tiles']:11.0f} {r['fit_us']:8.1f} "
              f"{r['tau_us']:8.1f} {r['fit_us'] / r['tau_us']:8.3f}")
    e = rows[0]
    print(f"decode 64x128K end to end: logits {e['logits_us']:.1f} us, + top-k fit {e['fit_us']:.1f} "
          f"({e['fit_over_logits']:.3f}), tau {e['tau_us']:.1f} ({e['tau_over_logits']:.3f}); mismatched rows {e['bad']}")
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
