"""Which frozen kernel runs a call: the fallback ladder over the dispatch tables, cached per shape.

Imports only torch and this package (the generated modules it loads import torch and triton).
The tables themselves (layout on disk, validation, module loading) are indexer_logits._tables.

The ladder for one call (problem, bucket), with INDEXER_LOGITS_BACKEND=auto:
  1. exact: the current GPU's table has an entry for this problem and bucket;
  2. nearest: its entry for this problem at the nearest bucket (log-distance in batch, context);
  3. predicted: the same two steps in the GPU's predicted table (<slug>/predicted/: configs chosen
     by the tuner's performance model and cross-compiled for the GPU, never timed on it), for a
     GPU with no tuned entry for the problem;
  4. default: the family default for the problem (the GPU table's "defaults", then default/'s);
  5. reference: the torch reference, with a one-time warning.
A module whose sha256 differs from its table, a table with a wrong format, or a table made for
another GPU is refused with a warning naming the file, and the ladder goes on to the next rung.
The choice is cached per (device, problem, bucket, backend, table dir): after the first call
for a shape, a call does no file I/O.
"""

from __future__ import annotations

import enum
import math
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

import torch

from . import _fastpath, _versions
from ._identity import INTERPRETER_DOT_DTYPES, PROBLEM_FIELDS, family_kind, problem_key, slugify
from ._tile_max_rule import rows_width, tile_max_block
# The table names are re-exported: the public API and the tuner reach the tables through here.
from ._tables import (CPU_SLUG, DEFAULT_SLUG, ENV_TABLE_DIR, FORMAT, PACKAGE_DIR, PREDICTED_DIR,  # noqa: F401
                      TABLE_FILE, TABLES_DIR, DispatchTableError, file_sha256, interpreting, load_kernel, load_table,
                      predicted_table_dir, table_root, validate_table)

ENV_BACKEND = "INDEXER_LOGITS_BACKEND"
_fastpath.watch_env(ENV_BACKEND)
_fastpath.watch_env(ENV_TABLE_DIR)


class Backend(str, enum.Enum):
    """INDEXER_LOGITS_BACKEND: which path serves a call (for A/B tests and rollback)."""

    AUTO = "auto"  # the whole ladder: exact, nearest, predicted, default, reference
    TUNED = "tuned"  # only the current GPU's tuned table (exact or nearest bucket); error if none
    PREDICTED = "predicted"  # only the current GPU's predicted table (exact or nearest bucket); error if none
    DEFAULT = "default"  # only the family default; error if none
    REFERENCE = "reference"  # always the torch reference (slow; no warning)

    @classmethod
    def parse(cls, value: Optional[str]) -> "Backend":
        text = (value or "auto").strip().lower() or "auto"
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"{ENV_BACKEND}: expected one of {[b.value for b in cls]}, got {value!r}") from None

    @classmethod
    def from_env(cls) -> "Backend":
        return cls.parse(os.environ.get(ENV_BACKEND))


class DispatchWarning(RuntimeWarning):
    """A rung of the ladder was skipped, or the call fell back to the reference."""


class NoKernelError(RuntimeError):
    """A forced backend (INDEXER_LOGITS_BACKEND=tuned|predicted|default) has no kernel for the call."""


# ---------------------------------------------------------------------------------------------


