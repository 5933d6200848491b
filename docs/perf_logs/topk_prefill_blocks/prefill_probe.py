"""The ragged prefill top-k's bound path, its settings against each other in one process: the tile maxima
from the logits kernel's epilogue (EPILOGUE) or from the path's own kernels, and the count by rows
(COUNT_LANES), which lost end to end on the 4096 x 64K prefill while the tuner's prefill bucket timed it
faster. Four views of the same call:

1. end to end, eager, alternated (bench.topk.best_alternated with eager_us), sampled blocks exact;
2. the host's time to enqueue a call against the call's whole time (a host-bound call shows them equal),
   and whether every block's launches were replayed (indexer_logits._recorded_launches);
3. per-kernel device time of one call, summed over its blocks (torch.profiler);
4. the selection alone over the first block's logits in a CUDA graph (what the tuner times, but over the
   prefill's own logits), and the count's segments: programs whose segment overflowed, and the mean fill.

    python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py [--shape 4096x65536]
        [--variants COUNT_LANES=0,COUNT_LANES=1] [--block-rows 132,165,198] [--out FILE]

(Call 1 ran it at commit 62babd6 with --variants EPILOGUE=0,EPILOGUE=1,EPILOGUE=0+COUNT_LANES=1,
EPILOGUE=1+COUNT_LANES=1: the prefill epilogue it timed was reverted after it.)
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench._topk_profile import kernel_times  # noqa: E402
from bench.topk import best_alternated, eager_us, graph_us, sampled_mismatches  # noqa: E402
from indexer_logits import _recorded_launches as R, _topk_paths as P  # noqa: E402
from indexer_logits import _topk_select as S  # noqa: E402
from tuner.inputs import make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

from indexer_logits import _topk, _topk_bound as B  # noqa: E402


def parse_variant(text: str) -> dict:
    """"EPILOGUE=0+COUNT_LANES=1" -> {(module, name): value}: settings of indexer_logits._topk_bound, or
    _topk.EPILOGUE / RAGGED_EPILOGUE (the logits kernel writing the bound path's tile maxima)."""
    out = {}
    for part in text.split("+"):
        name, _, value = part.partition("=")
        module = _topk if name in ("EPILOGUE", "RAGGED_EPILOGUE") else B
        if not hasattr(module, name) or not value.lstrip("-").isdigit():
            raise SystemExit(f"--variants: {part!r} is not NAME=INT of _topk_bound's settings, EPILOGUE or RAGGED_EPILOGUE")
        out[(module, name)] = int(value)
    return out


def with_settings(values: dict, fn):
    """fn with those module values while it runs (read at each call)."""
    def call():
        saved = {key: getattr(*key) for key in values}
        try:
            for (module, name), v in values.items():
                old = saved[(module, name)]
                setattr(module, name, bool(v) if old is None or isinstance(old, bool) else type(old)(v))
            return fn()
        finally:
            for (module, name), v in saved.items():
                setattr(module, name, v)
    return call


def host_and_total(fn, calls: int = 5) -> tuple:
    """(median host us to enqueue fn, median us from enqueue to the device's end)."""
    host, total = [], []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e6)
        total.append((t2 - t0) * 1e6)
    return sorted(host)[calls // 2], sorted(total)[calls // 2]


def segments_seen(fn) -> dict:
    """One call of fn with the bound path's scratch kept: programs whose segment overflowed (count past
    the segment's slots; with a count a warp, COUNT_VOTE, any warp's past its sub-segment's) and the mean count
    over the slots, over every block."""
    kept, real = [], P._bound_scratch  # _topk_select holds its own reference (imported by name): patch both

    def keep(*a, **kw):
        out = real(*a, **kw)
        kept.append(out)
        return out
    P._bound_scratch = S._bound_scratch = keep
    shared, _topk.SHARE_PLANS = _topk.SHARE_PLANS, False  # (a block's own buffers each, as before SHARE_PLANS)
    try:
        fn()
        torch.cuda.synchronize()
    finally:
        P._bound_scratch = S._bound_scratch = real
        _topk.SHARE_PLANS = shared
    over = programs = 0
    fill = 0.0
    for _, _, seg, counts in kept:
        cap = seg.shape[2]
        if counts.dim() == 3:  # a count a warp (COUNT_VOTE): a program overflowed where any of its warps did
            sub = cap // counts.shape[2]
            over += int((counts > sub).any(2).sum())
            held = counts.clamp(max=sub).sum(2)
        else:
            over += int((counts > cap).sum())
            held = counts.clamp(max=cap)
        programs += held.numel()
        fill += float(held.float().sum()) / max(cap, 1)
    return {"blocks": len(kept), "programs": programs, "overflowed": over, "mean_fill": fill / max(programs, 1),
            "seg_slots": kept[0][2].shape[2] if kept else 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="4096x65536")
    ap.add_argument("--variants", default="COUNT_LANES=0,COUNT_LANES=1")
    ap.add_argument("--block-rows", default="",
                    help="comma-separated: also end to end with blocks of these many rows (max_scratch_bytes sized for "
                         "them under each variant's buffers), each variant, alternated")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows, keys = (int(x) for x in a.shape.split("x"))
    k = a.k
    print(torch.cuda.get_device_name(), flush=True)
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    args = inp.args()
    out = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    variants = {v: parse_variant(v) for v in a.variants.split(",")}
    fns = {name: with_settings(vals, lambda: K.fp8_mqa_topk(*args, k, out=out)) for name, vals in variants.items()}
    lbuf = torch.empty(rows, keys, device="cuda")
    fns_all = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf), **fns}
    result = {"device": torch.cuda.get_device_name(), "shape": a.shape,
              "block_rows": K._topk.scratch_rows(rows, keys, None, k, "cuda"),
              "serving": repr(S._serving(K._topk.scratch_rows(rows, keys, None, k, "cuda"), keys,
                                         torch.device("cuda"), "prefill")), "variants": {}}
    for name, fn in fns.items():
        bad, checked = sampled_mismatches(inp, (fn(), out.clone())[1], k)
        result["variants"][name] = {"bad_rows": bad, "checked_rows": checked}
    result["e2e_us"] = best_alternated(fns_all, 3, timer=eager_us)
    R.clear()
    for name, fn in fns.items():
        v = result["variants"][name]
        fn()
        fn()
        v["host_us"], v["total_us"] = host_and_total(fn)
        v["uncacheable"] = list(R._UNCACHEABLE.values())[:3]
        v["recorded_sequences"] = len(R.sequences())
        v["kernels"] = [(n.split("(")[0][-44:], c, round(us, 1)) for n, c, us in kernel_times(fn, calls=2)]
        v["segments"] = segments_seen(fn)
    # the selection alone over the first block's logits, in a CUDA graph (as the tuner times a bucket)
    b = result["block_rows"]
    blk = K.fp8_mqa_logits(inp.q[:b], inp.kv, inp.weights[:b], inp.cu_seqlen_ks[:b], inp.cu_seqlen_ke[:b], False)
    ws = S.workspace(b, "cuda")
    idx = torch.empty(b, k, dtype=torch.int32, device="cuda")
    sel = {name: with_settings(vals, lambda: S.select_rows(blk, k, S.WINDOW_RAGGED, idx, None, ws,
                                                           lo=inp.cu_seqlen_ks[:b], hi=inp.cu_seqlen_ke[:b],
                                                           kind="prefill"))
           for name, vals in variants.items()}
    for name, fn in sel.items():
        result["variants"][name]["block_selection_graph_us"] = graph_us(fn)
        result["variants"][name]["block_selection_eager_us"] = eager_us(fn)
    sizes = [int(x) for x in a.block_rows.split(",") if x]
    if sizes:
        fns_sized, result["sized_bytes"] = {"logits": fns_all["logits"]}, {}
        for n in sizes:
            for name, vals in variants.items():
                label = f"{name} @{n} rows"
                budget = with_settings(vals, lambda n=n: n * (keys * 4 + S.scratch_bytes_per_row(n, keys, k, "cuda")))()
                got = with_settings(vals, lambda b=budget: K._topk.scratch_rows(rows, keys, b, k, "cuda"))()
                result["sized_bytes"][label] = (budget, got)  # (the budget, the block's rows it gives)
                fns_sized[label] = with_settings(vals, lambda b=budget: K.fp8_mqa_topk(*args, k, out=out,
                                                                                      max_scratch_bytes=b))
                fns_sized[label]()
                result["variants"][name][f"bad_rows@{n}"] = sampled_mismatches(inp, out.clone(), k)[0]
        result["sized_e2e_us"] = best_alternated(fns_sized, 3, timer=eager_us)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k_: v for k_, v in result.items() if k_ != "variants"}))
    for name, v in result["variants"].items():
        print(f"\n{name}: bad {v['bad_rows']}/{v['checked_rows']}, e2e {result['e2e_us'][name]:.0f} us "
              f"({result['e2e_us'][name] / result['e2e_us']['logits']:.3f} of the logits), host {v['host_us']:.0f} "
              f"/ total {v['total_us']:.0f} us, sequences {v['recorded_sequences']}, uncacheable {v['uncacheable']}")
        print(f"  segments {v['segments']}")
        print(f"  block selection: graph {v['block_selection_graph_us']:.1f} us, eager {v['block_selection_eager_us']:.1f}")
        print("  kernels (launches, us a call): " + ", ".join(f"{n} x{c} {us}" for n, c, us in v["kernels"]))
    for label, us in result.get("sized_e2e_us", {}).items():
        if label != "logits":
            budget, got = result["sized_bytes"][label]
            print(f"{label:32s} ({budget / 2**20:5.1f} MiB, blocks of {got} rows): {us:8.0f} us "
                  f"({us / result['sized_e2e_us']['logits']:.3f} of the logits)")
    bad = [v for r in result["variants"].values() for n, v in r.items() if n.startswith("bad_rows")]
    return 1 if any(bad) else 0


if __name__ == "__main__":
    sys.exit(main())
