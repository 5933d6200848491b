"""`ship`: a self-contained folder that SGLang or vLLM imports with only torch and triton.

    <out>/<package>/                    the runtime (every indexer_logits/*.py file)
    <out>/<package>/tables/<gpu_slug>/  each chosen GPU's dispatch.json and the modules it names
    <out>/<package>/tables/<gpu_slug>/triton-X.Y/  its tables tuned under other Tritons, when it has any
    <out>/<package>/tables/default/     the family defaults
    <out>/<package>/SHIPPED.json what was shipped: the GPUs, the tool version, every file's sha256

Every table is validated and every module's sha256 checked against its table before copying.
"""

from __future__ import annotations

import json
import keyword
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from indexer_logits import _dispatch, _versions
from . import __version__

RUNTIME_DIR = _dispatch.PACKAGE_DIR
MANIFEST = "SHIPPED.json"


class ShipError(ValueError):
    pass


@dataclass
class ShipResult:
    package_dir: Path
    gpus: list[str]
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256


def available_gpus(root: Path) -> list[str]:
    return sorted(p.parent.name for p in Path(root).glob(f"*/{_dispatch.TABLE_FILE}")
                  if p.parent.name != _dispatch.DEFAULT_SLUG)


def _checked_table(table_dir: Path, slug: str) -> dict:
    path = Path(table_dir) / _dispatch.TABLE_FILE
    if not path.is_file():
        raise ShipError(f"{path}: no table (run `python cli.py emit` first)")
    table = _dispatch.load_table(path, slug)
    for variant, info in sorted(table["modules"].items()):
        module = path.parent / info["file"]
        if not module.is_file():
            raise ShipError(f"{module}: named by {path} but missing")
        digest = _dispatch.file_sha256(module)
        if digest != info["sha256"]:
            raise ShipError(f"{module}: sha256 {digest[:16]}... differs from its table's {info['sha256'][:16]}...; "
                            "re-emit before shipping")
    return table


def ship(out: Path, gpus: Optional[Sequence[str]] = None, root: Path = _dispatch.TABLES_DIR,
         package: str = "indexer_logits") -> ShipResult:
    root = Path(root)
    if not package.isidentifier() or keyword.iskeyword(package):
        raise ShipError(f"package: expected a Python identifier, got {package!r}")
    known = available_gpus(root)
    chosen = sorted(dict.fromkeys(gpus)) if gpus else known
    unknown = [g for g in chosen if g not in known]
    if unknown:
        raise ShipError(f"--gpu: no table for {unknown} under {root}; tables: {known or 'none'}")
    # every side-by-side table of a slug ships: the runtime picks one by the Triton it runs
    dirs = {slug: [d for d, _ in _versions.candidates(root / slug)] or [root / slug]
            for slug in chosen + [_dispatch.DEFAULT_SLUG]}
    tables = {d.relative_to(root).as_posix(): _checked_table(d, slug) for slug, ds in dirs.items() for d in ds}
    target = Path(out) / package
    if target.exists():
        if not (target / MANIFEST).is_file():
            raise ShipError(f"{target}: exists and was not made by `ship` (no {MANIFEST}); choose another --out")
        shutil.rmtree(target)
    target.mkdir(parents=True)
    result = ShipResult(target, chosen)
    for src in sorted(RUNTIME_DIR.glob("*.py")):
        shutil.copyfile(src, target / src.name)
    for rel, table in tables.items():
        (target / "tables" / rel).mkdir(parents=True)
        names = [_dispatch.TABLE_FILE] + sorted(info["file"] for info in table["modules"].values())
        for name in names:
            shutil.copyfile(root / rel / name, target / "tables" / rel / name)
    for path in sorted(target.rglob("*")):
        if path.is_file():
            result.files[path.relative_to(target).as_posix()] = _dispatch.file_sha256(path)
    manifest = {"format": 1, "package": package, "tool_version": __version__, "gpus": chosen,
                "tables": {slug: t["provenance"] for slug, t in sorted(tables.items())}, "files": result.files}
    (target / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return result
