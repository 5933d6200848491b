"""A top-k call's buffers from one allocation (indexer_logits._topk_buffers.ONE_ALLOCATION) against a buffer
each, alternated in one process: for each case the host time of an eager call (calls enqueued back to back, the
GPU's time excluded where the host is slower), the time a call takes end to end (calls back to back, then one
synchronisation: what a host-bound call costs), the peak memory a call adds, and whether both give the same
indices (each row's, sorted).

    python3 docs/perf_logs/topk_arena/arena_ab.py [--calls 300] [--rounds 5] [--out FILE]
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
from indexer_logits import _topk_buffers  # noqa: E402

K_ = 2048
# (kind, rows, keys, calls a timing as a fraction of --calls)
CASES = (("decode", 1, 4096, 1), ("decode", 64, 8192, 1), ("decode", 64, 32768, 1), ("decode", 1, 1 << 20, 1),
         ("prefill", 128, 8192, 1), ("prefill", 1024, 4096, 1), ("prefill", 8192, 8192, 0.1))


def case_fn(kind: str, rows: int, keys: int):
    idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
    if kind == "decode":
        q, kv, w, lens, bt, _ = decode_inputs(rows, keys)
        return idx, lambda: K.fp8_paged_mqa_topk(q, kv, w, lens, bt, None, keys, K_, out=idx)
    q, kv, w, ks, ke, _ = prefill_inputs(rows, keys)
    return idx, lambda: K.fp8_mqa_topk(q, kv, w, ks, ke, K_, out=idx)


def timed(fn, calls: int) -> tuple:
    """(host us a call, end-to-end us a call) over `calls` calls enqueued back to back."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6


def peak_bytes(fn) -> int:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    result = {"device": torch.cuda.get_device_name(), "cases": {}}
    for kind, rows, keys, share in CASES:
        name = f"{kind} {rows}x{keys // 1024}K"
        idx, fn = case_fn(kind, rows, keys)
        calls = max(5, int(a.calls * share))
        answers, runs = {}, {True: [], False: []}
        for on in (False, True):
            _topk_buffers.ONE_ALLOCATION = on
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            answers[on] = idx.sort(1).values.clone()
        peaks = {}
        for r in range(a.rounds):
            for on in ((False, True) if r % 2 == 0 else (True, False)):
                _topk_buffers.ONE_ALLOCATION = on
                runs[on].append(timed(fn, calls))
        for on in (False, True):
            _topk_buffers.ONE_ALLOCATION = on
            peaks[on] = peak_bytes(fn)
        _topk_buffers.ONE_ALLOCATION = True
        v = result["cases"][name] = {
            "same_indices": bool(torch.equal(answers[True], answers[False])), "calls": calls,
            **{f"{'one' if on else 'each'}_{what}_us": round(statistics.median(t[i] for t in runs[on]), 1)
               for on in (False, True) for i, what in enumerate(("host", "call"))},
            "each_peak_bytes": peaks[False], "one_peak_bytes": peaks[True], "runs": {str(on): runs[on] for on in runs}}
        print(name, {k: x for k, x in v.items() if k != "runs"}, flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"\n{'case':18s} {'host us: each':>14s} {'one':>7s} {'call us: each':>14s} {'one':>7s} "
          f"{'peak MiB: each':>15s} {'one':>7s} same")
    for name, v in result["cases"].items():
        print(f"{name:18s} {v['each_host_us']:14.1f} {v['one_host_us']:7.1f} {v['each_call_us']:14.1f} "
              f"{v['one_call_us']:7.1f} {v['each_peak_bytes'] / 2**20:15.2f} {v['one_peak_bytes'] / 2**20:7.2f} "
              f"{v['same_indices']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
