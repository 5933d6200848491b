#!/usr/bin/env python3
"""indexer-logits-tuner: tune, emit, verify, bench, report and ship the indexer logits kernels.

Run `python cli.py --help`, or `python cli.py COMMAND --help` for one command.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from indexer_logits._identity import DTYPES, LensMode, ScaleLayout
from tuner.families import family_of
from tuner.families import names as family_names
from tuner.space import TARGETS
import tuner.bench
import tuner.report
import tuner.tables
from indexer_logits._identity import Bucket
from tuner import __version__, xcompile
from tuner.bench import METHODS, read_rows
from tuner.envinfo import current
from tuner.launch import tune as tune_with_settings
from tuner.pdl_gate import pdl_capable
from tuner.ship import ShipError, ship as ship_package
from tuner.space import default_config, grid_points, sample_points, target_for
from tuner.store import Store, merge_stores, now_iso
from tuner.tables import gpu_slugs, open_store_if_present
from tuner.timing import measure_copy_bandwidth, measure_matmul_rate
from tuner.tune import TuneError, TuneSettings, TuneUsageError
from tuner.verify import format_rows, verify_tables



class FamilyChoice(click.Choice):
    """The registered kernel families (tuner.families), read when an option is parsed, so a
    family registered after this module was imported is a valid choice too."""

    def __init__(self, extra: tuple[str, ...] = ()):
        self.extra = tuple(extra)
        super().__init__(self.choices)

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(family_names()) + self.extra

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns it
        pass


ROOT = Path(__file__).resolve().parent
GENERATED = ROOT / "indexer_logits" / "tables"
DB_DIR = ROOT / "db"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="indexer-logits-tuner", message="%(version)s")
def main() -> None:
    """Make fast, CUDA-graph-safe indexer logits kernels (DeepSeek-V3.2/V4 sparse attention) for
    the GPU you deploy on, and ship them as frozen Triton code with a tuned dispatch table."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def info(as_json: bool) -> None:
    """Show the GPU (or "no GPU"), compute capability, versions, and which tables are shipped."""
    env = current()
    tables = sorted(str(p.relative_to(ROOT)) for p in GENERATED.glob("*/dispatch.json"))
    data = {"tool": __version__, **env.to_dict(), "shipped_tables": tables}
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(f"indexer-logits-tuner {__version__}")
    if env.compute_capability:
        click.echo(f"GPU:        {env.gpu_name} (sm_{env.compute_capability.replace('.', '')}, {env.sm_count} SMs, driver {env.driver or '?'})")
    else:
        click.echo("GPU:        no GPU (kernels run under TRITON_INTERPRET=1 on CPU tensors)")
    click.echo(f"versions:   torch {env.torch}, triton {env.triton}, CUDA {env.cuda or '-'}, Python {env.python}")
    click.echo("tables:     " + (", ".join(tables) if tables else "none shipped yet"))


@main.command()
@click.option("--family", default="decode_paged", show_default=True,
              type=FamilyChoice(),
              help="decode_paged: decode over the paged cache; prefill_ragged: prefill over ragged K; prefill_paged: "
                   "chunked prefill (many query rows) over the paged cache.")
@click.option("--dtype", default="fp8", show_default=True, type=click.Choice(DTYPES), help="q and cache dtype.")
@click.option("--next-n", "next_n", multiple=True, metavar="N[,N...]",
              help="Decode draft tokens per request (repeatable or a comma list; the prefill families take 1). "
                   "[default: 1]")
@click.option("--page-size", default=64, show_default=True, type=int,
              help="Paged cache page size (1, 32, 64, 128): decode_paged and prefill_paged.")
@click.option("--scale-layout", default=None, type=click.Choice([s.value for s in ScaleLayout]),
              help="Where the fp8 scales sit. [default: page_blocked for fp8, none for bf16]")
@click.option("--heads", default=64, show_default=True, type=int)
@click.option("--head-dim", default=128, show_default=True, type=int)
@click.option("--lens-mode", default="1d", show_default=True, type=click.Choice([m.value for m in LensMode]),
              help="context_lens [B] (causal within next_n) or [B, N]; the prefill families take 1d.")
@click.option("--batch", multiple=True, metavar="SIZES",
              help="Decode: requests per CUDA graph; prefill_ragged, prefill_paged: query rows. Comma lists, "
                   "repeatable, 'pow2' = 1..256. [default: SGLang's capture sizes 1,2,4,8,12,16,24..256 for decode; "
                   "4096 for prefill]")
