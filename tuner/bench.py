"""Benchmarks of the shipped kernels against the baselines, on the same inputs.

Per bucket, each method is timed on the same input sets and, where it can be captured, by
CUDA-graph replay (the timer is recorded in every row):
- shipped: the public runtime API (indexer_logits), i.e. the dispatch table's choice
  (`*_paged_mqa_logits`, `*_mqa_logits` or `*_paged_mqa_logits_chunked`, with out= and no value
  checks);
- shipped_pdl: the same calls as programmatic dependent launches (`enable_pdl=True`; decode on
  sm_90+ only). Timed back to back, each launch's predecessor is the previous one, itself a PDL
  launch: what PDL gives when the kernel before the indexer in a model step is launched that way
  too (after a plain kernel it gives nothing; docs/PERF.md, "Programmatic dependent launch");
- default: the family's untuned default config;
- autotune: the config `triton.testing.do_bench` picks among the same candidate configs at the
  first call, which is what `triton.autotune` does (eager timing on the call's own inputs); the
  pick is then timed like the others;
- torch_fullwidth: the torch fallback over the whole page-table width (what SGLang runs on GPUs
  without DeepGEMM), decode fp8 only, in batch chunks that keep its intermediates under 4 GiB;
- deepgemm: DeepGEMM's own kernel (`fp8_paged_mqa_logits` with its
  `get_paged_mqa_logits_metadata` schedule, computed per input set outside the timing;
  `fp8_mqa_logits` for ragged prefill) wherever `import deep_gemm` works (tuner/baselines.py),
  timed in the same harness after its logits matched ours on the valid region (calc_diff
  < 1e-3). Every row of a bucket records DeepGEMM's version, its p50 (`deepgemm_us`) and the
  row's time over it (`ratio_to_deepgemm`), or why there is none (`deepgemm_absent`);
- reference: the length-aware torch reference (reads lengths on the host: not capturable, so
  it is timed eagerly with events).
Rows go to a JSON-lines file (schema: BenchRow); the report reads only that file.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

import indexer_logits as rt
from indexer_logits import _dispatch, _tables, _versions

from . import baselines
from .gates import launch, new_output, reference
from .inputs import DecodeInputs, PrefillPagedInputs
from .measure import time_candidate, timing_inputs
from .pdl_gate import pdl_capable
from indexer_logits._identity import Bucket, Config, Problem, variant_name
from .render import emit, load_module
from .roofline import floor_ms
from .space import default_config
from .timing import Timing, time_cuda_graph, time_wall_clock

METHODS = ("shipped", "shipped_pdl", "default", "autotune", "torch_fullwidth", "deepgemm", "reference")
FALLBACK_CHUNK_BYTES = 4 << 30


@dataclass
class BenchRow:
    run_id: str
    created_at: str
    gpu_slug: str
    gpu_name: str
    family: str
    problem_json: str
    bucket_batch: int
    bucket_context: int
    lens: str  # "full" | "quarter" (decode) | "causal" (prefill_ragged) | "full" (prefill_paged)
    method: str
    variant: str
    timer: str
    p20_ms: float
    p50_ms: float
    p80_ms: float
    floor_ms: float
    frac_of_floor: float
    ratio_to_shipped: Optional[float]  # this method's p50 / shipped p50 (> 1: slower than shipped)
    copy_bw: Optional[float]
    matmul_rate: Optional[float]
    torch_version: str
    triton_version: str
    # DeepGEMM, the same for every row of a bucket (None in rows written before it was a baseline):
    deepgemm_version: Optional[str] = None  # `2.3.0+477618c` where it imported
    deepgemm_us: Optional[float] = None  # its p50 in microseconds at this bucket
    ratio_to_deepgemm: Optional[float] = None  # this method's p50 / DeepGEMM's (< 1: faster than DeepGEMM)
    deepgemm_diff: Optional[float] = None  # calc_diff of its logits against ours on the valid region
    deepgemm_absent: Optional[str] = None  # why this bucket has no DeepGEMM figure
    # The table the runtime served `shipped` from (None in rows written before it was recorded):
    table_kind: Optional[str] = None  # "tuned" | "predicted" | "defaults"
    table_triton_version: Optional[str] = None  # the Triton that table was tuned under (issue 30)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _api_call(problem: Problem, enable_pdl: Optional[bool] = None) -> Callable:
    if enable_pdl and not problem.is_decode:
        raise ValueError(f"enable_pdl: only the decode family launches with PDL, not {problem.family}")
    if problem.is_decode:
        fn = rt.fp8_paged_mqa_logits if problem.cache_dtype == "fp8" else rt.bf16_paged_mqa_logits

        def call(x: DecodeInputs, out):
            return fn(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, None, x.max_context_len, False,
                      out=out, scale_layout=x.scale_layout, check_values=False, enable_pdl=enable_pdl)
    elif problem.is_paged:  # chunked prefill over the paged cache
        fn = rt.fp8_paged_mqa_logits_chunked if problem.cache_dtype == "fp8" else rt.bf16_paged_mqa_logits_chunked

        def call(x: PrefillPagedInputs, out):
            return fn(x.q, x.kv_cache, x.weights, x.row_request, x.row_limit, x.block_table, x.max_context_len, False,
                      out=out, scale_layout=x.scale_layout, check_values=False)
    else:
        fn = rt.fp8_mqa_logits if problem.cache_dtype == "fp8" else rt.bf16_mqa_logits

        def call(x, out):
            return fn(x.q, x.kv if problem.cache_dtype == "fp8" else x.kv[0], x.weights, x.cu_seqlen_ks,
                      x.cu_seqlen_ke, False, out=out, check_values=False)
    return call


def api_launches(problem: Problem, sets: Sequence, enable_pdl: Optional[bool] = None) -> list[Callable[[], object]]:
    """One runtime-API call per input set, each into an output of its own: what the bench times as
    `shipped` (with enable_pdl=True, `shipped_pdl`), ready for time_cuda_graph."""
    call = _api_call(problem, enable_pdl)
    outs = [new_output(x, 0.0) for x in sets]
    return [lambda x=x, o=o: call(x, o) for x, o in zip(sets, outs)]


# GPU time each bench timing replays first. The tuner's 20 ms (timing.DEFAULT_WARMUP_MS) ranks
# candidates timed back to back; the bench's figures are the ones the goals read, and right after
# a second of matmuls (which the bench runs at start, and the torch baselines resemble) the H200
# still ran the 64x8K kernel 3-4% slow after 20 ms of replays and at its idle speed after 100 ms
# (`python -m bench.checks warmup`, docs/PERF.md "The bench's clocks"). Every method of the bench
# warms up as long: with 20 ms for `default` and `autotune` and 100 for `shipped`, the same
# prefill kernel (1 ms a launch, tensor-bound) read 6% slower as `shipped`, in any order: most
# likely lower clocks after the longer stretch of power-heavy work (docs/PERF.md, "Where the goals
# stand"; clocks not read).
BENCH_WARMUP_MS = 100.0


def _time_fns(fns: Sequence[Callable[[], object]], method: str, replays: int) -> Timing:
    if method == "cuda_graph":
        return time_cuda_graph(fns, replays=replays, warmup_ms=BENCH_WARMUP_MS)
    return time_wall_clock(fns, reps=max(3, replays // 10))


def _time_eager(fn: Callable[[], object], reps: int = 5) -> Timing:
    """Events around eager calls (for what cannot be captured); wall clock on CPU."""
    if not torch.cuda.is_available():
        return time_wall_clock([fn], reps=reps)
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        samples.append(a.elapsed_time(b))
    s = sorted(samples)
    return Timing("eager_events", s[len(s) // 5], statistics.median(s), s[(4 * len(s)) // 5], len(s))


def torch_fullwidth_fallback(x: DecodeInputs, out: torch.Tensor) -> torch.Tensor:
    """Score every position of the page-table width with plain torch (fp8 page-blocked cache)."""
    q, kv, w, lens, bt, width = x.args()
    b, n, h, d = q.shape
    page = kv.shape[1]
    raw = kv.as_strided((kv.shape[0], page * (d + 4)), (kv.stride(0), 1))
    per_request = bt.shape[1] * page * (h * n * 4 + d * 4 + (d + 4))
    step = max(1, FALLBACK_CHUNK_BYTES // max(per_request, 1))
    for b0 in range(0, b, step):
        b1 = min(b, b0 + step)
        pages = raw[bt[b0:b1].long()]
        vals = pages[..., : page * d].reshape(b1 - b0, -1, d).view(torch.float8_e4m3fn).float()
        sc = pages[..., page * d:].contiguous().view(torch.float32).reshape(b1 - b0, -1)
        s = torch.einsum("bnhd,btd->bnht", q[b0:b1].float(), vals).relu_()
        logits = (s * w[b0 * n:b1 * n].view(b1 - b0, n, h, 1)).sum(2) * sc[:, None, :]
        t = torch.arange(logits.shape[-1], device=q.device)
        lim = lens[b0:b1].long()[:, None] - n + 1 + torch.arange(n, device=q.device)[None, :]
        logits = logits.masked_fill(t[None, None, :] >= lim[:, :, None], float("-inf"))
        out[b0 * n:b1 * n] = logits.reshape((b1 - b0) * n, -1)[:, :width]
    return out


def autotune_pick(modules: dict, inputs, clean_logits: bool = False):
    """The candidate triton.autotune would keep: fastest by triton.testing.do_bench on the call's
    own inputs (eager launches, no graph, one input set). Like triton.autotune, a candidate that
    does not fit the GPU (out of shared memory at launch, a failed compile assertion or ptxas)
    is passed over; the space's static shared-memory estimate can be below the real need."""
    import triton
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import OutOfResources, PTXASError

    x = inputs[0]
    out = new_output(x, 0.0)
    best, unfit = None, []
    for config, module in modules.items():
        try:
            if x.q.is_cuda:
                ms = triton.testing.do_bench(lambda: launch(module, x, out, clean_logits), warmup=5, rep=20,
                                             return_mode="median")
            else:
                ms = time_wall_clock([lambda: launch(module, x, out, clean_logits)], reps=2).p50_ms
        except (OutOfResources, CompileTimeAssertionFailure, PTXASError) as exc:
            unfit.append(f"{config.slug}: {exc}")
            continue
        if best is None or ms < best[1]:
            best = (config, ms)
    if best is None:
        raise RuntimeError("autotune: no candidate fits this GPU:\n  " + "\n  ".join(unfit))
    return best[0]


