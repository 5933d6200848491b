"""Seeds from dispatch tables: the one a user names (`tune --seed-table`) and, for a GPU being
tuned, every other GPU's tuned table (issue 25: "another GPU's shipped table is a source of
seeds for a new GPU").

A winner on another GPU is a measured config, not a prediction: the H200's winners share a few
shapes (64-token tiles, 3 stages, the key tile on the dot's M side) that also compile within
sm_120's limits, so on a board with no table they are worth one trial each. A table of this GPU
itself never seeds its own fresh tune here (that is --seed-table's, on request), nor does a
predicted table (the model's own seeds already stand for it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

from indexer_logits import _dispatch
from indexer_logits._identity import Config, Problem


def table_seeds(seed_table: Optional[str], plan, dot_dtypes) -> tuple:
    """((problem key, batch, context), Config) for every bucket of `plan` that the dispatch table
    `seed_table` (a GPU slug under indexer_logits/tables/, or a dispatch.json path) ships a config for.

    A problem with 2-D lengths that the table has no entry for is seeded with its 1-D twin's
    entry at the same bucket: the two kernels differ only in how a row's length is read (one
    int32 per row instead of per request), so the 1-D winner is the best-known start, and
    `--lens-mode 2d --seed-table <gpu> --trials 1` turns a 1-D table into measured 2-D entries."""
    if not seed_table:
        return ()
    path = Path(seed_table)
    if path.suffix != ".json":
        path = _dispatch.TABLES_DIR / seed_table / "dispatch.json"
    if not path.is_file():
        raise ValueError(f"expected a GPU slug with a table under indexer_logits/tables/ or a dispatch.json "
                         f"path; {path} does not exist")
    try:
        table = json.loads(path.read_text())
        shipped = {(Problem(**e["problem"]).key, e["bucket"]["batch"], e["bucket"]["context"]):
                   Config.from_dict(table["modules"][e["variant"]]["config"]) for e in table["entries"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a dispatch table: {exc!r}") from None
    out = []
    for problem, buckets in plan:
        twin = dataclasses.replace(problem, lens_mode="1d").key if problem.lens_mode == "2d" else None
        for bucket in buckets:
            config = shipped.get((problem.key, bucket.batch, bucket.context))
            if config is None and twin is not None:
                config = shipped.get((twin, bucket.batch, bucket.context))
            if config is not None and config.dot_dtype in dot_dtypes:
                out.append(((problem.key, bucket.batch, bucket.context), config))
    return tuple(out)


def tuned_tables(tables_dir: Path, exclude_slug: str) -> list[tuple[str, Path]]:
    """(slug, dispatch.json) of every GPU's tuned table under `tables_dir` but `exclude_slug`'s."""
    out = []
    for path in sorted(Path(tables_dir).glob("*/dispatch.json")):
        slug = path.parent.name
        if slug in ("default", exclude_slug):
            continue
        try:
            kind = json.loads(path.read_text()).get("provenance", {}).get("kind", "tuned")
        except (OSError, ValueError):
            continue  # not a table: the runtime refuses it in its own words
        if kind == "tuned":
            out.append((slug, path))
    return out


def transfer_seeds(plan, gpu_slug: str, dot_dtypes, tables_dir: Path | None = None) -> tuple:
    """((problem key, batch, context), Config, source) from the other GPUs' tuned tables, for every
    bucket of `plan` they ship a config for (source 'seed:transfer:<their slug>')."""
    out = []
    for slug, path in tuned_tables(tables_dir or _dispatch.TABLES_DIR, gpu_slug):
        try:
            seeds = table_seeds(str(path), plan, dot_dtypes)
        except ValueError:
            continue
        out += [(key, config, f"seed:transfer:{slug}") for key, config in seeds]
    return tuple(out)
