"""`emit`, `verify` and `ship`: from the trial store to frozen modules, re-checked and packaged."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import torch

import tuner.tables
from tuner.ship import ShipError
from tuner.ship import ship as ship_package
from tuner.wheel import build_wheel
from tuner.tables import gpu_slugs, open_store_if_present
from tuner.envinfo import current
from tuner.verify import format_rows, verify_tables
from tuner.verify_progress import Progress, seconds_text
from tuner.verify_record import record_rows

from .common import DB_DIR, GENERATED, FamilyChoice


@click.command()
@click.option("--db", "db_path", default=DB_DIR / "trials.sqlite", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The trial store to take the winners from.")
@click.option("--gpu", "gpus", multiple=True, help="GPU slug to emit (repeatable). [default: every GPU in the store]")
@click.option("--out", "out_dir", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where the <gpu_slug>/ and default/ folders go.")
@click.option("--defaults-only", is_flag=True, help="Only write the family defaults (default/), ignoring the store.")
@click.option("--by-triton", is_flag=True,
              help="Write each GPU's table into <gpu_slug>/triton-X.Y/, beside its primary table, for the Triton the "
                   "store's trials ran under (a store of one Triton: what `cli.py retime` writes).")
def emit(db_path: Path, gpus, out_dir: Path, defaults_only: bool, by_triton: bool) -> None:
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
            try:
                results += [tuner.tables.emit_gpu(store, slug, out_dir, by_triton) for slug in chosen]
            except ValueError as exc:  # --by-triton over a store of several Tritons
                raise click.BadParameter(str(exc), param_hint="--by-triton") from None
    results.append(tuner.tables.emit_defaults(out_dir))
    for r in results:
        state = (f"{len(r.written)} file(s) written, {len(r.removed)} removed" if r.changed else "unchanged")
        click.echo(f"{r.directory}: {r.entries} entries, {r.modules} modules ({state})")
        for note in r.notes:
            click.echo(f"  note: {note}")


def _shape_cap(ctx, param, value):
    if value is None:
        return None
    try:
        batch, context = (int(v) for v in value.lower().split("x"))
        if batch < 1 or context < 1:
            raise ValueError
    except ValueError:
        raise click.BadParameter(f"expected BATCHxCONTEXT of positive ints (e.g. 64x32768), got {value!r}") from None
    return batch, context


@click.command()
@click.option("--gpu", "gpus", multiple=True, help="GPU slug whose table to check (repeatable). [default: all]")
@click.option("--root", default=GENERATED, show_default=True,
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder holding the <gpu_slug>/ and default/ tables.")
@click.option("--no-defaults", is_flag=True, help="Skip the family defaults (default/).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@click.option("--family", "families", multiple=True, type=FamilyChoice(),
              help="Only entries of this kernel family (repeatable). [default: all]")
@click.option("--quiet", is_flag=True, help="No progress line per checked entry (stderr).")
@click.option("--no-bucket", is_flag=True, help="Only the capped gates: no check at each bucket's own shape.")
@click.option("--cap", "bucket_cap", default=None, callback=_shape_cap, metavar="BATCHxCONTEXT",
              help="Run the bucket checks at most at this shape. [default: none on a GPU (up to 256x1M)]")
@click.option("--no-pool", is_flag=True, help="Skip the > 4 GiB cache-pool case of the paged modules.")
@click.option("--sample-rows", default=4, show_default=True, type=click.IntRange(0, 64),
              help="Random rows checked against the reference at a bucket's shape, beside the first, last and widest.")
@click.option("--max-entries", default=None, type=click.IntRange(1), help="Only the first N checks of the plan.")
@click.option("--plan-only", is_flag=True,
              help="Run nothing: list the checks a GPU run would make, their shapes and estimated time.")
@click.option("--record", is_flag=True,
              help="Write each entry's result into its table's `verified` field (only the running device's table).")
def verify(gpus, root: Path, no_defaults: bool, seed: int, families, quiet: bool, no_bucket: bool, bucket_cap,
           no_pool: bool, sample_rows: int, max_entries, plan_only: bool, record: bool) -> None:
    """Re-check every shipped dispatch entry against the torch reference (GPU or interpreter).

    Each module's sha256 is checked, then it runs the tuner's gates (reference values, -inf mask,
    CUDA-graph replay with other lengths, poisoned block table) at its bucket's shape capped at
    64x32K, then, on a GPU, a check at the bucket's own shape (up to 256x1M): a sample of rows
    (first, last, widest, --sample-rows random; listed in the output) against the reference over
    the whole width, DeepGEMM's calc_diff < 1e-3 and relative error < 1e-3 (or every logit within
    the fp32 rounding bound of its terms: tuner/verify_bound.py), the exact -inf mask of
    every row, the poisoned block table; a shape whose inputs would not fit the free memory is
    skipped and says so. Every paged module also reads a cache pool of more than 4 GiB past its
    4 GiB byte offset. Without a GPU this runs under TRITON_INTERPRET=1 at small shapes (a 4 MiB
    pool read past 2 MiB), where native-dot modules are checked through an fp16/fp32-dot
    stand-in; the table says which way each row was checked. Exits 1 on any failure.
    """
    if record and (no_bucket or plan_only):
        raise click.BadParameter("records the bucket checks' results: not with --no-bucket or --plan-only",
                                 param_hint="--record")
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"
    if plan_only:
        rows = verify_tables(root, gpus, include_defaults=not no_defaults, on_gpu=True, seed=seed,
                             families=families or None, at_bucket=not no_bucket, pool=not no_pool,
                             bucket_cap=bucket_cap, random_rows=sample_rows, max_entries=max_entries, dry_run=True)
        click.echo(format_rows(rows))
        total = sum(float(r.detail.split()[1]) for r in rows if r.how == "planned")
        click.echo(f"plan of a GPU run: {len(rows)} checks, estimated {seconds_text(total)} on one H200 "
                   f"(tuner/verify_progress.py's costs)")
        sys.exit(0 if all(r.ok for r in rows) else 1)
    if not on_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is loaded (verify_tables loads them)
    clock = Progress()
    announced = []
    try:
        def progress(i: int, n: int, r) -> None:
            if not announced:
                announced.append(True)
                if not quiet:
                    click.echo(f"plan: {n} checks, estimated {seconds_text(clock.estimate)}", err=True)
            if not quiet:
                click.echo(f"[{i}/{n}] {r.table} {r.what} {r.problem} {r.bucket}: {'ok' if r.ok else 'FAIL'} "
                           f"({clock.text()}) {r.detail}"[:600], err=True)

        rows = verify_tables(root, gpus, include_defaults=not no_defaults, on_gpu=on_gpu, seed=seed,
                             families=families or None, on_row=progress, at_bucket=not no_bucket, pool=not no_pool,
                             bucket_cap=bucket_cap, random_rows=sample_rows, max_entries=max_entries, progress=clock)
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
    at_bucket = [r for r in rows if r.what == "entry" and r.full is not None]
    pools = [r for r in rows if r.what == "pool"]
    skipped = [r for r in at_bucket + pools if not r.full.ran]
    click.echo(f"at their bucket's own shape: {sum(r.full.ran for r in at_bucket)} entries checked, "
               f"{sum(not r.full.ran for r in at_bucket)} skipped; large pool: {sum(r.full.ran for r in pools)} "
               f"modules checked, {sum(not r.full.ran for r in pools)} skipped; {clock.text().split(',')[0]}")
    for r in skipped:
        click.echo(f"  skipped {r.table} {r.what} {r.problem} {r.bucket}: {r.full.skipped}")
    if record:
        env = current()
        stamp = {"device": env.gpu_name if on_gpu else "cpu (interpreter)", "triton": env.triton, "torch": env.torch}
        for note in record_rows(root, rows, env.gpu_slug if on_gpu else "cpu", stamp, seed):
            click.echo(note)
    sys.exit(1 if failed else 0)


@click.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to create the package in (with --wheel: the folder the .whl is written to).")
@click.option("--gpu", "gpus", multiple=True, help="GPU slug to ship (repeatable). [default: every emitted table]")
@click.option("--package", default="indexer_logits", show_default=True, help="Name of the shipped Python package.")
@click.option("--root", default=GENERATED, show_default=True,
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder holding the emitted <gpu_slug>/ and default/ tables.")
@click.option("--wheel", "as_wheel", is_flag=True,
              help="Write OUT/<package>-<version>-py3-none-any.whl instead of a folder: `pip install` it.")
def ship(out_dir: Path, gpus, package: str, root: Path, as_wheel: bool) -> None:
    """Copy the runtime plus the chosen GPUs' modules and tables into a self-contained folder.

    The result, OUT/<package>/, needs only torch and triton: put OUT on sys.path and
    `from <package> import fp8_paged_mqa_logits`. Tables and module hashes are checked first.
    With --wheel the same files become a reproducible wheel (stdlib only, no network) that
    declares torch and triton with pyproject.toml's floors.
    """
    try:
        if as_wheel:
            built = build_wheel(out_dir, gpus, root=root, package=package)
            click.echo(f"{built.path}: runtime, default/ and {', '.join(built.gpus) or 'no tuned GPU'} "
                       f"({built.files} files; sha256 {built.sha256[:16]}...)")
            return
        result = ship_package(out_dir, gpus, root=root, package=package)
    except (ShipError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{result.package_dir}: runtime, default/ and {', '.join(result.gpus) or 'no tuned GPU'} "
               f"({len(result.files)} files; see SHIPPED.json)")
