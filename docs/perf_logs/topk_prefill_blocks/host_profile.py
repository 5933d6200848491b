"""Where the ragged prefill top-k's host time goes, under settings of indexer_logits._topk's switches
(RAGGED_EPILOGUE: the ragged logits kernel's tile maxima; SHARE_PLANS: a call's blocks sharing their selection's
plan). Call 4 saw the host's enqueue time of a 4096 x 64K call rise 4279 -> 6532 us (~90 us a block of 164 rows)
with the epilogue on (call 6 did not: 4036 -> 3333). For each shape and setting, after warm calls (sampled
blocks checked against a stable sort first; end to end eager, alternated with the logits call alone):

1. the host's enqueue time of one call (median of 7), split into the blocks' logits calls
   (_topk.topk_ragged_logits) and selections (_topk._select), timed around each;
2. which launches were replayed: the logits replays' and the selection sequences' call counters over one call
   (a block served by the full path leaves them unchanged), whether each replays through the direct launcher,
   and what either cache refused (_fastpath._UNCACHEABLE, _recorded_launches._UNCACHEABLE);
3. with --profile, cProfile of 3 calls, the top functions by own time.

    python3 docs/perf_logs/topk_prefill_blocks/host_profile.py [--shapes 4096x65536,8192x8192]
        [--variants RAGGED_EPILOGUE=1+SHARE_PLANS=0,RAGGED_EPILOGUE=1+SHARE_PLANS=1] [--profile] [--out FILE]

(Call 6 ran it before SHARE_PLANS, as `--shape 4096x65536` with the two epilogue settings and the profile.)
"""

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated, eager_us, sampled_mismatches  # noqa: E402
from indexer_logits import _fastpath as F, _recorded_launches as R, _topk  # noqa: E402
from tuner.inputs import make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402


def timed_parts():
    """Wrap _topk's logits call and selection with timers; returns (totals dict, restore())."""
    totals = {"logits": 0.0, "select": 0.0, "blocks": 0}
    real_logits, real_select = _topk.topk_ragged_logits, _topk._select

    def logits(*a, **kw):
        t0 = time.perf_counter()
        out = real_logits(*a, **kw)
        totals["logits"] += time.perf_counter() - t0
        totals["blocks"] += 1
        return out

    def select(*a, **kw):
        t0 = time.perf_counter()
        out = real_select(*a, **kw)
        totals["select"] += time.perf_counter() - t0
        return out

    _topk.topk_ragged_logits, _topk._select = logits, select

    def restore():
        _topk.topk_ragged_logits, _topk._select = real_logits, real_select
    return totals, restore


def counters() -> tuple:
    return ({id(r): r.calls for r in F.replays().values()}, {id(s): s.calls for s in R.sequences().values()})


def served_counts(before: tuple, after: tuple) -> dict:
    logits = sum(after[0].get(i, 0) - before[0].get(i, 0) for i in after[0])
    select = sum(after[1].get(i, 0) - before[1].get(i, 0) for i in after[1])
    return {"logits_replayed": logits, "selection_sequences_replayed": select}


def parse_variant(text: str) -> dict:
    """"RAGGED_EPILOGUE=1+SHARE_PLANS=0+SCRATCH_FLOOR_MIB=48" -> {name: value} of indexer_logits._topk's
    switches (0/1) and its SCRATCH_FLOOR (the least scratch a call's blocks take, in MiB here)."""
    out = {}
    for part in text.split("+"):
        name, _, value = part.partition("=")
        if name == "SCRATCH_FLOOR_MIB" and value.isdigit() and int(value) > 0:
            out["SCRATCH_FLOOR"] = int(value) << 20
            continue
        if name not in ("RAGGED_EPILOGUE", "SHARE_PLANS", "EPILOGUE") or value not in ("0", "1"):
            raise SystemExit(f"--variants: {part!r} is not RAGGED_EPILOGUE, SHARE_PLANS or EPILOGUE =0/1, or "
                             "SCRATCH_FLOOR_MIB=N")
        out[name] = value == "1"
    return out


def with_switches(values: dict, fn):
    def call():
        saved = {n: getattr(_topk, n) for n in values}
        try:
            for n, v in values.items():
                setattr(_topk, n, v)
            return fn()
        finally:
            for n, v in saved.items():
                setattr(_topk, n, v)
    return call


