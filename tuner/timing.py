"""Timers. Every stored timing names the method that produced it.

- `cuda_graph`: the launches are captured in one CUDA graph that cycles over several input
  sets (so that repeated runs do not measure L2), and the graph is replayed many times; the
  per-launch time is replay time / launches per graph. p20/p50/p80 over replays.
- `wall_clock`: host clock around synchronous calls, for the CPU interpreter (tests of the
  tuning loop); its numbers say nothing about a GPU.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import torch


@dataclass(frozen=True)
class Timing:
    method: str
    p20_ms: float
    p50_ms: float
    p80_ms: float
    samples: int

    def to_dict(self) -> dict:
        return asdict(self)


def _quantiles(samples_ms: Sequence[float], method: str) -> Timing:
    s = sorted(samples_ms)
    pick = lambda q: s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]
    return Timing(method, pick(0.2), statistics.median(s), pick(0.8), len(s))


def time_wall_clock(fns: Sequence[Callable[[], object]], reps: int = 5, warmup: int = 1) -> Timing:
    """Host-clock timing of synchronous callables (cycled), for CPU runs."""
    for i in range(warmup):
        fns[i % len(fns)]()
    samples = []
    for i in range(reps):
        t0 = time.perf_counter()
        fns[i % len(fns)]()
        samples.append((time.perf_counter() - t0) * 1e3)
    return _quantiles(samples, "wall_clock")


MIN_REPLAYS = 5
DEFAULT_BUDGET_MS = 400.0  # GPU time one timing may take; huge buckets get fewer replays
DEFAULT_WARMUP_MS = 20.0  # GPU time replayed before timing, so clocks settle (time_cuda_graph)


def time_cuda_graph(fns: Sequence[Callable[[], object]], replays: int = 50, min_launches: int = 8,
                    warmup_replays: int = 3, budget_ms: float | None = DEFAULT_BUDGET_MS,
                    warmup_ms: float = DEFAULT_WARMUP_MS, min_replays: int = MIN_REPLAYS) -> Timing:
    """Capture `fns` (cycled to at least `min_launches` launches) in one graph; time replays.

    With `budget_ms`, the replay count is cut (to no fewer than `min_replays`) so that the timed
    replays take about that long: a 256 x 1M bucket runs ~9 ms a launch, and 30 replays of 8
    launches would spend 2 s of GPU time on one candidate.

    Before the timed replays the graph is replayed `warmup_replays` times and then until about
    `warmup_ms` of GPU time has passed: after power-heavy work (a second of matmuls, as
    `warm_up_gpu` runs) the H200 ran a 20 us decode kernel 5-9% slower, and three replays of it
    (under a millisecond) were timed inside that window (docs/PERF.md, "The bench's clocks")."""
    if not torch.cuda.is_available():
        raise RuntimeError("time_cuda_graph needs a CUDA device")
    launches = max(min_launches, len(fns))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in fns:  # compile and warm outside the capture
            f()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(launches):
            fns[i % len(fns)]()
    w0, w1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    w0.record()
    for _ in range(warmup_replays):
        graph.replay()
    w1.record()
    torch.cuda.synchronize()
    warmed_ms = w0.elapsed_time(w1)
    per_replay = max(warmed_ms / max(warmup_replays, 1), 1e-3)
    for _ in range(max(0, math.ceil((warmup_ms - warmed_ms) / per_replay))):
        graph.replay()
    if budget_ms is not None:
        replays = max(min_replays, min(replays, int(budget_ms / per_replay)))
    start = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for i in range(replays):
        start[i].record()
        graph.replay()
        end[i].record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) / launches for s, e in zip(start, end)]
    del graph
    return _quantiles(samples, "cuda_graph")


def warm_up_gpu(seconds: float = 1.0) -> None:
    """Keep the GPU busy long enough for its clocks to leave idle (a cold H200 idles at ~400 MHz
    and the first milliseconds of any measurement would otherwise run slow)."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


def kernel_copy_bandwidth(src: torch.Tensor, dst: torch.Tensor, replays: int = 20,
                          warmup_ms: float = DEFAULT_WARMUP_MS) -> float:
    """Bytes/s (read plus written) of an elementwise SM kernel copying `src` into `dst`, captured
    in a graph: measure_copy_bandwidth's "graph_kernel" figure."""
    t = time_cuda_graph([lambda: torch.mul(src, 1.0, out=dst)], replays=replays, min_launches=4, warmup_ms=warmup_ms)
    return 2 * src.numel() * src.element_size() / (t.p50_ms * 1e-3)


def measure_copy_bandwidth(nbytes: int = 4 << 30, replays: int = 20, report: dict | None = None) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written.

    Best of: `copy_` timed with events outside a graph, `copy_` captured in a graph (a memcpy
    node, which may go to a copy engine), and an elementwise SM kernel captured in a graph.
    `report`, when given, receives each variant's figure.
    """
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    warm_up_gpu()
    figures = {}
    figures["graph_memcpy"] = 2 * nbytes / (time_cuda_graph([lambda: dst.copy_(src)], replays=replays, min_launches=4).p50_ms * 1e-3)
    figures["graph_kernel"] = kernel_copy_bandwidth(src, dst, replays)
    samples = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        torch.cuda.synchronize()
        samples.append(a.elapsed_time(b))
    figures["eager_copy"] = 2 * nbytes / (statistics.median(samples) * 1e-3)
    if report is not None:
        report.update(figures)
    del src, dst
    return max(figures.values())


def measure_matmul_rate(dtype: str = "fp8", n: int = 8192, replays: int = 10) -> float:
    """Dense matmul rate in flop/s on random data: torch._scaled_mm for fp8, matmul for bf16."""
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if dtype == "fp8":
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major B, as _scaled_mm wants
        one = torch.ones((), device="cuda")
        fn = lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)
    else:
        a16, b16 = a.bfloat16(), b.bfloat16()
        fn = lambda: a16 @ b16
    t = time_cuda_graph([fn], replays=replays, min_launches=2)
    return 2 * n**3 / (t.p50_ms * 1e-3)
