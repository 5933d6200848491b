"""Where a decode launch's time goes: a timeline of its programs, from timers read inside them.

docs/PERF.md splits the shipped kernel's time at 8,192-16,384 tiles into the bare read with its
split, the scales, the logits writes and "the rest", from kernels that each leave one part out. This
script looks inside the launch instead. It copies the dispatch table's module for a bucket (or
renders --configs), adds probes that read the GPU's global timer (%globaltimer, nanoseconds, common
to all SMs) at fixed points of every program, and replays the bench's graph (8 launches cycling 4
block tables, each launch with its own probe buffer). Per program it records:

  start     the program's first instruction;
  lens      its request's length has arrived (the timer read waits on the loaded value);
  bt        its first block-table entry has arrived (programs with a run only);
  first     its first tile is scored (the latest of the tile's threads);
  loop      its last tile is scored (store="run": before the run's one store);
  end       its last instruction (stores issued, not necessarily landed);
  sm        the SM it ran on.

From these, per launch (relative to the launch's first program start, t0): how long until all
programs had started, the start chain (lens, bt, first tile), when programs end (p10 / p50 / max:
the tail is max - p50), the gap from the launch's last end to the next launch's t0 (what a graph
node costs between kernels), and the launch period (t0 to next t0), which the probed module's own
graph-replay time per launch should match. The same graph without probes is timed too: the
difference is what the probes cost (one timer read and a predicated store per tile).

The probes are text inserted at anchors of the emitted module; an anchor not found exactly once
stops the script (re-emit the table or update the anchors with the template).

Usage (GPU host): python3 -m bench.timeline [--buckets 64x8192:full,...] [--configs JSON]
                  [--out DIR]
  --configs: also probe these configs in every bucket; DIR gets timeline.json (every probe).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from bench._common import module_config, module_for, no_cuda, overlay, parse_configs
from indexer_logits._identity import Config, Problem
from tuner.buckets import parse_bucket_specs
from tuner.families import run_all_gates
from tuner.gates import launch, new_output
from tuner.measure import timing_inputs
from tuner.roofline import floor_ms

SCALARS = 8  # int64 slots a program: start, lens, bt, loop, end, sm, n_tiles, (unused)
SLOT = {"start": 0, "lens": 1, "bt": 2, "loop": 3, "end": 4, "sm": 5, "n_tiles": 6}

# The timer is read after `x` is available: the asm takes x as an input and folds one bit of it
# into the result, so the instruction cannot issue before the value has landed.
TIMER_SRC = '''
@triton.jit
def _timer_after(x):
    return tl.inline_asm_elementwise(
        "{ .reg .u64 v; .reg .u64 t; cvt.u64.u32 v, $1; mov.u64 t, %globaltimer; and.b64 v, v, 1; add.u64 $0, t, v; }",
        "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


'''

# The first tile's probe goes right after the tile's logits are computed (unscaled, [BLOCK_T,
# NEXT_N]: k_rows tiles only, whatever the store mode).
FIRST_TILE_ANCHOR = "            logits = _tile_logits(q, k, w)\n"
FIRST_TILE_PROBE = ("            tl.store(_probe + SCALARS + offs_t[:, None] + j[None, :] * 0,\n"
                    "                     _timer_after(logits.to(tl.int32, bitcast=True)), mask=(i == 0))\n")
# The module's constexpr flags the probes depend on (the template keeps every branch in the text).
K_ROWS_ON = "K_ROWS: tl.constexpr = tl.constexpr(True)"
STORE_RUN_ON = "STORE_RUN: tl.constexpr = tl.constexpr(True)"
PER_TOKEN_ENTRIES = "IN_PAGE: tl.constexpr = tl.constexpr(False)"  # tiles over a page: one entry a token
# (anchor, replacement); each anchor must occur exactly once in the module.
PATCHES = [
    ("@triton.jit\ndef _decode_paged_kernel(", TIMER_SRC + "@triton.jit\ndef _decode_paged_kernel("),
    ("state_ptr, state_offset, state_stride,\n    CLEAN: tl.constexpr",
     "state_ptr, state_offset, state_stride, probe_ptr,\n    CLEAN: tl.constexpr"),
    ("    NH: tl.constexpr = NEXT_N * HEADS\n",
     "    _t_start = _timer_after(tl.program_id(1))\n"
     "    _probe = probe_ptr + (tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)).to(tl.int64) * PROBE_STRIDE\n"
     "    NH: tl.constexpr = NEXT_N * HEADS\n"),
    # after q and w are issued (as the kernel issues them before waiting on the length)
    ("    valid_tiles = tl.minimum(", "    _t_lens = _timer_after(top)\n    valid_tiles = tl.minimum("),
    ("    if n_tiles > 0:\n", "    _t_bt = _t_start * 0\n    _t_loop = _t_start * 0\n    if n_tiles > 0:\n"),
    ("        for i in range(0, n_tiles):\n", "        _t_bt = _timer_after(page_next)\n        for i in range(0, n_tiles):\n"),
    ("    if CLEAN:\n",
     "    _t_end = _timer_after(n_tiles)\n"
     "    tl.store(_probe + 0, _t_start)\n"
     "    tl.store(_probe + 1, _t_lens)\n"
     "    tl.store(_probe + 2, _t_bt)\n"
     "    tl.store(_probe + 3, _t_loop)\n"
     "    tl.store(_probe + 4, _t_end)\n"
     "    tl.store(_probe + 5, _smid(n_tiles).to(tl.int64))\n"
     "    tl.store(_probe + 6, n_tiles.to(tl.int64))\n"
     "    if CLEAN:\n"),
    ("ntiles, state, state_offset, state_stride,\n", "ntiles, state, state_offset, state_stride, PROBE,\n"),
]
# The loop's end: right before the run's one store (store="run"), else right after the loop (inside
# `if n_tiles > 0:`, just before the stores PATCHES puts ahead of `if CLEAN:`).
LOOP_END_RUN = ("            tl.store(out_rows[None, None, :] + t_run",
                "            _t_loop = _timer_after(n_tiles)\n            tl.store(out_rows[None, None, :] + t_run")
LOOP_END_TILE = ("    _t_end = _timer_after(n_tiles)\n", "        _t_loop = _timer_after(n_tiles)\n    _t_end = _timer_after(n_tiles)\n")


def probed_source(text: str, block_t: int, first_tile: bool = True) -> str:
    """The module's source with the probes in (see the module docstring). first_tile=False leaves
    out the one probe inside the tile loop (a timer read and a predicated store every tile)."""
    patches = list(PATCHES)
    if PER_TOKEN_ENTRIES in text:  # page_next holds one entry a token
        patches = [(a, n.replace("_timer_after(page_next)", "tl.max(_timer_after(page_next), 0)")) for a, n in patches]
    if first_tile and K_ROWS_ON not in text:  # orient q_rows: logits [next_n, BLOCK_T]; not probed there
        print("note: no first-tile probe for this module (k_rows tiles only)", file=sys.stderr)
    elif first_tile:
        patches.append((FIRST_TILE_ANCHOR, FIRST_TILE_ANCHOR + FIRST_TILE_PROBE))
    for anchor, new in patches + [LOOP_END_RUN if STORE_RUN_ON in text else LOOP_END_TILE]:
        if text.count(anchor) != 1:
            raise SystemExit(f"probe anchor found {text.count(anchor)} times, expected once: {anchor!r} "
                             "(a split-grid fp8 decode module of the current template is needed)")
        text = text.replace(anchor, new)
    text += f"\n\nPROBE = None\nSCALARS: tl.constexpr = tl.constexpr({SCALARS})\n" \
            f"PROBE_STRIDE: tl.constexpr = tl.constexpr({SCALARS + block_t})\n"
    try:  # an anchor found once can still sit in another block than the probe expects
        compile(text, "<probed module>", "exec")
    except SyntaxError as exc:
        raise SystemExit(f"the probes leave invalid Python (line {exc.lineno}: {(exc.text or '').strip()!r}): the "
                         "template moved under an anchor; update the anchors with the template") from None
    return text


def load_module_from(text: str, name: str, workdir: Path):
    from tuner.render import load_module

    path = workdir / f"{name}.py"  # a real file: triton.jit reads the source
    path.write_text(text)
    return load_module(path)


def module_text(problem: Problem, bucket, lens, config: Config | None,
                template_dir: Path | None) -> tuple[str, str, Config]:
    """(source, name, config) to probe: `config` rendered, or the dispatch table's module for the
    bucket; with template_dir, rendered from those templates (the table's config, if none is given)."""
    from tuner.render import render

    if config is None:
        src, variant = module_for(problem, bucket)
        text = src.read_text()
        config = module_config(text)
        if template_dir is None:
            return text, variant, config
    tag = " (alt)" if template_dir is not None else ""
    return render(problem, config, template_dir), config.slug + tag, config


def xcompile_probed(problem: Problem, config: Config, capability: int = 90) -> dict:
    """No GPU: the probed kernel of `config` compiled for sm_<capability> (ptxas's registers and
    spills, and how many timer reads the PTX holds), to check the anchors before a GPU call."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tuner.render import render
    from tuner.signature import build_signature
    from tuner.xcompile import _ptxas_report

    workdir = Path(tempfile.mkdtemp(prefix="timeline_x_"))
    mod = load_module_from(probed_source(render(problem, config), config.block_t), "probed_x", workdir)
    fn = mod._decode_paged_kernel
    sig, consts, attrs = build_signature(fn, problem, config=config, extra_args={"probe_ptr": "*i64"})
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                            target=GPUTarget("cuda", capability, 32),
                            options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    ptx = kernel.asm["ptx"]
    return {"timer_reads": ptx.count("%globaltimer"), "smid_reads": ptx.count("%smid"),
            "bulk_copies": ptx.count("cp.async.bulk.tensor"), "shared": kernel.metadata.shared,
            **_ptxas_report(ptx, capability)}


def graph_launches(fns, warmup_ms: float = 100.0):
    """Capture fns (one launch each) in one graph and time its replays as the bench does (warmed
    up warmup_ms first): us per launch, median of 20 replays. The probes hold the last replay."""
    from tuner.timing import time_cuda_graph

    return time_cuda_graph(fns, replays=20, warmup_ms=warmup_ms).p50_ms * 1e3


def quant(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def analyse(probes: list[torch.Tensor]) -> dict:
    """probes[k]: [programs, SCALARS + block_t] int64 of launch k (graph order)."""
    launches = []
    for p in probes:
        p = p.cpu()
        sc = p[:, :SCALARS].double()
        first = p[:, SCALARS:].max(dim=1).values.double()
        ran = sc[:, SLOT["n_tiles"]] > 0
        t0 = sc[:, SLOT["start"]].min()
        rel = lambda col: (sc[:, SLOT[col]] - t0) / 1e3  # noqa: E731  (us)
        start, lens, end = rel("start"), rel("lens"), rel("end")
        d = {"t0": float(t0), "programs": int(p.shape[0]), "with_tiles": int(ran.sum()),
             "start": start.tolist(), "lens": lens.tolist(), "end": end.tolist(),
             "bt": rel("bt")[ran].tolist(), "loop": rel("loop")[ran].tolist(),
             "first": ((first[ran & (first > 0)] - t0) / 1e3).tolist(),  # empty without the probe
             "sm": sc[:, SLOT["sm"]].long().tolist(), "n_tiles": sc[:, SLOT["n_tiles"]].long().tolist(),
             "last_end": float(end.max())}
        launches.append(d)
    # graph order: the gap is from a launch's last end to the next launch's first start
    for a, b in zip(launches, launches[1:]):
        a["gap_to_next"] = (b["t0"] - a["t0"]) / 1e3 - a["last_end"]
        a["period"] = (b["t0"] - a["t0"]) / 1e3
    return {"launches": launches}


def summary(res: dict) -> dict:
    """Medians over launches 1..n-2 (each has a predecessor and a successor in the graph)."""
    ls = res["launches"][1:-1]
    med = lambda f: quant([f(d) for d in ls], 0.5)  # noqa: E731
    out = {
        "period_us": med(lambda d: d["period"]),
        "gap_us": med(lambda d: d["gap_to_next"]),
        "all_started_us": med(lambda d: max(d["start"])),
        "start_p50_us": med(lambda d: quant(d["start"], 0.5)),
        "lens_after_start_p50_us": med(lambda d: quant([b - a for a, b in zip(d["start"], d["lens"])], 0.5)),
        "bt_p50_us": med(lambda d: quant(d["bt"], 0.5)),
        "first_p10_us": med(lambda d: quant(d["first"], 0.1)),
        "first_p50_us": med(lambda d: quant(d["first"], 0.5)),
        "first_p90_us": med(lambda d: quant(d["first"], 0.9)),
        "loop_p50_us": med(lambda d: quant(d["loop"], 0.5)),
        "end_p10_us": med(lambda d: quant(d["end"], 0.1)),
        "end_p50_us": med(lambda d: quant(d["end"], 0.5)),
        "end_p90_us": med(lambda d: quant(d["end"], 0.9)),
        "end_max_us": med(lambda d: d["last_end"]),
    }

    def sm_ends(d):
        last: dict = {}
        for sm, e in zip(d["sm"], d["end"]):
            last[sm] = max(last.get(sm, 0.0), e)
        return sorted(last.values())

    out["sm_last_end_min_us"] = med(lambda d: sm_ends(d)[0])
    out["sm_last_end_p50_us"] = med(lambda d: quant(sm_ends(d), 0.5))
    out["programs_per_sm_max"] = med(lambda d: max(d["sm"].count(s) for s in set(d["sm"])))
    out["programs_per_sm_min"] = med(lambda d: min(d["sm"].count(s) for s in set(d["sm"])))
    return out


def timer_resolution_ns() -> float:
    """The smallest nonzero step between consecutive %globaltimer reads in one thread."""
    import triton
    import triton.language as tl

    @triton.jit
    def _reads(out_ptr, N: tl.constexpr):
        prev = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [tl.program_id(0)], dtype=tl.int64,
                                         is_pure=False, pack=1)
        for i in range(N):
            now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [i], dtype=tl.int64,
                                            is_pure=False, pack=1)
            tl.store(out_ptr + i, now - prev)
            prev = now

    out = torch.zeros(4096, dtype=torch.int64, device="cuda")
    _reads[(1,)](out, N=4096, num_warps=1)
    steps = out[out > 0]
    return float(steps.min()) if steps.numel() else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.timeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", default="64x8192:full,16x32768:full,64x8192:quarter,1x1048576:full,32x32768:full")
    ap.add_argument("--configs", default="", help="JSON list of configs to probe in every bucket, after the "
                    "table's module")
    ap.add_argument("--out", type=Path, default=None, help="folder for timeline.json")
    ap.add_argument("--alt", type=Path, default=None,
                    help="a folder of candidate templates (experiments/<name>): every module is rendered from "
                         "templates/ with these files put over it")
    ap.add_argument("--no-first-tile", action="store_true",
                    help="leave out the probe inside the tile loop (first tile scored), which costs the most")
    ap.add_argument("--xcompile", action="store_true",
                    help="no GPU: compile the probed kernel of each of --configs for sm_90 and print what it holds")
    args = ap.parse_args(argv)
    try:
        cases = parse_bucket_specs(args.buckets)
        extra = parse_configs(args.configs)
    except ValueError as exc:
        ap.error(str(exc))
    if args.xcompile:
        os.environ.pop("TRITON_INTERPRET", None)  # real compiles (set before triton.jit reads it)
        if not extra:
            ap.error("--xcompile needs --configs")
        for config in extra:
            print(f"{config.slug}: {xcompile_probed(Problem(), config)}", flush=True)
        return 0
    if not torch.cuda.is_available():
        return no_cuda("with --xcompile (the probes' compile only)")
    from tuner.inputs import make_decode_inputs
    from tuner.timing import measure_copy_bandwidth, warm_up_gpu

    problem = Problem()  # fp8, H=64, D=128, page 64, next_n 1
    configs = [None] + extra
    workdir = Path(tempfile.mkdtemp(prefix="timeline_"))
    template_dir = overlay(args.alt) if args.alt is not None else None
    warm_up_gpu()
    copy_bw = measure_copy_bandwidth()
    try:
        res_ns = timer_resolution_ns()
    except Exception as exc:  # a diagnostic of the diagnostic: report it and go on
        print(f"timer resolution not measured: {type(exc).__name__}: {exc}", flush=True)
        res_ns = float("nan")
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s; %globaltimer step {res_ns:.0f} ns", flush=True)
    gate_in = make_decode_inputs(problem, 3, 700, "random", seed=1, device="cuda")
    rows, raw = [], []
    for bucket, lens in cases:
        for wanted in configs:
            text, name, config = module_text(problem, bucket, lens, wanted, template_dir)
            block_t = config.block_t
            plain = load_module_from(text, f"plain_{len(rows)}", workdir)
            probed = load_module_from(probed_source(text, block_t, not args.no_first_tile), f"probed_{len(rows)}", workdir)
            # The probes must not change a logit (they only add timer reads and stores of their own).
            probed.PROBE = torch.zeros(1 << 16, dtype=torch.int64, device="cuda")
            run_all_gates(probed, problem, gate_in, True)
            sets = timing_inputs(problem, bucket, lens)
            fl_us = floor_ms(sets[0], False, copy_bw=copy_bw) * 1e3
            launches = 8
            outs = [new_output(sets[i % len(sets)], 0.0) for i in range(launches)]
            grid_programs = bucket.batch * -(-bucket.context // (config.block_t * config.tiles_per_program))
            probes = [torch.zeros(grid_programs, SCALARS + block_t, dtype=torch.int64, device="cuda")
                      for _ in range(launches)]

            def fn(i, mod, probe, x, out):
                def go():
                    if probe is not None:
                        mod.PROBE = probe
                    launch(mod, x, out, False)
                return go

            x_of = [sets[i % len(sets)] for i in range(launches)]
            t_plain = graph_launches([fn(i, plain, None, x_of[i], outs[i]) for i in range(launches)])
            t_probed = graph_launches([fn(i, probed, probes[i], x_of[i], outs[i]) for i in range(launches)])
            torch.cuda.synchronize()
            res = analyse(probes)
            s = summary(res)
            row = {"bucket": f"{bucket.batch}x{bucket.context}:{lens}", "module": name, "floor_us": fl_us,
                   "plain_us": t_plain, "probed_us": t_probed, **s}
            rows.append(row)
            raw.append({**row, **res})
            print(json.dumps(row), flush=True)
            del sets, outs, probes, x_of
            torch.cuda.empty_cache()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "timeline.json").write_text(json.dumps(raw))
    f = lambda v: f"{v:5.2f}"  # noqa: E731
    print("\nus from the launch's first program start (medians over launches 2-7 of the graph's 8)")
    print(f"{'bucket':20s} {'module':44s} floor plain probed period  gap  all-started lens bt  first p10/p50/p90  "
          "loop  end p10/p50/max  SM-last-end min/p50")
    for r in rows:
        print(f"{r['bucket']:20s} {r['module'][-44:]:44s} {f(r['floor_us'])} {f(r['plain_us'])} {f(r['probed_us'])} "
              f"{f(r['period_us'])} {f(r['gap_us'])} {f(r['all_started_us'])} {f(r['lens_after_start_p50_us'])} "
              f"{f(r['bt_p50_us'])} {f(r['first_p10_us'])}/{f(r['first_p50_us'])}/{f(r['first_p90_us'])} "
              f"{f(r['loop_p50_us'])} {f(r['end_p10_us'])}/{f(r['end_p50_us'])}/{f(r['end_max_us'])} "
              f"{f(r['sm_last_end_min_us'])}/{f(r['sm_last_end_p50_us'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
