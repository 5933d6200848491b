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
def emit() -> None:
    """Write the winners in db/ as frozen Triton modules plus a dispatch table per GPU."""
    _not_built("emit", "Emit frozen kernels and a tuned dispatch table per GPU")


@main.command()
def verify() -> None:
    """Re-check every shipped dispatch entry against the torch reference (GPU or interpreter)."""
    _not_built("verify", "Emit frozen kernels and a tuned dispatch table per GPU")


@main.command()
def bench() -> None:
    """Time the shipped kernels against the baselines by CUDA-graph replay, as % of the floor."""
    _not_built("bench", "Benchmarks against the baselines")


@main.command()
def report() -> None:
    """Write a markdown report with plots from the stored benchmark and tuning results."""
    _not_built("report", "Benchmarks against the baselines")


@main.command()
def ship() -> None:
    """Copy the runtime plus the chosen GPUs' modules and tables into a self-contained folder."""
    _not_built("ship", "Emit frozen kernels and a tuned dispatch table per GPU")


@main.command()
def check() -> None:
    """Cross-compile the search space for a target (e.g. sm_120) without a GPU; record resources."""
    _not_built("check", "Jinja templates ... cross-compiled for sm_90 and sm_120")


if __name__ == "__main__":
    sys.exit(main())