def profile_variant(fn, profile: bool) -> dict:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    v = {}
    before = counters()
    fn()
    v.update(served_counts(before, counters()))
    torch.cuda.synchronize()
    v["direct_logits_replays"] = sum(r.direct is not None for r in F.replays().values())
    v["logits_replays"] = len(F.replays())
    v["direct_sequences"] = sum(s.direct is not None for s in R.sequences().values())
    v["sequences"] = len(R.sequences())
    v["fastpath_uncacheable"] = sorted(set(F._UNCACHEABLE.values()))[:5]
    v["sequences_uncacheable"] = sorted(set(R._UNCACHEABLE.values()))[:5]
    host, total, parts = [], [], []
    for _ in range(7):
        totals, restore = timed_parts()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            fn()
        finally:
            restore()
        host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        total.append((time.perf_counter() - t0) * 1e6)
        parts.append(totals)
    med = sorted(range(7), key=lambda i: host[i])[3]
    v["host_us"] = round(host[med], 1)
    v["total_us"] = round(sorted(total)[3], 1)
    v["blocks"] = parts[med]["blocks"]
    v["logits_calls_us"] = round(parts[med]["logits"] * 1e6, 1)
    v["selections_us"] = round(parts[med]["select"] * 1e6, 1)
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(3):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(16)
        v["profile_tottime"] = text.getvalue()
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096x65536")
    ap.add_argument("--variants", default="RAGGED_EPILOGUE=0,RAGGED_EPILOGUE=1")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--profile", action="store_true", help="also cProfile 3 calls of each")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    result = {"device": torch.cuda.get_device_name(), "shapes": {}}
    lines = []
    for shape in a.shapes.split(","):
        rows, keys = (int(x) for x in shape.split("x"))
        inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
        args = inp.args()
        out = torch.empty(rows, a.k, dtype=torch.int32, device="cuda")
        lbuf = torch.empty(rows, keys, device="cuda")
        here = result["shapes"][shape] = {"block_rows": _topk.scratch_rows(rows, keys, None, a.k, "cuda"), "variants": {}}
        fns = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf)}
        for name in a.variants.split(","):
            fns[name] = with_switches(parse_variant(name), lambda: K.fp8_mqa_topk(*args, a.k, out=out))
            fns[name]()
            floor = parse_variant(name).get("SCRATCH_FLOOR", _topk.SCRATCH_FLOOR)
            budget = max(rows * keys * 4 // _topk.SCRATCH_FRACTION, floor)  # (the blocks the call took)
            here["variants"][name] = {"bad_rows_checked": sampled_mismatches(inp, out.clone(), a.k,
                                                                             max_scratch_bytes=budget)}
        for name, fn in fns.items():
            if name != "logits":
                here["variants"][name].update(profile_variant(fn, a.profile))
        here["e2e_us"] = best_alternated(fns, 3, timer=eager_us)
        for name, v in here["variants"].items():
            e2e = here["e2e_us"][name]
            lines.append(f"{shape} {name:34s} e2e {e2e:8.0f} us ({e2e / here['e2e_us']['logits']:.3f} of the logits "
                         f"{here['e2e_us']['logits']:.0f}), host {v['host_us']:.0f} / total {v['total_us']:.0f} us, "
                         f"{v['blocks']} blocks: logits calls {v['logits_calls_us']:.0f}, selections "
                         f"{v['selections_us']:.0f}; replayed {v['logits_replayed']}/{v['selection_sequences_replayed']}, "
                         f"bad {v['bad_rows_checked']}")
        fns = inp = args = lbuf = None  # (the next shape's buffers in their place)
        torch.cuda.empty_cache()
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    for shape, here in result["shapes"].items():
        for name, v in here["variants"].items():
            if "profile_tottime" in v:
                print(f"\n===== {shape} {name}\n{v['profile_tottime']}")
            short = {k_: v_ for k_, v_ in v.items() if not k_.startswith("profile")}
            print(f"{shape} {name}: {json.dumps(short)}")
    print("\n" + "\n".join(lines))
    bad = [v["bad_rows_checked"][0] for h in result["shapes"].values() for v in h["variants"].values()]
    return 1 if any(bad) else 0


if __name__ == "__main__":
    sys.exit(main())
