"""Logits + top-k on the GPU: the device selection against logits + torch.topk, same process.

    python3 -m bench.topk [--out DIR] [--paths row,rounds,fused] [--sweep] [--crossover] [--skip-prefill] [--k 2048]
                          [--scratch-mib 16,24,32]

Decode (fp8, next_n 1, full lengths; 64x32K, 64x128K, 1x1M, 128x8K): CUDA-graph time of the
logits kernel alone, of fp8_paged_mqa_topk through each selection path (--paths: "fused", the two
kernels of _topk_fused, "rounds", the four of _topk_kernels, and "row", the one of _topk_row;
indexer_logits._topk_select.PATH),
and of the logits then torch.topk, each graph holding 4 calls, all alternated over 5 rounds (best
of each). Prefill (fp8 ragged, causal windows: the last M tokens of one Nk sequence; 4096x64K,
2048x1M): eager time of fp8_mqa_logits into a full [M, Nk] buffer, of fp8_mqa_topk per path, of
the logits then torch.topk where the logits fit, and the peak memory each call adds over its
inputs and output (torch.cuda.max_memory_allocated). Every case checks each path's selection
first: its index sets against a stable descending sort of the same logits (the tie rule:
smallest index first), over all decode rows and a sample of prefill rows. "topk_us" is the first
path's time. --sweep times the first path's selection alone over its launch parameters
(indexer_logits._topk_select) on the decode logits. Writes topk_bench.json under --out (not
topk.json, the name of a GPU's selection table, which a copy of that table under --out would
lose) and prints a table last. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tuner.topk_tune import mismatched_rows, ref_sets  # noqa: F401  (tests and tools import them here)

DECODE = [(64, 32768), (64, 131072), (1, 1048576), (128, 8192)]
PREFILL = [(4096, 65536), (2048, 1048576)]
MIN_SCRATCH_ROWS = 16  # --scratch-mib sizes giving blocks of fewer rows are not timed (hundreds of launches)
ROUNDS = 5  # decode: every variant timed in turn this many rounds, the best kept (tests/test_bench_topk.py: 1)
DEVICE = "cuda"  # where the cases run (tests/test_bench_topk.py runs them on CPU at small shapes)


def graph_us(fn, calls: int = 4, rounds: int = 20) -> float:
    """Microseconds per call of `fn` replayed in a CUDA graph of `calls` calls (median of rounds)."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def best_alternated(fns: dict, rounds: int, timer=None) -> dict:
    """Each fn's best time (timer: graph_us when None) over `rounds` rounds that time every fn in
    turn, so that the GPU's clock and power state drift alike for all of them."""
    timer = graph_us if timer is None else timer
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], timer(fn))
    return best


def eager_us(fn, iters: int = 3) -> float:
    import torch
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) * 1e3)
    return best


def on_path(path: str, fn):
    """fn with the selection path set to `path` while it runs (read at launch: at capture, in a graph)."""
    from indexer_logits import _topk_select as S

    def call():
        saved, S.PATH = S.PATH, path
        try:
            return fn()
        finally:
            S.PATH = saved
    return call


