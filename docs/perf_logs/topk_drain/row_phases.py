"""Where the row path's program spends its time at 128 x 8K (one program of 16 warps a row, its row held in
registers): the kernel of indexer_logits._topk_row copied, %globaltimer read at each phase's end by every
program, over the decode logits of bench.topk's case (docs/PERF.md, "Next ideas": "a profile of the held
kernel's phases"; 128 x 8K is ~1.4 us from the bar on an H100).

Phases (the held path, a row of at most two steps): the row's two loads and its range; the one histogram; the
threshold bin and its count; the write pass (the scores above the bin to the output, the bin's to the
candidates); the candidates' sort (after the barrier that makes them visible); the answer's stores and the pad.
A timer read is a volatile instruction in program order: the values a phase computes are awaited where the next
phase's first instruction needs them, so each figure is that phase plus the latency it leaves to the next.

    python3 docs/perf_logs/topk_drain/row_phases.py [--case 128x8192] [--out FILE]
"""

import argparse
import json
import statistics
from pathlib import Path

import torch

from _probe import GTIMER_SOURCE, K_BEST, decode_case, module_from_source, row_launch, row_source
from bench.topk import graph_us
from indexer_logits import _topk_row

TIMER = GTIMER_SOURCE + '''

@triton.jit
def _mark(stamps_ptr, row, i: tl.constexpr):
    o = tl.arange(0, 1)
    tl.store(stamps_ptr + row * 8 + i + o, _gtimer(o.to(tl.int32)))

'''
PHASES = ["load + range", "histogram", "threshold", "write pass", "sort", "answer + pad"]
# (text after which a mark goes, the mark's index, its indentation); each text occurs once in the kernel
MARKS = [
    ("    row = tl.program_id(0)\n", 0, 4),
    ("            kmax = tl.max(tl.maximum(max0, max1), 0)\n", 1, 12),
    ("                      + tl.histogram(_digits(x1, m_lo, scale, BINS_)[0], BINS_, mask=m1))\n", 2, 12),
    ("        in_bin = tl.sum(tl.where(tl.arange(0, BINS_) == bt, counts, 0), 0)\n", 3, 8),
    ("            tl.debug_barrier()  # the candidates this program's threads wrote, visible to all of them\n", 4, 12),
    ("                           descending=True)\n", 5, 12),
]


def stamped_module():
    """_topk_row with the timer read at each phase's end (launched without INLINE_: tl.store's form, the one
    calls 1 and 2 ran)."""
    src = row_source()
    for old, new in (("\n@triton.jit\ndef topk_row_kernel(", TIMER + "\n@triton.jit\ndef topk_row_kernel("),
                     ("HOLD_: tl.constexpr = False,\n                    INLINE_: tl.constexpr = False):",
                      "HOLD_: tl.constexpr = False,\n                    INLINE_: tl.constexpr = False, stamps_ptr=None):")):
        if src.count(old) != 1:
            raise SystemExit(f"row_phases: expected one {old!r} in _topk_row")
        src = src.replace(old, new)
    for text, i, width in MARKS:
        if src.count(text) != 1:
            raise SystemExit(f"row_phases: expected one {text!r} in _topk_row")
        indent = " " * width
        if i == 4:  # before the barrier, at the write pass's end
            src = src.replace(text, f"{indent}_mark(stamps_ptr, row, {i})\n" + text)
        else:
            src = src.replace(text, text + f"{indent}_mark(stamps_ptr, row, {i})\n")
    end = "\n\n@triton.jit\ndef _write_step("
    if src.count(end) != 1:
        raise SystemExit("row_phases: the kernel's end not found")
    src = src.replace(end, "\n    _mark(stamps_ptr, row, 6)\n" + end)
    return module_from_source(src, "row_phases_stamped")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="128x8192")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dev, k, rk = torch.device("cuda"), K_BEST, _topk_row
    batch, ctx, _, logits, lens = decode_case(a.case, dev)
    block, warps, cap = rk.BLOCK, rk.NUM_WARPS, rk.CAP
    bins = rk.bins_for(ctx)
    hold = rk.holds(rk.HOLD, ctx, block, warps)
    mod = stamped_module()
    idx = torch.empty((batch, k), dtype=torch.int32, device=dev)
    cands = torch.empty((batch, cap), dtype=torch.int64, device=dev)
    st = torch.zeros((batch, 8), dtype=torch.int64, device=dev)
    plain = row_launch(rk.topk_row_kernel, logits, lens, idx, cands, k)
    stamped = row_launch(mod.topk_row_kernel, logits, lens, idx, cands, k, stamps_ptr=st)
    plain()
    want = torch.sort(idx.clone(), dim=1).values
    stamped()
    torch.cuda.synchronize()
    exact = bool(torch.equal(torch.sort(idx, dim=1).values, want))
    ref = torch.topk(logits, k, dim=1).indices.int()
    same_set = bool(torch.equal(torch.sort(ref, dim=1).values, want))
    times = {"plain_us": min(graph_us(plain), graph_us(plain)), "stamped_us": min(graph_us(stamped), graph_us(stamped))}
    runs = []
    for _ in range(5):
        st.zero_()
        stamped()
        torch.cuda.synchronize()
        runs.append(st.double().cpu())
    phases = {p: [] for p in PHASES}
    spans, totals = [], []
    for s in runs:
        t = (s - s[:, :1]) / 1e3  # us from each program's start
        for i, p in enumerate(PHASES):
            phases[p].extend((t[:, i + 1] - t[:, i]).tolist())
        totals.extend(t[:, 6].tolist())
        spans.append((s[:, 6].max() - s[:, 0].min()).item() / 1e3)
    starts = (runs[-1][:, 0] - runs[-1][:, 0].min()) / 1e3
    result = {"gpu": torch.cuda.get_device_name(), "case": a.case, "hold": hold, "bins": bins, "block": block,
              "warps": warps, "cap": cap, "same_indices_as_unstamped": exact, "same_set_as_torch_topk": same_set,
              **times, "kernel_span_us_median": statistics.median(spans),
              "program_us_median": statistics.median(totals),
              "program_start_spread_us": [float(starts.min()), float(starts.max())],
              "phase_us_median": {p: statistics.median(v) for p, v in phases.items()},
              "phase_us_p90": {p: sorted(v)[int(0.9 * len(v))] for p, v in phases.items()}}
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k_: v for k_, v in result.items() if not k_.startswith("phase")}))
    print(f"\n{a.case} row program ({'held' if hold else 'not held'}, {bins} bins, {warps} warps): us, median (p90)")
    for p in PHASES:
        print(f"  {p:14s} {result['phase_us_median'][p]:6.2f} ({result['phase_us_p90'][p]:.2f})")
    print(f"  {'program':14s} {result['program_us_median']:6.2f}; kernel span {result['kernel_span_us_median']:.2f}; "
          f"graph: plain {times['plain_us']:.2f}, stamped {times['stamped_us']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
