"""Is a timing trustworthy? Checks of the measurement itself, on the GPU host (issue 7 and
docs/PERF.md, "The bench's clocks"). Each sub-command prints its figures; none writes a store.

  warmup       does the GPU's clock state move a timing? (`cli.py bench` read the 64x8K kernel 6%
               slower than the ceilings did, on the same module, inputs and timer.) The shipped
               kernel through the runtime API, timed after the GPU sat idle for a second, with the
               warm-up of earlier versions (3 replays: warmup_ms=0) and with time-based warm-ups;
               and the same three right after a busy second (warm_up_gpu: bf16 matmuls). Several
               rounds, so a drift shows. p50 per launch (us) per mode and round. (The first run,
               docs/perf_logs/h200_v7/bench2_warmup/warmup_check.log, had the busy state with 3
               replays only.)
  bench-paths  why did `cli.py bench` read a decode kernel slower than the tuner and the sweeps?
               (1x1M read 38.8-39.3 us in separate `bench` processes, 37.7 us in a sweep, same
               module, same H200.) Per bucket, in one process, the table's module timed as the
               tuner does (its own launch()) and as the bench's `shipped` does (the runtime API:
               checks, dispatch, then the same launch()), each with the tuner's warm-up (20 ms of
               replays) and the bench's (100 ms), alternating, for a few rounds; first the CUDA
               kernels one API call launches (torch profiler), so an extra kernel would show.
  clocks       does a decode kernel slow down when it runs for a while, and is it the clocks? (The
               1x1M kernel read 37.9 us after 20 ms of replays and 38.9-39.1 us after 100 ms, in
               one process.) The table's module (runtime API) timed after warm-ups of increasing
               length, back to back, while nvidia-smi samples the SM and memory clocks, power,
               temperature and throttle reasons every 20 ms: per warm-up the p50 and the samples'
               medians. --next-n 2: the draft-token kernels; --deepgemm: DeepGEMM's kernel on the
               same inputs right after ours at each warm-up (is a gap between them the clocks'?
               docs/PERF.md, "next_n 2 against DeepGEMM"); --warmups: the warm-ups. --copy: then the copy bandwidth (the floor's divisor: an SM kernel copying
               4 GiB, graph replay, no warm-up) after two idle seconds and right after 5 s of the
               last bucket's kernel.
  page-stride  does the timing inputs' page stride matter? They put a 64-byte gap between pages
               (stride 8,512 bytes for fp8, 16,448 for bf16) so that a kernel assuming stride ==
               page bytes fails the gates, which also starts every other page off a 128-byte line;
               engines allocate pages back to back. The table's kernels on the same buckets, with
               the gap (64) and without it (0). (docs/perf_logs/page_stride.log is the first
               version's run, commit 5e04350; see docs/PERF.md.)
  matmul-rate  how steady is the dense matmul rate the prefill goals are measured against?
               tuner.timing.measure_matmul_rate (fp8 and bf16, 8192^3, graph replay) several times
               in a row after a warm-up, with the SM clock and power NVML reports after each.

Usage (GPU host): python3 -m bench.checks warmup [--buckets 64x8192:full,...] [--rounds 3]
                  python3 -m bench.checks bench-paths [--buckets 1x1048576:full,...] [--rounds 3]
                  python3 -m bench.checks clocks [--buckets 1x1048576:full,...] [--copy] [--next-n 2] [--deepgemm]
                  python3 -m bench.checks page-stride [--table SLUG] [--buckets ...] [--prefill-buckets ...]
                  python3 -m bench.checks matmul-rate [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._clocks import CLOCK_WARMUPS_MS, clocks, smi_gpu
from bench._common import no_cuda


# ---------------------------------------------------------------------------------------------
# warmup

WARMUP_MODES = [("idle, 3 replays", 0.0, False), ("idle, 20 ms", 20.0, False), ("idle, 100 ms", 100.0, False),
                ("busy, 3 replays", 0.0, True), ("busy, 20 ms", 20.0, True), ("busy, 100 ms", 100.0, True)]


def warmup(buckets, replays: int, rounds: int) -> int:
    import torch

    from indexer_logits._identity import Problem
    from tuner.bench import api_launches
    from tuner.measure import timing_inputs
    from tuner.timing import time_cuda_graph, warm_up_gpu

    problem = Problem()
    warm_up_gpu()
    print(f"{'bucket':18s} {'mode':16s} " + " ".join(f"round {r + 1:>2d}" for r in range(rounds)), flush=True)
    for bucket, lens in buckets:
        spec = f"{bucket.batch}x{bucket.context}:{lens}"
        sets = timing_inputs(problem, bucket, lens)
        fns = api_launches(problem, sets)
        time_cuda_graph(fns, replays=3)  # compile and load the module outside the rounds
        for name, warmup_ms, busy in WARMUP_MODES:
            cells = []
            for _ in range(rounds):
                torch.cuda.synchronize()
                if busy:
                    warm_up_gpu(1.0)
                else:
                    time.sleep(1.0)
                t = time_cuda_graph(fns, replays=replays, warmup_ms=warmup_ms)
                cells.append(f"{t.p50_ms * 1e3:8.1f}")
            print(f"{spec:18s} {name:16s} " + " ".join(cells), flush=True)
        del sets, fns
        torch.cuda.empty_cache()
    return 0


# ---------------------------------------------------------------------------------------------
# bench-paths


def api_kernels(fn) -> list[str]:
    """The CUDA kernels one API call launches (after a first call has compiled everything)."""
    import torch

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def bench_paths(buckets, replays: int, rounds: int) -> int:
    from bench._common import module_for
    from indexer_logits._identity import Problem
    from tuner.bench import api_launches
    from tuner.measure import time_candidate, timing_inputs
    from tuner.render import load_module
    from tuner.timing import time_cuda_graph

    problem = Problem()
    for bucket, lens in buckets:
        spec = f"{bucket.batch}x{bucket.context}:{lens}"
        sets = timing_inputs(problem, bucket, lens)
        src, variant = module_for(problem, bucket)
        module = load_module(src)
        api_fns = api_launches(problem, sets)
        print(f"{spec}: {variant}; one API call launches: {api_kernels(api_fns[0])}", flush=True)
        cells: dict[str, list[float]] = {}
        for _ in range(rounds):
            for warmup_ms in (20.0, 100.0):
                t = time_candidate(module, sets, False, "cuda_graph", replays, warmup_ms=warmup_ms)
                cells.setdefault(f"module, {warmup_ms:.0f} ms", []).append(1e3 * t.p50_ms)
                t = time_cuda_graph(api_fns, replays=replays, warmup_ms=warmup_ms)
                cells.setdefault(f"api, {warmup_ms:.0f} ms", []).append(1e3 * t.p50_ms)
        for name, values in cells.items():
            print(f"  {name:16s} " + " ".join(f"{v:8.2f}" for v in values), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------
# clocks



PAGE_GAPS = (64, 0)


def shipped(table: dict, family: str, dtype: str, next_n: int, batch: int, context: int):
    """(Problem, Config) of the table's entry for this H=64, D=128, page-64 bucket (1-D lengths;
    next_n 1 for the prefill families); SystemExit naming the bucket if it has none."""
    from indexer_logits._identity import Config, Problem

    for e in table["entries"]:
        p, b = e["problem"], e["bucket"]
        if (p["family"], p["cache_dtype"], p.get("next_n", 1), p.get("lens_mode", "1d"), p.get("heads"),
                p.get("head_dim"), p.get("page_size"), b["batch"], b["context"]) == \
                (family, dtype, next_n, "1d", 64, 128, 64, batch, context):
            return Problem(**p), Config(**table["modules"][e["variant"]]["config"])
    raise SystemExit(f"no table entry for {family} {dtype} n{next_n} {batch}x{context}")


def page_stride(table_path: Path, decode_buckets, prefill_buckets) -> int:
    import json

    import torch

    from tuner.measure import time_candidate, timing_inputs
    from tuner.render import load_module, render
    from tuner.roofline import floor_ms
    from tuner.timing import measure_copy_bandwidth, measure_matmul_rate, warm_up_gpu

    table = json.loads(table_path.read_text())
    workdir = Path(tempfile.mkdtemp(prefix="page_stride_"))

    def module_from(text: str, name: str):
        path = workdir / f"{name}.py"  # a real file: triton.jit reads the source
        path.write_text(text)
        return load_module(path)

    warm_up_gpu()
    copy_bw = measure_copy_bandwidth()
    rate = measure_matmul_rate("fp8") if prefill_buckets else None
    print(f"{torch.cuda.get_device_name()}: copy {copy_bw / 1e12:.2f} TB/s"
          + (f", fp8 matmul {rate / 1e12:.0f} TFLOP/s" if rate else "") + f"; table {table_path}", flush=True)
    rows = []
    cases = [("prefill_paged", b, lens) for b, lens in prefill_buckets] + [("decode_paged", b, lens)
                                                                          for b, lens in decode_buckets]
    for i, (family, bucket, lens) in enumerate(cases):
        prefill = family != "decode_paged"
        problem, config = shipped(table, family, "fp8", 1, bucket.batch, bucket.context)
        m = module_from(render(problem, config), f"{family}_{i}")
        for gap in PAGE_GAPS:
            xs = timing_inputs(problem, bucket, lens, page_gap_bytes=gap)
            t = time_candidate(m, xs, prefill, replays=5 if prefill else 20)
            pct = 100 * floor_ms(xs[0], prefill, copy_bw, rate) / t.p50_ms
            name = f"{'prefill_paged' if prefill else 'decode'} fp8 {bucket.batch}x{bucket.context} {lens}"
            rows.append((name, config.slug, gap, t.p50_ms * 1e3, pct))
            print(*rows[-1], flush=True)
            del xs
            torch.cuda.empty_cache()
    print(f"\n{'bucket':38s} {'config':28s} {'gap':>4s} {'p50 us':>10s} {'% floor':>8s}")
    for r in rows:
        print(f"{r[0]:38s} {r[1]:28s} {r[2]:4d} {r[3]:10.1f} {r[4]:7.1f}%")
    return 0


# ---------------------------------------------------------------------------------------------
# matmul-rate


def smi_clocks() -> str:
    """SM clock, power and temperature of this process's GPU, as nvidia-smi reports them now."""
    q = "clocks.sm,power.draw,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--id={smi_gpu()}", f"--query-gpu={q}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def matmul_rate(replays: int, rounds: int) -> int:
    from tuner.timing import measure_matmul_rate, warm_up_gpu

    warm_up_gpu(2.0)
    for dtype in ("fp8", "bf16"):
        rates = []
        for i in range(rounds):
            r = measure_matmul_rate(dtype, replays=replays) / 1e12
            rates.append(r)
            print(f"{dtype} round {i}: {r:7.0f} TFLOP/s   (sm clock, power, temp: {smi_clocks()})", flush=True)
        print(f"{dtype}: min {min(rates):.0f}  median {statistics.median(rates):.0f}  max {max(rates):.0f} TFLOP/s "
              f"(spread {100 * (max(rates) - min(rates)) / max(rates):.1f}%)", flush=True)
    return 0