def decode_cases(k: int, sweep: bool, paths=("fused", "rounds")) -> list[dict]:
    import torch
    import indexer_logits as K
    from indexer_logits import _topk_select as S
    from tuner.inputs import make_decode_inputs
    from tuner.space import Problem
    rows_out = []
    for batch, ctx in DECODE:
        inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device=DEVICE, max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
        logits_buf = torch.empty(batch, ctx, device=DEVICE)
        idx_buf = torch.empty(batch, k, dtype=torch.int32, device=DEVICE)
        logits = K.fp8_paged_mqa_logits(*args, False, out=logits_buf)
        hi = inp.context_lens.int()
        bad = {p: mismatched_rows(on_path(p, lambda: K.fp8_paged_mqa_topk(*args, k))(), logits, torch.zeros_like(hi),
                                  hi, k) for p in paths}
        fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=logits_buf)}
        for p in paths:
            fns[f"topk_{p}"] = on_path(p, lambda: K.fp8_paged_mqa_topk(*args, k, out=idx_buf))
        fns["torch_topk"] = lambda: torch.topk(K.fp8_paged_mqa_logits(*args, False, out=logits_buf), k, dim=1)
        best = best_alternated(fns, ROUNDS)
        row = {"case": f"decode {batch}x{ctx // 1024}K", "mismatched_rows": sum(bad.values()),
               "mismatched_by_path": bad, **{f"{n}_us": v for n, v in best.items()}}
        row["topk_us"] = best[f"topk_{paths[0]}"]
        for p in paths:
            row[f"{p}_over_logits"] = best[f"topk_{p}"] / best["logits"]
        row["topk_over_logits"] = row["topk_us"] / best["logits"]
        row["torch_over_logits"] = best["torch_topk"] / best["logits"]
        if sweep:
            row["sweep"] = _sweep(logits, hi, k, paths[0])
        rows_out.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "sweep"}), flush=True)
        del inp, logits_buf
        torch.cuda.empty_cache()
    return rows_out


SWEEP = [dict(BINS=n, BLOCK=b, NUM_WARPS=4, PROGRAMS_PER_SM=p, SCAN_SLOTS=False, CAP=c, PDL=d)
         for n in (32, 64) for b in (512, 1024) for p in (8, 16) for c in (64, 128) for d in (False, True)]
# the two-kernel path keeps a whole bin (hundreds of scores), not what two rounds leave (a handful)
SWEEP_FUSED = [dict(s, CAP=s["CAP"] * 32) for s in SWEEP]
# the one-program-a-row path (_topk_row): its bins, keys a step and warps a program
SWEEP_ROW = [dict(BINS=n, CAP=c, BLOCK=b, NUM_WARPS=w, PDL=False) for n in (64, 128) for c in (512, 1024, 2048)
             for b in (2048, 4096, 8192) for w in (8, 16, 32) if b >= 64 * w]


