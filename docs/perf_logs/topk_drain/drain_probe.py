"""What a ragged prefill top-k's blocks cost its logits kernel, and whether a block's rows could be selected
before the block's kernel ends (docs/PERF.md, "Top-k: the logits kernel's blocks, timed program by program").

The 4096 x 64K prefill top-k scores its rows in 25 blocks of 164, and the ragged logits kernel summed over them
runs ~500 us longer than over all rows in one call (~140 us of it the tile maxima's epilogue). The rest would be
each block's ramp and drain: the selection's first kernel waits for the whole block, so whatever SM time the
block's last wave leaves idle is lost, 25 times. A selection that started on a block's rows as they finish (a
per-row count of finished programs, the selection's kernels launched early and waiting on it) would fill that
time, but only if rows finish before the kernel does: the ragged kernel's grid is (row groups, chunks), row
groups fastest, so every row's last chunk runs in the last wave. With chunks fastest, rows finish in order.

This probe, on the module that serves a 164-row block (its source copied, edited, imported):
1. CUDA graphs, alternated: the kernel over all rows in one launch, and over the 25 blocks back to back into
   one scratch block (plain launches, no selection between), the maxima's epilogue off and on; with the grid
   as emitted (row groups fastest) and transposed (chunks fastest, the same programs in another order).
2. One block, one launch each order, every program stamped (%globaltimer at its start and end, %smid, its row
   group and chunk): the span, the programs' durations, the SMs' idle time after their last program (the
   drain), and when each row group's last program ended (what a per-row wait would see).

    python3 docs/perf_logs/topk_drain/drain_probe.py [--shape 4096x65536] [--rounds 5] [--out FILE]
"""

import inspect
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from _probe import GTIMER_SOURCE, edit_source, module_from_source, prefill_case  # noqa: E402  (it imports indexer_logits first: its tables and modules)
from bench.topk import best_alternated, graph_us  # noqa: E402
from indexer_logits import _prefill, _topk  # noqa: E402

STAMP_HELPERS = GTIMER_SOURCE + '''

@triton.jit
def _smid(dummy):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dummy], dtype=tl.int32, is_pure=False, pack=1)


STAMPS = [None]
'''

STAMP_START = '''    MH: tl.constexpr = BLOCK_M * HEADS
    if STAMP:
        _t0 = _gtimer(tl.full([1], 0, tl.int32))
'''

STAMP_END = '''    if STAMP:
        _o = tl.arange(0, 1)
        _at = stamps_ptr + (tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)) * 4 + _o
        tl.store(_at, _t0)
        tl.store(_at + 1, _gtimer(tl.full([1], 0, tl.int32)))
        tl.store(_at + 2, _smid(tl.full([1], 0, tl.int32)).to(tl.int64))
        tl.store(_at + 3, ((m0 // BLOCK_M) * 65536 + chunk_start // (TILES * BLOCK_T)).to(tl.int64) + _o * 0)


def launch('''


def _edit(src: str, old: str, new: str) -> str:
    return edit_source(src, old, new, "drain_probe")


def variant(path: Path, chunks_first: bool, stamped: bool, name: str):
    """The serving module's source with its grid transposed (chunks_first) and/or its programs stamped."""
    src = path.read_text()
    if chunks_first:
        src = _edit(src, "m0 = tl.program_id(0) * BLOCK_M", "m0 = tl.program_id(1) * BLOCK_M")
        src = _edit(src, "chunk_start = tl.program_id(1) * (TILES * BLOCK_T)",
                    "chunk_start = tl.program_id(0) * (TILES * BLOCK_T)")
        src = _edit(src, "if tl.program_id(1) == 0:", "if tl.program_id(0) == 0:")
        src = _edit(src, "grid = (triton.cdiv(num_rows, BLOCK_M), triton.cdiv(num_keys, CHUNK))",
                    "grid = (triton.cdiv(num_keys, CHUNK), triton.cdiv(num_rows, BLOCK_M))")
    if stamped:
        src = _edit(src, "\n@triton.jit\ndef _prefill_ragged_kernel(", STAMP_HELPERS + "\n@triton.jit\ndef _prefill_ragged_kernel(")
        src = _edit(src, "TILE_MAX: tl.constexpr = 0, TILE_RANGE: tl.constexpr = False,\n):",
                    "TILE_MAX: tl.constexpr = 0, TILE_RANGE: tl.constexpr = False, stamps_ptr=None,\n"
                    "    STAMP: tl.constexpr = False,\n):")
        src = _edit(src, "    MH: tl.constexpr = BLOCK_M * HEADS\n", STAMP_START)
        src = _edit(src, "\n\ndef launch(", "\n" + STAMP_END)
        src = _edit(src, "num_warps=NUM_WARPS, num_stages=NUM_STAGES,\n    )",
                    "stamps_ptr=STAMPS[0], STAMP=STAMPS[0] is not None, num_warps=NUM_WARPS, "
                    "num_stages=NUM_STAGES,\n    )")
    return module_from_source(src, f"drain_probe_{name}")


