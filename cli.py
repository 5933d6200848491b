#!/usr/bin/env python3
"""indexer-logits-tuner: tune, emit, verify, bench, report and ship the indexer logits kernels.

Run `python cli.py --help`, or `python cli.py COMMAND --help` for one command. The commands
live in commands/ (a module per group); this file is the entry point and `info`.
"""

from __future__ import annotations

import json
import sys

import click

from commands.check import check
from commands.common import GENERATED, ROOT
from commands.measure import bench, report
from commands.tables import emit, ship, verify
from commands.tuning import merge_db, tune
from tuner import __version__
from tuner.envinfo import current


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


for command in (tune, merge_db, emit, verify, bench, report, ship, check):
    main.add_command(command)


if __name__ == "__main__":
    sys.exit(main())