def bucket_distance(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Log-distance between (batch, context) buckets: ratios matter, not differences."""
    return math.hypot(math.log(a[0]) - math.log(b[0]), math.log(a[1]) - math.log(b[1]))


# ---------------------------------------------------------------------------------------------
# Selection.


@dataclass(frozen=True)
class Selection:
    """What serves a (device, problem, bucket): the rung, and the launcher when it is a kernel."""

    rung: str  # "exact" | "nearest" | "predicted" | "default" | "reference"
    problem: dict
    bucket: tuple[int, int]
    variant: Optional[str] = None
    table: Optional[str] = None  # the dispatch.json it came from
    entry_bucket: Optional[tuple[int, int]] = None  # the entry's bucket (exact / nearest / predicted)
    launch: Optional[Callable] = field(default=None, repr=False, compare=False)
    # The module's launch() takes pdl=True (decode modules emitted since PDL support; an older
    # table's modules do not, and are launched plainly).
    supports_pdl: bool = False
    # The module's key tile where its launch() also writes the top-k's tile maxima (tile_max=...:
    # split-grid decode modules emitted since the top-k epilogue) at a price worth paying, else 0.
    tile_max_block: int = 0

    @property
    def is_reference(self) -> bool:
        return self.rung == "reference"


@dataclass(frozen=True)
class _Device:
    key: str  # "cpu" or "cuda:0"
    slug: str
    compute_capability: Optional[str]
    is_cpu: bool


_DEVICES: dict[str, _Device] = {}
_TABLES: dict[tuple, Any] = {}  # dict, None (absent) or the DispatchTableError
_TABLE_DIRS: dict[tuple, Path] = {}  # (root, slug, cc): the side-by-side table directory _table() serves first
_SELECTIONS: dict[tuple, Selection] = {}
_WARNED: set[str] = set()
_LOCK = threading.RLock()


def _device_info(device: torch.device) -> _Device:
    key = str(device)
    info = _DEVICES.get(key)
    if info is None:
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            major, minor = torch.cuda.get_device_capability(index)
            info = _Device(key, slugify(torch.cuda.get_device_name(index)), f"{major}.{minor}", False)
        elif device.type == "cpu":
            info = _Device(key, CPU_SLUG, None, True)
        else:
            info = _Device(key, slugify(device.type), None, False)
        _DEVICES[key] = info
    return info


def _caller_stacklevel() -> int:
    """The stack level of the first frame outside this package (the caller's line in warnings)."""
    level, frame = 1, sys._getframe(1)
    here = str(PACKAGE_DIR)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        level += 1
        frame = frame.f_back
    return level


def warn_once(key: str, message: str) -> None:
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(message, DispatchWarning, stacklevel=_caller_stacklevel())


def clear_cache() -> None:
    """Forget loaded tables, selections and issued warnings (tests; after replacing tables)."""
    with _LOCK:
        _DEVICES.clear()
        _TABLES.clear()
        _TABLE_DIRS.clear()
        _SELECTIONS.clear()
        _WARNED.clear()
    _fastpath.clear()


def _table(root: Path, slug: str, dev: _Device, strict: bool) -> Optional[dict]:
    """The validated table of `slug` under root (cached), None when absent or refused. Of the
    slug's side-by-side tables (one per Triton it was tuned under) it is the one _versions picks."""
    key = (str(root), slug, dev.compute_capability)
    if key not in _TABLE_DIRS:
        _TABLE_DIRS[key] = _versions.pick_table_dir(root / slug, _versions.running_triton()) or root / slug
    return _table_at(_TABLE_DIRS[key], root / slug, dev, strict)


def _table_at(tdir: Path, slug_dir: Path, dev: _Device, strict: bool, log: bool = True) -> Optional[dict]:
    """The validated table in `tdir`, one of slug_dir's side-by-side tables (cached); with `log`,
    says once when it was tuned under another Triton minor than the running one."""
    key = (str(tdir), dev.compute_capability)
    if key not in _TABLES:
        path = tdir / TABLE_FILE
        try:
            _TABLES[key] = load_table(path, slug_dir.name, dev.compute_capability) if path.is_file() else None
        except DispatchTableError as exc:
            _TABLES[key] = exc
    table = _TABLES[key]
    if isinstance(table, DispatchTableError):
        if strict:
            raise table
        warn_once(f"table:{slug_dir}", f"indexer logits: {table}; using the next rung of the ladder")
        return None
    if log and table is not None and slug_dir.name != DEFAULT_SLUG:
        path = tdir / TABLE_FILE
        msg = _versions.mismatch_message(path, slug_dir, _versions.table_triton(table), _versions.running_triton())
        if msg is not None and f"triton:{path}" not in _WARNED:
            _WARNED.add(f"triton:{path}")
            _versions.LOGGER.warning(msg)
    return table


def _predicted_table(root: Path, dev: _Device, strict: bool) -> tuple[Optional[dict], Path]:
    """The validated predicted table serving this GPU (cached) and its directory; None when absent
    or refused. Only a table whose provenance says kind "predicted" is served from there."""
    key = (str(root), f"{dev.slug}/{PREDICTED_DIR}", dev.compute_capability)
    if key not in _TABLES:
        tdir = predicted_table_dir(root, dev.slug)
        path = tdir / TABLE_FILE
        _TABLE_DIRS[key] = tdir
        try:
            loaded = load_table(path, dev.slug, dev.compute_capability) if path.is_file() else None
            if loaded is not None and loaded["provenance"].get("kind") != "predicted":
                raise DispatchTableError(f"{path}: provenance kind {loaded['provenance'].get('kind')!r} in a "
                                         f"{PREDICTED_DIR}/ folder; expected 'predicted'")
            _TABLES[key] = loaded
        except DispatchTableError as exc:
            _TABLES[key] = exc
    table = _TABLES[key]
    if isinstance(table, DispatchTableError):
        if strict:
            raise table
        warn_once(f"table:{_TABLE_DIRS[key]}", f"indexer logits: {table}; using the next rung of the ladder")
        return None, _TABLE_DIRS[key]
    return table, _TABLE_DIRS[key]


def _table_dir(root: Path, slug: str, dev: _Device) -> Path:
    """The directory of the table _table() served for slug (its modules lie beside it)."""
    return _TABLE_DIRS.get((str(root), slug, dev.compute_capability), root / slug)


def _supports_pdl(module: ModuleType) -> bool:
    return getattr(module, "SUPPORTS_PDL", False) is True


def device_compute_capability(device: torch.device) -> Optional[str]:
    """"major.minor" of a CUDA device (cached), None for any other device."""
    return _device_info(torch.device(device)).compute_capability


def _usable(info: dict, interp: bool) -> bool:
    """Under the interpreter, only variants whose dot dtype it computes exactly."""
    if not interp:
        return True
    return info["config"].get("dot_dtype") in INTERPRETER_DOT_DTYPES.get(info["problem"].get("cache_dtype"), ())


def _try_load(tdir: Path, table: dict, variant: str, strict: bool) -> Optional[ModuleType]:
    try:
        return load_kernel(tdir, variant, table["modules"][variant])
    except DispatchTableError as exc:
        if strict:
            raise
        warn_once(f"module:{tdir / table['modules'][variant]['file']}",
                  f"indexer logits: {exc}; using the next rung of the ladder")
        return None


def _tuned(root: Path, dev: _Device, pkey: str, problem: dict, bucket, strict: bool,
           interp: bool) -> Optional[Selection]:
    """The entry of the first of the slug's tables (the running Triton's, then the nearest) that has
    this problem: a table re-timed for some families under this Triton leaves the rest to the next."""
    slug_dir = root / dev.slug
    for tdir in _versions.table_dirs_in_order(slug_dir, _versions.running_triton()):
        table = _table_at(tdir, slug_dir, dev, strict, log=False)
        if table is not None and any(e["problem_key"] == pkey for e in table["entries"]):
            _table_at(tdir, slug_dir, dev, strict)  # serving from it: say which Triton it was tuned under
            return _from_entries(table, tdir, pkey, problem, bucket, strict, interp, None)
    return None


def _predicted(root: Path, dev: _Device, pkey: str, problem: dict, bucket, strict: bool,
               interp: bool) -> Optional[Selection]:
    table, tdir = _predicted_table(root, dev, strict)
    if table is None:
        return None
    return _from_entries(table, tdir, pkey, problem, bucket, strict, interp, "predicted")


def _from_entries(table: dict, tdir: Path, pkey: str, problem: dict, bucket, strict: bool, interp: bool,
                  rung: Optional[str]) -> Optional[Selection]:
    """The entry for this problem at this bucket, else at the nearest one; rung None: exact/nearest."""
    cands = []
    for e in table["entries"]:
        if e["problem_key"] != pkey or not _usable(table["modules"][e["variant"]], interp):
            continue
        eb = (e["bucket"]["batch"], e["bucket"]["context"])
        cands.append((eb != bucket, bucket_distance(eb, bucket), eb, e["variant"]))
    for not_exact, _, eb, variant in sorted(cands):
        module = _try_load(tdir, table, variant, strict)
        if module is not None:
            return Selection(rung or ("nearest" if not_exact else "exact"), problem, bucket, variant,
                             str(tdir / TABLE_FILE), eb, module.launch, _supports_pdl(module),
                             tile_max_block(module, *rows_width(problem, bucket)))
    return None


def _default(root: Path, dev: _Device, pkey: str, problem: dict, bucket, strict: bool,
             interp: bool) -> Optional[Selection]:
    section = "interpreter_defaults" if interp else "defaults"
    for slug in dict.fromkeys((dev.slug, DEFAULT_SLUG)):
        strict_here = strict and slug == DEFAULT_SLUG  # a forced default ignores a broken tuned table
        table = _table(root, slug, dev, strict_here)
        if table is None:
            continue
        variant = (table.get(section) or {}).get(pkey)
        if variant is None or not _usable(table["modules"][variant], interp):
            continue
        tdir = _table_dir(root, slug, dev)
        module = _try_load(tdir, table, variant, strict_here)
        if module is not None:
            return Selection("default", problem, bucket, variant, str(tdir / TABLE_FILE), None, module.launch,
                             _supports_pdl(module), tile_max_block(module, *rows_width(problem, bucket)))
    return None


def _describe(problem: dict, bucket) -> str:
    p = problem
    kind = family_kind(p["family"])
    what = f"{p['family']} {p['cache_dtype']} H={p['heads']} D={p['head_dim']}"
    if kind.paged:
        what += f" page={p['page_size']} {p['scale_layout']}"
    if kind.decode:
        what += f" next_n={p['next_n']} lens={p['lens_mode']}"
    return f"{what} (batch {bucket[0]}, context {bucket[1]})"


def select(device: torch.device, problem: dict, bucket: tuple[int, int],
           backend: Optional[Backend] = None) -> Selection:
    """The kernel (or the reference) that serves this call; cached after the first call."""
    backend = Backend.from_env() if backend is None else backend
    root_setting = os.environ.get(ENV_TABLE_DIR, "")  # the raw setting: no filesystem call per call
    interp = interpreting()
    fields = tuple(problem[f] for f in PROBLEM_FIELDS)
    key = (str(device), fields, bucket, backend, root_setting, interp)
    hit = _SELECTIONS.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _SELECTIONS.get(key)
        if hit is None:
            hit = _select(device, problem, bucket, backend, table_root(), interp)
            _SELECTIONS[key] = hit
    return hit


def _select(device, problem, bucket, backend: Backend, root: Path, interp: bool) -> Selection:
    dev = _device_info(torch.device(device))
    pkey = problem_key(problem)
    what = _describe(problem, bucket)
    if backend is Backend.REFERENCE:
        return Selection("reference", problem, bucket)
    if dev.is_cpu and not interp:
        if backend is not Backend.AUTO:
            raise NoKernelError(f"{ENV_BACKEND}={backend.value}: Triton kernels need a GPU, or TRITON_INTERPRET=1 "
                                "for CPU tensors")
        warn_once(f"cpu-no-interp:{pkey}", f"indexer logits: {what}: CPU tensors without TRITON_INTERPRET=1 run "
                  "the torch reference (set TRITON_INTERPRET=1 before importing to run the kernels interpreted)")
        return Selection("reference", problem, bucket)
    strict = backend is not Backend.AUTO
    if backend in (Backend.AUTO, Backend.TUNED):
        sel = _tuned(root, dev, pkey, problem, bucket, strict and backend is Backend.TUNED, interp)
        if sel is not None:
            return sel
        if backend is Backend.TUNED:
            raise NoKernelError(f"{ENV_BACKEND}=tuned: no tuned entry for {what} in "
                                f"{root / dev.slug / TABLE_FILE}")
    if backend in (Backend.AUTO, Backend.PREDICTED):
        sel = _predicted(root, dev, pkey, problem, bucket, strict and backend is Backend.PREDICTED, interp)
        if sel is not None:
            return sel
        if backend is Backend.PREDICTED:
            raise NoKernelError(f"{ENV_BACKEND}=predicted: no predicted entry for {what} in "
                                f"{predicted_table_dir(root, dev.slug) / TABLE_FILE}")
    sel = _default(root, dev, pkey, problem, bucket, strict, interp)
    if sel is not None:
        return sel
    if backend is Backend.DEFAULT:
        raise NoKernelError(f"{ENV_BACKEND}=default: no family default for {what} under {root}")
    warn_once(f"reference:{pkey}", f"indexer logits: no kernel for {what} on {dev.key} ({dev.slug}) in {root}; "
              "running the torch reference (slow, and not CUDA-graph capturable)")
    return Selection("reference", problem, bucket)
