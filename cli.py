#!/usr/bin/env python3
"""indexer-logits-tuner: tune, emit, verify, bench, report and ship the indexer logits kernels.

Run `python cli.py --help`, or `python cli.py COMMAND --help` for one command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent
GENERATED = ROOT / "kernels_generated"
DB_DIR = ROOT / "db"


def _not_built(command: str, issue: str) -> None:
    raise click.ClickException(f"`{command}` is not built yet (see the issue '{issue}'); nothing was run.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="indexer-logits-tuner", message="%(version)s")
def main() -> None:
    """Make fast, CUDA-graph-safe indexer logits kernels (DeepSeek-V3.2/V4 sparse attention) for
    the GPU you deploy on, and ship them as frozen Triton code with a tuned dispatch table."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def info(as_json: bool) -> None:
    """Show the GPU (or "no GPU"), compute capability, versions, and which tables are shipped."""
    from tuner import __version__
    from tuner.envinfo import current

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
def tune() -> None:
    """Search kernel configs per shape bucket on this GPU with Optuna; every trial goes to db/."""
    _not_built("tune", "Optuna tuner on the GPU")


@main.command()
@click.option("--db", "db_path", default=DB_DIR / "trials.sqlite", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The trial store to take the winners from.")
@click.option("--gpu", "gpus", multiple=True, help="GPU slug to emit (repeatable). [default: every GPU in the store]")
@click.option("--out", "out_dir", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where the <gpu_slug>/ and default/ folders go.")
@click.option("--defaults-only", is_flag=True, help="Only write the family defaults (default/), ignoring the store.")
def emit(db_path: Path, gpus, out_dir: Path, defaults_only: bool) -> None:
    """Write the winners in db/ as frozen Triton modules plus a dispatch table per GPU.

    Per GPU: kernels_generated/<gpu_slug>/ with one module per winning variant and dispatch.json
    (provenance, measured p50s and % of the floor, each module's sha256). Always: the family
    defaults in kernels_generated/default/. Deterministic: re-emitting from the same store
    changes no byte. Works without a store (defaults only).
    """
    from tuner.tables import emit_defaults, emit_gpu, gpu_slugs, open_store_if_present

    results = []
    if not defaults_only:
        store = open_store_if_present(db_path)
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
            results += [emit_gpu(store, slug, out_dir) for slug in chosen]
    results.append(emit_defaults(out_dir))
    for r in results:
        state = (f"{len(r.written)} file(s) written, {len(r.removed)} removed" if r.changed else "unchanged")
        click.echo(f"{r.directory}: {r.entries} entries, {r.modules} modules ({state})")
        for note in r.notes:
            click.echo(f"  note: {note}")


@main.command()
@click.option("--gpu", "gpus", multiple=True, help="GPU slug whose table to check (repeatable). [default: all]")
@click.option("--root", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder holding the <gpu_slug>/ and default/ tables.")
@click.option("--no-defaults", is_flag=True, help="Skip the family defaults (default/).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
def verify(gpus, root: Path, no_defaults: bool, seed: int) -> None:
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
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    from tuner.verify import format_rows, verify_tables

    try:
        rows = verify_tables(root, gpus, include_defaults=not no_defaults, on_gpu=on_gpu, seed=seed)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu") from None
    where = (f"on {torch.cuda.get_device_name()}" if on_gpu
             else "without a GPU, under TRITON_INTERPRET=1 on CPU tensors")
    click.echo(f"verify {root} {where}")
    if not rows:
        click.echo("nothing to verify: no dispatch tables there (run `python cli.py emit`)")
        sys.exit(1)
    click.echo(format_rows(rows))
    failed = [r for r in rows if not r.ok]
    hows = sorted({r.how for r in rows if r.how != "-"})
    click.echo(f"{len(rows)} checked, {len(rows) - len(failed)} ok, {len(failed)} failed; checked as: {'; '.join(hows) or '-'}")
    sys.exit(1 if failed else 0)


@main.command()
def bench() -> None:
    """Time the shipped kernels against the baselines by CUDA-graph replay, as % of the floor."""
    _not_built("bench", "Benchmarks against the baselines")


@main.command()
def report() -> None:
    """Write a markdown report with plots from the stored benchmark and tuning results."""
    _not_built("report", "Benchmarks against the baselines")


@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to create the package in.")
@click.option("--gpu", "gpus", multiple=True, help="GPU slug to ship (repeatable). [default: every emitted table]")
@click.option("--package", default="indexer_logits", show_default=True, help="Name of the shipped Python package.")
@click.option("--root", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder holding the emitted <gpu_slug>/ and default/ tables.")
def ship(out_dir: Path, gpus, package: str, root: Path) -> None:
    """Copy the runtime plus the chosen GPUs' modules and tables into a self-contained folder.

    The result, OUT/<package>/, needs only torch and triton: put OUT on sys.path and
    `from <package> import fp8_paged_mqa_logits`. Tables and module hashes are checked first.
    """
    from tuner.ship import ShipError, ship as ship_package

    try:
        result = ship_package(out_dir, gpus, root=root, package=package)
    except (ShipError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{result.package_dir}: runtime, default/ and {', '.join(result.gpus) or 'no tuned GPU'} "
               f"({len(result.files)} files; see SHIPPED.json)")


@main.command()
def check() -> None:
    """Cross-compile the search space for a target (e.g. sm_120) without a GPU; record resources."""
    _not_built("check", "Jinja templates ... cross-compiled for sm_90 and sm_120")


if __name__ == "__main__":
    sys.exit(main())
