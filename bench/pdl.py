"""Programmatic dependent launch (PDL) for the fp8 decode kernel: does it take the launch cost off?

Issue 7's unmet goals all sit in buckets whose time is the floor plus a ~6 us fixed cost
(docs/PERF.md, "What bounds the small buckets"), part of which is the launch of a graph node:
an empty kernel on the split grid takes 1.3-1.8 us a launch. With PDL (sm_90+) a kernel is
launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, its programs may start
before the kernel ahead of it in the stream has finished, and each program first runs
`griddepcontrol.wait`, which returns once that kernel has completed and its writes are visible.
The launch, the block scheduling and whatever a program does before its first read then overlap
the predecessor's tail.

For each bucket, the dispatch table's module, as emitted and patched (all but the first launched
with pdl=True):
- shipped: launch(..., pdl=False), a plain launch;
- wait:    launch(..., pdl=True): the template's PDL path, `gdc_wait()` first in the kernel;
- trigger: as wait, plus `gdc_launch_dependents()` right after it, so the next kernel in the
           stream may launch as soon as every program of this one has started;
- trigger_end: as wait, with `gdc_launch_dependents()` after the program's last tile instead;
- wait_after_lens: the wait moved after the request's length is read (before q, the block
           table and the cache): how much the lengths' round trip is worth. Not shippable as is:
           correct only where nothing writes the lengths right before the indexer, which the
           API cannot know (the q-writer below never writes them, so its check passes);
- nowait:  the trigger instead of the wait: unsafe on purpose (the negative control of the
           correctness check below: it may read q before its predecessor has written it).
(Calls 1-2 of docs/perf_logs/h200_pdl/ ran this tool, then scripts/gpu_pdl_check.py, as of commit
991ddde, which patched the wait into modules emitted before the template had it: the same kernels.)
and timed by CUDA-graph replay in three settings:
- alone:  the bench's graph (8 launches cycling 4 block tables): each launch's predecessor is
          the previous launch of the same kernel;
- after:  each launch preceded by a kernel that writes the request's q (as a model step's q
          quantisation would), that kernel launched plainly and unaware of PDL; the indexer's
          time is the pair's minus the writer's alone;
- after_pdl: the same with a PDL-aware writer (launched with PDL, waits, triggers at its start).
Correctness: in the `after` settings the writer copies a different q into place before every
launch (4 sources), so a variant that read q early scores the previous q. Every variant's logits
from the graph are compared bit for bit with the shipped kernel's for the same q.

Usage (GPU host): python3 -m bench.pdl [--buckets 64x8192:full,...] [--out FILE.json] [--alt DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

from bench._common import module_config, module_for, no_cuda, overlay
from indexer_logits._identity import Problem
from tuner.buckets import parse_bucket_specs
from tuner.gates import launch as gates_launch
from tuner.gates import new_output
from tuner.measure import timing_inputs
from tuner.pdl_gate import pdl_capable, write_q
from tuner.roofline import floor_ms
from tuner.timing import measure_copy_bandwidth, time_cuda_graph, warm_up_gpu

# Whole lines at the kernel's top level (four spaces; the wait inside its `if PDL:`): a line of a
# deeper block that ends the same way is not one of them.
WAIT_LINE = "\n        tl_cuda.gdc_wait()\n"
CLEAN_ANCHOR = "\n    if CLEAN:\n"
Q_ANCHOR = "\n    q, w = _query("  # the split grid's q load, at the kernel's top level
VARIANTS = ("shipped", "wait", "trigger", "trigger_end", "wait_after_lens", "nowait")


def patched_source(text: str, variant: str) -> str:
    """The emitted module's source, changed for `variant` (all but `shipped` launch with pdl=True);
    ValueError where the module lacks the lines the variant moves (wait_after_lens: the split
    grid's q load, which a persistent grid does inside its loop)."""
    if variant in ("shipped", "wait"):
        return text  # the template's own PDL path: launch(..., pdl=True)
    if text.count(WAIT_LINE) != 1 or text.count(CLEAN_ANCHOR) != 1:
        raise ValueError("the module does not have the decode template's PDL wait / CLEAN branch; re-emit it")
    if variant == "trigger":
        return text.replace(WAIT_LINE, WAIT_LINE + "        tl_cuda.gdc_launch_dependents()\n")
    if variant == "trigger_end":  # once this program has issued its last read of the cache
        return text.replace(CLEAN_ANCHOR, "\n    if PDL:\n        tl_cuda.gdc_launch_dependents()" + CLEAN_ANCHOR)
    if variant == "wait_after_lens":  # the lengths read before the wait: see the module docstring
        if text.count(Q_ANCHOR) != 1:
            raise ValueError("the module does not have the decode template's split-grid q load")
        text = text.replace(WAIT_LINE, "\n        pass\n")
        return text.replace(Q_ANCHOR, "\n    if PDL:\n        tl_cuda.gdc_wait()" + Q_ANCHOR)
    assert variant == "nowait"
    return text.replace(WAIT_LINE, "\n        tl_cuda.gdc_launch_dependents()\n")


def load_variant(src: Path, variant: str, workdir: Path):
    from tuner.render import load_module

    path = workdir / f"{src.stem}__{variant}.py"  # a real file: triton.jit reads the source
    path.write_text(patched_source(src.read_text(), variant))
    mod = load_module(path)
    if not getattr(mod, "SUPPORTS_PDL", False):
        raise SystemExit(f"{src}: emitted before PDL support; re-emit the table")
    return mod


def launch(mod, x, out, pdl):
    return gates_launch(mod, x, out, False, pdl=pdl)


def rerender(src: Path, template_dir: Path, workdir: Path) -> Path:
    """The same variant (problem and config of the table's module) rendered from other templates."""
    from tuner.render import render

    config = module_config(src.read_text())
    out = workdir / f"{src.stem}__alt.py"
    out.write_text(render(Problem(), config, template_dir))
    return out


def measure_bucket(problem, bucket, lens, copy_bw, replays, workdir, template_dir=None):
    src, variant_name = module_for(problem, bucket)
    if template_dir is not None:
        src = rerender(src, template_dir, workdir)
        variant_name += " (alt templates)"
    mods = {}
    for v in VARIANTS:
        try:
            mods[v] = load_variant(src, v, workdir)
        except ValueError as exc:  # not this module's shape (e.g. a persistent grid's q load)
            print(f"{bucket.batch}x{bucket.context}:{lens} {v}: not timed: {exc}", flush=True)
    sets = timing_inputs(problem, bucket, lens)
    fl_us = floor_ms(sets[0], False, copy_bw=copy_bw) * 1e3
    q = sets[0].q  # the sets share q (they differ in block tables)
    assert all(x.q.data_ptr() == q.data_ptr() for x in sets)
    gen = torch.Generator(device="cuda").manual_seed(1)
    q_src = [(torch.randn(q.shape, device="cuda", generator=gen) * 0.5).to(q.dtype) for _ in sets]
    outs = [new_output(x, 0.0) for x in sets]

    # The shipped kernel's logits for each q source, eagerly: the reference of the graph checks.
    expect = []
    for i, x in enumerate(sets):
        q.copy_(q_src[i])
        expect.append(launch(mods["shipped"], x, new_output(x, 0.0), False).clone())
    torch.cuda.synchronize()

    row = {"bucket": f"{bucket.batch}x{bucket.context}", "lens": lens, "variant": variant_name, "floor_us": fl_us}
    t = lambda fns: time_cuda_graph(fns, replays=replays).p50_ms * 1e3  # noqa: E731
    row["writer_alone_us"] = t([lambda i=i: write_q(q_src[i], q, False) for i in range(len(sets))])
    row["writer_pdl_alone_us"] = t([lambda i=i: write_q(q_src[i], q, True) for i in range(len(sets))])
    for v in mods:
        mod, pdl = mods[v], v != "shipped"
        if v != "nowait":
            row[f"{v}_alone_us"] = t([lambda x=x, o=o: launch(mod, x, o, pdl) for x, o in zip(sets, outs)])
        for setting, pdl_writer in (("after", False), ("after_pdl", True)):
            def step(i, mod=mod, pdl=pdl, pdl_writer=pdl_writer):
                write_q(q_src[i], q, pdl_writer)
                launch(mod, sets[i], outs[i], pdl)
            for o in outs:
                o.fill_(float("nan"))
            pair = t([lambda i=i: step(i) for i in range(len(sets))])
            torch.cuda.synchronize()
            # After the replays each out[i] holds the logits of q_src[i] (the graph's last write of it).
            # Positions past a row's limit are never written (clean_logits=False): compare the valid ones.
            bad = sum(int((x.valid_mask() & ~torch.eq(o, e)).any(dim=1).sum()) for x, o, e in zip(sets, outs, expect))
            row[f"{v}_{setting}_us"] = pair - row["writer_pdl_alone_us" if pdl_writer else "writer_alone_us"]
            row[f"{v}_{setting}_bad_rows"] = bad
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pdl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", default="64x8192:full,64x8192:quarter,16x32768:full,4x32768:full,1x131072:full,"
                    "32x32768:full,1x1048576:full")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    ap.add_argument("--alt", type=Path, default=None,
                    help="a folder of candidate templates (experiments/<name>): each bucket's table config is "
                         "rendered from templates/ with these files put over it, instead of the emitted module")
    args = ap.parse_args(argv)
    try:
        cases = parse_bucket_specs(args.buckets)
    except ValueError as exc:
        ap.error(str(exc))
    if not torch.cuda.is_available():
        return no_cuda()
    if not pdl_capable("cuda"):
        print("PDL needs sm_90 or newer", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    warm_up_gpu()
    copy_bw = measure_copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    problem = Problem()  # fp8, H=64, D=128, page 64, next_n 1
    rows = []
    template_dir = None
    if args.alt is not None:
        template_dir = overlay(args.alt)  # templates/ with the candidate's files over it
    with tempfile.TemporaryDirectory() as tmp:
        for bucket, lens in cases:
            row = measure_bucket(problem, bucket, lens, copy_bw, args.replays, Path(tmp), template_dir)
            rows.append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    pct = lambda r, k: f"{r[k]:6.1f} {100 * r['floor_us'] / r[k]:3.0f}%" if k in r else f"{'-':>11}"  # noqa: E731
    print("\nus per launch, p50, and % of floor; 'after': net of a q writer before each launch "
          "(plain / PDL-aware writer); bad = rows differing from the shipped kernel's logits")
    timed = [v for v in VARIANTS if v != "nowait"]
    for setting in ("alone", "after", "after_pdl"):
        print(f"\n{setting}:\n{'bucket':>18} {'floor':>6} | " + " ".join(f"{v:>11}" for v in timed))
        for r in rows:
            print(f"{r['bucket'] + ':' + r['lens']:>18} {r['floor_us']:6.1f} | "
                  + " ".join(pct(r, f"{v}_{setting}_us") for v in timed))
    print("\nbad rows, after / after_pdl: " + ", ".join(v for v in VARIANTS if v != "shipped"))
    for r in rows:
        print(f"{r['bucket'] + ':' + r['lens']:>18} "
              + " ".join(f"{r.get(f'{v}_after_bad_rows', '-')}/{r.get(f'{v}_after_pdl_bad_rows', '-')}"
                         for v in VARIANTS if v != "shipped"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
