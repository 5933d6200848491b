"""The dispatch tables on disk: where they live, their validation, and loading a frozen module.

Imports only the standard library and this package.

Layout on disk (the table directory is this package's tables/ folder, or $INDEXER_LOGITS_TABLE_DIR):

    <dir>/<gpu_slug>/dispatch.json   tuned on that GPU (slug of torch.cuda.get_device_name)
    <dir>/<gpu_slug>/<variant>.py    the frozen modules it names
    <dir>/<gpu_slug>/triton-X.Y/     optional: the same, tuned under another Triton (_versions picks)
    <dir>/<gpu_slug>/predicted/      optional: a predicted table (provenance kind "predicted": chosen by
                                     tuner.model and cross-compiled, never timed), served when the slug
                                     has no tuned entry; a tuned table of the slug wins
    <dir>/<gpu_slug>/predicted/same_as   instead of a table: the slug whose predicted/ serves this one
                                     (a board's other edition); that table lists this slug in gpu_slugs
    <dir>/default/dispatch.json      family defaults for any GPU (and CPU-interpreter variants)

The format is documented in docs/RUNTIME.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from . import _versions
from ._identity import problem_key, slugify

FORMAT = 1
TABLE_FILE = "dispatch.json"
PREDICTED_DIR = "predicted"
SAME_AS_FILE = "same_as"
DEFAULT_SLUG = "default"
CPU_SLUG = "cpu"
ENV_TABLE_DIR = "INDEXER_LOGITS_TABLE_DIR"
PACKAGE_DIR = Path(__file__).resolve().parent
# The generated tables and modules: package data beside the hand-written runtime.
TABLES_DIR = PACKAGE_DIR / "tables"

_VARIANT_FILE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.py$")


class DispatchTableError(ValueError):
    """A dispatch table or module that must not be used (wrong format, foreign GPU, tampered file)."""


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def table_root() -> Path:
    value = os.environ.get(ENV_TABLE_DIR)
    return Path(value).resolve() if value else TABLES_DIR


def _fail(path: Path, msg: str):
    raise DispatchTableError(f"{path}: {msg}")


def validate_table(table: Any, path: Path, expect_slug: Optional[str] = None,
                   compute_capability: Optional[str] = None) -> dict:
    """Check a parsed table's structure and that it was made for this GPU; return it."""
    if not isinstance(table, dict):
        _fail(path, f"expected a JSON object, got {type(table).__name__}")
    if table.get("format") != FORMAT:
        _fail(path, f"format: expected {FORMAT}, got {table.get('format')!r} (re-emit it with this tool version)")
    for name in ("provenance", "modules", "entries", "defaults"):
        if name not in table:
            _fail(path, f"missing the {name!r} section")
    prov, modules = table["provenance"], table["modules"]
    if not isinstance(prov, dict) or not isinstance(modules, dict) or not isinstance(table["entries"], list):
        _fail(path, "provenance and modules must be objects, entries a list")
    slug = prov.get("gpu_slug")
    serves = prov.get("gpu_slugs") if prov.get("kind") == "predicted" else None  # a predicted table's other boards
    if expect_slug is not None and slug != expect_slug and expect_slug not in (serves or ()):
        _fail(path, f"made for GPU {slug!r} ({prov.get('gpu_name', '?')}), not for {expect_slug!r}: refusing a foreign table")
    table_cc = prov.get("compute_capability")
    if compute_capability and table_cc and slug != DEFAULT_SLUG and table_cc != compute_capability:
        _fail(path, f"made for compute capability {table_cc}, this GPU is {compute_capability}: refusing a foreign table")
    for variant, info in modules.items():
        if not isinstance(info, dict) or not all(k in info for k in ("file", "sha256", "problem", "config")):
            _fail(path, f"modules[{variant!r}]: expected file, sha256, problem and config")
        if not _VARIANT_FILE.match(str(info["file"])):
            _fail(path, f"modules[{variant!r}]: file {info['file']!r} must be a plain module file name")
    for i, e in enumerate(table["entries"]):
        if not isinstance(e, dict) or e.get("variant") not in modules:
            _fail(path, f"entries[{i}]: variant {e.get('variant') if isinstance(e, dict) else e!r} is not in modules")
        b = e.get("bucket")
        if not (isinstance(b, dict) and isinstance(b.get("batch"), int) and isinstance(b.get("context"), int)
                and b["batch"] >= 1 and b["context"] >= 1):
            _fail(path, f"entries[{i}]: expected bucket {{batch, context}} of positive ints, got {b!r}")
        try:
            key = problem_key(e.get("problem") or {})
        except (ValueError, TypeError) as exc:
            _fail(path, f"entries[{i}]: {exc}")
        if e.get("problem_key") != key:
            _fail(path, f"entries[{i}]: problem_key does not match its problem")
    for section in ("defaults", "interpreter_defaults"):
        if not isinstance(table.get(section) or {}, dict):
            _fail(path, f"{section}: expected an object {{problem_key: variant}}")
        for key, variant in (table.get(section) or {}).items():
            if variant not in modules:
                _fail(path, f"{section}[{key[:12]}...]: variant {variant!r} is not in modules")
            if problem_key(modules[variant]["problem"]) != key:
                _fail(path, f"{section}[{key[:12]}...]: key does not match module {variant!r}'s problem")
    return table