def stamp_summary(st: torch.Tensor, launched: int) -> dict:
    """Per-program (start, end, sm, row group << 16 | chunk) in ns -> the block's timeline in us."""
    s = st.view(-1, 4).cpu()[:launched]
    t0, t1, sm, tag = s[:, 0].double(), s[:, 1].double(), s[:, 2], s[:, 3]
    origin, end = t0.min().item(), t1.max().item()
    span = (end - origin) / 1e3
    dur = ((t1 - t0) / 1e3).tolist()
    worked = [d for d in dur if d > 0.5]  # programs with no tile in their rows' windows end at once
    per_sm_last = {}
    per_sm_busy = {}
    for a, b, m in zip(t0.tolist(), t1.tolist(), sm.tolist()):
        per_sm_last[m] = max(per_sm_last.get(m, 0.0), b)
        per_sm_busy[m] = per_sm_busy.get(m, 0.0) + (b - a) / 1e3
    idle_after = [(end - v) / 1e3 for v in per_sm_last.values()]
    groups = {}
    for b, g in zip(t1.tolist(), (tag // 65536).tolist()):
        groups[g] = max(groups.get(g, 0.0), b)
    done = sorted((v - origin) / 1e3 for v in groups.values())
    q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    # slots: the most programs running at once (an SM's programs times the SMs)
    ev = sorted([(a, 1) for a in t0.tolist()] + [(b, -1) for b in t1.tolist()])
    live = most = 0
    for _, d in ev:
        live += d
        most = max(most, live)
    busy = sum(dur)
    return {"programs": launched, "sms": len(per_sm_last), "most_at_once": most, "span_us": span,
            "program_us_mean": statistics.mean(worked) if worked else 0.0,
            "program_us_p10_p90": [q(sorted(worked), 0.1), q(sorted(worked), 0.9)] if worked else [],
            "slot_use": busy / (most * span) if most and span else 0.0,
            "sm_idle_after_last_us_mean": statistics.mean(idle_after),
            "sm_idle_after_last_us_max": max(idle_after),
            "rowgroups": len(done),
            "rowgroup_done_at_fraction_of_span": {f: q(done, f) / span for f in (0.1, 0.25, 0.5, 0.75, 0.9)}}


def main() -> int:
    a, rows, keys, dev, (q, kv, w, ks, ke), (kk, ksc) = prefill_case(__doc__)
    k = 2048
    step = _topk.scratch_rows(rows, keys, None, k, dev)
    blocks = [(i, min(rows, i + step)) for i in range(0, rows, step)]
    sel_block = _prefill.ragged_selection(q[:step], kv, w[:step], ks[:step], ke[:step])
    sel_full = _prefill.ragged_selection(q, kv, w, ks, ke)
    path = Path(inspect.getsourcefile(sel_block.launch))
    info = {"gpu": torch.cuda.get_device_name(), "shape": a.shape, "block_rows": step, "blocks": len(blocks),
            "block_module": sel_block.variant, "block_rung": sel_block.rung, "full_module": sel_full.variant,
            "tile_max_block": sel_block.tile_max_block}
    print(json.dumps(info), flush=True)
    mods = {"rows_first": variant(path, False, False, "rows_first"),
            "chunks_first": variant(path, True, False, "chunks_first")}
    scratch = torch.empty((step, keys), dtype=torch.float32, device=dev)
    full = torch.empty((rows, keys), dtype=torch.float32, device=dev)
    tile = _topk.tiles_first_pass(step, keys, k, dev, "prefill")[0] or 16
    maxima = torch.empty((step, -(-keys // tile)), dtype=torch.float32, device=dev)
    ntiles = torch.empty((step,), dtype=torch.int32, device=dev)
    full_max = torch.empty((rows, -(-keys // tile)), dtype=torch.float32, device=dev)
    full_nt = torch.empty((rows,), dtype=torch.int32, device=dev)

    def one_call(mod, epi):
        tm = (full_max, full_nt, tile) if epi else None
        return lambda: mod.launch(q, kk, ksc, w, ks, ke, full, False, tile_max=tm)

    def in_blocks(mod, epi):
        def run():
            for i0, i1 in blocks:
                n = i1 - i0
                tm = (maxima[:n], ntiles[:n], tile) if epi else None
                mod.launch(q[i0:i1], kk, ksc, w[i0:i1], ks[i0:i1], ke[i0:i1], scratch[:n], False, tile_max=tm)
        return run

    # the transposed grid computes the same logits
    ref = torch.empty_like(full)
    mods["rows_first"].launch(q, kk, ksc, w, ks, ke, ref, False)
    mods["chunks_first"].launch(q, kk, ksc, w, ks, ke, full, False)
    torch.cuda.synchronize()
    same = bool(torch.equal(ref, full))
    del ref
    print(json.dumps({"chunks_first_logits_equal": same}), flush=True)

    fns = {}
    for order, mod in mods.items():
        for epi in (False, True):
            tag = f"{order}{'_maxima' if epi else ''}"
            fns[f"one_call_{tag}"] = one_call(mod, epi)
            fns[f"blocks_{tag}"] = in_blocks(mod, epi)
    best = best_alternated(fns, a.rounds, timer=lambda fn: graph_us(fn, calls=1, rounds=5))
    result = {**info, "chunks_first_logits_equal": same, "us": best}
    for order in mods:
        for sfx in ("", "_maxima"):
            result[f"blocks_over_one_call_{order}{sfx}_us"] = best[f"blocks_{order}{sfx}"] - best[f"one_call_{order}{sfx}"]

    if a.out:  # (again below, with the stamped timelines)
        Path(a.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({"us": best}), flush=True)

    # one block (the middle one), every program stamped
    i0, i1 = blocks[len(blocks) // 2]
    n = i1 - i0
    timelines = {}
    for order, chunks_first in (("rows_first", False), ("chunks_first", True)):
        mod = variant(path, chunks_first, True, f"{order}_stamped")
        launched = -(-n // mod.BLOCK_M.value) * -(-keys // mod.CHUNK)
        st = torch.zeros(launched * 4, dtype=torch.int64, device=dev)
        for epi in (False, True):
            mod.STAMPS[0] = st
            tm = (maxima[:n], ntiles[:n], tile) if epi else None
            for _ in range(3):  # the last of three launches, warm
                mod.launch(q[i0:i1], kk, ksc, w[i0:i1], ks[i0:i1], ke[i0:i1], scratch[:n], False, tile_max=tm)
            torch.cuda.synchronize()
            timelines[f"{order}{'_maxima' if epi else ''}"] = stamp_summary(st, launched)
            mod.STAMPS[0] = None
    result["one_block_stamped"] = timelines
    text = json.dumps(result, indent=1)
    if a.out:
        Path(a.out).write_text(text)
    print("\ncase                               us")
    for name, v in best.items():
        print(f"{name:32s} {v:9.1f}")
    for key, v in result.items():
        if key.startswith("blocks_over_one_call"):
            print(f"{key:48s} {v:8.1f}")
    print("\nstamped block            span  prog us  slot use  SM idle after last (mean/max)  rows done at 25/50/75%")
    for name, t in timelines.items():
        f = t["rowgroup_done_at_fraction_of_span"]
        print(f"{name:22s} {t['span_us']:7.1f} {t['program_us_mean']:7.1f} {t['slot_use']:8.2f} "
              f"{t['sm_idle_after_last_us_mean']:12.1f} / {t['sm_idle_after_last_us_max']:5.1f}"
              f"        {f[0.25]:.2f} / {f[0.5]:.2f} / {f[0.75]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
