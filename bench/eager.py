"""Host time of one eager call: where the microseconds go between the Python call and the launch.

    python3 -m bench.eager [--calls 2000] [--out DIR]

For decode (fp8, paged) and prefill (fp8, ragged K), at a tiny shape (the GPU finishes each
kernel before the host issues the next, so calls per second measure the host) and at the
shapes issue 26 names (64x8K decode, 1024x8K prefill: eager time per call, host and GPU
together), it prints the mean host microseconds of: the whole API call as a user makes it
(`call`: a shape's second call is its recorded launch, indexer_logits._fastpath; `alloc`: the
same with out=None, the output allocated per call), the full path with the fast path off
(`full_path`: INDEXER_LOGITS_FAST_LAUNCH=0), and the full path's phases: the argument checks,
the dispatch lookup, the module's launch(), and inside it the cache views, the grid, the TMA
descriptor; then the top functions of a cProfile of the call with the fast path off. Under
Triton 3.6.0 the replay launches directly (indexer_logits._direct_launch; `direct` true): then
`tensors` is the call with tensors handed to the launcher as tensors, not addresses, and
`tritons_launcher` the call through Triton's launcher, as before the direct launch. `guarded`
and `exact_key`: the call found through the guard index (indexer_logits._call_key) and by its
exact key alone, alternated three times. Last, per case, our call and DeepGEMM's are alternated
five times (`alternated`: the median of the rounds, `alternated_best`: the best; `_alloc`: ours
with out=None, which allocates its output per call as DeepGEMM's does): the host's
speed drifts within a run (the first case and the long-kernel case read up to 2x slower in every
column, the pure-Python checks too), so the ratio of alternated figures is the comparison.
Wherever `import deep_gemm` works (tuner/baselines.py), each case gets a DeepGEMM row beside
ours, in the same process at the same shapes: its host time per call (`call`), per call with
the GPU (`eager`) and, for decode, of its get_paged_mqa_logits_metadata call (`metadata`; the
timed decode calls take a schedule computed once), after its logits matched ours (calc_diff
< 1e-3, `diff`); where it cannot run, the row says why (`absent`).
Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path


def _alternated(fns: dict, calls: int, rounds: int = 5, batch: int = 200, timer=None) -> dict:
    """Host us per call of each of `fns`, timed in turn `rounds` times (so the host's drift, which
    moves figures up to 2x within one process on a shared GPU host, falls on each alike): the
    median of its rounds and its best round. `batch` and `timer` (_us): as _us takes them."""
    import statistics
    timer = _us if timer is None else timer
    seen: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            seen[name].append(timer(fn, calls, batch=batch))
    return {name: (statistics.median(v), min(v)) for name, v in seen.items()}


def _us(fn, calls: int, batch: int = 200) -> float:
    """Host microseconds per call: the median over batches of `batch` calls, each batch timed
    from its first call to its last launch and synchronised after. A batch stays below the
    device's queue of pending launches, so the host never waits for the GPU inside it (with
    2,000 calls in a row the queue fills and a call takes the kernel's time, whatever the host's:
    a decode at 64x8K then reads 24 us, its GPU time)."""
    import statistics
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(max(1, calls // batch)):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per_call.append((time.perf_counter() - t0) / batch)
        torch.cuda.synchronize()
    return statistics.median(per_call) * 1e6


def _eager_us(fn, calls: int) -> float:
    """Per call, host and GPU together (synchronised at the end)."""
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def decode_inputs(batch: int, context: int, page: int = 64, heads: int = 64, dim: int = 128):
    import torch
    pages_per = (context + page - 1) // page
    pool = batch * pages_per + 8
    q = torch.randn(batch, 1, heads, dim, device="cuda").to(torch.float8_e4m3fn)
    kv = torch.randint(0, 120, (pool, page, 1, dim + 4), dtype=torch.uint8, device="cuda")
    kv.view(pool, -1)[:, page * dim:].view(torch.float32).fill_(0.01)
    w = torch.randn(batch, heads, device="cuda")
    lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    bt = torch.randperm(pool, device="cuda")[: batch * pages_per].view(batch, pages_per).to(torch.int32)
    out = torch.empty(batch, context, device="cuda")
    return q, kv, w, lens, bt, out


def prefill_inputs(rows: int, keys: int, heads: int = 64, dim: int = 128):
    import torch
    q = torch.randn(rows, heads, dim, device="cuda").to(torch.float8_e4m3fn)
    k = torch.randn(keys, dim, device="cuda").to(torch.float8_e4m3fn)
    ks_scale = torch.rand(keys, device="cuda")
    w = torch.randn(rows, heads, device="cuda")
    ks = torch.zeros(rows, dtype=torch.int32, device="cuda")
    ke = torch.arange(keys - rows + 1, keys + 1, dtype=torch.int32, device="cuda").clamp(min=1)
    out = torch.empty(rows, keys, device="cuda")
    return q, (k, ks_scale), w, ks, ke, out


def _fast_and_full(row: dict, call, call_alloc, calls: int) -> None:
    """The call as served (a recorded launch after the first), with out= and without, and the full
    path with the fast path off; `replayed`: every timed call was served by the recorded launch."""
    from indexer_logits import _fastpath
    served = lambda: sum(r.calls for r in _fastpath.replays().values())  # noqa: E731
    before = served()
    row["call_us"] = _us(call, calls)
    row["alloc_us"] = _us(call_alloc, calls)
    row["replayed"] = served() - before >= 2 * calls  # the first call of each records; warm-ups replay too
    _guard_ab(row, call, calls)
    _direct_ab(row, call, calls)
    os.environ[_fastpath.ENV_FAST_LAUNCH] = "0"
    try:
        row["full_path_us"] = _us(call, calls)
        row["eager_full_path_us"] = _eager_us(call, max(200, calls // 10))
        row["profile"] = _profile(call, calls)
    finally:
        del os.environ[_fastpath.ENV_FAST_LAUNCH]
    row["eager_us"] = _eager_us(call, max(200, calls // 10))


def _guard_ab(row: dict, call, calls: int, rounds: int = 3) -> None:
    """The served call found through the guard index (indexer_logits._call_key, `guarded`) and by
    its exact key alone (`exact_key`, as before the index), alternated `rounds` times in this
    process; each the median of its rounds. `guards`: whether this torch's TensorGuards passed."""
    import statistics
    from indexer_logits import _call_key
    saved = _call_key.GUARDS
    row["guards"] = saved is not None
    if saved is None:
        return
    guarded, exact = [], []
    try:
        for _ in range(rounds):
            guarded.append(_us(call, calls))
            _call_key.GUARDS = None
            exact.append(_us(call, calls))
            _call_key.GUARDS = saved
    finally:
        _call_key.GUARDS = saved
    row["guarded_us"], row["exact_key_us"] = statistics.median(guarded), statistics.median(exact)


