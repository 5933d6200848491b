"""Why does `cli.py bench` read a decode kernel slower than the tuner and the sweeps do? (issue 7:
1x1M read 38.8-39.3 us in separate `bench` processes, 37.7 us in `gpu_decode_sweep.py`, for the
same module on the same H200.)

For each bucket, in one process, the table's module is timed two ways. One is as the tuner does it
(`time_candidate`: the module's own launch()). The other is as the bench's `shipped` does it (the
runtime API: checks, dispatch, then the same launch()). Each way is timed with the tuner's warm-up
(20 ms of replays) and with the bench's (100 ms), alternating, for a few rounds. Before the rounds,
the CUDA kernels that one API call launches are listed (torch profiler), so an extra kernel in the
API path would show. Prints p50 per launch (us).

Usage (GPU host): python3 scripts/gpu_bench_paths.py [--buckets 1x1048576:full,64x8192:full] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from gpu_pdl_check import module_for  # noqa: E402
from tuner.bench import api_launches  # noqa: E402
from tuner.buckets import parse_bucket_specs  # noqa: E402
from tuner.measure import time_candidate, timing_inputs  # noqa: E402
from indexer_logits._identity import Problem  # noqa: E402
from tuner.render import load_module  # noqa: E402
from tuner.timing import time_cuda_graph  # noqa: E402


def api_kernels(fn) -> list[str]:
    """The CUDA kernels one API call launches (after a first call has compiled everything)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", default="1x1048576:full,8x131072:full,64x8192:full")
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
    for bucket, lens in buckets:
        spec = f"{bucket.batch}x{bucket.context}:{lens}"
        sets = timing_inputs(problem, bucket, lens)
        src, variant = module_for(problem, bucket)
        module = load_module(src)
        api_fns = api_launches(problem, sets)
        print(f"{spec}: {variant}; one API call launches: {api_kernels(api_fns[0])}", flush=True)
        cells: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for warmup_ms in (20.0, 100.0):
                t = time_candidate(module, sets, False, "cuda_graph", args.replays, warmup_ms=warmup_ms)
                cells.setdefault(f"module, {warmup_ms:.0f} ms", []).append(1e3 * t.p50_ms)
                t = time_cuda_graph(api_fns, replays=args.replays, warmup_ms=warmup_ms)
                cells.setdefault(f"api, {warmup_ms:.0f} ms", []).append(1e3 * t.p50_ms)
        for name, values in cells.items():
            print(f"  {name:16s} " + " ".join(f"{v:8.2f}" for v in values), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
