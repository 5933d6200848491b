"""The ragged prefill top-k under two (path, settings) of the selection (indexer_logits._topk_select.SERVING, so
every block takes them), alternated in one process with the logits call alone: end to end eager, the peak memory
a call adds, sampled blocks checked against a stable sort first. Call 9 compares the H100 table's prefill entry
(bound, 16 programs an SM, the count by rows from the model) with the one call 8's re-tune kept (8 programs an
SM, the count by rows off).

    python3 docs/perf_logs/topk_prefill_blocks/entry_ab.py [--shape 4096x65536] [--out FILE]
        [--settings 'bound:{"PROGRAMS_PER_SM": 16}' 'bound:{"PROGRAMS_PER_SM": 8, "COUNT_LANES": false}']
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
from tuner.inputs import make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

OLD = 'bound:{"TILE": 0, "BINS": 64, "PROGRAMS_PER_SM": 16, "BLOCK": 512, "SEGMENTS": true}'
NEW = 'bound:{"TILE": 0, "BINS": 64, "PROGRAMS_PER_SM": 8, "BLOCK": 512, "SEGMENTS": true, "COUNT_LANES": false}'


def serving(text: str) -> tuple:
    path, _, settings = text.partition(":")
    return path, json.loads(settings) if settings else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="4096x65536")
    ap.add_argument("--settings", nargs="+", default=[OLD, NEW])
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows, keys = (int(x) for x in a.shape.split("x"))
    print(torch.cuda.get_device_name(), flush=True)
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    args = inp.args()
    out = torch.empty(rows, a.k, dtype=torch.int32, device="cuda")
    lbuf = torch.empty(rows, keys, device="cuda")

    def under(text):
        def call():
            S.SERVING = serving(text)
            try:
                return K.fp8_mqa_topk(*args, a.k, out=out)
            finally:
                S.SERVING = None
        return call
    fns = {"logits": lambda: K.fp8_mqa_logits(*args, False, out=lbuf)}
    result = {"device": torch.cuda.get_device_name(), "shape": a.shape, "settings": {}}
    for text in a.settings:
        fns[text] = under(text)
        fns[text]()
        S.SERVING = serving(text)  # (the blocks' rows as the call took them: its buffers count in a block's budget)
        try:
            bad = sampled_mismatches(inp, out.clone(), a.k)
        finally:
            S.SERVING = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fns[text]()
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base
        result["settings"][text] = {"bad_rows_checked": bad, "extra_bytes": extra,
                                    "extra_over_logits": extra / (rows * keys * 4)}
    result["e2e_us"] = best_alternated(fns, 5, timer=eager_us)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    logits = result["e2e_us"]["logits"]
    print(f"logits alone {logits:.0f} us")
    for text, v in result["settings"].items():
        e2e = result["e2e_us"][text]
        print(f"{e2e:8.0f} us ({e2e / logits:.3f} of the logits), extra memory {v['extra_bytes'] / 2**20:.1f} MiB "
              f"({v['extra_over_logits']:.4f} of the logits), bad {v['bad_rows_checked']}: {text}")
    return 1 if any(v["bad_rows_checked"][0] for v in result["settings"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