def _direct_ab(row: dict, call, calls: int) -> None:
    """The same call, same process, with the replay's direct launch (indexer_logits._direct_launch,
    Triton 3.6.0) changed: `direct` says whether it served; `tensors_us` with tensors handed over as
    tensors instead of addresses; `tritons_launcher_us` through Triton's launcher (the path before)."""
    from indexer_logits import _fastpath
    plans = [(r, r.direct) for r in _fastpath.replays().values()]
    row["direct"] = any(d is not None for _, d in plans)
    if not row["direct"]:
        return
    try:
        for _, d in plans:
            if d is not None:
                d.addresses = False
        row["tensors_us"] = _us(call, calls)
        for r, _ in plans:
            r.direct = None
        row["tritons_launcher_us"] = _us(call, calls)
    finally:
        for r, d in plans:
            r.direct = d
            if d is not None:
                d.addresses = True


def _profile(fn, calls: int, lines: int = 22) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(lines)
    return s.getvalue()


def decode_phases(il, batch: int, context: int, calls: int) -> dict:
    import torch
    from indexer_logits._checks import check_decode
    from indexer_logits._decode import _decode_selection
    q, kv, w, lens, bt, out = decode_inputs(batch, context)
    full = lambda: il.fp8_paged_mqa_logits(q, kv, w, lens, bt, None, context, out=out)  # noqa: E731
    alloc = lambda: il.fp8_paged_mqa_logits(q, kv, w, lens, bt, None, context)  # noqa: E731
    a = check_decode(q, kv, w, lens, bt, context, "page_blocked", check_values=False)
    sel = _decode_selection(q, a, context)
    mod = sys.modules[sel.launch.__module__]
    row = {"case": f"decode {batch}x{context}", "rung": sel.rung, "variant": sel.variant, "_call": full,
           "_alloc": alloc}
    _fast_and_full(row, full, alloc, calls)
    row.update({
           "checks_us": _us(lambda: check_decode(q, kv, w, lens, bt, context, "page_blocked", check_values=False), calls),
           "select_us": _us(lambda: _decode_selection(q, a, context), calls),
           "launch_us": _us(lambda: sel.launch(q, kv, w, lens, bt, out, context, False), calls)})
    kv2, scales, ps, sps = mod._cache_views(kv)
    row["views_us"] = _us(lambda: mod._cache_views(kv), calls)
    row["grid_us"] = _us(lambda: mod._grid(batch, context, q.device), calls)
    if hasattr(mod, "_cache_descriptor"):  # (none where the cache loads take no TMA descriptor: the H100's 64x8K)
        row["desc_us"] = _us(lambda: mod._cache_descriptor(kv2, kv.shape[0], ps), calls)
    row["empty_us"] = _us(lambda: torch.empty(batch, context, device="cuda"), calls)
    try:
        row["direct_us"], row["direct_err"] = _direct_decode(mod, q, kv, w, lens, bt, out, batch, context, calls)
    except Exception as exc:  # an experiment on Triton's internals: report, do not fail the run
        row["direct_err"] = f"{type(exc).__name__}: {exc}"
    return row