@click.option("--context", multiple=True, metavar="SIZES",
              help="Decode, prefill_paged: page-table width in tokens; prefill_ragged: keys. K/M suffixes allowed. "
                   "[default: 4K,8K,32K,128K,1M for decode; 8K,16K,32K,64K for prefill_ragged; 22528,128K for "
                   "prefill_paged]")
@click.option("--trials", default=20, show_default=True, type=click.IntRange(min=1),
              help="Distinct configs per bucket with a verdict (static infeasibility does not count).")
@click.option("--time-budget", default=None, type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Bound on the whole search, shared out over the buckets. [default: none]")
@click.option("--sampler", default="tpe", show_default=True, type=click.Choice(["tpe", "grid", "random"]))
@click.option("--ask-batch", default=8, show_default=True, type=click.IntRange(min=1),
              help="Trials asked at once (built in parallel).")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds one gate or timing may take before its worker is killed ('timeout').")
@click.option("--db", default=str(DB_DIR / "trials.sqlite"), show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="Trial store.")
@click.option("--optuna-db", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Optuna study storage. [default: optuna.sqlite beside --db]")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Continue the stored Optuna studies, or start them afresh. Stored trials are never re-measured.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--interpret", is_flag=True,
              help="Run under Triton's CPU interpreter on CPU tensors with wall-clock timing (needed where there "
                   "is no GPU; for tests: its times say nothing about a GPU).")
@click.option("--replays", default=30, show_default=True, type=click.IntRange(min=1),
              help="CUDA-graph replays per timing (the wall clock takes a tenth, at least 3).")
@click.option("--jobs", default=None, type=click.IntRange(min=1), help="Build processes. [default: min(ask batch, CPUs)]")
@click.option("--try-config", "try_config", multiple=True, metavar="JSON",
              help="A config to try in every bucket, e.g. from another GPU's table (repeatable).")
@click.option("--seed-table", "seed_table", default=None, metavar="GPU|PATH",
              help="Enqueue first, in each bucket's study, the config this dispatch table ships for that bucket (a "
                   "GPU slug under indexer_logits/tables/, or a dispatch.json). After a template change that leaves the "
                   "compiled kernels alone, `--seed-table <gpu> --trials 1` re-times just the shipped configs.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Tuners run at once, one per local GPU (worker i gets CUDA_VISIBLE_DEVICES=i; under --interpret, "
                   "CPU workers), on shared Optuna studies and one trial store; each config is measured once.")
@click.option("--storage", default=None, metavar="URL|PATH",
              help="Shared Optuna storage: a PostgreSQL URL (postgresql://user@host:5432/db) for hosts that tune "
                   "together, or a journal file. [default: optuna.sqlite beside --db; optuna.journal with --workers > 1]")
def tune(**options) -> None:
    """Search kernel configs per shape bucket on this GPU with Optuna; every trial goes to db/.

    Per bucket: ask a batch of configs, build them in parallel, gate each config once (reference;
    for the paged families also graph replay and a poisoned table) and time it by CUDA-graph
    replay (decode: full and partly filled lengths; prefill: full), in a worker process that a
    crash or hang cannot take down. Ends with a table of the best variant per bucket.
    """
    try:
        tune_with_settings(TuneSettings(**options))
    except TuneUsageError as exc:
        raise click.BadParameter(exc.message, param_hint=exc.param_hint) from None
    except TuneError as exc:
        raise click.ClickException(str(exc)) from None


@main.command("merge-db")
@click.option("--into", "into", default=DB_DIR / "trials.sqlite", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The trial store to merge into (created if missing).")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def merge_db(into: Path, sources) -> None:
    """Merge the trial stores of other hosts (SOURCES: their db/trials.sqlite) into one.

    Hosts that tune together through `tune --storage postgresql://...` share the Optuna studies but
    each keeps its own store. One row per trial key is kept: the one already there, unless it is a
    harness 'error' and the other is not. Sources are only read.
    """
    try:
        counts = merge_stores(Store(into), sources)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{into}: {counts['added']} rows added, {counts['replaced']} replaced (were 'error'), "
               f"{counts['kept']} already there")


@main.command()
@click.option("--db", "db_path", default=DB_DIR / "trials.sqlite", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The trial store to take the winners from.")
@click.option("--gpu", "gpus", multiple=True, help="GPU slug to emit (repeatable). [default: every GPU in the store]")
@click.option("--out", "out_dir", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where the <gpu_slug>/ and default/ folders go.")
@click.option("--defaults-only", is_flag=True, help="Only write the family defaults (default/), ignoring the store.")
def emit(db_path: Path, gpus, out_dir: Path, defaults_only: bool) -> None:
    """Write the winners in db/ as frozen Triton modules plus a dispatch table per GPU.

    Per GPU: indexer_logits/tables/<gpu_slug>/ with one module per winning variant and dispatch.json
    (provenance, measured p50s and % of the floor, each module's sha256). Always: the family
    defaults in indexer_logits/tables/default/. Deterministic: re-emitting from the same store
    changes no byte. Works without a store (defaults only).
    """
    results = []
    if defaults_only and gpus:
        raise click.BadParameter("--defaults-only writes default/ only; it takes no --gpu", param_hint="--gpu")
    if not defaults_only:
        try:
            store = open_store_if_present(db_path)
        except ValueError as exc:  # not a trial store, or another schema version
            raise click.BadParameter(str(exc), param_hint="--db") from None
        if store is None:
            if gpus:
                raise click.BadParameter(f"no trial store at {db_path}", param_hint="--db")
            click.echo(f"no trial store at {db_path}: writing the family defaults only", err=True)
        else:
            known = gpu_slugs(store)
            chosen = sorted(dict.fromkeys(gpus)) if gpus else known
            missing = [g for g in chosen if g not in known]
            if missing:
                raise click.BadParameter(f"no ok trials for {missing} in {db_path}; GPUs there: {known or 'none'}",
                                         param_hint="--gpu")
            results += [tuner.tables.emit_gpu(store, slug, out_dir) for slug in chosen]
    results.append(tuner.tables.emit_defaults(out_dir))
    for r in results:
        state = (f"{len(r.written)} file(s) written, {len(r.removed)} removed" if r.changed else "unchanged")
        click.echo(f"{r.directory}: {r.entries} entries, {r.modules} modules ({state})")
        for note in r.notes:
            click.echo(f"  note: {note}")


@main.command()
@click.option("--gpu", "gpus", multiple=True, help="GPU slug whose table to check (repeatable). [default: all]")
@click.option("--root", default=GENERATED, show_default=True,
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder holding the <gpu_slug>/ and default/ tables.")
@click.option("--no-defaults", is_flag=True, help="Skip the family defaults (default/).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@click.option("--family", "families", multiple=True, type=FamilyChoice(),
              help="Only entries of this kernel family (repeatable). [default: all]")
@click.option("--quiet", is_flag=True, help="No progress line per checked entry (stderr).")
def verify(gpus, root: Path, no_defaults: bool, seed: int, families, quiet: bool) -> None:
    """Re-check every shipped dispatch entry against the torch reference (GPU or interpreter).

    Each module's sha256 is checked, then it runs the tuner's gates (reference values, -inf mask,
    CUDA-graph replay with other lengths, poisoned block table) at its bucket's shape (capped).
    Without a GPU this runs under TRITON_INTERPRET=1, where native-dot modules are checked through
    an fp16/fp32-dot stand-in; the table says which way each row was checked. Exits 1 on any failure.
    """
    import os

    import torch

    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"
    if not on_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is loaded (verify_tables loads them)
    try:
        def progress(i: int, n: int, r) -> None:
            if not quiet:
                click.echo(f"[{i}/{n}] {r.table} {r.what} {r.problem} {r.bucket}: {'ok' if r.ok else 'FAIL'} {r.detail}"[:200],
                           err=True)

        rows = verify_tables(root, gpus, include_defaults=not no_defaults, on_gpu=on_gpu, seed=seed,
                             families=families or None, on_row=progress)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu") from None
    where = (f"on {torch.cuda.get_device_name()}" if on_gpu
             else "without a GPU, under TRITON_INTERPRET=1 on CPU tensors")
    click.echo(f"verify {root} {where}")
    if not rows:
        if families:
            click.echo(f"nothing to verify: no entries of family {', '.join(families)} in the tables under {root}")
        else:
            click.echo("nothing to verify: no dispatch tables there (run `python cli.py emit`)")
        sys.exit(1)
    click.echo(format_rows(rows))
    failed = [r for r in rows if not r.ok]
    hows = sorted({r.how for r in rows if r.how != "-"})
    click.echo(f"{len(rows)} checked, {len(rows) - len(failed)} ok, {len(failed)} failed; checked as: {'; '.join(hows) or '-'}")
    sys.exit(1 if failed else 0)


def _int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated positive ints, got {text!r}", param_hint=option) from None
    if not values or any(v < 1 for v in values):
        raise click.BadParameter(f"expected comma-separated positive ints, got {text!r}", param_hint=option)
    return values


@main.command()
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
                                             "reference"]),
              show_default=True, help="Comma list of methods to time (shipped_pdl: decode on sm_90+ only).")
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
    programmatic dependent launch: shipped_pdl); each in ms, % of the floor (bytes / measured copy bandwidth
    for decode, flops / measured matmul rate of the dtype for both prefill families) and ratio
    to the shipped kernel."""
    import os
    import uuid

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
        next_ns = _int_list("--next-n", next_n) if spec.kind.decode else [1]
        problems = spec.problems(dtype, next_ns, page_size, None, heads, head_dim, "1d")
    except ValueError as e:  # the Problem field leads the message: name its option
        hints = {"heads": "--heads", "head_dim": "--head-dim", "page_size": "--page-size", "next_n": "--next-n"}
        raise click.BadParameter(str(e), param_hint=hints.get(str(e).split(":", 1)[0])) from None
    batches, contexts = _int_list("--batch", batch), _int_list("--context", context)
    import torch

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
    header = f"{'problem':26s} {'bucket':16s} {'lens':8s} {'method':16s} {'p50 ms':>10s} {'% floor':>8s} {'x shipped':>9s}"
    click.echo(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s" + (f", matmul {matmul_rate / 1e12:.0f} TFLOP/s" if matmul_rate else ""), err=True)
    if "shipped_pdl" in chosen and (family != "decode_paged" or not pdl_capable(device)):
        click.echo("note: shipped_pdl skipped: programmatic dependent launch is for decode on a CUDA device of "
                   "compute capability 9.0 or newer", err=True)
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
                    for r in rows:
                        ratio = f"{r.ratio_to_shipped:9.2f}" if r.ratio_to_shipped is not None else f"{'-':>9s}"
                        line = (f"{problem.slug:26s} {f'b{b}_c{c}':16s} {fill:8s} {r.method:16s} {r.p50_ms:10.4f} "
                                f"{100 * r.frac_of_floor:7.1f}% {ratio}")
                        lines.append(line)
                        click.echo(line, err=True)
                    if on_gpu:
                        torch.cuda.empty_cache()
    click.echo(header)
    for line in lines:
        click.echo(line)
    click.echo(f"rows appended to {out_path} (run {run_id}, timer {timer})")


@main.command()
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


@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to create the package in.")
@click.option("--gpu", "gpus", multiple=True, help="GPU slug to ship (repeatable). [default: every emitted table]")
@click.option("--package", default="indexer_logits", show_default=True, help="Name of the shipped Python package.")
@click.option("--root", default=GENERATED, show_default=True,
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder holding the emitted <gpu_slug>/ and default/ tables.")
def ship(out_dir: Path, gpus, package: str, root: Path) -> None:
    """Copy the runtime plus the chosen GPUs' modules and tables into a self-contained folder.

    The result, OUT/<package>/, needs only torch and triton: put OUT on sys.path and
    `from <package> import fp8_paged_mqa_logits`. Tables and module hashes are checked first.
    """
    try:
        result = ship_package(out_dir, gpus, root=root, package=package)
    except (ShipError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{result.package_dir}: runtime, default/ and {', '.join(result.gpus) or 'no tuned GPU'} "
               f"({len(result.files)} files; see SHIPPED.json)")


@main.command()
@click.option("--target", "targets", multiple=True, default=("sm_120",), show_default=True,
              type=click.Choice(sorted(TARGETS, key=lambda t: TARGETS[t].capability) + ["local"]),
              help="GPU generation to compile for (repeatable); 'local' is this machine's GPU.")
@click.option("--family", default="all", show_default=True,
              type=FamilyChoice(extra=("all",)))
@click.option("--dtype", default="fp8", show_default=True, type=click.Choice(DTYPES), help="q and cache dtype.")
@click.option("--heads", default=64, show_default=True, type=int)
@click.option("--head-dim", default=128, show_default=True, type=int)
@click.option("--page-size", default=None, type=int, help="Decode only. [default: 64]")
@click.option("--next-n", default=None, type=int, help="Decode only. [default: 1]")
@click.option("--scale-layout", default=None, type=click.Choice([s.value for s in ScaleLayout]),
              help="Decode only. [default: page_blocked for fp8, none for bf16]")
@click.option("--sample", "sample", default=24, show_default=True, type=click.IntRange(min=1),
              help="Compile a reproducible sample of this many points (the family default included).")
@click.option("--all", "every", is_flag=True, help="Compile every point of the space instead of a sample.")
@click.option("--jobs", default=None, type=click.IntRange(min=1), help="Worker processes. [default: CPU count]")
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="JSON-lines output. [default: db/check_<target>.jsonl]")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sample.")
@click.option("--max-spill-bytes", default=None, type=click.IntRange(min=0),
              help="Spill bytes (stores + loads) above which a point is infeasible. [default: 256]")
def check(targets, family, dtype, heads, head_dim, page_size, next_n, scale_layout, sample, every, jobs,
          out_path, seed, max_spill_bytes) -> None:
    """Cross-compile the search space for a target (e.g. sm_120) without a GPU; record resources.

    Each point is really compiled (TTIR -> PTX -> ptxas) for the target: registers, spills,
    shared memory and the tensor-core instruction are recorded; points that do not fit the target
    are infeasible. Exits non-zero if any compile errored or a family default did not build.
    """
    import os

    if every and click.get_current_context().get_parameter_source("sample") is click.core.ParameterSource.COMMANDLINE:
        raise click.BadParameter("--all compiles every point; it takes no --sample", param_hint="--sample")
    resolved = {}
    for name in targets:
        try:
            target = xcompile.local_target() if name == "local" else target_for(name)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--target") from None
        resolved.setdefault(target.name, target)
    resolved = list(resolved.values())
    options = {"q_dtype": "--dtype", "cache_dtype": "--dtype", "heads": "--heads", "head_dim": "--head-dim",
               "page_size": "--page-size", "next_n": "--next-n", "scale_layout": "--scale-layout",
               "next_n/lens_mode": "--next-n"}  # check has no lens mode option: next_n is the cause
    given = {"page_size": page_size, "next_n": next_n}
    problems = []
    for fam in (family_names() if family == "all" else [family]):
        spec = family_of(fam)
        for field in spec.unused_options:  # named for one family that takes no such option: refused
            if family != "all" and given.get(field) is not None:
                raise click.BadParameter(f"decode-only option; {fam} takes no {options[field]} {given[field]}",
                                         param_hint=options[field])
        next_ns = [1 if next_n is None or "next_n" in spec.unused_options else next_n]
        try:
            problems += spec.problems(dtype, next_ns, 64 if page_size is None else page_size, scale_layout, heads,
                                      head_dim, "1d")
        except ValueError as exc:
            field = str(exc).split(":", 1)[0]
            raise click.BadParameter(str(exc), param_hint=options.get(field, "--family")) from None

    points, defaults = [], set()
    for problem in problems:
        default = default_config(problem)
        configs = list(grid_points(problem)) if every else sample_points(problem, sample, None, seed)
        if default not in configs:  # reported even when it cannot build: that is news
            configs.insert(0, default)
        defaults.add((problem, default))
        points += [(problem, c, target) for target in resolved for c in configs]
    files, sinks = {}, {}  # one JSON-lines file per target, or all in --out
    for target in resolved:
        path = out_path or DB_DIR / f"check_{target.name}.jsonl"
        if path not in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            files[path] = open(path, "w")
        sinks[target.name] = files[path]
    click.echo(f"compiling {len(points)} variants for {', '.join(sinks)} with {jobs or os.cpu_count()} workers -> "
               f"{', '.join(map(str, files))}", err=True)
    finished = 0

    def on_result(result) -> None:
        nonlocal finished
        finished += 1
        click.echo(xcompile.progress_line(result, finished, len(points)), err=True)
        sinks[result.target].write(json.dumps(xcompile.result_row(result), sort_keys=True) + "\n")
        sinks[result.target].flush()

    spill_limit = xcompile.MAX_SPILL_BYTES if max_spill_bytes is None else max_spill_bytes
    try:
        results = xcompile.compile_many(points, jobs=jobs, on_result=on_result, max_spill_bytes=spill_limit)
    finally:
        for f in files.values():
            f.close()
    exit_code = 0
    for target in resolved:
        mine = [r for r in results if r.target == target.name]
        click.echo(f"\n{target.name}")
        click.echo(xcompile.format_table(mine))
        for r in mine:
            if (r.problem, r.config) in defaults:
                where = (f"{r.registers} registers, {r.spills} B spills, {r.shared_bytes} B shared, {r.mma}"
                         if r.ok else f"{r.reason}: {r.detail.splitlines()[0] if r.detail else ''}")
                click.echo(f"family default {r.variant}: {r.status} ({where})")
                exit_code |= not r.ok
        for r in mine:
            if r.status == "error":
                exit_code = 1
                click.echo(f"error {r.variant}: {r.detail[:2000]}\n  reproduce: {xcompile.reproducer(r)}", err=True)
        click.echo(f"{target.name} summary: {xcompile.summary_line(mine)}")
    sys.exit(int(exit_code))


if __name__ == "__main__":
    sys.exit(main())
