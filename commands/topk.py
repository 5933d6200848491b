"""`tune-topk` and `verify-topk`: the top-k selection's launch settings per bucket on this GPU
(tuner/topk_tune.py), and their re-check (exact on fresh inputs, timed beside the built-in choice)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch

from indexer_logits import _topk_select as S
from indexer_logits._identity import slugify
from indexer_logits._topk_table import FILE, validate
from tuner import topk_tune

from .common import DB_DIR, GENERATED


def _table_path(out: Path | None) -> Path:
    return Path(out or GENERATED) / slugify(torch.cuda.get_device_name()) / FILE


def _needs_cuda() -> None:
    if not torch.cuda.is_available():
        raise click.ClickException("no CUDA device: the top-k selection is tuned and verified on the GPU it serves")


@click.command("tune-topk")
@click.option("--buckets", default=None, help="ROWSxWIDTH[:KIND],... buckets, KIND decode (the default: timed as "
              "the decode top-k serves them, less the logits) or prefill (the selection alone; a prefill's row "
              "blocks). Default: 1x1048576, 64x32768, 64x131072, 128x8192, 256x8192, 256x65536:prefill.")
@click.option("--k", "k", type=click.IntRange(1, 16384), default=2048, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Table directory (default: the package's indexer_logits/tables).")
@click.option("--trials", type=click.Path(path_type=Path), default=None,
              help="JSON-lines file every trial is appended to (default: db/topk_trials_<gpu>.jsonl).")
@click.option("--fresh", is_flag=True, help="Retune the listed buckets the table already holds (its other entries stay).")
@click.option("--paths", default=",".join(topk_tune.PATHS), show_default=True,
              help="The selection paths searched (comma-separated): fewer make a shorter tune.")
def tune_topk(buckets, k, out, trials, fresh, paths) -> None:
    """Tune the top-k selection (path and launch settings) per bucket on this GPU: every setting of
    each path that suits the bucket, gated exact, timed in CUDA graphs; the best per bucket goes to
    <out>/<gpu_slug>/topk.json, served by the runtime's "auto" path."""
    _needs_cuda()
    try:
        bucket_list = topk_tune.parse_buckets(buckets)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--buckets") from None
    try:
        paths = topk_tune.parse_paths(paths)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--paths") from None
    table = _table_path(out)
    trials = trials or DB_DIR / f"topk_trials_{table.parent.name}.jsonl"
    click.echo(f"tuning the top-k selection, k {k}, {len(bucket_list)} buckets, paths {','.join(paths)} -> {table} "
               f"(trials: {trials})")
    entries = topk_tune.run(bucket_list, k, table, trials, fresh=fresh, log=click.echo, paths=paths)
    click.echo(f"{'bucket':>14}  {'kind':8}{'path':6}  {'us':>8}  {'built-in us':>11}  settings")
    for e in entries:
        click.echo(f"{e['rows']:>5}x{e['width']:<8}  {e.get('kind', '-'):8}{e['path']:6}  {e['us']:8.1f}  "
                   f"{e['default_us']:11.1f}  {json.dumps(e['settings'])}")


@click.command("verify-topk")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Table directory (default: the package's).")
@click.option("--seed", type=int, default=1, show_default=True, help="Inputs other than the tuner's (seed 0).")
def verify_topk(out, seed) -> None:
    """Re-check this GPU's top-k table: each entry exact on fresh inputs (and their bfloat16-rounded
    ties) and timed beside the built-in choice; exit 1 on a mismatch."""
    _needs_cuda()
    path = _table_path(out)
    if not path.is_file():
        raise click.ClickException(f"{path}: no top-k table for this GPU (`python cli.py tune-topk` makes one)")
    table = validate(json.loads(path.read_text()), path, expect_slug=path.parent.name)
    bad = 0
    for e in table["entries"]:
        rows, width, k = e["rows"], e["width"], table["k"]
        logits, lens = topk_tune.bucket_logits(rows, width, "cuda", seed=seed)
        idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
        ws = S.workspace(rows, "cuda")
        mismatched = 0
        for x in (logits, logits.to(torch.bfloat16).float()):
            S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path=e["path"], settings=e["settings"])
            mismatched += topk_tune.mismatched_rows(idx, x, torch.zeros_like(lens), lens, k)
        tuned = topk_tune.gpu_timer(lambda: S.select_rows(logits, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens,
                                                          path=e["path"], settings=e["settings"]))
        builtin = topk_tune.gpu_timer(lambda: S.select_rows(logits, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens,
                                                            path=S.pick_path(rows, width, logits.device,
                                                                             e.get("kind"))))
        bad += mismatched > 0
        click.echo(f"{rows:>5}x{width:<8} {e['path']:6} {'exact' if not mismatched else f'{mismatched} rows WRONG'}  "
                   f"{tuned:8.1f} us (table said {e['us']:.1f}), built-in {builtin:8.1f} us")
    if bad:
        raise click.ClickException(f"{bad} of {len(table['entries'])} entries selected wrong keys")
    click.echo(f"{len(table['entries'])} entries exact")
