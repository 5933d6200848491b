"""Where the host time of one eager top-k call goes (a call of one block: the selection's plan made once a call),
as bench.eager_topk calls it. For each case, after warm calls: the call's mean host time alone, then with timers
around its parts (the logits call, the workspace, the selection's plan and its run, the recorded launches, their
key and guard, torch's allocations, the SM count's lookups), each part's mean time and calls a top-k call; then
cProfile over the same calls, the top functions by own time.

    python3 docs/perf_logs/topk_eager_host/eager_profile.py [--calls 300] [--out FILE]
"""

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.eager import decode_inputs, prefill_inputs  # noqa: E402
from indexer_logits import _api, _call_key, _recorded_launches as R, _topk, _topk_select as S  # noqa: E402

CASES = (("decode", 1, 4096), ("decode", 64, 8192), ("prefill", 128, 8192), ("prefill", 1024, 4096))
K_ = 2048
# (owner, attribute, label): each wrapped with a timer while the parts are timed
PARTS = ((_topk, "topk_logits", "decode logits call"), (_topk, "topk_ragged_logits", "ragged logits call"),
         (S, "workspace", "workspace (zeros)"), (_topk, "select_rows", "select_rows"),
         (S, "plan_selection", "plan_selection"), (S.SelectionPlan, "run", "plan.run"),
         (R, "run", "recorded launches"), (_call_key, "skeleton_of", "key skeleton"), (_call_key, "find", "guard find"),
         (torch, "empty", "torch.empty"), (torch, "zeros", "torch.zeros"), (_api, "_device_sms", "_device_sms"))


def case_fn(kind: str, rows: int, keys: int):
    idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
    if kind == "decode":
        q, kv, w, lens, bt, _ = decode_inputs(rows, keys)
        return lambda: K.fp8_paged_mqa_topk(q, kv, w, lens, bt, None, keys, K_, out=idx)
    q, kv, w, ks, ke, _ = prefill_inputs(rows, keys)
    return lambda: K.fp8_mqa_topk(q, kv, w, ks, ke, K_, out=idx)


def host_us(fn, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return t


def timed_parts(fn, calls: int) -> dict:
    totals = {label: [0.0, 0] for _, _, label in PARTS}
    saved = []
    for owner, name, label in PARTS:
        real = getattr(owner, name)
        saved.append((owner, name, real))

        def wrap(*a, _real=real, _label=label, **kw):
            t0 = time.perf_counter()
            try:
                return _real(*a, **kw)
            finally:
                cell = totals[_label]
                cell[0] += time.perf_counter() - t0
                cell[1] += 1
        setattr(owner, name, wrap)
    try:
        whole = host_us(fn, calls)
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)
    return {"whole_us": round(whole, 1),
            **{label: (round(t / calls * 1e6, 2), round(n / calls, 2)) for label, (t, n) in totals.items() if n}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    result = {"device": torch.cuda.get_device_name(), "cases": {}}
    for kind, rows, keys in CASES:
        fn = case_fn(kind, rows, keys)
        for _ in range(20):
            fn()
        name = f"{kind} {rows}x{keys // 1024}K"
        v = result["cases"][name] = {"alone_us": round(min(host_us(fn, a.calls) for _ in range(3)), 1)}
        v["parts"] = timed_parts(fn, a.calls)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.calls):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        v["profile_tottime"] = text.getvalue()
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    for name, v in result["cases"].items():
        print(f"\n===== {name}\n{v['profile_tottime']}")
    for name, v in result["cases"].items():
        print(f"\n{name}: alone {v['alone_us']} us a call; with the timers {v['parts']['whole_us']}")
        for label, part in v["parts"].items():
            if label != "whole_us":
                print(f"  {label:22s} {part[0]:7.2f} us a call ({part[1]} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
