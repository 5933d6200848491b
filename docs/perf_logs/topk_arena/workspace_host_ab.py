"""The host time of eager top-k calls with a module flag off and on, alternated in one process: calls enqueued
back to back (host us a call), then one synchronisation (end to end us a call); the same indices both ways. By
default the flag is _topk_select.SKIP_UNREAD_WORKSPACE (a call the row path serves: no workspace against a zeroed
one; call 6), and the cases three that the row path serves on an H100; call 7 gives _topk_workspace.KEEP (the
workspace kept across calls) and cases of every path.

    python3 docs/perf_logs/topk_arena/workspace_host_ab.py [--flag MODULE.NAME] [--cases decode:128x8192,...]
        [--calls 300] [--rounds 5] [--out FILE]
"""

import argparse
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.eager import decode_inputs, prefill_inputs  # noqa: E402
from indexer_logits import _topk_select as S  # noqa: E402

K_ = 2048
CASES = "decode:128x8192,prefill:128x8192,decode:64x8192"


def case_fn(kind: str, rows: int, keys: int):
    idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
    if kind == "decode":
        q, kv, w, lens, bt, _ = decode_inputs(rows, keys)
        return idx, lambda: K.fp8_paged_mqa_topk(q, kv, w, lens, bt, None, keys, K_, out=idx)
    q, kv, w, ks, ke, _ = prefill_inputs(rows, keys)
    return idx, lambda: K.fp8_mqa_topk(q, kv, w, ks, ke, K_, out=idx)


def timed(fn, calls: int) -> tuple:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6, (time.perf_counter() - t0) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flag", default="_topk_select.SKIP_UNREAD_WORKSPACE")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    result = {"device": torch.cuda.get_device_name(), "flag": a.flag, "cases": {}}
    print(result["device"], a.flag, flush=True)
    module, _, flag = a.flag.rpartition(".")
    owner = importlib.import_module(f"indexer_logits.{module}")
    cases = [(kind, *(int(n) for n in shape.split("x"))) for kind, _, shape in
             (c.partition(":") for c in a.cases.split(","))]
    for kind, rows, keys in cases:
        idx, fn = case_fn(kind, rows, keys)
        answers, runs = {}, {True: [], False: []}
        for on in (False, True):
            setattr(owner, flag, on)
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            answers[on] = idx.sort(1).values.clone()
        for r in range(a.rounds):
            for on in ((False, True) if r % 2 == 0 else (True, False)):
                setattr(owner, flag, on)
                runs[on].append(timed(fn, a.calls))
        setattr(owner, flag, True)
        path = S._serving(rows, keys, torch.device("cuda"), kind)[0]
        name = f"{kind} {rows}x{keys // 1024}K ({path})"
        result["cases"][name] = v = {
            "same_indices": bool(torch.equal(answers[True], answers[False])),
            **{f"{'on' if on else 'off'}_{what}_us": round(statistics.median(t[i] for t in runs[on]), 1)
               for on in (False, True) for i, what in enumerate(("host", "call"))}}
        print(name, v, flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"\n{'case':30s} {'host us: off':>13s} {'on':>7s} {'call us: off':>13s} {'on':>7s} same")
    for name, v in result["cases"].items():
        print(f"{name:30s} {v['off_host_us']:13.1f} {v['on_host_us']:7.1f} {v['off_call_us']:13.1f} "
              f"{v['on_call_us']:7.1f} {v['same_indices']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
