"""One-off (issue 26, item 4): does a launch cost the host more while the GPU works through a backlog?

Host us per call (median of batches, synchronised between batches) of: the served prefill call at
16x512 and 1024x8K and the served decode call at 64x8K, each with the GPU idle at the batch's
start and with the GPU busy (torch.cuda._sleep ahead of the batch, long enough to outlast it), and
at 1024x8K for batches of 10, 50 and 200 calls; the replay's C launch alone (Plan.__call__, no key,
no lookup); and a one-element torch add_ (torch's own launch) idle and busy.
    python3 docs/perf_logs/host_time_h200_guards/backlog.py
"""
import statistics
import time

import torch

import indexer_logits as il
from bench.eager import decode_inputs, prefill_inputs
from indexer_logits import _fastpath

SLEEP = int(3e8)  # cycles of torch.cuda._sleep: ~150 ms at the H200's clock, longer than any batch here


def host_us(fn, batch: int = 200, batches: int = 7, busy: bool = False) -> float:
    for _ in range(10):
        fn()
    per = []
    for _ in range(batches):
        torch.cuda.synchronize()
        if busy:
            torch.cuda._sleep(SLEEP)
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per.append((time.perf_counter() - t0) / batch)
        torch.cuda.synchronize()
    return statistics.median(per) * 1e6


def direct_of(call):
    """The replay's Plan and its inputs for the call (recorded by its first call)."""
    _fastpath.clear()
    call()
    call()
    (replay,) = _fastpath.replays().values()
    return replay


def main():
    rows = []
    q, kv, w, ks, ke, out = prefill_inputs(16, 512)
    small = lambda: il.fp8_mqa_logits(q, kv, w, ks, ke, out=out)  # noqa: E731
    Q, KV, W, KS, KE, OUT = prefill_inputs(1024, 8192)
    big = lambda: il.fp8_mqa_logits(Q, KV, W, KS, KE, out=OUT)  # noqa: E731
    dq, dkv, dw, dl, dbt, dout = decode_inputs(64, 8192)
    dec = lambda: il.fp8_paged_mqa_logits(dq, dkv, dw, dl, dbt, None, 8192, out=dout)  # noqa: E731
    x = torch.zeros(1, device="cuda")
    add = lambda: x.add_(1)  # noqa: E731
    for name, fn in (("prefill 16x512", small), ("prefill 1024x8K", big), ("decode 64x8K", dec), ("torch add_", add)):
        rows.append((name, "idle", 200, host_us(fn)))
        rows.append((name, "busy", 200, host_us(fn, busy=True)))
    for batch in (10, 50):
        rows.append(("prefill 1024x8K", "idle", batch, host_us(big, batch=batch, batches=21)))
    for name, fn in (("prefill 16x512", small), ("prefill 1024x8K", big)):
        replay = direct_of(fn)
        inputs = [q, kv[0], kv[1], w, ks, ke, out] if fn is small else [Q, KV[0], KV[1], W, KS, KE, OUT]
        plan = replay.direct
        stream = torch.cuda.current_stream().cuda_stream
        launch = lambda: plan(inputs, stream)  # noqa: E731
        rows.append((name + " C launch", "idle", 200, host_us(launch)))
        rows.append((name + " C launch", "busy", 200, host_us(launch, busy=True)))
    print(f"{'case':28s}{'GPU':>6s}{'batch':>7s}{'host us':>9s}")
    for name, state, batch, us in rows:
        print(f"{name:28s}{state:>6s}{batch:7d}{us:9.1f}")


if __name__ == "__main__":
    main()