def _direct_decode(mod, q, kv, w, lens, bt, out, batch, context, calls):
    """The decode module's kernel launched through its CompiledKernel's launcher, skipping
    JITFunction.run (the binder, the cache key, the globals check): what a cached launch would
    cost. Triton 3.6's internals; returns (host us per call, max abs difference to launch())."""
    import torch
    import triton
    jit = mod._decode_paged_kernel
    kv2, scales, ps, sps = mod._cache_views(kv)
    grid = mod._grid(batch, context, q.device)
    desc, use_tma = mod._cache_descriptor(kv2, kv.shape[0], ps)
    pos = [q, kv2, desc, scales, w, lens, bt, out, q.stride(0), q.stride(1), ps, sps, w.stride(0), 0, bt.stride(0),
           out.stride(0), bt.shape[1], mod._guess_per(context), context, batch]
    kw = dict(CLEAN=False, BATCH_POW2=triton.next_power_of_2(batch), USE_TMA=use_tma, PDL=False, launch_pdl=False,
              num_warps=mod.NUM_WARPS, num_stages=mod.NUM_STAGES)
    compiled = jit.run(*pos, grid=grid, warmup=True, **kw)
    device = torch.cuda.current_device()
    binder = jit.device_caches[device][4]
    bound = binder(*pos, **kw)[0]
    names = list(bound.keys())
    n_pos = len(pos)
    consts = [bound[n] for n in names[n_pos:]]
    g = tuple(grid) + (1,) * (3 - len(grid))
    fn, meta = compiled.function, compiled.packed_metadata
    get_stream = triton.runtime.driver.active.get_current_stream

    def launch():
        compiled.run(g[0], g[1], g[2], get_stream(device), fn, meta, None, None, None, *pos, *consts)

    ref = out.clone()
    mod.launch(q, kv, w, lens, bt, ref, context, False)
    out.fill_(0)
    launch()
    torch.cuda.synchronize()
    n = min(batch, 4)
    diff = float((out[:n] - ref[:n]).abs().max())
    return _us(launch, calls), f"max |direct - launch()| = {diff}"


def prefill_phases(il, rows: int, keys: int, calls: int) -> dict:
    import torch
    from indexer_logits._checks import check_prefill
    from indexer_logits._prefill import _ragged_selection, _split_kv
    q, kv, w, ks, ke, out = prefill_inputs(rows, keys)
    full = lambda: il.fp8_mqa_logits(q, kv, w, ks, ke, out=out)  # noqa: E731
    alloc = lambda: il.fp8_mqa_logits(q, kv, w, ks, ke)  # noqa: E731
    a = check_prefill(q, kv, w, ks, ke, check_values=False)
    sel = _ragged_selection(q, a)
    k, k_scale = _split_kv(q, kv)
    row = {"case": f"prefill {rows}x{keys}", "rung": sel.rung, "variant": sel.variant, "_call": full,
           "_alloc": alloc}
    _fast_and_full(row, full, alloc, calls)
    row.update({
           "checks_us": _us(lambda: check_prefill(q, kv, w, ks, ke, check_values=False), calls),
           "select_us": _us(lambda: _ragged_selection(q, a), calls),
           "launch_us": _us(lambda: sel.launch(q, k, k_scale, w, ks, ke, out, True), calls),
           "empty_us": _us(lambda: torch.empty(rows, keys, device="cuda"), calls)})
    return row


