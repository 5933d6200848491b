"""Host time of a cached call's own Python, on CPU: the key, the lookup, the replay without Triton.

    python3 -m bench.fastpath [--number 20000] [--repeat 7] [--out DIR]

What a shape's second call does before Triton's launcher (indexer_logits._fastpath), timed with
CPU tensors of the shapes issue 26 names (decode 64 x 8K: 7 arguments; prefill 1024 x 8K: 6,
K given as (k, k_scale)), so it runs anywhere and isolates the package's own work:
- `key`: _fastpath.key_of, the key a CUDA call gets (call_key less its CUDA gate);
- `lookup`: _fastpath.get of that key, recorded (its hash and an equal key's comparison);
- `replay`, `replay_alloc`: Replay.__call__ with out= given and with out=None (the output
  allocated per call), over a stand-in CompiledKernel whose launcher returns at once and a
  stand-in driver (stream 0): everything but Triton's launcher and the CUDA calls;
- `served`: key + lookup + replay, what the call adds to the launcher, with out= and without.
The best of --repeat runs of --number calls, in microseconds per call. On a GPU host, bench.eager
times the whole call with the real launcher (docs/PERF.md, "Host time of one eager call").
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path


class _Compiled:
    """A CompiledKernel stand-in: the launcher is a no-op (Triton's is not what this times)."""

    function, packed_metadata = 0, None

    @staticmethod
    def run(*args):
        return None


class _Driver:
    @staticmethod
    def get_current_device():
        return 0

    @staticmethod
    def get_current_stream(device):
        return 0


def decode_case():
    import torch
    q = torch.empty(64, 1, 64, 128).to(torch.float8_e4m3fn)
    kv = torch.empty(8200, 64, 1, 132, dtype=torch.uint8)
    w, lens = torch.empty(64, 64), torch.empty(64, dtype=torch.int32)
    bt, out = torch.empty(64, 128, dtype=torch.int32), torch.empty(64, 8192)
    # as _decode._paged builds them: the tensors (indices last), then the scalars
    tensors = (q, kv, w, lens, bt, out, None)
    scalars = (8192, False, "page_blocked", None, None, type(None), torch.float32)
    return "decode 64x8K", "paged", tensors, scalars, [q, kv, w, lens, bt, out], 5


def prefill_case():
    import torch
    q = torch.empty(1024, 64, 128).to(torch.float8_e4m3fn)
    k, s = torch.empty(8192, 128).to(torch.float8_e4m3fn), torch.empty(8192)
    w, ks, ke = torch.empty(1024, 64), torch.empty(1024, dtype=torch.int32), torch.empty(1024, dtype=torch.int32)
    out = torch.empty(1024, 8192)
    tensors = (q, (k, s), w, ks, ke, out)
    scalars = (True, 0, None, ("cu_seq_len_k_start", "cu_seq_len_k_end"), torch.float32)
    return "prefill 1024x8K", "ragged", tensors, scalars, [q, k, s, w, ks, ke, out], 6


def _replay(inputs: list, out_index: int):
    """A Replay as _fastpath records one: every input a tensor slot, the rest constants."""
    from indexer_logits._fastpath import Replay
    out = inputs[out_index]
    slots = [(i, i) for i in range(len(inputs))]
    template = [None] * len(inputs) + [8192, 64, 1, True]
    return Replay(_Compiled(), (132, 1, 1), template, slots, [], (tuple(out.shape), out.dtype))


def measure(case, number: int, repeat: int) -> dict:
    from indexer_logits import _fastpath
    name, tag, tensors, scalars, inputs, out_index = case
    key = _fastpath.key_of(tag, tensors, scalars)
    replay = _replay(inputs, out_index)
    _fastpath._REPLAYS[key] = replay
    no_out = list(inputs)
    no_out[out_index] = None
    assert replay(list(inputs), out_index) is not None, "the stand-in replay did not launch (no triton imported?)"
    env = {"F": _fastpath, "tag": tag, "tensors": tensors, "scalars": scalars, "key": key, "replay": replay,
           "inputs": inputs, "no_out": no_out, "i": out_index}
    stmts = {
        "key": "F.key_of(tag, tensors, scalars)",
        "lookup": "F.get(key)",
        "replay": "replay(list(inputs), i)",
        "replay_alloc": "replay(list(no_out), i)",
        "served": "F.get(F.key_of(tag, tensors, scalars))(list(inputs), i)",
        "served_alloc": "F.get(F.key_of(tag, tensors, scalars))(list(no_out), i)",
    }
    row = {"case": name}
    for name, stmt in stmts.items():
        best = min(timeit.repeat(stmt, globals=env, number=number, repeat=repeat))
        row[f"{name}_us"] = round(best / number * 1e6, 3)
    del _fastpath._REPLAYS[key]
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fastpath", description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per timed run")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs; the best is kept")
    parser.add_argument("--out", type=Path, default=None, help="also write DIR/fastpath.json")
    args = parser.parse_args(argv)
    if args.number < 1 or args.repeat < 1:
        parser.error("--number and --repeat must be positive")
    import triton  # noqa: F401  (a replay reads Triton's launch hooks; the package has it loaded by then)

    from indexer_logits import _fastpath
    _fastpath.active_driver = lambda: _Driver()  # no GPU: a stand-in driver (stream 0 of device 0)
    rows = [measure(decode_case(), args.number, args.repeat), measure(prefill_case(), args.number, args.repeat)]
    names = [k for k in rows[0] if k.endswith("_us")]
    print(f"{'case':22s}" + "".join(f"{n[:-3]:>14s}" for n in names))
    for r in rows:
        print(f"{r['case']:22s}" + "".join(f"{r[n]:14.3f}" for n in names))
    print(f"(microseconds per call, best of {args.repeat} x {args.number}; CPU tensors, no launcher; "
          f"python {sys.version.split()[0]})")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fastpath.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
