"""Where a top-k call's device time goes between its kernels: one call's kernels from torch.profiler's
trace (start and end of each), the gaps between consecutive kernels summed by the pair they sit between
(a negative gap: the next kernel started before the one before it ended, PDL), beside the kernels' own time.

    python3 docs/perf_logs/topk_gaps/timeline.py [--out DIR]

Cases: the 4096 x 64K ragged prefill (one eager call: its blocks' logits and selections), the 1 x 1M and
64 x 32K decode top-k (eager, after warm-up; and 20 replays of a CUDA graph of one call).
"""

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from tuner.inputs import make_decode_inputs, make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402


def short(name: str) -> str:
    for key in ("_prefill_ragged_kernel", "topk_", "_decode", "_paged", "memset", "fill", "zero"):
        if key in name:
            i = name.find(key)
            return name[i:i + 40].split("(")[0]
    return name[:40]


def kernels_of(fn, reps: int = 1) -> list:
    """[(name, start us, end us)] of the kernels fn runs (`reps` times), in start order."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.loads(Path(f.name).read_text())
    ev = [(short(e["name"]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
          for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    return sorted(ev, key=lambda e: e[1])


def summary(label: str, ev: list, reps: int = 1) -> dict:
    busy = collections.defaultdict(float)
    count = collections.Counter()
    gaps = collections.defaultdict(list)
    for name, s, e in ev:
        busy[name] += e - s
        count[name] += 1
    for (a, _, ea), (b, sb, _) in zip(ev, ev[1:]):
        gaps[(a, b)].append(sb - ea)
    span = ev[-1][2] - ev[0][1]
    out = {"case": label, "span_us": span / reps, "kernels_us": {n: busy[n] / reps for n in busy},
           "launches": {n: count[n] / reps for n in count},
           "gaps": {f"{a} -> {b}": {"n": len(g) / reps, "sum_us": sum(g) / reps, "mean_us": sum(g) / len(g),
                                    "min_us": min(g), "max_us": max(g)} for (a, b), g in gaps.items()}}
    print(f"\n{label}: span {span / reps:.1f} us a call, kernels {sum(busy.values()) / reps:.1f}", flush=True)
    for n in busy:
        print(f"  {n:42s} x{count[n] / reps:5.1f} {busy[n] / reps:9.1f} us", flush=True)
    for (a, b), g in sorted(gaps.items(), key=lambda kv: -sum(kv[1])):
        print(f"  gap {a} -> {b}: x{len(g) / reps:.1f} sum {sum(g) / reps:8.1f} mean {sum(g) / len(g):6.2f} "
              f"[{min(g):.2f}, {max(g):.2f}] us", flush=True)
    return out


def prefill(k: int) -> dict:
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 4096, 65536, device="cuda")
    out = torch.empty(4096, k, dtype=torch.int32, device="cuda")
    fn = lambda: K.fp8_mqa_topk(*pre.args(), k, out=out)  # noqa: E731
    for _ in range(2):
        fn()
    return summary("prefill 4096x64K, eager", kernels_of(fn))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    k = 2048
    res = [{"device": torch.cuda.get_device_name()}]
    res.append(prefill(k))
    torch.cuda.empty_cache()
    for rows, width in ((1, 1 << 20), (64, 32768)):
        inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
        o = torch.empty(rows, k, dtype=torch.int32, device="cuda")
        f = lambda: K.fp8_paged_mqa_topk(*args, k, out=o)  # noqa: E731
        for _ in range(3):
            f()
        res.append(summary(f"decode {rows}x{width}, eager, 5 calls", kernels_of(f, 5), 5))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            f()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            f()
        g.replay()
        res.append(summary(f"decode {rows}x{width}, graph, 20 replays", kernels_of(g.replay, 20), 20))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
