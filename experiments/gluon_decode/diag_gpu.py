"""What scoring adds to a bare read, timed on the GPU with the Gluon kernel's diagnostics.

For each bucket: the shipped v7 runtime, then the Gluon kernel (settings below) as is (diag 0),
without the per-tile logits stores (1), without the scale copies (2), as the ring's bare read
(3: the same grid, runs, block-table reads, TMA copies and barriers; no wgmma, epilogue or store),
with the logits written by bulk tensor stores from shared memory (4), and with the per-thread
stores marked evict_last, so the output lines stay in L2 while the cache streams past (5).
Diag 0, 4 and 5 are first checked against the reference inside the valid region of the bucket's
inputs; diagnostics 1-3 give wrong logits by design and are only timed. CUDA-graph replay as `cli.py bench` (tuner.timing).

Usage (GPU host, repo root): python3 experiments/gluon_decode/diag_gpu.py [--buckets ...]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402

import kernel as K  # noqa: E402
from check_gpu import TOL, _run  # noqa: E402  (the correctness check's launch and tolerance)

DIAGS = {0: "kernel", 1: "no stores", 2: "no scales", 3: "bare read", 4: "bulk stores", 5: "stores evict_last"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", default="64x8192:full,16x32768:full,32x32768:full,1x1048576:full")
    ap.add_argument("--settings", default="tp16_b3_c1_r64,tp32_b4_c1_r64")
    ap.add_argument("--replays", type=int, default=30)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    from tuner.bench import _api_call
    from tuner.buckets import parse_bucket_specs
    from tuner.gates import new_output
    from tuner.measure import timing_inputs
    from indexer_logits._identity import Problem
    from tuner.reference import paged_mqa_logits_ref, relative_error
    from tuner.roofline import floor_ms
    from tuner.timing import measure_copy_bandwidth, time_cuda_graph

    try:
        buckets = parse_bucket_specs(args.buckets)
    except ValueError as exc:
        ap.error(str(exc))
    names = [n for n in args.settings.split(",") if n]
    unknown = [n for n in names if n not in K.SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {unknown}; known: {list(K.SETTINGS)}")
    p = Problem()
    copy_bw = measure_copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    table = []
    for bucket, lens in buckets:
        spec = f"{bucket.batch}x{bucket.context}:{lens}"
        sets = timing_inputs(p, bucket, lens, device="cuda")
        fl = floor_ms(sets[0], False, copy_bw=copy_bw, matmul_rate=None) * 1e3
        call = _api_call(p)
        outs = [new_output(x, 0.0) for x in sets]
        shipped = time_cuda_graph([lambda x=x, o=o: call(x, o) for x, o in zip(sets, outs)],
                                  replays=args.replays).p50_ms * 1e3
        print(f"{spec}: floor {fl:.1f} us, shipped {shipped:.1f} us ({100 * fl / shipped:.1f}%)", flush=True)
        ref = paged_mqa_logits_ref(*sets[0].args())
        valid = sets[0].valid_mask()
        for name in names:
            row = [spec, name, fl, shipped]
            for diag in DIAGS:
                fn = functools.partial(K.launch, **K.SETTINGS[name], diag=diag)
                try:
                    if diag in (0, 4, 5):  # these must be right inside the valid region
                        err = relative_error(_run(fn, sets[0]), ref, valid)
                        if not err < TOL:
                            raise AssertionError(f"relative error {err:.3g}: the kernel is wrong here")
                    fns = [lambda x=x, o=o: fn(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, o,
                                               x.max_context_len, False) for x, o in zip(sets, outs)]
                    t = time_cuda_graph(fns, replays=args.replays).p50_ms * 1e3
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"  {name} diag {diag} ({DIAGS[diag]}): FAILED {type(exc).__name__}: {str(exc)[:300]}",
                          flush=True)
                    t = None
                row.append(t)
                if t is not None:
                    print(f"  {name} diag {diag} ({DIAGS[diag]}): {t:.1f} us ({100 * fl / t:.1f}%)", flush=True)
            table.append(row)
        del sets, ref, valid, outs
        torch.cuda.empty_cache()
    print("\nbucket setting | floor | shipped | " + " | ".join(DIAGS.values()) + "   (us, p50)")
    for r in table:
        print(" | ".join([r[0], r[1]] + [("-" if v is None else f"{v:.1f}") for v in r[2:]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