def load_table(path: Path, expect_slug: Optional[str] = None, compute_capability: Optional[str] = None) -> dict:
    """Read and validate a dispatch.json; raises DispatchTableError with the file's path."""
    path = Path(path)
    try:
        table = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DispatchTableError(f"{path}: not valid JSON ({exc})") from None
    return validate_table(table, path, expect_slug, compute_capability)


def table_text(table: dict) -> str:
    """A dispatch table's bytes as emit and verify --record write them (sorted keys: reproducible)."""
    return json.dumps(table, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


def predicted_table_dir(root: Path, slug: str) -> Path:
    """Where the predicted table serving `slug` lies: <slug>/predicted/, or the directory its
    same_as file names (a predicted/ of another slug); the path may hold no table."""
    pdir = Path(root) / slug / PREDICTED_DIR
    pointer = pdir / SAME_AS_FILE
    if not (pdir / TABLE_FILE).is_file() and pointer.is_file():
        other = pointer.read_text().strip()
        if re.fullmatch(r"[a-z0-9_]+", other):
            return Path(root) / other / PREDICTED_DIR
    return pdir


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_MODULES_LOCK = threading.Lock()


def load_kernel(table_dir: Path, variant: str, info: dict) -> ModuleType:
    """Import a table's module after checking its sha256; the module name carries the hash and
    the interpreter flag, so equal files share one import and a changed file never reuses one."""
    path = Path(table_dir) / info["file"]
    if not path.is_file():
        raise DispatchTableError(f"{path}: module file named by the table is missing")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != info["sha256"]:
        raise DispatchTableError(
            f"{path}: sha256 {digest[:16]}... does not match the table's {str(info['sha256'])[:16]}...: "
            "refusing a modified module (re-emit, or restore the shipped file)")
    name = f"_indexer_logits_kernel__{variant}__{digest[:16]}{'__interp' if interpreting() else ''}"
    with _MODULES_LOCK:
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException as exc:
                del sys.modules[name]
                if isinstance(exc, Exception):  # a module that cannot even import is refused like a tampered one
                    raise DispatchTableError(f"{path}: failed to import ({type(exc).__name__}: {exc})") from exc
                raise
    if getattr(module, "VARIANT", None) != variant or not callable(getattr(module, "launch", None)):
        raise DispatchTableError(f"{path}: expected a generated module with VARIANT={variant!r} and launch()")
    return module


def serving_table(gpu_name: str, compute_capability: Optional[str], root: Path) -> tuple[str, Path]:
    """(kind, path) of the table the runtime serves a GPU's entries from: "tuned" (of its slug's
    side-by-side tables, the one for the running Triton or the nearest), "predicted" (no tuned
    table for the slug) or "defaults". What `info`, `bench` and `report` name as the served table."""
    defaults = "defaults", root / DEFAULT_SLUG / TABLE_FILE
    if not compute_capability:
        return defaults
    slug = slugify(gpu_name)
    tuned = _versions.pick_table_dir(root / slug, _versions.running_triton())
    if tuned is not None:
        return "tuned", tuned / TABLE_FILE
    predicted = predicted_table_dir(root, slug) / TABLE_FILE
    return ("predicted", predicted) if predicted.is_file() else defaults
