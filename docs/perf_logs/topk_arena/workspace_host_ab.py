"""The host time of an eager top-k call the row path serves, its workspace skipped (_topk_select.
SKIP_UNREAD_WORKSPACE) against zeroed, alternated in one process: calls enqueued back to back (host us a call),
then one synchronisation (end to end us a call); the same indices both ways.

    python3 docs/perf_logs/topk_arena/workspace_host_ab.py [--calls 300] [--rounds 5] [--out FILE]
"""

import argparse
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
CASES = (("decode", 128, 8192), ("prefill", 128, 8192), ("decode", 64, 8192))  # (the last: not the row path's)


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
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    result = {"device": torch.cuda.get_device_name(), "cases": {}}
    print(result["device"], flush=True)
    for kind, rows, keys in CASES:
        idx, fn = case_fn(kind, rows, keys)
        answers, runs = {}, {True: [], False: []}
        for skip in (False, True):
            S.SKIP_UNREAD_WORKSPACE = skip
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            answers[skip] = idx.sort(1).values.clone()
        for r in range(a.rounds):
            for skip in ((False, True) if r % 2 == 0 else (True, False)):
                S.SKIP_UNREAD_WORKSPACE = skip
                runs[skip].append(timed(fn, a.calls))
        S.SKIP_UNREAD_WORKSPACE = True
        path = S._serving(rows, keys, torch.device("cuda"), kind)[0]
        name = f"{kind} {rows}x{keys // 1024}K ({path})"
        result["cases"][name] = v = {
            "same_indices": bool(torch.equal(answers[True], answers[False])),
            **{f"{'skipped' if skip else 'zeroed'}_{what}_us": round(statistics.median(t[i] for t in runs[skip]), 1)
               for skip in (False, True) for i, what in enumerate(("host", "call"))}}
        print(name, v, flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"\n{'case':30s} {'host us: zeroed':>16s} {'skipped':>8s} {'call us: zeroed':>16s} {'skipped':>8s} same")
    for name, v in result["cases"].items():
        print(f"{name:30s} {v['zeroed_host_us']:16.1f} {v['skipped_host_us']:8.1f} {v['zeroed_call_us']:16.1f} "
              f"{v['skipped_call_us']:8.1f} {v['same_indices']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
