"""The selection kernels letting their dependent launch at their start (TRIGGER) against not (as served), end to
end: decode logits + top-k in CUDA graphs of 4 calls, and the ragged prefill top-k eagerly, alternated in one
process with the logits alone; every variant's answer checked first (decode: every row against a stable sort;
prefill: sampled blocks). The served path's table entries keep their own settings; the variant sets
_topk_select.TRIGGER, which they do not name; where bound serves a decode case, its settings with 128 bins too.

    python3 docs/perf_logs/topk_trigger/trigger_ab.py [--rounds 5] [--skip-prefill] [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated, eager_us, sampled_mismatches  # noqa: E402
from indexer_logits import _topk_select as S  # noqa: E402
from tuner.inputs import make_decode_inputs, make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402
from tuner.topk_tune import mismatched_rows  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_arena"))
from decode_ab import under  # noqa: E402 (a variant's module values set while its call runs)

K_ = 2048
DECODE = ((64, 32768), (1, 1 << 20), (64, 131072), (16, 1 << 18), (32, 16384), (128, 8192))
PREFILL = ((4096, 65536), (2048, 1 << 20))
VARIANTS = [("served", {}), ("trigger", {(S, "TRIGGER"): True})]
BINS_128 = True  # where bound serves a decode case, its settings at 128 bins too (topk_ballot/ballot_ab.py: off)
EXTRA_BOUND: list = []  # (label, settings over the served ones) where bound serves a decode case (ballot_ab.py's)


def decode(rounds: int, result: dict) -> None:
    for rows, width in DECODE:
        inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
        lbuf = torch.empty(rows, width, device="cuda")
        idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
        logits = K.fp8_paged_mqa_logits(*args, False, out=lbuf).clone()
        hi = inp.context_lens.int()
        fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=lbuf)}
        bad = {}
        served = S._serving(rows, width, torch.device("cuda"), "decode")
        variants = list(VARIANTS)
        # the maxima's round and the keys' histogram at 128 / 256 bins (the space: 32, 64)
        if served[0] == "bound" and BINS_128:
            variants.append(("bins 128", {(S, "SERVING"): ("bound", dict(served[1] or {}, BINS=128))}))
        if served[0] == "bound":
            variants += [(label, {(S, "SERVING"): ("bound", dict(served[1] or {}, **over))})
                         for label, over in EXTRA_BOUND]
        for label, settings in variants:
            fns[label] = under(settings, lambda: K.fp8_paged_mqa_topk(*args, K_, out=idx))
            bad[label] = mismatched_rows(fns[label]().clone(), logits, torch.zeros_like(hi), hi, K_)
        best = best_alternated(fns, rounds)
        name = f"decode {rows}x{width // 1024}K"
        result["cases"][name] = {"us": best, "mismatched_rows": bad, "served": [served[0], served[1]]}
        print(f"\n{name}: logits alone {best['logits']:.1f} us; served {served}", flush=True)
        for label, _ in variants:
            print(f"  {best[label]:8.1f} us  {best[label] / best['logits']:.3f}  bad {bad[label]}  {label}", flush=True)
        lbuf = logits = None
        torch.cuda.empty_cache()


def prefill(rounds: int, result: dict) -> None:
    for rows, keys in PREFILL:
        inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
        args = inp.args()
        idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
        fns, bad = {}, {}
        for label, settings in VARIANTS:
            fns[label] = under(settings, lambda: K.fp8_mqa_topk(*args, K_, out=idx))
            bad[label] = sampled_mismatches(inp, fns[label]().clone(), K_)
        lbuf = torch.empty(rows, keys, device="cuda")
        fns = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf), **fns}
        best = best_alternated(fns, rounds, timer=eager_us)
        name = f"prefill {rows}x{keys // 1024}K"
        result["cases"][name] = {"us": best, "mismatched_sample_rows": bad}
        print(f"\n{name}: logits alone {best['logits']:.1f} us", flush=True)
        for label, _ in VARIANTS:
            print(f"  {best[label]:8.1f} us  {best[label] / best['logits']:.3f}  bad {bad[label]}  {label}", flush=True)
        lbuf = inp = None
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--against-off", action="store_true",
                    help="time the served default (TRIGGER None: decode only) against TRIGGER off")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.against_off:
        VARIANTS[:] = [("trigger off", {(S, "TRIGGER"): False}), ("served", {})]
    result = {"device": torch.cuda.get_device_name(), "cases": {}}
    print(result["device"], flush=True)
    decode(a.rounds, result)
    if not a.skip_prefill:
        prefill(max(2, a.rounds // 2), result)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    bad = [v for c in result["cases"].values() for v in (c.get("mismatched_rows") or {}).values()]
    bad += [v[0] for c in result["cases"].values() for v in (c.get("mismatched_sample_rows") or {}).values()]
    return 1 if any(bad) else 0


if __name__ == "__main__":
    sys.exit(main())
