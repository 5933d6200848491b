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
from commands.retime import retime
from commands.topk import tune_topk, verify_topk
from commands.tuning import merge_db, tune
from indexer_logits import _tables, _versions
from tuner import __version__
from tuner.envinfo import current


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="indexer-logits-tuner", message="%(version)s")
def main() -> None:
    """Make fast, CUDA-graph-safe indexer logits kernels (DeepSeek-V3.2/V4 sparse attention) for
    the GPU you deploy on, and ship them as frozen Triton code with a tuned dispatch table."""


def serving_table(gpu_name: str, compute_capability: str | None, root=GENERATED) -> tuple[str, str]:
    """(kind, path) of the table the runtime would serve this GPU's entries from (_tables.serving_table),
    the path relative to the checkout when inside it."""
    kind, path = _tables.serving_table(gpu_name, compute_capability, root)
    return kind, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def info(as_json: bool) -> None:
    """Show the GPU (or "no GPU"), compute capability, versions, which tables are shipped and which
    one serves this GPU (tuned, predicted or the family defaults)."""
    env = current()
    paths = sorted([*GENERATED.glob("*/dispatch.json"), *GENERATED.glob("*/triton-*/dispatch.json"),
                    *GENERATED.glob(f"*/{_tables.PREDICTED_DIR}/dispatch.json")])
    tables = [str(p.relative_to(ROOT)) for p in paths]
    loaded = [json.loads(p.read_text()) for p in paths]
    tuned_under = {t: _versions.table_triton(tab) for t, tab in zip(tables, loaded)}
    kinds = {t: tab.get("provenance", {}).get("kind", "?") for t, tab in zip(tables, loaded)}
    serving = serving_table(env.gpu_name, env.compute_capability)
    data = {"tool": __version__, **env.to_dict(), "shipped_tables": tables, "tables_triton": tuned_under,
            "tables_kind": kinds, "serving": {"kind": serving[0], "table": serving[1]}}
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
        mark = "  (another minor)" if _versions.other_minor(tuned_under[t], env.triton) else ""
        what = {"predicted": "predicted (model + cross-compile, not timed)", "defaults": "family defaults"}.get(kinds[t],
                                                                                                       "tuned")
        click.echo(f"{'tables:' if i == 0 else '':<12}{t}  {what} under triton {tuned_under[t] or '?'}{mark}")
    if env.compute_capability:
        note = {"predicted": "  (a predicted table: no tuned one for this GPU; `cli.py tune --seed-table "
                             f"{serving[1]}` makes one)", "defaults": "  (no table for this GPU)"}.get(serving[0], "")
        click.echo(f"serving:    {serving[0]} {serving[1]}{note}")


for command in (tune, retime, merge_db, emit, verify, bench, report, ship, check, predict_command, tune_topk,
                verify_topk):
    main.add_command(command)


if __name__ == "__main__":
    sys.exit(main())
