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
- `served`: key + lookup + replay, what the call adds to the launcher, with out= and without;
- `guarded`: the same call as the entry points serve it (_fastpath.serve_any: the guard index of
  indexer_logits._call_key, where this torch's TensorGuards passed its self-test, else the key);
- `launcher` (under Triton 3.6.0, whose launcher it builds): Triton's CudaLauncher as a replay
  called it before (its __call__, wrap_handle_tensordesc's expansion, make_tensordesc_arg) and
  `direct`, indexer_logits._direct_launch's call of the same C launch with a cached tensor map,
  for the decode kernel's 24 arguments (one TMA descriptor); the C launch is a no-op and
  fill_tma_descriptor a stand-in returning at once (the real one encodes a CUtensorMap: not here);
  `direct` hands tensors over as addresses (_direct_launch.ADDRESSES: their data_ptr() read here,
  the C launcher's cuPointerGetAttribute per tensor saved, which this no-op launch cannot show),
  `direct_tensors` as tensors.
The best of --repeat runs of --number calls, in microseconds per call; each round times every
phase in turn (alternated), so load on the host falls on all of them alike. On a GPU host, bench.eager
times the whole call with the real launcher (docs/PERF.md, "Host time of one eager call").
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path
from typing import Optional


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


def _best_alternated(stmts: dict, env: dict, number: int, repeat: int) -> dict:
    """{name_us: best of `repeat` runs of `number` calls} per statement, the statements timed in
    turn within each round rather than one after another: a spell of load on a shared host then
    falls on every phase alike instead of on whichever was being timed, so phases that contain
    one another keep their order (a served call holds its key)."""
    timers = {name: timeit.Timer(stmt, globals=env) for name, stmt in stmts.items()}
    best = dict.fromkeys(stmts, float("inf"))
    for _ in range(repeat):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(number))
    return {f"{name}_us": round(t / number * 1e6, 3) for name, t in best.items()}


def measure(case, number: int, repeat: int) -> dict:
    from indexer_logits import _fastpath
    name, tag, tensors, scalars, inputs, out_index = case
    key = _fastpath.key_of(tag, tensors, scalars)
    replay = _replay(inputs, out_index)
    _fastpath._REPLAYS[key] = replay
    from indexer_logits import _call_key
    skeleton, flat = _call_key.skeleton_of(tag, tensors, scalars)
    _call_key.file(skeleton, flat, replay)  # as record() files it (nothing where GUARDS is None)
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
        "guarded": "F.serve_any(tag, tensors, scalars, list(inputs), i)",
    }
    row = {"case": name}
    row.update(_best_alternated(stmts, env, number, repeat))
    row["guards"] = _call_key.GUARDS is not None
    del _fastpath._REPLAYS[key]
    _call_key.clear()
    return row


# The H200 decode kernel's signature (decode_paged fp8, USE_TMA): 8 pointers and a descriptor, 12 ints, 4 constexprs.
_DECODE_SIGNATURE = dict([(f"p{i}", "*fp8e4nv") for i in range(2)] + [("kv_desc", "tensordesc<fp8e4nv[1, 64, 128]>")]
                         + [(f"p{i}", "*fp32") for i in range(3, 8)] + [(f"i{i}", "i32") for i in range(12)]
                         + [(f"c{i}", "constexpr") for i in range(4)])
_DECODE_META = [{"swizzle": 3, "elem_size": 1, "elem_type": 0, "block_size": [1, 64, 128], "fp4_padded": False}]


def measure_launcher(number: int, repeat: int) -> Optional[dict]:
    """Triton 3.6.0's launcher (Python part) against the direct call, decode 64x8K's arguments."""
    import types

    import triton
    from triton.backends.nvidia import driver as nv

    from indexer_logits import _direct_launch
    if triton.__version__ not in _direct_launch.SUPPORTED:
        return None
    fill = types.SimpleNamespace(fill_tma_descriptor=lambda *a: object())
    saved, triton.runtime.driver._active = triton.runtime.driver._active, types.SimpleNamespace(utils=fill)
    try:  # the stand-in is make_tensordesc_arg's encoder while this runs
        return _time_launcher(nv, _direct_launch, number, repeat)
    finally:
        triton.runtime.driver._active = saved


def _time_launcher(nv, direct_launch, number: int, repeat: int) -> dict:
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    run = object.__new__(nv.CudaLauncher)
    run.num_ctas, run.launch_cooperative_grid, run.launch_pdl = 1, False, False
    run.launch = nv.wrap_handle_tensordesc(lambda *a: None, _DECODE_SIGNATURE, _DECODE_META)
    run.global_scratch_size = run.profile_scratch_size = 0
    run.global_scratch_align = run.profile_scratch_align = 1
    _, _, tensors, _, inputs, _ = decode_case()
    kv = tensors[1]
    desc = TensorDescriptor(kv.view(torch.float8_e4m3fn), [8200, 64, 128], [64 * 132, 128, 1], [1, 64, 128])
    template = [None] * 8 + list(range(12)) + [True, 64, True, False]
    slots = [(0, 0), (1, 1), (3, 1), (4, 2), (5, 3), (6, 4), (7, 5)]
    direct = direct_launch.plan(run, 0, (4, 1, 0), (132, 1, 1), template, slots, [(2, 1, desc)])
    assert direct is not None
    tensors = direct_launch.Plan(direct.launch, direct.flat, direct.ptr_slots, direct.map_slots)
    tensors.addresses = False
    env = {"run": run, "direct": direct, "tensors": tensors, "inputs": inputs, "template": template, "slots": slots,
           "desc": desc}
    before = ("args = template.copy()\nfor i, j in slots: args[i] = inputs[j]\n"
              "d = object.__new__(type(desc)); d.__dict__.update(desc.__dict__); d.base = inputs[1]; args[2] = d\n"
              "run(132, 1, 1, 0, 0, (4, 1, 0), None, None, None, *args)")
    stmts = {"triton_launcher": before, "direct": "direct(inputs, 0)", "direct_tensors": "tensors(inputs, 0)"}
    return {"case": "decode 64x8K launcher", **_best_alternated(stmts, env, number, repeat)}


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
    launcher = measure_launcher(args.number, args.repeat)
    if launcher is not None:
        print(f"{launcher['case']:22s}  Triton's launcher {launcher['triton_launcher_us']:.3f}  "
              f"direct {launcher['direct_us']:.3f} (tensors as tensors: {launcher['direct_tensors_us']:.3f})  "
              "(Python only: no-op C launch and encoder)")
        rows.append(launcher)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fastpath.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