@functools.lru_cache(maxsize=8)
def served_table(gpu_name: str, compute_capability: str, root: str) -> tuple[str, Optional[str]]:
    """(kind, Triton version it was tuned under) of the table the runtime serves this GPU from: a
    row timed under Triton 3.8 from a table tuned under 3.6 says so (issue 30: the same table ran
    prefill 1.19x slower there)."""
    kind, path = _tables.serving_table(gpu_name, compute_capability or None, Path(root))
    return kind, _versions.tuned_under(path)


_RUNG_KIND = {"exact": "tuned", "nearest": "tuned", "predicted": "predicted", "default": "defaults"}


def served_by(problem: Problem, bucket: Bucket, device: str) -> tuple[str, Optional[str]]:
    """(kind, Triton it was tuned under) of the table the runtime serves this problem and bucket
    from: with tables of several Tritons side by side, a problem the running Triton's table lacks
    comes from another (under 3.9 the H200's decode from triton-3.8/), which the GPU-wide
    served_table() cannot say."""
    sel = _dispatch.select(torch.device(device), problem.to_dict(), (bucket.batch, bucket.context))
    return _RUNG_KIND.get(sel.rung, sel.rung), _versions.tuned_under(Path(sel.table)) if sel.table else None


def bench_bucket(problem: Problem, bucket: Bucket, lens: str, *, candidates: Sequence[Config], timer: str,
                 device: str, copy_bw: Optional[float], matmul_rate: Optional[float], env, run_id: str,
                 created_at: str, replays: int = 30, dot_dtype: str = "native",
                 methods: Sequence[str] = METHODS) -> list[BenchRow]:
    sets = timing_inputs(problem, bucket, lens, device=device)
    fl = floor_ms(sets[0], False, copy_bw=copy_bw, matmul_rate=matmul_rate)
    gen = Path(tempfile.mkdtemp(prefix="bench_modules_"))
    results: dict[str, tuple[str, Timing]] = {}
    if "shipped" in methods:
        results["shipped"] = ("runtime", _time_fns(api_launches(problem, sets), timer, replays))
    if "shipped_pdl" in methods and problem.is_decode and pdl_capable(device):
        results["shipped_pdl"] = ("runtime, enable_pdl=True",
                                  _time_fns(api_launches(problem, sets, enable_pdl=True), timer, replays))
    if "default" in methods:
        cfg = default_config(problem, dot_dtype)
        m = load_module(emit(problem, cfg, gen))
        results["default"] = (variant_name(problem, cfg),
                              time_candidate(m, sets, False, timer, replays, warmup_ms=BENCH_WARMUP_MS))
    if "autotune" in methods and candidates:
        modules = {c: load_module(emit(problem, c, gen)) for c in candidates}
        pick = autotune_pick(modules, sets)
        results["autotune"] = (variant_name(problem, pick),
                               time_candidate(modules[pick], sets, False, timer, replays, warmup_ms=BENCH_WARMUP_MS))
    if ("torch_fullwidth" in methods and problem.is_decode and problem.cache_dtype == "fp8"
            and problem.scale_layout == "page_blocked"):
        out = new_output(sets[0], 0.0)
        fn = lambda: torch_fullwidth_fallback(sets[0], out)
        results["torch_fullwidth"] = ("torch", _time_fns([fn], timer, max(3, replays // 5)))
    dg, dg_diff, dg_absent = None, None, "not asked for (--methods)"
    if "deepgemm" in methods:
        dg = baselines.deepgemm(device)
        dg_absent = dg.reason or baselines.unsupported(problem, device)
        if dg_absent is None:
            dg_diff, dg_absent, timing = _deepgemm_timing(dg, problem, sets, timer, replays)
            if timing is not None:
                results["deepgemm"] = (f"deep_gemm {dg.version}", timing)
    if "reference" in methods:
        results["reference"] = ("torch", _time_eager(lambda: reference(sets[0]), reps=3))
    shipped, theirs = results.get("shipped"), results.get("deepgemm")
    served = served_by(problem, bucket, device)
    rows = []
    for method, (variant, t) in results.items():
        rows.append(BenchRow(
            run_id, created_at, env.gpu_slug, env.gpu_name, problem.family, problem.to_json(), bucket.batch,
            bucket.context, lens, method, variant, t.method, t.p20_ms, t.p50_ms, t.p80_ms, fl, fl / t.p50_ms,
            (t.p50_ms / shipped[1].p50_ms) if shipped else None, copy_bw, matmul_rate, env.torch, env.triton,
            deepgemm_version=dg.version if dg else None,
            deepgemm_us=theirs[1].p50_ms * 1e3 if theirs else None,
            ratio_to_deepgemm=(t.p50_ms / theirs[1].p50_ms) if theirs else None,
            deepgemm_diff=dg_diff, deepgemm_absent=None if theirs else dg_absent,
            table_kind=served[0], table_triton_version=served[1]))
    return rows


def _deepgemm_timing(dg, problem: Problem, sets: Sequence, timer: str, replays: int):
    """(calc_diff against ours, why absent or None, Timing or None): DeepGEMM's calls checked
    against ours on the first input set, then timed like `shipped` (a graph that cannot be
    captured is timed eagerly with events, its timer saying so)."""
    try:
        fns = baselines.launches(dg.module, problem, sets)
        ours = _api_call(problem)(sets[0], new_output(sets[0], 0.0))
        diff = baselines.check(fns[0](), ours, sets[0].valid_mask())
    except Exception as exc:  # DeepGEMM refused the shapes (a host assertion) or faulted: say so
        return None, f"DeepGEMM failed at this bucket: {type(exc).__name__}: {baselines.first_line(exc)}", None
    if not diff < baselines.MAX_DIFF:
        return diff, f"DeepGEMM's logits differ from ours (calc_diff {diff:.2e} >= {baselines.MAX_DIFF:g}): not timed", None
    try:
        return diff, None, _time_fns(fns, timer, replays)
    except Exception as exc:
        if timer != "cuda_graph":
            return diff, f"DeepGEMM failed to time: {type(exc).__name__}: {baselines.first_line(exc)}", None
        torch.cuda.synchronize()
        return diff, None, _time_eager(fns[0], reps=max(5, replays))


def append_rows(path: Path, rows: Sequence[BenchRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r.to_dict(), sort_keys=True) + "\n")


def read_rows(path: Path) -> list[dict]:
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
