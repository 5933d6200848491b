"""Does a decode kernel slow down when it runs for a while, and is it the clocks? (issue 7: the
table's 1x1M kernel read 37.9 us right after its first 20 ms of replays and 38.9-39.1 us after
100 ms, in one process: `scripts/gpu_bench_paths.py`.)

For each bucket, the table's module (through the runtime API, as the bench's `shipped`) is timed by
graph replay after warm-ups of increasing length, each run straight after the one before. Meanwhile
`nvidia-smi` samples the SM and memory clocks, the power draw, the temperature and the active
clock-throttle reasons every 20 ms. Prints, per warm-up, the p50 per launch (us) and the medians
of the samples taken while that timing ran.

--copy: then the copy bandwidth (the floor's divisor: an SM kernel copying 4 GiB, graph replay, no
warm-up) after two idle seconds and right after 5 s of the last bucket's kernel, so the floor can be
read at both clock states.

Usage (GPU host): python3 scripts/gpu_sustained_clocks.py [--buckets 1x1048576:full,64x8192:full] [--copy]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from tuner.bench import api_launches  # noqa: E402
from tuner.buckets import parse_bucket_specs  # noqa: E402
from tuner.measure import timing_inputs  # noqa: E402
from indexer_logits._identity import Problem  # noqa: E402
from tuner.timing import kernel_copy_bandwidth, time_cuda_graph  # noqa: E402

FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
WARMUPS_MS = (0.0, 20.0, 100.0, 500.0, 2000.0, 5000.0)


def sampler(path: str) -> subprocess.Popen:
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    fields = FIELDS
    probe = subprocess.run(["nvidia-smi", "-i", gpu, f"--query-gpu={fields}", "--format=csv,noheader"],
                           capture_output=True, text=True)
    if probe.returncode != 0:  # newer drivers name the throttle reasons "clocks_event_reasons"
        fields = fields.replace("clocks_throttle_reasons", "clocks_event_reasons")
    return subprocess.Popen(["nvidia-smi", "-i", gpu, f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                             "-lms", "20"], stdout=open(path, "w"), stderr=subprocess.DEVNULL)


def read_samples(path: str) -> list[tuple[float, list[str]]]:
    out = []
    for row in csv.reader(open(path)):
        if len(row) < 6:
            continue
        try:
            t = dt.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        except ValueError:
            continue
        out.append((t, [c.strip() for c in row[1:]]))
    return out


def summarise(samples, t0: float, t1: float) -> str:
    window = [v for t, v in samples if t0 <= t <= t1]
    if not window:
        return "no samples"

    def med(i):
        try:
            return f"{statistics.median(float(v[i]) for v in window):.0f}"
        except ValueError:
            return "?"
    reasons = sorted({v[4] for v in window})
    return (f"sm {med(0)} MHz, mem {med(1)} MHz, {med(2)} W, {med(3)} C, throttle {'/'.join(reasons)} "
            f"({len(window)} samples)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", default="1x1048576:full,64x8192:full")
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--copy", action="store_true", help="also the copy bandwidth, idle and right after 5 s of load")
    args = ap.parse_args()
    try:
        buckets = parse_bucket_specs(args.buckets)
    except ValueError as exc:
        ap.error(str(exc))
    if not torch.cuda.is_available():
        print("no CUDA device: run on the GPU host", file=sys.stderr)
        return 2
    problem = Problem()
    log = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    proc = sampler(log)
    phases = []
    try:
        time.sleep(1.0)  # idle first: the samples before the first timing show the idle clocks
        for bucket, lens in buckets:
            spec = f"{bucket.batch}x{bucket.context}:{lens}"
            sets = timing_inputs(problem, bucket, lens)
            fns = api_launches(problem, sets)
            time_cuda_graph(fns, replays=3)  # compile and capture outside the phases
            torch.cuda.synchronize()
            time.sleep(1.0)
            for warmup_ms in WARMUPS_MS:
                t0 = time.time()
                p50 = 1e3 * time_cuda_graph(fns, replays=args.replays, warmup_ms=warmup_ms).p50_ms
                phases.append((spec, warmup_ms, p50, t0, time.time()))
        if args.copy:
            nbytes = 4 << 30
            src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
            dst = torch.empty_like(src)

            def copy_tb_s() -> float:
                return kernel_copy_bandwidth(src, dst, replays=10, warmup_ms=0.0) / 1e12

            copy_tb_s()  # capture outside the phases
            torch.cuda.synchronize()
            time.sleep(2.0)
            for state in ("copy, after 2 s idle", "copy, after 5 s of load"):
                if state.endswith("load"):
                    time_cuda_graph(fns, replays=3, warmup_ms=5000.0)
                t0 = time.time()
                bw = copy_tb_s()
                phases.append((state, 0.0, bw, t0, time.time()))
    finally:
        time.sleep(0.1)
        proc.terminate()
        proc.wait(timeout=10)
    samples = read_samples(log)
    print(f"{len(samples)} nvidia-smi samples; idle before the first timing: "
          f"{summarise(samples, samples[0][0] if samples else 0, phases[0][3] if phases else 0)}")
    print(f"{'bucket':18s} {'warm-up':>9s} {'p50 us':>8s}  while timed")
    for spec, warmup_ms, p50, t0, t1 in phases:
        if spec.startswith("copy"):
            print(f"{spec:28s} {p50:.3f} TB/s  {summarise(samples, t0, t1)}")
        else:
            print(f"{spec:18s} {warmup_ms:7.0f}ms {p50:8.2f}  {summarise(samples, t0, t1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
