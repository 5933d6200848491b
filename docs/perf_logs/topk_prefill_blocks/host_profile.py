"""Where the ragged prefill top-k's host time goes, with and without the ragged logits kernel's tile maxima
(_topk.RAGGED_EPILOGUE). Call 4 saw the host's enqueue time of a 4096 x 64K call rise 4279 -> 6532 us (~90 us
a block of 164 rows) with it on. For each setting, after warm calls:

1. the host's enqueue time of one call (median of 7), split into the blocks' logits calls
   (_topk.topk_ragged_logits) and selections (_topk._select), timed around each;
2. which launches were replayed: the logits replays' and the selection sequences' call counters over one call
   (a block served by the full path leaves them unchanged), whether each replays through the direct launcher,
   and what either cache refused (_fastpath._UNCACHEABLE, _recorded_launches._UNCACHEABLE);
3. cProfile of 3 calls, the top functions by own time.

    python3 docs/perf_logs/topk_prefill_blocks/host_profile.py [--shape 4096x65536] [--out FILE]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="4096x65536")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows, keys = (int(x) for x in a.shape.split("x"))
    print(torch.cuda.get_device_name(), flush=True)
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    args = inp.args()
    out = torch.empty(rows, a.k, dtype=torch.int32, device="cuda")
    result = {"device": torch.cuda.get_device_name(), "shape": a.shape,
              "block_rows": _topk.scratch_rows(rows, keys, None, a.k, "cuda"), "variants": {}}
    for on in (False, True):
        saved = _topk.RAGGED_EPILOGUE
        _topk.RAGGED_EPILOGUE = on
        try:
            fn = lambda: K.fp8_mqa_topk(*args, a.k, out=out)  # noqa: E731
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            v = result["variants"][f"RAGGED_EPILOGUE={int(on)}"] = {}
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
            host, parts = [], []
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
                parts.append(totals)
            med = sorted(range(7), key=lambda i: host[i])[3]
            v["host_us"] = round(host[med], 1)
            v["blocks"] = parts[med]["blocks"]
            v["logits_calls_us"] = round(parts[med]["logits"] * 1e6, 1)
            v["selections_us"] = round(parts[med]["select"] * 1e6, 1)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(3):
                fn()
            prof.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(22)
            v["profile_tottime"] = text.getvalue()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
            v["profile_cumulative"] = text.getvalue()
        finally:
            _topk.RAGGED_EPILOGUE = saved
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    for name, v in result["variants"].items():
        print(f"\n===== {name}\n{v['profile_tottime']}\n{v['profile_cumulative']}")
    for name, v in result["variants"].items():
        short = {k_: v_ for k_, v_ in v.items() if not k_.startswith("profile")}
        print(f"{name}: {json.dumps(short)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