def deepgemm_row(dg, kind: str, size: tuple, calls: int) -> dict:
    """DeepGEMM's eager call at one case's shapes, checked against ours first; or why not."""
    import torch
    import indexer_logits as il
    from tuner import baselines
    row = {"case": f"{kind} {size[0]}x{size[1]}", "impl": "deep_gemm", "version": dg.version}
    if not dg:
        row["absent"] = dg.reason
        return row
    try:
        torch.manual_seed(7)
        if kind == "decode":
            q, kv, w, lens, bt, out = decode_inputs(*size)
            meta = dg.module.get_paged_mqa_logits_metadata(lens, kv.shape[1], dg.module.get_num_sms())
            call = lambda: dg.module.fp8_paged_mqa_logits(q, kv, w, lens, bt, meta, size[1], False)  # noqa: E731
            ours = il.fp8_paged_mqa_logits(q, kv, w, lens, bt, None, size[1], out=out)
            valid = torch.arange(size[1], device="cuda")[None, :] < lens[:, None]
        else:
            q, kv, w, ks, ke, out = prefill_inputs(*size)
            call = lambda: dg.module.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=False)  # noqa: E731
            ours = il.fp8_mqa_logits(q, kv, w, ks, ke, out=out)
            t = torch.arange(size[1], device="cuda")[None, :]
            valid = (t >= ks[:, None]) & (t < ke[:, None])
        row["diff"] = baselines.check(call(), ours, valid)
        if not row["diff"] < baselines.MAX_DIFF:
            row["absent"] = f"its logits differ from ours (calc_diff {row['diff']:.2e}): not timed"
            return row
        row["call_us"] = _us(call, calls)
        row["eager_us"] = _eager_us(call, max(200, calls // 10))
        row["_call"] = call
        if kind == "decode":
            row["metadata_us"] = _us(lambda: dg.module.get_paged_mqa_logits_metadata(lens, kv.shape[1],
                                                                                   dg.module.get_num_sms()), calls)
    except Exception as exc:  # a refused shape or a fault: the row says so, the run goes on
        row["absent"] = f"failed: {type(exc).__name__}: {baselines.first_line(exc)}"
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.eager", description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        from ._common import no_cuda
        return no_cuda()
    import indexer_logits as il
    from tuner import baselines
    dg = baselines.deepgemm("cuda")
    rows = []
    for kind, size in (("decode", (1, 256)), ("decode", (64, 8192)), ("prefill", (16, 512)), ("prefill", (1024, 8192))):
        phases = decode_phases if kind == "decode" else prefill_phases
        rows.append(dict(phases(il, *size, args.calls), impl="indexer_logits"))
        rows.append(deepgemm_row(dg, kind, size, args.calls))
    for mine, theirs in zip(rows[::2], rows[1::2]):  # ours and DeepGEMM's call alternated, per case
        fns = {"ours": mine["_call"], "ours_alloc": mine["_alloc"]}
        fns |= {"deep_gemm": theirs["_call"]} if "_call" in theirs else {}
        for name, (median, best) in _alternated(fns, args.calls).items():
            row, tag = (theirs, "") if name == "deep_gemm" else (mine, name[4:])
            row[f"alternated{tag}_us"], row[f"alternated{tag}_best_us"] = median, best
    for r in rows:
        r.pop("_call", None), r.pop("_alloc", None)
    ours = [r for r in rows if r["impl"] == "indexer_logits"]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "eager.json").write_text(json.dumps(rows, indent=1))
    for r in ours:
        print(f"--- {r['case']} ({r['rung']} {r['variant']}; every timed call replayed: {r['replayed']}): "
              f"cProfile of {args.calls} calls with the fast path off")
        print("\n".join(r["profile"].splitlines()[:40]))
        if "direct_err" in r:
            print(f"direct launch: {r.get('direct_us', 'n/a')} us; {r['direct_err']}")
    keys = list(dict.fromkeys(k for r in ours for k in r if k.endswith("_us") and not k.startswith("alternated")))
    keys.append("metadata_us")
    print("case".ljust(26) + "".join(k[:-3].rjust(9) for k in keys))
    for r in rows:
        label = r["case"] + (" DG" if r["impl"] == "deep_gemm" else "")
        print(label.ljust(26) + "".join((f"{r[k]:9.1f}" if k in r else " " * 9) for k in keys))
    print("host us per call, ours and DeepGEMM's alternated 5 times (median / best round):")
    for r in ours:
        dg_row = next(d for d in rows if d["impl"] == "deep_gemm" and d["case"] == r["case"])
        theirs = (f"DeepGEMM {dg_row['alternated_us']:.1f} / {dg_row['alternated_best_us']:.1f}; ours / DeepGEMM "
                  f"{r['alternated_us'] / dg_row['alternated_us']:.2f} (out=None: "
                  f"{r['alternated_alloc_us'] / dg_row['alternated_us']:.2f})"
                  if "alternated_us" in dg_row else "DeepGEMM absent")
        print(f"  {r['case']:20s} ours {r['alternated_us']:.1f} / {r['alternated_best_us']:.1f} (out=None: "
              f"{r['alternated_alloc_us']:.1f} / {r['alternated_alloc_best_us']:.1f}); {theirs}")
    for r in rows:
        if r["impl"] == "deep_gemm":
            mine = next(o for o in ours if o["case"] == r["case"])
            if "absent" in r:
                print(f"DeepGEMM {r['case']}: not run ({r['absent']})")
            else:
                print(f"DeepGEMM {r['version']} {r['case']}: eager {r['eager_us']:.1f} us, host {r['call_us']:.1f} us "
                      f"(calc_diff {r['diff']:.1e}); ours eager {mine['eager_us']:.1f} us, host {mine['call_us']:.1f} us: "
                      f"ours / DeepGEMM eager {mine['eager_us'] / r['eager_us']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
