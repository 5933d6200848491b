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
from commands.predict import predict_command
from commands.tables import emit, ship, verify
from commands.tuning import merge_db, tune
from indexer_logits import _versions
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
    paths = sorted([*GENERATED.glob("*/dispatch.json"), *GENERATED.glob("*/triton-*/dispatch.json")])
    tables = [str(p.relative_to(ROOT)) for p in paths]
    tuned_under = {t: _versions.table_triton(json.loads(p.read_text())) for t, p in zip(tables, paths)}
    data = {"tool": __version__, **env.to_dict(), "shipped_tables": tables, "tables_triton": tuned_under}
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(f"indexer-logits-tuner {__version__}")
    if env.compute_capability:
        click.echo(f"GPU:        {env.gpu_name} (sm_{env.compute_capability.replace('.', '')}, {env.sm_count} SMs, driver {env.driver or '?'})")
    else:
        click.echo("GPU:        no GPU (kernels run under TRITON_INTERPRET=1 on CPU tensors)")
    click.echo(f"versions:   torch {env.torch}, triton {env.triton}, CUDA {env.cuda or '-'}, Python {env.python}")
    click.echo(f"triton:     running {_versions.running_triton() or 'not installed'}")
    if not tables:
        click.echo("tables:     none shipped yet")
    for i, t in enumerate(tables):
        mark = "" if _versions.minor_of(tuned_under[t]) in (None, _versions.minor_of(env.triton)) else "  (another minor)"
        click.echo(f"{'tables:' if i == 0 else '':<12}{t}  tuned under triton {tuned_under[t] or '?'}{mark}")


for command in (tune, merge_db, emit, verify, bench, report, ship, check, predict_command):
    main.add_command(command)


if __name__ == "__main__":
    sys.exit(main())