# ---------------------------------------------------------------------------------------------


def _warmups(text: str) -> tuple:
    try:
        values = tuple(float(w) for w in text.split(","))
    except ValueError:
        values = ()
    if not values or any(w < 0 for w in values):
        raise argparse.ArgumentTypeError(f"expected milliseconds >= 0, comma-separated, got {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.checks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="check", required=True, metavar="CHECK")

    def add(name, help_, buckets=None, replays=10, rounds=None):
        p = sub.add_parser(name, help=help_, description=help_)
        if buckets is not None:
            p.add_argument("--buckets", default=buckets, help="BxCONTEXT[:lens], comma-separated")
        p.add_argument("--replays", type=int, default=replays, help="timed replays, as `cli.py bench` uses")
        if rounds is not None:
            p.add_argument("--rounds", type=int, default=rounds)
        return p

    add("warmup", "the clock state against a timing: idle or busy, old or time-based warm-ups",
        "64x8192:full,64x8192:quarter,64x131072:full", rounds=3)
    add("bench-paths", "the table's module timed as the tuner and as the bench do, 20 and 100 ms warm-ups",
        "1x1048576:full,8x131072:full,64x8192:full", rounds=3)
    p = add("clocks", "timings after longer and longer warm-ups, with nvidia-smi's clocks sampled meanwhile",
            "1x1048576:full,64x8192:full")
    p.add_argument("--copy", action="store_true", help="also the copy bandwidth, idle and right after 5 s of load")
    p.add_argument("--next-n", type=int, default=1, choices=(1, 2, 3, 4))
    p.add_argument("--deepgemm", action="store_true", help="DeepGEMM's kernel timed after ours at each warm-up")
    p.add_argument("--warmups", type=_warmups, default=CLOCK_WARMUPS_MS,
                   help=f"warm-ups in ms, comma-separated [default: {','.join(f'{w:g}' for w in CLOCK_WARMUPS_MS)}]")
    p = add("page-stride", "the table's kernels with and without the timing inputs' 64-byte page gap",
            "64x8192:full,64x8192:quarter,64x131072:full,64x1048576:full")
    p.add_argument("--prefill-buckets", default="4096x22528:full,4096x131072:full",
                   help="chunked prefill buckets, comma-separated ('' for none)")
    p.add_argument("--table", default=None,
                   help="the table: a GPU slug under indexer_logits/tables/ or a dispatch.json [default: this GPU's]")
    add("matmul-rate", "the dense matmul rate measured several times in a row, with the clocks after each",
        rounds=6)
    return ap


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    from tuner.buckets import parse_bucket_specs

    try:
        buckets = parse_bucket_specs(args.buckets) if hasattr(args, "buckets") else []
        prefill_buckets = (parse_bucket_specs(args.prefill_buckets, "--prefill-buckets")
                           if getattr(args, "prefill_buckets", "") else [])
    except ValueError as exc:
        ap.error(str(exc))
    table_path = None
    if args.check == "page-stride" and args.table:
        from indexer_logits._dispatch import TABLES_DIR

        table_path = Path(args.table) if args.table.endswith(".json") else TABLES_DIR / args.table / "dispatch.json"
        if not table_path.is_file():
            ap.error(f"--table: no table at {table_path}")
    import torch

    if not torch.cuda.is_available():
        return no_cuda()
    if args.check == "warmup":
        return warmup(buckets, args.replays, args.rounds)
    if args.check == "bench-paths":
        return bench_paths(buckets, args.replays, args.rounds)
    if args.check == "clocks":
        return clocks(buckets, args.replays, args.copy, args.next_n, args.deepgemm, args.warmups)
    if args.check == "page-stride":
        if table_path is None:
            from indexer_logits._dispatch import TABLES_DIR
            from indexer_logits._identity import slugify

            table_path = TABLES_DIR / slugify(torch.cuda.get_device_name()) / "dispatch.json"
            if not table_path.is_file():
                print(f"no table for this GPU at {table_path}: pass --table", file=sys.stderr)
                return 2
        return page_stride(table_path, buckets, prefill_buckets)
    return matmul_rate(args.replays, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
