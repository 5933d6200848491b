"""GPU check of the experimental Gluon decode kernel (H100/H200, sm_90): correctness, then timing.

Usage, from the repo root on the GPU host:
    python3 experiments/gluon_decode/check_gpu.py [--settings tp16_b3_c1_r64,...] [--buckets 64x8192:full,...]
                                                  [--replays 30] [--skip-timing]
    python3 experiments/gluon_decode/check_gpu.py --next-n 2     # SETTINGS_N2 on next_n 2's buckets

(a) Correctness, per setting, in a child process with a timeout (a deadlocked warp-specialised
    kernel then costs one setting, not the run): random lengths, explicit lengths (0, 1, 63, 64, 65,
    non-multiples of 64, full width), a width that is not a multiple of 64, quarter-full tables,
    and each input again with the block table poisoned past every request's valid pages (huge and
    negative ids); with clean_logits=True too, and with 2-D lengths ([B, next_n]). Checks: relative
    error ||out - ref|| / ||ref|| < 1e-3 in the valid region against
    tuner.reference.paged_mqa_logits_ref; every valid position written; positions past the length
    left untouched (clean_logits=False) or exactly -inf (True); output bit-identical with the
    poisoned table; and the project's own gates (tuner.families.run_all_gates: NaN-poisoned output,
    poison, CUDA-graph capture replayed with other lengths and tables), for both clean_logits
    values and both length layouts.
(b) Timing of the settings that passed, by CUDA-graph replay over tuner.measure.timing_inputs
    (4 block tables over a >= 1 GiB pool, 8 launches a graph), against the shipped runtime
    (tuner.bench._api_call), as bench/ceilings.py does; each timed bucket is first checked
    against the reference on its first input set. % of floor = floor / time, floor from
    tuner.roofline.floor_ms at the measured copy bandwidth. Where `import deep_gemm` works
    (tuner/baselines.py; on the H200 `python3 -m bench.deepgemm build`), DeepGEMM's kernel is timed
    on the same inputs too. --warmup-ms: replays before each timing (the bench's 100 ms by default:
    next_n 2 slows by 16% within it under the power cap; docs/PERF.md, "Against DeepGEMM").
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import json
import os
import subprocess
import sys
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402

TOL = 1e-3
# name -> launch keyword arguments (tiles per program, ring slots, consumer warpgroups, maxnreg)
from kernel import SETTINGS, SETTINGS_N2  # noqa: E402  (imports torch and triton only; compiles nothing)
BUCKETS = "64x8192:full,64x8192:quarter,16x32768:full,32x32768:full,4x32768:full"
# next_n 2: where DeepGEMM leads most (0.83-0.92 of its speed) at 8,192 and 16,384 tiles, and one long bucket
BUCKETS_N2 = "64x8192:full,8x8192:full,32x32768:full,128x8192:full,16x131072:full"
CHILD_TIMEOUT_S = 300  # correctness of one setting, in a child process
BUCKET_TIMEOUT_S = 300  # timing of one bucket (all settings), in this process
DEVICE = "cuda"  # (--cpu-self-test swaps it, with torch stand-ins for the kernel)


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def log(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------------------------------------
# (a) correctness, one setting (runs in a child process)

def _launch_fn(setting: dict):
    import kernel as K

    return functools.partial(K.launch, **setting)


def _run(fn, x, fill=float("nan"), clean=False):
    q, kv, w, lens, bt, width = x.args()
    out = torch.full((q.shape[0] * q.shape[1], width), fill, dtype=torch.float32, device=q.device)
    fn(q, kv, w, lens, bt, out, width, clean)
    _sync()
    return out


def _check_one(fn, x, what: str, clean: bool = False) -> str:
    from tuner.inputs import poison_block_table
    from tuner.reference import paged_mqa_logits_ref, relative_error

    out = _run(fn, x, clean=clean)
    ref = paged_mqa_logits_ref(*x.args())
    valid = x.valid_mask()
    problems = []
    n_unwritten = int(torch.isnan(out[valid]).sum())
    if n_unwritten:
        problems.append(f"{n_unwritten} valid positions not written")
    err = relative_error(out, ref, valid) if bool(valid.any()) else 0.0
    if not err < TOL:
        problems.append(f"relative error {err:.3g} >= {TOL}")
    if clean:
        n_not_inf = int((out[~valid] != float("-inf")).sum())
        if n_not_inf:
            problems.append(f"{n_not_inf} positions past the length are not -inf (clean_logits=True)")
    else:
        n_touched = int((~torch.isnan(out[~valid])).sum())
        if n_touched:
            problems.append(f"{n_touched} positions past the length were written")
    poisoned = _run(fn, poison_block_table(x), clean=clean)
    if not torch.equal(torch.nan_to_num(out, nan=1.0), torch.nan_to_num(poisoned, nan=1.0)):
        problems.append("output changed with the block table poisoned past the valid pages")
    lens = x.context_lens.tolist()
    desc = f"{what}: B={x.q.shape[0]} width={x.max_context_len} lens[:8]={lens[:8]}"
    if problems:
        raise AssertionError(f"{desc}: " + "; ".join(problems))
    past = "-inf past length" if clean else "untouched past length"
    return f"{desc}: rel err {err:.2e}, {past}, poison-invariant"


def check_setting(name: str, next_n: int = 1) -> bool:
    import triton  # noqa: F401

    from tuner.families import run_all_gates
    from tuner.inputs import make_decode_inputs
    from indexer_logits._identity import Problem

    known = SETTINGS if next_n == 1 else SETTINGS_N2
    setting = known[name] if name in known else json.loads(name)
    fn = _launch_fn(setting)
    p = Problem(next_n=next_n)
    p2d = Problem(next_n=next_n, lens_mode="2d")
    cases = [
        ("random", dict(batch=4, width=4096, lens="random", seed=1)),
        ("explicit lens incl. 0", dict(batch=8, width=8192, lens=[0, 1, 63, 64, 65, 4097, 8191, 8192], seed=2)),
        ("all zero", dict(batch=3, width=2048, lens=0, seed=3)),
        ("full", dict(batch=3, width=2048, lens="full", seed=4)),
        ("width not a multiple of 64", dict(batch=5, width=3000, lens="random", seed=5)),
        ("quarter", dict(batch=16, width=8192, lens="quarter", seed=6)),
        ("random, B=64", dict(batch=64, width=8192, lens="random", seed=7)),
        ("random, long", dict(batch=2, width=65536, lens="random", seed=8)),
        # the launch contract's other forms (added 2026-12-04): -inf past each row's limit, and 2-D lengths
        ("clean_logits, random", dict(batch=4, width=4096, lens="random", seed=11, clean=True)),
        ("clean_logits, explicit lens incl. 0, width 3000",
         dict(batch=8, width=3000, lens=[0, 1, 63, 64, 65, 2047, 2999, 3000], seed=12, clean=True)),
        ("clean_logits, all zero", dict(batch=3, width=2048, lens=0, seed=13, clean=True)),
        ("2-D lens, random", dict(batch=8, width=8192, lens="random", seed=14, two_d=True)),
        ("2-D lens, clean_logits, width 3000", dict(batch=5, width=3000, lens="random", seed=15, two_d=True,
                                                     clean=True)),
    ]
    ok = True
    for what, c in cases:
        try:
            x = make_decode_inputs(p2d if c.get("two_d") else p, c["batch"], c["width"], c["lens"], seed=c["seed"],
                                   device=DEVICE)
            log(f"  [{name}] ok  {_check_one(fn, x, what, clean=c.get('clean', False))}")
        except Exception as exc:  # noqa: BLE001 - report and go on
            ok = False
            log(f"  [{name}] FAIL {what}: {type(exc).__name__}: {str(exc)[:2000]}")
            if not isinstance(exc, AssertionError):
                traceback.print_exc()
    gate_cases = [(p, 4, 4096, False), (p, 16, 8192, False), (p, 4, 4096, True), (p2d, 16, 8192, False),
                  (p2d, 4, 4096, True)]
    for seed, (prob, batch, width, clean) in enumerate(gate_cases):
        form = f"B={batch} width={width} lens {prob.lens_mode} clean_logits={clean}"
        try:
            x = make_decode_inputs(prob, batch, width, "random", seed=100 + seed, device=DEVICE)
            err = run_all_gates(types.SimpleNamespace(launch=fn), prob, x, clean_logits=clean, seed=seed)
            log(f"  [{name}] ok  project gates (reference, poison, CUDA-graph replay) {form}: rel err {err:.2e}")
        except Exception as exc:  # noqa: BLE001
            ok = False
            log(f"  [{name}] FAIL project gates {form}: {type(exc).__name__}: {str(exc)[:2000]}")
    return ok


def check_in_child(name: str, next_n: int = 1) -> bool:
    """Run check_setting(name) in a fresh process with a timeout (a hang must not stop the run)."""
    t0 = time.time()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-check", name,
                               "--next-n", str(next_n)],
                              timeout=CHILD_TIMEOUT_S, capture_output=True, text=True, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        log(out.rstrip())
        log(f"  [{name}] FAIL: timed out after {CHILD_TIMEOUT_S} s (deadlock?)")
        return False
    log(proc.stdout.rstrip())
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-4000:]
        log(f"  [{name}] FAIL: child exited with {proc.returncode}; stderr tail:\n{tail}")
        return False
    log(f"  [{name}] correctness passed ({time.time() - t0:.0f} s)")
    return True


# ------------------------------------------------------------------------------------------------
# (b) timing

def time_buckets(names, buckets, replays, next_n=1, warmup_ms=100.0):
    from tuner import baselines
    from tuner.bench import _api_call
    from tuner.gates import new_output
    from tuner.measure import timing_inputs
    from indexer_logits._identity import Problem
    from tuner.reference import paged_mqa_logits_ref, relative_error
    from tuner.roofline import floor_ms
    from tuner.timing import measure_copy_bandwidth, time_cuda_graph

    p = Problem(next_n=next_n)
    known = SETTINGS if next_n == 1 else SETTINGS_N2
    dg = baselines.deepgemm("cuda")
    log(f"DeepGEMM: {dg.version}" if dg else f"DeepGEMM: not timed ({dg.reason})")
    timed = functools.partial(time_cuda_graph, replays=replays, warmup_ms=warmup_ms)
    copy_bw = measure_copy_bandwidth()
    log(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s")
    rows = []
    for bucket, lens in buckets:
        spec = f"{bucket.batch}x{bucket.context}:{lens}"
        # A hang (a deadlock that only shows at these sizes) ends the run with tracebacks instead
        # of holding the GPU: every line so far has been printed already.
        faulthandler.dump_traceback_later(BUCKET_TIMEOUT_S, exit=True)
        row = {"bucket": spec, "gluon": {}}
        try:
            sets = timing_inputs(p, bucket, lens, device="cuda")
            fl = floor_ms(sets[0], False, copy_bw=copy_bw, matmul_rate=None)
            row["floor_us"] = fl * 1e3
            call = _api_call(p)
            outs = [new_output(x, 0.0) for x in sets]
            t = timed([lambda x=x, o=o: call(x, o) for x, o in zip(sets, outs)])
            row["shipped_us"] = t.p50_ms * 1e3
            log(f"{spec:>18} floor {fl * 1e3:7.1f} us | shipped {t.p50_ms * 1e3:7.1f} us ({100 * fl / t.p50_ms:4.1f}%)")
            if dg:
                theirs = baselines.launches(dg.module, p, sets)
                diff = baselines.check(theirs[0](), call(sets[0], new_output(sets[0], 0.0)), sets[0].valid_mask())
                if diff < baselines.MAX_DIFF:  # checked against ours first, as the bench does
                    t = timed(theirs)
                    row["deepgemm_us"] = t.p50_ms * 1e3
                    log(f"{'':>18} DeepGEMM {t.p50_ms * 1e3:7.1f} us ({100 * fl / t.p50_ms:4.1f}%)")
                else:
                    log(f"{'':>18} DeepGEMM: logits differ from ours (calc_diff {diff:.2e}), not timed")
        except Exception as exc:  # noqa: BLE001
            log(f"{spec}: inputs or shipped timing failed: {type(exc).__name__}: {exc}")
            traceback.print_exc()
            rows.append(row)
            continue
        x0 = sets[0]
        ref = paged_mqa_logits_ref(*x0.args())
        valid = x0.valid_mask()
        for name in names:
            fn = _launch_fn(known[name])
            try:
                out = _run(fn, x0)
                err = relative_error(out, ref, valid)
                if not err < TOL:
                    raise AssertionError(f"relative error {err:.3g} on this bucket's inputs: not timed")
                outs = [new_output(x, 0.0) for x in sets]
                fns = [lambda x=x, o=o: fn(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, o,
                                           x.max_context_len, False) for x, o in zip(sets, outs)]
                t = timed(fns)
                row["gluon"][name] = t.p50_ms * 1e3
                log(f"{'':>18} gluon {name:16s} {t.p50_ms * 1e3:7.1f} us ({100 * fl / t.p50_ms:4.1f}%), "
                    f"x{row['shipped_us'] / (t.p50_ms * 1e3):.2f} vs shipped")
            except Exception as exc:  # noqa: BLE001
                row["gluon"][name] = None
                log(f"{'':>18} gluon {name:16s} FAILED: {type(exc).__name__}: {str(exc)[:500]}")
        rows.append(row)
        del sets, ref, valid
        torch.cuda.empty_cache()
    faulthandler.cancel_dump_traceback_later()
    return rows


def print_table(rows, names):
    log("\ntimes in us (p50) and % of floor")
    log(f"{'bucket':>22} {'floor':>7}  {'shipped':>15}  {'DeepGEMM':>15}  " + "  ".join(f"{n:>18}" for n in names))
    for r in rows:
        fl = r.get("floor_us")
        if fl is None:
            log(f"{r['bucket']:>22}  (failed)")
            continue

        def cell(v):
            return "-" if v is None else f"{v:7.1f} {100 * fl / v:5.1f}%"

        log(f"{r['bucket']:>22} {fl:7.1f}  {cell(r.get('shipped_us')):>15}  {cell(r.get('deepgemm_us')):>15}  "
            + "  ".join(f"{cell(r['gluon'].get(n)):>18}" for n in names))


def cpu_self_test() -> int:
    """The correctness harness on CPU (no GPU, no kernel): the cases of check_setting against a torch
    stand-in that keeps the launch contract (they must pass) and one that ignores clean_logits
    (they must fail). The gates need CUDA graphs and are left out here. Exit 0 when both hold."""
    global DEVICE, _launch_fn
    import tuner.families
    from indexer_logits._reference import paged_mqa_logits_ref

    def standin(keep_contract):
        def launch(q, kv, w, lens, bt, out, width, clean):
            ref = paged_mqa_logits_ref(q, kv, w, lens, bt, width, True)
            if clean and keep_contract:
                out[:, :width] = ref
            else:
                valid = ~torch.isneginf(ref)
                out[valid] = ref[valid]
            return out
        return launch

    DEVICE = "cpu"
    tuner.families.run_all_gates = lambda *a, **k: 0.0
    results = {}
    for keep in (True, False):
        _launch_fn = lambda setting, keep=keep: standin(keep)  # noqa: E731
        results[keep] = check_setting("n2_tp128_b8_c4_r96", next_n=2)
    log(f"cpu self-test: the contract-keeping stand-in {'passed' if results[True] else 'FAILED'}, "
        f"the one ignoring clean_logits {'failed, as it must' if not results[False] else 'PASSED (harness bug)'}")
    return 0 if results[True] and not results[False] else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--next-n", type=int, default=1, choices=(1, 2))
    ap.add_argument("--settings", default=None, help="comma-separated names from SETTINGS (next_n 2: SETTINGS_N2) "
                                                     "[default: all of them]")
    ap.add_argument("--buckets", default=None, help="BxCONTEXT:full|quarter, comma-separated [default: BUCKETS, "
                                                    "next_n 2: BUCKETS_N2]")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--warmup-ms", type=float, default=100.0, help="replays before each timing (the bench's 100 ms)")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--child-check", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cpu-self-test", action="store_true",
                    help="check the correctness harness itself on CPU with torch stand-ins (no GPU needed)")
    args = ap.parse_args()
    if args.cpu_self_test:
        return cpu_self_test()
    if args.child_check:
        return 0 if check_setting(args.child_check, args.next_n) else 1
    known = SETTINGS if args.next_n == 1 else SETTINGS_N2
    args.settings = args.settings or ",".join(known)
    args.buckets = args.buckets or (BUCKETS if args.next_n == 1 else BUCKETS_N2)
    if not torch.cuda.is_available():
        log("no CUDA device")
        return 2
    import triton

    log(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    names = [n for n in args.settings.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown settings {unknown} for next_n {args.next_n}; known: {list(known)}")
    from tuner.buckets import parse_bucket_specs

    try:
        buckets = parse_bucket_specs(args.buckets)
    except ValueError as exc:
        ap.error(str(exc))
    log("== (a) correctness")
    passed = [n for n in names if check_in_child(n, args.next_n)]
    failed = [n for n in names if n not in passed]
    log(f"correctness: passed {passed}; failed {failed}")
    if args.skip_timing or not passed:
        return 0 if passed else 1
    log("== (b) timing (CUDA-graph replay, p50)")
    rows = time_buckets(passed, buckets, args.replays, args.next_n, args.warmup_ms)
    print_table(rows, passed)
    if failed:
        log(f"(not timed, failed correctness: {failed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
