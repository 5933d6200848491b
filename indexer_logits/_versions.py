"""Which Triton a table was tuned under, which one runs, and which of a GPU's tables to serve.

Imports only the standard library: the running version is read from an already imported triton,
or from its installed metadata, so that importing the runtime does not import triton.

Layout (one GPU slug; every directory is a complete table, its modules beside its dispatch.json):

    <dir>/<gpu_slug>/dispatch.json                the primary table (its provenance says the Triton)
    <dir>/<gpu_slug>/triton-<major>.<minor>/dispatch.json   tables tuned under other Tritons

The table tuned under the running major.minor is served when there is one; otherwise the one
tuned under the nearest version (a tie goes to the older), with a one-time log record.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Optional

LOGGER = logging.getLogger("indexer_logits")
TABLE_FILE = "dispatch.json"
_VERSION_DIR = re.compile(r"^triton-(\d+)\.(\d+)$")
_MINOR = re.compile(r"^\s*(\d+)\.(\d+)")


def running_triton() -> Optional[str]:
    """The Triton this process runs (its __version__), None when triton is not installed. Imported
    here if it is not yet: the installed distribution's metadata can name another Triton than the
    package that imports (a Triton put first on PYTHONPATH, as the H200 runs 3.8 and 3.9; a torch
    nightly's pytorch-triton), and the table picked before the first kernel is cached."""
    module = sys.modules.get("triton")
    if module is None:
        try:
            import triton as module
        except ImportError:
            module = None
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        from importlib.metadata import PackageNotFoundError, version as dist_version
        return dist_version("triton")
    except (ImportError, PackageNotFoundError):
        return None


def minor_of(version: Optional[str]) -> Optional[tuple[int, int]]:
    """(major, minor) of "3.6.0" / "3.8.0+git1234"; None for None or an unparsable string."""
    match = _MINOR.match(version) if isinstance(version, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def version_dir_name(version: str) -> str:
    """The side-by-side directory of a table tuned under `version`: "triton-3.8"."""
    mm = minor_of(version)
    if mm is None:
        raise ValueError(f"triton version {version!r}: expected major.minor[.patch]")
    return f"triton-{mm[0]}.{mm[1]}"


def table_triton(table: dict) -> Optional[str]:
    """The triton_version a parsed table's provenance records (None when it records none)."""
    prov = table.get("provenance") if isinstance(table, dict) else None
    value = prov.get("triton_version") if isinstance(prov, dict) else None
    return value if isinstance(value, str) else None


def tuned_under(path: Path) -> Optional[str]:
    """The triton_version a table file's provenance records; None when it records none or is
    unreadable (ranking the candidates, and what bench names; the served table is validated by its loader)."""
    try:
        return table_triton(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def candidates(slug_dir: Path) -> list[tuple[Path, Optional[tuple[int, int]]]]:
    """Every table directory of one GPU slug with the (major, minor) it was tuned under."""
    out: list[tuple[Path, Optional[tuple[int, int]]]] = []
    if (slug_dir / TABLE_FILE).is_file():
        out.append((slug_dir, minor_of(tuned_under(slug_dir / TABLE_FILE))))
    if slug_dir.is_dir():
        for sub in sorted(slug_dir.iterdir()):
            match = _VERSION_DIR.match(sub.name)
            if match and (sub / TABLE_FILE).is_file():
                out.append((sub, (int(match.group(1)), int(match.group(2)))))
    return out


def _distance(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int, int]:
    # A major version apart is farther than any minor; a tie prefers the older table.
    return (abs(a[0] - b[0]), abs(a[1] - b[1]) if a[0] == b[0] else 0, a[0] * 1000 + a[1])


def table_dirs_in_order(slug_dir: Path, running: Optional[str]) -> list[Path]:
    """Every table directory of one GPU slug, in the order a process running Triton `running` is
    served from them: the exact major.minor, then the nearest known versions, then a table that
    records no version. The tuned rung takes a problem from the first that has an entry for it, so
    a table re-timed for some families under a new Triton (`retime --family`) leaves the others
    to the nearest table that has them, not to the family defaults."""
    run = minor_of(running)
    found = candidates(slug_dir)
    known = [(d, v) for d, v in found if v is not None]
    if run is None or not known:
        return [d for d, _ in found]
    ranked = sorted(known, key=lambda dv: _distance(dv[1], run))
    return [d for d, _ in ranked] + [d for d, v in found if v is None]


def pick_table_dir(slug_dir: Path, running: Optional[str]) -> Optional[Path]:
    """The directory whose table serves a process running Triton `running` first (what info, bench
    and report name); None when the slug has no table. An exact major.minor wins, then the nearest
    known version; a table that records no version is served only when no versioned one exists."""
    dirs = table_dirs_in_order(slug_dir, running)
    return dirs[0] if dirs else None


def other_minor(tuned: Optional[str], running: Optional[str]) -> bool:
    """Whether a table tuned under `tuned` was tuned under another minor than `running` (a table
    that records no version is not said to be): what info, bench and the report mark."""
    tm = minor_of(tuned)
    return tm is not None and tm != minor_of(running)


def mismatch_message(path: Path, slug_dir: Path, tuned: Optional[str], running: Optional[str]) -> Optional[str]:
    """The log line for a table tuned under another Triton minor than the running one, else None."""
    tm, rm = minor_of(tuned), minor_of(running)
    if tm is None or rm is None or tm == rm:
        return None
    return (f"indexer logits: {path} was tuned under Triton {tuned}, this process runs Triton {running}; "
            "the kernels stay correct, but their speed is the tuned one only under the same minor version "
            f"(a table tuned under it goes in {slug_dir / version_dir_name(running)}/)")
