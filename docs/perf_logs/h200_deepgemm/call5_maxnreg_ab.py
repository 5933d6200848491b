"""A/B: the shipped next_n 2 decode modules launched with a register cap (maxnreg), same process,
alternating, at the tuner's 20 ms and a power-capped 500 ms warm-up. Outputs compared bit for bit."""
import sys, tempfile, torch
from pathlib import Path
from indexer_logits._identity import Problem, Bucket
from tuner.measure import timing_inputs, time_candidate
from tuner.render import load_module
from tuner.gates import launch, new_output
from bench._common import module_for

CAPS = [None, 96, 104]
tmp = Path(tempfile.mkdtemp())
for nn, spec in [(2, (32, 32768)), (2, (64, 8192)), (2, (128, 8192)), (2, (16, 131072)), (1, (64, 8192)), (1, (32, 32768))]:
    problem, bucket = Problem(next_n=nn), Bucket(*spec)
    src, variant = module_for(problem, bucket)
    text = Path(src).read_text()
    mods = {}
    for cap in CAPS:
        if cap is None:
            mods[cap] = load_module(src)
            continue
        t = text.replace("num_stages=NUM_STAGES,", f"num_stages=NUM_STAGES, maxnreg={cap},")
        assert t != text
        p = tmp / f"{variant}_r{cap}.py"; p.write_text(t)
        mods[cap] = load_module(p)
    sets = timing_inputs(problem, bucket, "full")
    ref = None
    for cap, m in mods.items():
        o = new_output(sets[0], 0.0); launch(m, sets[0], o, False); torch.cuda.synchronize()
        if ref is None: ref = o
        else: print(f"  cap {cap}: equal {torch.equal(o, ref)}", flush=True)
    cells = {}
    for rnd in range(3):
        for w in (20.0, 500.0):
            for cap, m in mods.items():
                t = time_candidate(m, sets, False, "cuda_graph", 10, warmup_ms=w)
                cells.setdefault((w, cap), []).append(t.p50_ms * 1e3)
    base = {w: min(cells[(w, None)]) for w in (20.0, 500.0)}
    for (w, cap), v in sorted(cells.items(), key=lambda x: (x[0][0], x[0][1] or 0)):
        print(f"n{nn} {spec[0]}x{spec[1]} {variant.split('__')[2]:22s} warm {w:5.0f} ms cap {str(cap):5s} "
              + " ".join(f"{x:7.2f}" for x in v) + f"   best/base {min(v) / base[w]:.3f}", flush=True)