def _sweep(logits, hi, k, path="rounds") -> list[dict]:
    """The selection alone on these logits, per launch setting (graph time)."""
    import torch
    from indexer_logits import _topk_fused as F, _topk_kernels as KN, _topk_row as R, _topk_select as S
    rows = logits.shape[0]
    owners = {"BINS": KN, "CAP": F if path == "fused" else KN, "BLOCK": S, "NUM_WARPS": S, "PROGRAMS_PER_SM": S, "SCAN_SLOTS": S, "PDL": S}
    settings = SWEEP_FUSED if path == "fused" else SWEEP
    if path == "row":
        owners = {"BINS": R, "CAP": R, "BLOCK": R, "NUM_WARPS": R, "PDL": R}
        settings = SWEEP_ROW
    saved = {n: getattr(owners[n], n) for n in owners}
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    out = []
    try:
        for setting in settings:
            for n, v in setting.items():
                setattr(owners[n], n, v)
            ws = S.workspace(rows, "cuda")
            fn = lambda: S.select_rows(logits, k, S.WINDOW_LIMIT, idx, None, ws, lens=hi, path=path)
            try:
                fn()
                ok = mismatched_rows(idx, logits, torch.zeros_like(hi), hi, k) == 0
                us = min(graph_us(fn) for _ in range(2))
                out.append({**setting, "us": us, "exact": ok})
            except Exception as exc:  # a setting that does not compile on this GPU: say so, go on
                out.append({**setting, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    finally:
        for n, v in saved.items():
            setattr(owners[n], n, v)
    out.sort(key=lambda r: r.get("us", float("inf")))
    return out


CROSSOVER_ROWS = (32, 64, 128, 256)
CROSSOVER_WIDTHS = (4096, 8192, 16384, 32768)


def crossover(k: int, paths=("row", "rounds"), rows_list=CROSSOVER_ROWS, widths=CROSSOVER_WIDTHS) -> list[dict]:
    """The selection alone per path (graph time) on fp8 decode logits of every (rows, width) of
    rows_list x widths (next_n 1, full lengths), each path's answer checked first: where one path
    overtakes the other."""
    import torch
    import indexer_logits as K
    from indexer_logits import _topk_select as S
    from tuner.inputs import make_decode_inputs
    from tuner.space import Problem
    out = []
    for rows in rows_list:
        for width in widths:
            inp = make_decode_inputs(Problem(), rows, width, lens="full", device=DEVICE, max_pool_bytes=3 << 30)
            logits = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table,
                                            None, width, False)
            hi = inp.context_lens.int()
            idx = torch.empty(rows, k, dtype=torch.int32, device=DEVICE)
            ws = S.workspace(rows, DEVICE)
            row = {"rows": rows, "width": width}
            for p in paths:
                fn = lambda p=p: S.select_rows(logits, k, S.WINDOW_LIMIT, idx, None, ws, lens=hi, path=p)
                fn()
                row[f"{p}_exact"] = mismatched_rows(idx, logits, torch.zeros_like(hi), hi, k) == 0
                row[f"{p}_us"] = min(graph_us(fn) for _ in range(3))
            out.append(row)
            print(json.dumps(row), flush=True)
            del inp, logits
    return out


def sampled_mismatches(inp, ours, k, blocks=(0, 1, -2, -1), max_scratch_bytes=None) -> tuple[int, int]:
    """(mismatched rows, rows checked) over a few of the row blocks fp8_mqa_topk scores (blocks of
    `max_scratch_bytes`, its argument): each block's logits recomputed with the same call shape
    (so the same kernel and the same sums; another row count may pick another config, whose
    last-bit differences move the k-th score)."""
    from indexer_logits import _topk
    import indexer_logits as K
    rows, keys = inp.q.shape[0], inp.kv[0].shape[0]
    step = _topk.scratch_rows(rows, keys, max_scratch_bytes, k, inp.q.device)
    starts = list(range(0, rows, step))
    bad = checked = 0
    for b in sorted({starts[i] for i in blocks if -len(starts) <= i < len(starts)}):
        e = min(rows, b + step)
        logits = K.fp8_mqa_logits(inp.q[b:e], inp.kv, inp.weights[b:e], inp.cu_seqlen_ks[b:e],
                                  inp.cu_seqlen_ke[b:e], False)
        bad += mismatched_rows(ours[b:e], logits, inp.cu_seqlen_ks[b:e], inp.cu_seqlen_ke[b:e], k)
        checked += e - b
        del logits
    return bad, checked


def prefill_cases(k: int, paths=("fused", "rounds"), scratch_mib=()) -> list[dict]:
    """Per PREFILL case: each path's fp8_mqa_topk (default blocks) against the logits alone and the
    logits then torch.topk; with `scratch_mib`, the first path again with blocks of at most each
    of those MiB (`scratch_<MiB>_us`, `_extra_bytes`, `_mismatched_sample_rows`): smaller blocks
    launch more, but a block's logits that fit in L2 are read back from it by the selection."""
    import torch
    import indexer_logits as K
    from tuner.inputs import make_prefill_inputs
    from tuner.space import Problem
    rows_out = []
    for rows, keys in PREFILL:
        inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device=DEVICE)
        args = inp.args()
        idx_buf = torch.empty(rows, k, dtype=torch.int32, device=DEVICE)
        topk = {p: on_path(p, lambda: K.fp8_mqa_topk(*args, k, out=idx_buf)) for p in paths}
        bad = checked = 0
        for p in paths:
            b, checked = sampled_mismatches(inp, topk[p]().clone(), k)
            bad += b
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        t_path = {p: eager_us(topk[p]) for p in paths}
        extra_topk = torch.cuda.max_memory_allocated() - base
        logits_buf = torch.empty(rows, keys, device=DEVICE)
        t_logits = eager_us(lambda: K.fp8_mqa_logits(*args, False, out=logits_buf))
        t_torch = eager_us(lambda: torch.topk(K.fp8_mqa_logits(*args, False, out=logits_buf), k, dim=1))
        t_path = {p: min(t, eager_us(topk[p])) for p, t in t_path.items()}
        t_topk = t_path[paths[0]]
        row = {"case": f"prefill {rows}x{keys // 1024}K", "mismatched_sample_rows": bad, "sample_rows": checked,
               "logits_us": t_logits, "topk_us": t_topk, "torch_topk_us": t_torch,
               **{f"topk_{p}_us": t for p, t in t_path.items()},
               **{f"{p}_over_logits": t / t_logits for p, t in t_path.items()},
               "topk_over_logits": t_topk / t_logits, "torch_over_logits": t_torch / t_logits,
               "logits_bytes": rows * keys * 4, "topk_extra_bytes": extra_topk,
               "extra_over_logits": extra_topk / (rows * keys * 4)}
        for mib in scratch_mib:
            if K._topk.scratch_rows(rows, keys, mib << 20, k, DEVICE) < MIN_SCRATCH_ROWS:
                row[f"scratch_{mib}_us"] = None  # blocks of a few rows: the logits kernel's tiles mostly empty
                continue
            fn = on_path(paths[0], lambda mib=mib: K.fp8_mqa_topk(*args, k, out=idx_buf, max_scratch_bytes=mib << 20))
            bad_s, _ = sampled_mismatches(inp, fn().clone(), k, max_scratch_bytes=mib << 20)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            t_s = min(eager_us(fn), eager_us(fn))
            torch.cuda.synchronize()
            h0 = time.perf_counter()
            fn()  # the host's time to enqueue one call (a block's five launches): more than t_s is host-bound
            row[f"scratch_{mib}_host_us"] = (time.perf_counter() - h0) * 1e6
            torch.cuda.synchronize()
            row[f"scratch_{mib}_us"], row[f"scratch_{mib}_over_logits"] = t_s, t_s / t_logits
            row[f"scratch_{mib}_extra_bytes"] = torch.cuda.max_memory_allocated() - base
            row[f"scratch_{mib}_mismatched_sample_rows"] = bad_s
            row["mismatched_sample_rows"] += bad_s
        rows_out.append(row)
        print(json.dumps(row), flush=True)
        del logits_buf, inp
        torch.cuda.empty_cache()
    return rows_out


