"""`tune` and `merge-db`: search configs on this GPU, gather other hosts' trial stores."""

from __future__ import annotations

from pathlib import Path

import click

from indexer_logits._identity import DTYPES, LensMode, ScaleLayout
from tuner.launch import tune as tune_with_settings
from tuner.store import Store, merge_stores
from tuner.tune import TuneError, TuneSettings, TuneUsageError

from .common import DB_DIR, FamilyChoice


@click.command()
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
@click.option("--seeds-only", is_flag=True,
              help="Time only the configs given (--seed-table, --try-config): no model, default or neighbour "
                   "seeds, no sampler, no local search (what `cli.py retime` runs).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Tuners run at once, one per local GPU (worker i gets CUDA_VISIBLE_DEVICES=i; under --interpret, "
                   "CPU workers), on shared Optuna studies and one trial store; each config is measured once.")
@click.option("--storage", default=None, metavar="URL|PATH",
              help="Shared Optuna storage: a PostgreSQL URL (postgresql://user@host:5432/db) for hosts that tune "
                   "together, or a journal file. [default: optuna.sqlite beside --db; optuna.journal with --workers > 1]")
@click.option("--engine", is_flag=True,
              help="Tune what a serving engine calls on DeepSeek-V3.2's indexer, in one run: fp8 decode next_n 1 and "
                   "2 at pow2 batches over 4K..1M, fp8 prefill over ragged K, fp8 chunked prefill (tuner/presets.py; "
                   "run.sh's GPU tune). The problem, batch and context options are its to decide.")
@click.option("--model-seeds", default=3, show_default=True, type=click.IntRange(min=0),
              help="The performance model's best configs (distinct in structure) each bucket's study times first "
                   "(tuner/guide.py); 0: none.")
@click.option("--climb", default=5, show_default=True, type=click.IntRange(min=0),
              help="Local search: after each batch, the untried ones among this many one-step neighbours of the "
                   "bucket's best config, the model's likeliest; when all are measured the bucket is at a local "
                   "optimum. 0: none (TPE alone after the seeds).")
@click.option("--stop-at-optimum/--no-stop-at-optimum", default=True, show_default=True,
              help="A bucket whose best config's neighbours are all measured is done before --trials.")
@click.option("--short-first/--no-short-first", default=True, show_default=True,
              help="Multi-fidelity: time each config briefly first; one more than 5% behind the bucket's best keeps "
                   "that short timing (never a winner), the others get the full replay count.")
@click.option("--transfer/--no-transfer", default=True, show_default=True,
              help="Seed each bucket with the configs other GPUs' tuned tables (indexer_logits/tables/<slug>/) ship "
                   "for it; this GPU's own table seeds only through --seed-table.")
@click.option("--xcompile-cache", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Cross-compile results the model ranks with (registers, shared memory). "
                   "[default: xcompile_cache.jsonl beside --db]")
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


@click.command("merge-db")
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
