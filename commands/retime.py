"""`retime`: a tuned table re-timed under the running Triton, emitted beside it (tuner.retime)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import torch

from indexer_logits._identity import slugify
from indexer_logits._versions import running_triton
from tuner import retime as rt
from tuner.store import Store
from tuner.tune import TuneError, TuneUsageError

from .common import DB_DIR, GENERATED, FamilyChoice


@click.command()
@click.option("--table", "table", required=True, metavar="GPU|PATH",
              help="The tuned table to re-time: a GPU slug under indexer_logits/tables/ or a dispatch.json.")
@click.option("--top", default=3, show_default=True, type=click.IntRange(min=1),
              help="Distinct configs per bucket: the shipped one, then the trial store's next best.")
@click.option("--no-twins", is_flag=True,
              help="Without each config's twins: head_sum tree <-> chain, and for prefill_ragged k_load threads <-> tma.")
@click.option("--family", "families", multiple=True, type=FamilyChoice(),
              help="Only this family's buckets (repeatable; the emitted table holds what the store has timed).")
@click.option("--source-db", default=DB_DIR / "trials.sqlite", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The trial store the configs are ranked from.")
@click.option("--db", "db_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="The store the new trials go to. [default: db/triton-X.Y/trials.sqlite, X.Y the running Triton]")
@click.option("--out", "out_dir", default=GENERATED, show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Where <gpu_slug>/triton-X.Y/ is written.")
@click.option("--replays", default=30, show_default=True, type=click.IntRange(min=1), help="CUDA-graph replays a timing.")
@click.option("--plan", "plan_only", is_flag=True, help="Time nothing: print the buckets and configs, and an estimate.")
@click.option("--quiet", is_flag=True, help="No progress bar (the per-run lines stay).")
def retime(table, top, no_twins, families, source_db, db_path, out_dir, replays, plan_only, quiet) -> None:
    """Re-time a tuned table's best configs under the running Triton and emit it beside the table.

    For a new Triton, minutes instead of a full tune: per bucket the shipped config, the trial
    store's next best distinct configs (--top in all) and their twins (head_sum; k_load for ragged
    prefill: tuner.retime.TWIN_AXES) are timed through
    the tuner's gates and timer (`tune --seeds-only`, one run per family and dtype, with progress and
    an ETA), into a store of this Triton's own; then `emit --by-triton` writes
    <out>/<gpu_slug>/triton-X.Y/, which the runtime serves under that Triton. On a GPU only.
    """
    try:
        data, path = rt.load_table(table)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--table") from None
    if data.get("provenance", {}).get("kind") != "tuned":
        raise click.BadParameter(f"{path} is not a tuned table (kind {data.get('provenance', {}).get('kind')!r})",
                                 param_hint="--table")
    try:
        source = Store(source_db) if Path(source_db).is_file() else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--source-db") from None
    items = rt.candidates(data, source, top, twins=not no_twins)
    if families:
        items = [i for i in items if i.problem.family in families]
    click.echo(f"{path}: {len(items)} buckets to re-time"
               + ("" if source else f" (no trial store at {source_db}: the shipped configs only)"))
    for line in rt.plan_lines(items):
        click.echo("  " + line)
    if plan_only or not items:
        return
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise click.UsageError("retime times kernels on a GPU under the running Triton; the interpreter's times say "
                               "nothing about either (unset TRITON_INTERPRET; --plan runs anywhere)")
    if not torch.cuda.is_available():
        raise click.ClickException("no GPU found: retime times kernels on the GPU the table is for (--plan runs anywhere)")
    slug = data["provenance"]["gpu_slug"]
    if slugify(torch.cuda.get_device_name()) != slug:
        raise click.ClickException(f"this GPU is {torch.cuda.get_device_name()!r}, the table is {slug!r}'s")
    running = running_triton()
    db = db_path or rt.default_db(DB_DIR, running)
    try:
        rt.check_versions(data, running, Store(db) if Path(db).is_file() else None, slug)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"Triton {running}: trials into {db}")
    try:
        rt.run(items, db, out_dir, replays=replays, quiet=quiet, say=click.echo)
    except TuneUsageError as exc:
        raise click.UsageError(exc.message) from None
    except (TuneError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
