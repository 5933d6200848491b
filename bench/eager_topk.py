"""Host time of one eager top-k call: the call as engines make it, against its logits call alone.

    python3 -m bench.eager_topk [--calls 1000] [--out DIR]

For decode (fp8, paged; 1x4K and 64x8K) and prefill (fp8, ragged K; 128x8K, one block of rows),
the mean host microseconds per call of, alternated five rounds in one process (the host's speed
drifts within a run): the logits call (`logits`), the top-k call with its selection launches
recorded and replayed (`topk`, indexer_logits._recorded_launches: a shape's second call on) and
the same top-k call with every launch through Triton's JITFunction.run (`topk_launch_code`:
INDEXER_LOGITS_FAST_LAUNCH=0, which turns the logits call's recorded launch off too). Timed as
bench.eager times (batches of 100 calls, a top-k call's six launches each, below the device's
queue of pending launches). Writes eager_topk.json under --out, prints a table last. Needs a
CUDA device.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench.eager import _alternated, decode_inputs, prefill_inputs

CASES = (("decode", 1, 4096), ("decode", 64, 8192), ("prefill", 128, 8192))
ROUNDS = 5
K = 2048


def _with_env(fn, name: str, value: str):
    """fn with the environment variable `name` set to `value` during each call."""
    def call():
        old = os.environ.get(name)
        os.environ[name] = value
        try:
            return fn()
        finally:
            if old is None:
                del os.environ[name]
            else:
                os.environ[name] = old
    return call


def case_fns(kind: str, rows: int, keys: int) -> dict:
    """The three calls of one case: logits, top-k (recorded), top-k (launch code)."""
    import torch
    import indexer_logits as il
    idx = torch.empty(rows, K, dtype=torch.int32, device="cuda")
    if kind == "decode":
        q, kv, w, lens, bt, out = decode_inputs(rows, keys)
        logits = lambda: il.fp8_paged_mqa_logits(q, kv, w, lens, bt, None, keys, False, out=out)
        topk = lambda: il.fp8_paged_mqa_topk(q, kv, w, lens, bt, None, keys, K, out=idx)
    else:
        q, kv, w, ks, ke, out = prefill_inputs(rows, keys)
        logits = lambda: il.fp8_mqa_logits(q, kv, w, ks, ke, False, out=out)
        topk = lambda: il.fp8_mqa_topk(q, kv, w, ks, ke, K, out=idx)
    return {"logits": logits, "topk": topk,
            "topk_launch_code": _with_env(topk, "INDEXER_LOGITS_FAST_LAUNCH", "0")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.eager_topk", description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        from ._common import no_cuda
        return no_cuda()
    from indexer_logits import _recorded_launches
    rows = []
    for kind, n, keys in CASES:
        timed = _alternated(case_fns(kind, n, keys), args.calls, ROUNDS, batch=100)
        row = {"case": f"{kind} {n}x{keys // 1024}K", **{f"{name}_us": m for name, (m, _) in timed.items()},
               **{f"{name}_best_us": b for name, (_, b) in timed.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    replayed = sum(s.calls for s in _recorded_launches.sequences().values())
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "eager_topk.json").write_text(json.dumps({"rows": rows, "replayed_sequences": replayed}, indent=1))
    print(f"host us per call, alternated {ROUNDS} rounds (median / best); top-k calls served by a recorded "
          f"sequence: {replayed}")
    print("case".ljust(18) + "logits".rjust(16) + "topk".rjust(16) + "launch code".rjust(16) + "topk/logits".rjust(13))
    for r in rows:
        cols = "".join(f"{r[f'{n}_us']:9.1f} /{r[f'{n}_best_us']:5.0f}" for n in ("logits", "topk", "topk_launch_code"))
        print(r["case"].ljust(18) + cols + f"{r['topk_us'] / r['logits_us']:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
