"""The decode bar's cases under variants of the selection, end to end in CUDA graphs (logits + top-k, 4 calls a
graph), alternated in one process with the logits call alone; each variant's answer checked against a stable
sort first. A variant is a label and the module settings it sets while the call runs (so at capture): the
selection's (path, settings) through _topk_select.SERVING, and module flags.

    python3 docs/perf_logs/topk_arena/decode_ab.py [--rounds 5] [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated  # noqa: E402
from indexer_logits import _topk_row, _topk_select as S  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402
from tuner.topk_tune import mismatched_rows  # noqa: E402

K_ = 2048
BOUND = dict(TILE=0, BINS=64, PROGRAMS_PER_SM=8, BLOCK=512, SEGMENTS=True)  # the H100 table's 64x32K and 1x1M entry
# (rows, width): [(label, {(module, name): value})]; "served" sets nothing
CASES = {
    (128, 8192): [("served", {}), ("workspace zeroed", {(S, "SKIP_UNREAD_WORKSPACE"): False}),
                  ("row PDL", {(_topk_row, "PDL"): True}),
                  ("row 256 bins, 256 cands", {(S, "SERVING"): ("row", dict(BINS=256, CAP=256))}),
                  ("row 32 warps", {(S, "SERVING"): ("row", dict(NUM_WARPS=32))})],
    (1, 1 << 20): [("served", {}), ("scan slots", {(S, "SERVING"): ("bound", dict(BOUND, SCAN_SLOTS=True))}),
                   ("4 programs an SM", {(S, "SERVING"): ("bound", dict(BOUND, PROGRAMS_PER_SM=4))}),
                   ("4 an SM, scan slots", {(S, "SERVING"): ("bound", dict(BOUND, PROGRAMS_PER_SM=4, SCAN_SLOTS=True))}),
                   ("2 an SM, scan slots", {(S, "SERVING"): ("bound", dict(BOUND, PROGRAMS_PER_SM=2, SCAN_SLOTS=True))})],
    (64, 32768): [("served", {}), ("scan slots", {(S, "SERVING"): ("bound", dict(BOUND, SCAN_SLOTS=True))}),
                  ("count by rows", {(S, "SERVING"): ("bound", dict(BOUND, COUNT_LANES=True))}),
                  ("16 an SM, scan slots", {(S, "SERVING"): ("bound", dict(BOUND, PROGRAMS_PER_SM=16, SCAN_SLOTS=True))})],
}


def under(settings: dict, fn):
    def call():
        saved = {key: getattr(*key) for key in settings}
        for (mod, name), value in settings.items():
            setattr(mod, name, value)
        try:
            return fn()
        finally:
            for (mod, name), value in saved.items():
                setattr(mod, name, value)
    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    result = {"device": torch.cuda.get_device_name(), "cases": {}}
    print(result["device"], flush=True)
    for (rows, width), variants in CASES.items():
        inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
        lbuf = torch.empty(rows, width, device="cuda")
        idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
        logits = K.fp8_paged_mqa_logits(*args, False, out=lbuf).clone()
        hi = inp.context_lens.int()
        fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf)}
        bad = {}
        for label, settings in variants:
            fns[label] = under(settings, lambda: K.fp8_paged_mqa_topk(*args, K_, out=idx))
            bad[label] = mismatched_rows(fns[label]().clone(), logits, torch.zeros_like(hi), hi, K_)
        best = best_alternated(fns, a.rounds)
        name = f"{rows}x{width // 1024}K"
        result["cases"][name] = {"us": best, "mismatched_rows": bad}
        print(f"\n{name}: logits alone {best['logits']:.1f} us", flush=True)
        for label, _ in variants:
            print(f"  {best[label]:8.1f} us  {best[label] / best['logits']:.3f}  bad {bad[label]}  {label}", flush=True)
        torch.cuda.empty_cache()
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    return 1 if any(v for c in result["cases"].values() for v in c["mismatched_rows"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
