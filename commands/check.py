"""`check`: cross-compile the search space for a target without a GPU."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from indexer_logits._dispatch import DEFAULT_SLUG, TABLE_FILE
from indexer_logits._identity import DTYPES, Config, Problem, ScaleLayout
from tuner import xcompile
from tuner.families import family_of
from tuner.families import names as family_names
from tuner.space import TARGETS, default_config, grid_points, sample_points, target_for

from .common import DB_DIR, GENERATED, FamilyChoice

# The options that pick one problem's space (parameter -> flag); --defaults takes the shipped
# table's problems instead.
_PROBLEM_OPTIONS = {"dtype": "--dtype", "heads": "--heads", "head_dim": "--head-dim", "page_size": "--page-size",
                    "next_n": "--next-n", "scale_layout": "--scale-layout", "sample": "--sample", "every": "--all"}


def _shipped_defaults(root: Path, family: str) -> list[tuple[Problem, Config, set]]:
    """The native family defaults of root/default/dispatch.json (the modules that ship), each with
    the targets its table entry says it fits."""
    path = root / DEFAULT_SLUG / TABLE_FILE
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"no readable family-default table at {path}: {exc}", param_hint="--root") from None
    out = []
    for variant in sorted(set(table["defaults"].values())):
        info = table["modules"][variant]
        problem = Problem.from_dict(info["problem"])
        if family in ("all", problem.family):
            out.append((problem, Config.from_dict(info["config"]), set(info["fits_targets"])))
    return out


@click.command()
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
@click.option("--defaults", "shipped", is_flag=True,
              help="Compile every native family default that ships in ROOT/default/dispatch.json (of --family) "
                   "instead of one problem's space; each must build on every target its entry claims to fit.")
@click.option("--root", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="With --defaults: the folder holding default/.")
def check(targets, family, dtype, heads, head_dim, page_size, next_n, scale_layout, sample, every, jobs,
          out_path, seed, max_spill_bytes, shipped, root) -> None:
    """Cross-compile the search space for a target (e.g. sm_120) without a GPU; record resources.

    Each point is really compiled (TTIR -> PTX -> ptxas) for the target: registers, spills,
    shared memory and the tensor-core instruction are recorded; points that do not fit the target
    are infeasible. Exits non-zero if any compile errored or a family default did not build (with
    --defaults: did not build on a target its table entry claims it fits).
    """
    ctx = click.get_current_context()
    if shipped:
        picked = [flag for name, flag in _PROBLEM_OPTIONS.items()
                  if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if picked:
            raise click.BadParameter(f"--defaults compiles the shipped defaults; it takes no {picked[0]}",
                                     param_hint="--defaults")
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
    for fam in ([] if shipped else family_names() if family == "all" else [family]):
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

    points, defaults, claims = [], set(), {}
    for problem, config, fits in (_shipped_defaults(root, family) if shipped else []):
        defaults.add((problem, config))
        claims[(problem, config)] = fits
        points += [(problem, config, target) for target in resolved]
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
                claimed = (r.problem, r.config) not in claims or target.name in claims[(r.problem, r.config)]
                note = "" if claimed else f" (its table entry does not claim {target.name})"
                click.echo(f"family default {r.variant}: {r.status} ({where}){note}")
                exit_code |= claimed and not r.ok
        for r in mine:
            if r.status == "error":
                exit_code = 1
                click.echo(f"error {r.variant}: {r.detail[:2000]}\n  reproduce: {xcompile.reproducer(r)}", err=True)
        click.echo(f"{target.name} summary: {xcompile.summary_line(mine)}")
    sys.exit(int(exit_code))
