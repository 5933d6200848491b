"""The tiles path (indexer_logits._topk_tiles) against what serves today ("auto": the table, else
pick_path), tiles of --tiles keys (0: the model's tile_for) at the issue's six shapes, one process, alternated rounds.

    python3 docs/perf_logs/topk_tiles_h200/tiles_ab.py [--tiles 8,16,32] [--rounds 5] [--skip-prefill]
    python3 docs/perf_logs/topk_tiles_h200/tiles_ab.py --crossover   # the selection alone, rows x widths

Decode: logits + top-k in CUDA graphs of 4 calls (bench.topk.graph_us), best of --rounds
alternated rounds. Prefill: eager, best of --rounds alternated rounds (3 by default there), the
peak extra memory of each variant. Every variant's answer is checked against a stable sort first
(decode every row, prefill the sampled blocks). Prints one JSON line a case, then a table."""

import argparse
import json

import torch

import indexer_logits as K
from bench.topk import DECODE, PREFILL, eager_us, graph_us, mismatched_rows, on_path, sampled_mismatches
from indexer_logits import _topk_tiles as TT
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem


def with_tile(tile, fn):
    def call():
        saved, TT.TILE = TT.TILE, tile
        try:
            return fn()
        finally:
            TT.TILE = saved
    return call


def variants(tiles, make):
    out = {"auto": on_path("auto", make)}
    for t in tiles:
        out[f"tiles{t}"] = on_path("tiles", with_tile(t, make))
    return out


def decode(k, tiles, rounds):
    rows = []
    for batch, ctx in DECODE:
        inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device="cuda", max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
        lbuf = torch.empty(batch, ctx, device="cuda")
        ibuf = torch.empty(batch, k, dtype=torch.int32, device="cuda")
        logits = K.fp8_paged_mqa_logits(*args, False, out=lbuf).clone()
        hi = inp.context_lens.int()
        fns = variants(tiles, lambda: K.fp8_paged_mqa_topk(*args, k, out=ibuf))
        bad = {n: mismatched_rows(fn().clone(), logits, torch.zeros_like(hi), hi, k) for n, fn in fns.items()}
        fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf), **fns}
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(rounds):
            for n, fn in fns.items():
                best[n] = min(best[n], graph_us(fn))
        row = {"case": f"decode {batch}x{ctx // 1024}K", "bad": bad, **{f"{n}_us": v for n, v in best.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del inp, lbuf, logits
        torch.cuda.empty_cache()
    return rows


def prefill(k, tiles, rounds):
    rows = []
    for nrows, keys in PREFILL:
        inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), nrows, keys, device="cuda")
        args = inp.args()
        ibuf = torch.empty(nrows, k, dtype=torch.int32, device="cuda")
        fns = variants(tiles, lambda: K.fp8_mqa_topk(*args, k, out=ibuf))
        bad, extra = {}, {}
        for n, fn in fns.items():
            bad[n] = sampled_mismatches(inp, fn().clone(), k)[0]
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn()
            torch.cuda.synchronize()
            extra[n] = (torch.cuda.max_memory_allocated() - base) / (nrows * keys * 4)
        lbuf = torch.empty(nrows, keys, device="cuda")
        fns = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf), **fns}
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(rounds):
            for n, fn in fns.items():
                best[n] = min(best[n], eager_us(fn, iters=1))
        row = {"case": f"prefill {nrows}x{keys // 1024}K", "bad": bad, "extra_over_logits": extra,
               **{f"{n}_us": v for n, v in best.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del inp, lbuf
        torch.cuda.empty_cache()
    return rows


def crossover(k, rows_list=(1, 16, 64, 128), widths=(262144, 524288, 1048576)):
    """The selection alone (graph time, best of 3) of rounds and tiles (the model's tile) on fp8
    decode logits of each (rows, width): where tiles overtakes rounds."""
    from indexer_logits import _topk_select as S
    out = []
    for rows in rows_list:
        for width in widths:
            inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=3 << 30)
            logits = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table,
                                            None, width, False)
            hi = inp.context_lens.int()
            idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
            ws = S.workspace(rows, "cuda")
            row = {"rows": rows, "width": width, "tile": TT.tile_for(width, k)}
            fns = {p: (lambda p=p: S.select_rows(logits, k, S.WINDOW_LIMIT, idx, None, ws, lens=hi, path=p))
                   for p in ("rounds", "tiles")}
            for p, fn in fns.items():
                fn()
                row[f"{p}_bad"] = mismatched_rows(idx, logits, torch.zeros_like(hi), hi, k)
            best = dict.fromkeys(fns, float("inf"))
            for _ in range(3):
                for p, fn in fns.items():
                    best[p] = min(best[p], graph_us(fn))
            row.update({f"{p}_us": v for p, v in best.items()})
            out.append(row)
            print(json.dumps(row), flush=True)
            del inp, logits
            torch.cuda.empty_cache()
    print(f"{'rows':>5}{'width':>9}{'tile':>5}{'rounds us':>11}{'tiles us':>10}{'tiles/rounds':>14}")
    for r in out:
        print(f"{r['rows']:>5}{r['width']:>9}{r['tile']:>5}{r['rounds_us']:>11.1f}{r['tiles_us']:>10.1f}"
              f"{r['tiles_us'] / r['rounds_us']:>14.2f}" + ("  INEXACT" if r["rounds_bad"] or r["tiles_bad"] else ""))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiles", default="8,16,32")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--crossover", action="store_true", help="only the selection-alone matrix (crossover())")
    a = ap.parse_args()
    if a.crossover:
        rows = crossover(a.k)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(rows, f, indent=1)
        return
    tiles = [int(t) for t in a.tiles.split(",")]
    rows = decode(a.k, tiles, a.rounds)
    if not a.skip_prefill:
        rows += prefill(a.k, tiles, max(1, min(a.rounds, 3)))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    names = ["auto"] + [f"tiles{t}" for t in tiles]
    print(f"{'case':20s}{'logits us':>11s}" + "".join(f"{n:>16s}" for n in names) + "   (us, x logits)")
    for r in rows:
        cells = "".join(f"{r[n + '_us']:>9.1f} {r[n + '_us'] / r['logits_us']:5.2f}" + ("!" if r["bad"][n] else " ")
                        for n in names)
        print(f"{r['case']:20s}{r['logits_us']:>11.1f}{cells}")
    print("! = a mismatched row")


if __name__ == "__main__":
    main()
