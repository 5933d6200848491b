"""Does the GPU's clock state move a timing? (issue 7: `cli.py bench` read the 64x8K kernel 6%
slower than `scripts/gpu_ceilings.py` did, on the same module, inputs and timer.)

For each bucket, the shipped kernel through the runtime API, timed by `time_cuda_graph` after the
GPU sat idle for a second, with the warm-up of earlier versions (3 replays: `warmup_ms=0`) and
with time-based warm-ups; and the same three right after a busy second (`warm_up_gpu`: bf16
matmuls). Three rounds, so a drift shows. Prints p50 per launch (us) per mode and round.
(The first run, `docs/perf_logs/h200_v7/bench2_warmup/warmup_check.log`, had the busy state with
3 replays only.)

Usage (GPU host): python3 scripts/gpu_warmup_check.py [--buckets 64x8192:full,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from tuner.bench import api_launches  # noqa: E402
from tuner.buckets import parse_bucket_specs  # noqa: E402
from tuner.measure import timing_inputs  # noqa: E402
from indexer_logits._identity import Problem  # noqa: E402
from tuner.timing import time_cuda_graph, warm_up_gpu  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", default="64x8192:full,64x8192:quarter,64x131072:full")
    ap.add_argument("--replays", type=int, default=10, help="timed replays, as `cli.py bench` uses")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        buckets = parse_bucket_specs(args.buckets)
    except ValueError as exc:
        ap.error(str(exc))
    if not torch.cuda.is_available():
        print("no CUDA device: run on the GPU host", file=sys.stderr)
        return 2
    problem = Problem()  # fp8, H=64, D=128, page 64, next_n 1
    modes = [("idle, 3 replays", 0.0, False), ("idle, 20 ms", 20.0, False), ("idle, 100 ms", 100.0, False),
             ("busy, 3 replays", 0.0, True), ("busy, 20 ms", 20.0, True), ("busy, 100 ms", 100.0, True)]
    warm_up_gpu()
    print(f"{'bucket':18s} {'mode':16s} " + " ".join(f"round {r + 1:>2d}" for r in range(args.rounds)), flush=True)
    for bucket, lens in buckets:
        spec = f"{bucket.batch}x{bucket.context}:{lens}"
        sets = timing_inputs(problem, bucket, lens)
        fns = api_launches(problem, sets)
        time_cuda_graph(fns, replays=3)  # compile and load the module outside the rounds
        for name, warmup_ms, busy in modes:
            cells = []
            for _ in range(args.rounds):
                torch.cuda.synchronize()
                if busy:
                    warm_up_gpu(1.0)
                else:
                    time.sleep(1.0)
                t = time_cuda_graph(fns, replays=args.replays, warmup_ms=warmup_ms)
                cells.append(f"{t.p50_ms * 1e3:8.1f}")
            print(f"{spec:18s} {name:16s} " + " ".join(cells), flush=True)
        del sets, fns
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
