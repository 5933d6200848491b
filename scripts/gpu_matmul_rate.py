"""How steady is the dense matmul rate that the prefill goals are measured against?

Measures tuner.timing.measure_matmul_rate (fp8 and bf16, 8192^3, CUDA-graph replay) several times
in a row after a warm-up and prints each figure, their spread, and the GPU's SM clock and power
as NVML reports them after each measurement.
Usage (GPU host): python scripts/gpu_matmul_rate.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from tuner.timing import measure_matmul_rate, warm_up_gpu


def clocks() -> str:
    q = "clocks.sm,power.draw,temperature.gpu"
    try:
        dev = torch.cuda.current_device()
        out = subprocess.run(["nvidia-smi", f"--id={dev}", f"--query-gpu={q}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--replays", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    warm_up_gpu(2.0)
    for dtype in ("fp8", "bf16"):
        rates = []
        for i in range(args.rounds):
            r = measure_matmul_rate(dtype, replays=args.replays) / 1e12
            rates.append(r)
            print(f"{dtype} round {i}: {r:7.0f} TFLOP/s   (sm clock, power, temp: {clocks()})", flush=True)
        print(f"{dtype}: min {min(rates):.0f}  median {statistics.median(rates):.0f}  max {max(rates):.0f} TFLOP/s "
              f"(spread {100 * (max(rates) - min(rates)) / max(rates):.1f}%)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
