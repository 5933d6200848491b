"""bench.checks clocks: a kernel timed after warm-ups of 0 ms to 5 s, with nvidia-smi's clocks,
power, temperature and throttle reasons sampled while each timing runs."""

from __future__ import annotations

import csv
import datetime as dt
import os
import statistics
import subprocess
import tempfile
import time



# ---------------------------------------------------------------------------------------------
# warmup

WARMUP_MODES = [("idle, 3 replays", 0.0, False), ("idle, 20 ms", 20.0, False), ("idle, 100 ms", 100.0, False),
                ("busy, 3 replays", 0.0, True), ("busy, 20 ms", 20.0, True), ("busy, 100 ms", 100.0, True)]


SMI_FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
CLOCK_WARMUPS_MS = (0.0, 20.0, 100.0, 500.0, 2000.0, 5000.0)


def smi_gpu() -> str:
    """The nvidia-smi index of the GPU this process uses (the first of CUDA_VISIBLE_DEVICES)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"


def sampler(path: str) -> subprocess.Popen:
    gpu = smi_gpu()
    fields = SMI_FIELDS
    probe = subprocess.run(["nvidia-smi", "-i", gpu, f"--query-gpu={fields}", "--format=csv,noheader"],
                           capture_output=True, text=True)
    if probe.returncode != 0:  # newer drivers name the throttle reasons "clocks_event_reasons"
        fields = fields.replace("clocks_throttle_reasons", "clocks_event_reasons")
    return subprocess.Popen(["nvidia-smi", "-i", gpu, f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                             "-lms", "20"], stdout=open(path, "w"), stderr=subprocess.DEVNULL)


def read_samples(path: str) -> list[tuple[float, list[str]]]:
    """(unix time, [sm MHz, mem MHz, W, C, throttle reasons]) per nvidia-smi line; others skipped."""
    out = []
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) < 6:
                continue
            try:
                t = dt.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            except ValueError:
                continue
            out.append((t, [c.strip() for c in row[1:]]))
    return out


def summarise(samples, t0: float, t1: float) -> str:
    """The medians of the samples taken in [t0, t1] and the throttle reasons seen."""
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


def clocks(buckets, replays: int, copy: bool, next_n: int = 1, deepgemm: bool = False,
           warmups_ms=CLOCK_WARMUPS_MS) -> int:
    """With deepgemm, DeepGEMM's kernel on the same inputs is timed right after ours at each
    warm-up (where it imports: tuner/baselines.py): whether a gap between the two is the clocks'."""
    import torch

    from indexer_logits._identity import Problem
    from tuner import baselines
    from tuner.bench import api_launches
    from tuner.measure import timing_inputs
    from tuner.timing import kernel_copy_bandwidth, time_cuda_graph

    problem = Problem(next_n=next_n)
    dg = baselines.deepgemm("cuda") if deepgemm else None
    if deepgemm and not dg:
        print(f"DeepGEMM: not timed ({dg.reason})")
    log = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    proc = sampler(log)
    phases = []
    try:
        time.sleep(1.0)  # idle first: the samples before the first timing show the idle clocks
        fns = None
        for bucket, lens in buckets:
            spec = f"{bucket.batch}x{bucket.context}:{lens}"
            sets = timing_inputs(problem, bucket, lens)
            fns = api_launches(problem, sets)
            kernels = [(spec, fns)]
            if dg:
                theirs = baselines.launches(dg.module, problem, sets)
                # checked against ours before it is timed, as the bench does (DeepGEMM's bound)
                diff = baselines.check(theirs[0](), fns[0](), sets[0].valid_mask())
                if not diff < baselines.MAX_DIFF:
                    raise SystemExit(f"{spec}: DeepGEMM's logits differ from ours (calc_diff {diff:.2e}); not timed")
                kernels.append((f"{spec} DeepGEMM", theirs))
            for _, k in kernels:
                time_cuda_graph(k, replays=3)  # compile and capture outside the phases
            torch.cuda.synchronize()
            time.sleep(1.0)
            for warmup_ms in warmups_ms:
                for name, k in kernels:
                    t0 = time.time()
                    p50 = 1e3 * time_cuda_graph(k, replays=replays, warmup_ms=warmup_ms).p50_ms
                    phases.append((name, warmup_ms, p50, t0, time.time()))
        if copy:
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
    print(f"next_n {next_n}\n{'bucket':27s} {'warm-up':>9s} {'p50 us':>8s}  while timed")
    for spec, warmup_ms, p50, t0, t1 in phases:
        if spec.startswith("copy"):
            print(f"{spec:28s} {p50:.3f} TB/s  {summarise(samples, t0, t1)}")
        else:
            print(f"{spec:27s} {warmup_ms:7.0f}ms {p50:8.2f}  {summarise(samples, t0, t1)}")
    return 0


# ---------------------------------------------------------------------------------------------
# page-stride

