"""`bench` and `report`: the shipped kernels against the baselines, and the report of the runs."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import click
import torch

import tuner.baselines
import tuner.bench
import tuner.report
from indexer_logits._identity import DTYPES, Bucket
from indexer_logits._tables import table_root
from indexer_logits._versions import other_minor
from tuner.bench import METHODS, read_rows
from tuner.envinfo import current
from tuner.families import family_of
from tuner.pdl_gate import pdl_capable
from tuner.space import sample_points, target_for
from tuner.store import Store, now_iso
from tuner.timing import measure_copy_bandwidth, measure_matmul_rate

from .common import DB_DIR, ROOT, FamilyChoice, int_list


@click.command()
@click.option("--family", type=FamilyChoice(),
              default="decode_paged", show_default=True)
@click.option("--dtype", type=click.Choice(DTYPES), default="fp8", show_default=True)
@click.option("--next-n", "next_n", default="1", show_default=True, help="Comma list of next_n (decode).")
@click.option("--heads", type=int, default=64, show_default=True)
@click.option("--head-dim", type=int, default=128, show_default=True)
@click.option("--page-size", type=int, default=64, show_default=True, help="Decode and prefill_paged.")
@click.option("--batch", default="1,8,64,256", show_default=True,
              help="Decode: requests per captured batch. Prefill: query rows.")
@click.option("--context", default="8192,32768,131072,1048576", show_default=True,
              help="Decode, prefill_paged: page-table width in tokens. prefill_ragged: keys.")
@click.option("--lens", "lens_modes", multiple=True, type=click.Choice(["full", "quarter"]),
              help="Decode length fill (repeatable; default both). The prefill families take none: prefill_ragged "
                   "times one causal sequence, prefill_paged the rows at the end of full tables ('full').")
@click.option("--candidates", type=click.IntRange(min=1), default=12, show_default=True,
              help="Configs the autotune baseline chooses among (a reproducible sample incl. the default).")
@click.option("--methods", default=",".join(["shipped", "shipped_pdl", "default", "autotune", "torch_fullwidth",
                                             "deepgemm", "reference"]),
              show_default=True, help="Comma list of methods to time (shipped_pdl: decode on sm_90+ only; deepgemm: "
                                      "DeepGEMM's kernel wherever `import deep_gemm` works, else every row says why not).")
@click.option("--replays", type=click.IntRange(min=1), default=30, show_default=True)
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON-lines results file (default docs/results/bench_<gpu>.jsonl).")
@click.option("--run-id", "run_id", default=None, metavar="ID",
              help="Tag the rows with this run id (e.g. one id for the bench processes of one run on several GPUs). "
                   "[default: a new random id]")
@click.option("--interpret", is_flag=True, help="Run on CPU under the Triton interpreter with wall-clock timing.")
def bench(family, dtype, next_n, heads, head_dim, page_size, batch, context, lens_modes, candidates, methods,
          replays, out_path, run_id, interpret) -> None:
    """Time the shipped kernels against the baselines by CUDA-graph replay, as % of the floor.

    Per bucket and on the same inputs: the shipped kernel (the runtime API), the family's untuned
    default, the autotune pick among the same configs, the torch full-width fallback (decode) and
    the length-aware torch reference (and, for decode on sm_90+, the shipped kernel as a
    programmatic dependent launch: shipped_pdl; and DeepGEMM's own kernel wherever deep_gemm
    imports, checked against ours first, its version in every row); each in ms, % of the floor (bytes / measured copy bandwidth
    for decode, flops / measured matmul rate of the dtype for both prefill families) and ratio
    to the shipped kernel."""
    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    bad = [m for m in chosen if m not in METHODS]
    if bad or not chosen:
        raise click.BadParameter(f"unknown methods {bad}; expected some of {list(METHODS)}" if bad else
                                 f"no method given; expected some of {list(METHODS)}", param_hint="--methods")
    spec = family_of(family)
    source = click.get_current_context().get_parameter_source
    for opt, name, field in (("--next-n", "next_n", "next_n"), ("--lens", "lens_modes", "lens_mode"),
                             ("--page-size", "page_size", "page_size")):
        # decode-only options given with prefill: refuse rather than ignore
        if field in spec.unused_options + (("lens_mode",) if not spec.kind.decode else ()) \
                and source(name) is click.core.ParameterSource.COMMANDLINE:
            raise click.BadParameter(f"decode-only option; {family} takes no {opt}", param_hint=opt)
    try:
        next_ns = int_list("--next-n", next_n) if spec.kind.decode else [1]
        problems = spec.problems(dtype, next_ns, page_size, None, heads, head_dim, "1d")
    except ValueError as e:  # the Problem field leads the message: name its option
        hints = {"heads": "--heads", "head_dim": "--head-dim", "page_size": "--page-size", "next_n": "--next-n"}
        raise click.BadParameter(str(e), param_hint=hints.get(str(e).split(":", 1)[0])) from None
    batches, contexts = int_list("--batch", batch), int_list("--context", context)
    if interpret or not torch.cuda.is_available():
        if not interpret:
            raise click.ClickException("no CUDA GPU found; pass --interpret to run the benchmark loop on CPU "
                                       "under the Triton interpreter (wall-clock timing, no GPU figures)")
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is loaded (bench_bucket loads them)
    env = current()
    on_gpu = not interpret
    device = "cuda" if on_gpu else "cpu"
    timer = "cuda_graph" if on_gpu else "wall_clock"
    copy_bw = measure_copy_bandwidth() if on_gpu else 1e11
    prefill = not spec.kind.decode  # compute-bound: the floor needs the dtype's matmul rate
    matmul_rate = measure_matmul_rate("fp8" if dtype == "fp8" else "bf16") if on_gpu and prefill else (None if on_gpu else 1e11)
    dot_dtype = "native" if on_gpu else ("fp16" if dtype == "fp8" else "fp32")
    fills = list(lens_modes) if spec.kind.decode and lens_modes else list(spec.bench_fills)
    out_path = out_path or ROOT / "docs" / "results" / f"bench_{env.gpu_slug}.jsonl"
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", run_id):
        raise click.BadParameter(f"expected 1-64 letters, digits, '.', '_' or '-', got {run_id!r}", param_hint="--run-id")
    run_id, created = run_id or uuid.uuid4().hex[:12], now_iso()
    target = target_for(env.compute_capability.replace(".", "")) if on_gpu else None
    header = (f"{'problem':26s} {'bucket':16s} {'lens':8s} {'method':16s} {'p50 ms':>10s} {'% floor':>8s} {'x shipped':>9s}"
              f" {'x DeepGEMM':>10s}")
    click.echo(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s" + (f", matmul {matmul_rate / 1e12:.0f} TFLOP/s" if matmul_rate else ""), err=True)
    if "shipped_pdl" in chosen and (family != "decode_paged" or not pdl_capable(device)):
        click.echo("note: shipped_pdl skipped: programmatic dependent launch is for decode on a CUDA device of "
                   "compute capability 9.0 or newer", err=True)
    if "shipped" in chosen:
        kind, tuned = tuner.bench.served_table(env.gpu_name, env.compute_capability, str(table_root()))
        click.echo(f"shipped: the {kind} table, tuned under Triton {tuned or '(not recorded)'}; running Triton "
                   f"{env.triton}" + (" (another minor)" if other_minor(tuned, env.triton) else ""),
                   err=True)
    if "deepgemm" in chosen:
        dg = tuner.baselines.deepgemm(device)
        click.echo(f"DeepGEMM: deep_gemm {dg.version}" if dg else f"note: DeepGEMM not run ({dg.reason})", err=True)
    lines = []
    for problem in problems:
        cands = sample_points(problem, candidates, target, dot_dtypes=(dot_dtype,))
        for b in batches:
            for c in contexts:
                for fill in fills:
                    rows = tuner.bench.bench_bucket(problem, Bucket(b, c), fill, candidates=cands, timer=timer, device=device,
                                                    copy_bw=copy_bw, matmul_rate=matmul_rate, env=env, run_id=run_id,
                                                    created_at=created, replays=replays, dot_dtype=dot_dtype,
                                                    methods=chosen)
                    tuner.bench.append_rows(out_path, rows)
                    if rows and rows[0].deepgemm_absent and "deepgemm" in chosen:
                        click.echo(f"{problem.slug:26s} {f'b{b}_c{c}':16s} {fill:8s} DeepGEMM not run: "
                                   f"{rows[0].deepgemm_absent}", err=True)
                    for r in rows:
                        ratio = f"{r.ratio_to_shipped:9.2f}" if r.ratio_to_shipped is not None else f"{'-':>9s}"
                        vs_dg = f"{r.ratio_to_deepgemm:10.2f}" if r.ratio_to_deepgemm is not None else f"{'-':>10s}"
                        line = (f"{problem.slug:26s} {f'b{b}_c{c}':16s} {fill:8s} {r.method:16s} {r.p50_ms:10.4f} "
                                f"{100 * r.frac_of_floor:7.1f}% {ratio} {vs_dg}")
                        lines.append(line)
                        click.echo(line, err=True)
                    if on_gpu:
                        torch.cuda.empty_cache()
    click.echo(header)
    for line in lines:
        click.echo(line)
    click.echo(f"rows appended to {out_path} (run {run_id}, timer {timer})")


@click.command()
@click.option("--bench", "bench_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Bench JSON-lines files (default: every docs/results/bench_*.jsonl).")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=DB_DIR / "trials.sqlite",
              show_default=True, help="Trial store for the convergence and time-to-tune plots.")
@click.option("--out", "out_md", type=click.Path(dir_okay=False, path_type=Path), default=ROOT / "docs" / "REPORT.md",
              show_default=True)
def report(bench_files, db_path, out_md) -> None:
    """Write a markdown report with plots from the stored benchmark and tuning results."""
    files = list(bench_files) or sorted((ROOT / "docs" / "results").glob("bench_*.jsonl"))
    for f in files:  # refuse unreadable inputs before writing anything
        try:
            read_rows(f)
        except (ValueError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"{f}: not a bench JSON-lines file ({exc})", param_hint="--bench") from None
    if db_path.exists():
        try:
            Store(db_path)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--db") from None
    path = tuner.report.write_report(files, db_path if db_path.exists() else None, out_md, out_md.parent / "plots")
    click.echo(f"wrote {path} ({len(files)} bench files)")
