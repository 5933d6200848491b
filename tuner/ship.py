"""`ship`: a self-contained folder that SGLang or vLLM imports with only torch and triton.

    <out>/<package>/                    the runtime (every indexer_logits/*.py file)
    <out>/<package>/tables/<gpu_slug>/  each chosen GPU's dispatch.json and the modules it names, and
                                        its topk.json (the top-k selection's tuned settings) if it has one
    <out>/<package>/tables/<gpu_slug>/triton-X.Y/  its tables tuned under other Tritons, when it has any
    <out>/<package>/tables/<gpu_slug>/predicted/   its predicted table, or the same_as pointer (with the
                                        table it names), when it has one
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

from indexer_logits import _dispatch, _tables, _topk_table, _versions
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
    """Slugs with a tuned table, a predicted one, or a same_as pointer to one."""
    root = Path(root)
    tuned = {p.parent.name for p in root.glob(f"*/{_dispatch.TABLE_FILE}")}
    predicted = {p.parent.parent.name for name in (_dispatch.TABLE_FILE, _tables.SAME_AS_FILE)
                 for p in root.glob(f"*/{_tables.PREDICTED_DIR}/{name}")}
    return sorted((tuned | predicted) - {_dispatch.DEFAULT_SLUG})


def _table_dirs(root: Path, slug: str) -> tuple[dict[Path, str], list[Path]]:
    """({table directory: the slug it is validated for}, [same_as pointer files]) that ship for a slug."""
    dirs = {d: slug for d, _ in _versions.candidates(root / slug)}
    pointers = []
    pdir = root / slug / _tables.PREDICTED_DIR
    served = _tables.predicted_table_dir(root, slug)
    if (served / _dispatch.TABLE_FILE).is_file():
        dirs[served] = served.parent.name
        if served != pdir:
            pointers.append(pdir / _tables.SAME_AS_FILE)
    return (dirs or {root / slug: slug}), pointers


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
    # every side-by-side table of a slug ships (the runtime picks one by the Triton it runs), and its
    # predicted table (or the pointer to it and the table it names)
    dirs, pointers = {}, []
    for slug in chosen + [_dispatch.DEFAULT_SLUG]:
        ds, ps = _table_dirs(root, slug)
        dirs.update(ds)
        pointers += ps
    tables = {d.relative_to(root).as_posix(): _checked_table(d, slug) for d, slug in dirs.items()}
    topk_tables = {slug: root / slug / _topk_table.FILE for slug in chosen if (root / slug / _topk_table.FILE).is_file()}
    for slug, topk in topk_tables.items():
        try:
            _topk_table.validate(json.loads(topk.read_text()), topk, expect_slug=slug)
        except (ValueError, _tables.DispatchTableError) as exc:
            raise ShipError(f"{topk}: {exc}") from None
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
        (target / "tables" / rel).mkdir(parents=True, exist_ok=True)
        names = [_dispatch.TABLE_FILE] + sorted(info["file"] for info in table["modules"].values())
        for name in names:
            shutil.copyfile(root / rel / name, target / "tables" / rel / name)
    for pointer in pointers:
        (target / "tables" / pointer.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pointer, target / "tables" / pointer.relative_to(root))
    for slug, topk in topk_tables.items():  # the top-k selection's tuned settings, where a GPU has them
        (target / "tables" / slug).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(topk, target / "tables" / slug / _topk_table.FILE)
    for path in sorted(target.rglob("*")):
        if path.is_file():
            result.files[path.relative_to(target).as_posix()] = _dispatch.file_sha256(path)
    manifest = {"format": 1, "package": package, "tool_version": __version__, "gpus": chosen,
                "tables": {slug: t["provenance"] for slug, t in sorted(tables.items())}, "files": result.files}
    (target / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return result