def _positive_ints(text: str, allow_empty: bool):
    """An option's comma-separated positive integers, or None where it holds anything else (or none
    at all, unless allow_empty)."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        return None
    return values if (values or allow_empty) and all(v >= 1 for v in values) else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.topk", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--paths", default="fused,rounds",
                    help="selection paths to time, comma-separated (indexer_logits._topk_select.PATHS, or auto: "
                         "the runtime's pick per shape); the first "
                         "is the table's +topk column")
    ap.add_argument("--crossover", action="store_true",
                    help="the selection alone per path over rows x widths of decode logits (where one path overtakes)")
    ap.add_argument("--crossover-rows", default=",".join(map(str, CROSSOVER_ROWS)),
                    help="--crossover's row counts, comma-separated")
    ap.add_argument("--crossover-widths", default=",".join(map(str, CROSSOVER_WIDTHS)),
                    help="--crossover's keys a row, comma-separated")
    ap.add_argument("--scratch-mib", default="",
                    help="prefill: also time the first path with blocks of at most these MiB of logits, "
                         "comma-separated (fp8_mqa_topk's max_scratch_bytes; default blocks: 1/20 of the logits)")
    ap.add_argument("--profile", action="store_true",
                    help="per-kernel device time of a 64x32K decode top-k and of a 4096x64K prefill one")
    a = ap.parse_args(argv)
    from indexer_logits._topk_select import PATHS
    paths = tuple(p for p in a.paths.split(",") if p)
    scratch_mib = _positive_ints(a.scratch_mib, allow_empty=True)
    if scratch_mib is None:
        ap.error(f"--scratch-mib: expected comma-separated positive MiB, got {a.scratch_mib!r}")
    grid = {}
    for name in ("crossover_rows", "crossover_widths"):
        grid[name] = _positive_ints(getattr(a, name), allow_empty=False)
        if grid[name] is None:
            ap.error(f"--{name.replace('_', '-')}: expected comma-separated positive integers, got {getattr(a, name)!r}")
    if not paths or any(p not in PATHS + ("auto",) for p in paths):
        ap.error(f"--paths: expected a comma-separated subset of {','.join(PATHS)},auto, got {a.paths!r}")
    import torch
    if not torch.cuda.is_available():
        print("bench.topk: needs a CUDA device", file=sys.stderr)
        return 2
    t0 = time.time()
    if a.profile:
        from bench._topk_profile import profile
        profile(a.k, paths, on_path)
    result = {"gpu": torch.cuda.get_device_name(), "k": a.k, "paths": paths,
              "decode": decode_cases(a.k, a.sweep, paths)}
    if not a.skip_prefill:
        result["prefill"] = prefill_cases(a.k, paths, scratch_mib)
    if a.crossover:
        result["crossover"] = crossover(a.k, paths, grid["crossover_rows"], grid["crossover_widths"])
    result["seconds"] = time.time() - t0
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "topk_bench.json").write_text(json.dumps(result, indent=1))
    head = "".join(f"{'+' + p + ' us':>14}{'ratio':>7}" for p in paths)
    print(f"\n{'case':<22}{'logits us':>11}{head}{'+torch.topk':>13}{'ratio':>7}{'bad rows':>9}")
    for r in result["decode"] + result.get("prefill", []):
        bad = r.get("mismatched_rows", r.get("mismatched_sample_rows"))
        cols = "".join(f"{r[f'topk_{p}_us']:>14.1f}{r[f'{p}_over_logits']:>7.2f}" for p in paths)
        print(f"{r['case']:<22}{r['logits_us']:>11.1f}{cols}{r['torch_topk_us']:>13.1f}{r['torch_over_logits']:>7.2f}"
              f"{bad:>9}")
    for r in result.get("crossover", []):
        print(f"selection alone {r['rows']}x{r['width']}: " + ", ".join(
            f"{p} {r[f'{p}_us']:.1f} us{'' if r[f'{p}_exact'] else ' (INEXACT)'}" for p in paths))
    for r in result.get("prefill", []):
        print(f"{r['case']}: extra memory {r['topk_extra_bytes'] / 2**20:.1f} MiB = "
              f"{r['extra_over_logits']:.4f} of the logits")
        for mib in scratch_mib:
            if r.get(f"scratch_{mib}_us") is None:
                print(f"{r['case']}: blocks of <= {mib} MiB: not timed (fewer than {MIN_SCRATCH_ROWS} rows a block)")
                continue
            print(f"{r['case']}: blocks of <= {mib} MiB: {r[f'scratch_{mib}_us']:.1f} us, "
                  f"{r[f'scratch_{mib}_over_logits']:.2f} of the logits, extra memory "
                  f"{r[f'scratch_{mib}_extra_bytes'] / 2**20:.1f} MiB, "
                  f"{r[f'scratch_{mib}_mismatched_sample_rows']} mismatched sample rows, host "
                  f"{r[f'scratch_{mib}_host_us']:.0f} us to enqueue a call")
    for r in result["decode"]:
        if "sweep" in r:
            print(r["case"], "selection alone, the best four settings and the worst:",
                  [{**s, "us": round(s.get("us", -1), 1)} for s in r["sweep"][:4]], r["sweep"][-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
