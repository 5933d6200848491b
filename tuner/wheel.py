"""`ship --wheel`: the shipped package as an installable, reproducible wheel, built with the stdlib.

    <out>/<package>-<version>-py3-none-any.whl
        <package>/...                       exactly what `ship` puts in a folder (runtime, tables, SHIPPED.json)
        <package>-<version>.dist-info/METADATA, WHEEL, RECORD

No build backend and no network: the folder `ship` stages is zipped with fixed timestamps and
modes, entries sorted, so two builds of the same tables give the same bytes. RECORD carries every
file's urlsafe-base64 sha256 (PEP 376/427), which `pip install` checks; the tables keep their own
sha256, which the runtime checks when it imports a module.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from indexer_logits import _dispatch
from . import __version__
from .ship import ShipError, ship

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
RUNTIME_REQUIRES = ("torch", "triton")  # the runtime imports only these and the stdlib
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry
_SUMMARY = "CUDA-graph-safe Triton kernels for the DeepSeek-V3.2/V4 sparse-attention indexer logits, with tuned tables."


@dataclass
class WheelResult:
    path: Path
    gpus: list[str]
    files: int
    sha256: str


def requires_dist(pyproject: Path = PYPROJECT) -> list[str]:
    """The floors pyproject.toml declares for torch and triton, as Requires-Dist values."""
    import tomllib

    deps = tomllib.loads(Path(pyproject).read_text())["project"]["dependencies"]
    found = {}
    for dep in deps:
        name = re.match(r"^\s*([A-Za-z0-9_.-]+)", dep).group(1).lower()
        if name in RUNTIME_REQUIRES:
            found[name] = dep.replace(" ", "")
    missing = [n for n in RUNTIME_REQUIRES if n not in found]
    if missing:
        raise ShipError(f"{pyproject}: [project] dependencies declare no {missing}; the wheel needs their floors")
    return [found[n] for n in RUNTIME_REQUIRES]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _metadata(dist: str, version: str, requires: list[str], gpus: list[str]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}", f"Summary: {_SUMMARY}",
             "License: Apache-2.0", "Requires-Python: >=3.10"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    body = (f"The indexer logits runtime with the tables of: {', '.join(gpus) or 'no tuned GPU'} (and the family "
            "defaults). `import indexer_logits`; see SHIPPED.json inside the package for every file's sha256.")
    return "\n".join(lines) + "\n\n" + body + "\n"


def _wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: indexer-logits-tuner {__version__}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _entry(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = (0o100644 & 0xFFFF) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # unix, so the mode above is read as one
    zf.writestr(info, data, compresslevel=9)


def build_wheel(out: Path, gpus: Optional[Sequence[str]] = None, root: Path = _dispatch.TABLES_DIR,
                package: str = "indexer_logits", version: str = __version__,
                pyproject: Path = PYPROJECT) -> WheelResult:
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ShipError(f"--out: {out} is not a directory")
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise ShipError(f"version: expected digits and dots (e.g. 0.1.0), got {version!r}")
    requires = requires_dist(pyproject)
    with tempfile.TemporaryDirectory(prefix="ship-wheel-") as stage:
        shipped = ship(Path(stage), gpus, root=root, package=package)
        files = {f"{package}/{p.relative_to(shipped.package_dir).as_posix()}": p.read_bytes()
                 for p in shipped.package_dir.rglob("*") if p.is_file()}
    info_dir = f"{package}-{version}.dist-info"
    files[f"{info_dir}/METADATA"] = _metadata(package, version, requires, shipped.gpus).encode()
    files[f"{info_dir}/WHEEL"] = _wheel_file().encode()
    record = f"{info_dir}/RECORD"
    rows = [f"{name},{_record_hash(data)},{len(data)}" for name, data in sorted(files.items())] + [f"{record},,"]
    files[record] = ("\n".join(rows) + "\n").encode()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShipError(f"--out: cannot create {out}: {exc.strerror}") from None
    path = out / f"{package}-{version}-py3-none-any.whl"
    tmp = path.with_suffix(".whl.part")
    try:
        with zipfile.ZipFile(tmp, "w") as zf:
            # RECORD goes last by convention; every other entry in sorted order
            for name in sorted(files, key=lambda n: (n == record, n)):
                _entry(zf, name, files[name])
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ShipError(f"--out: cannot write {path}: {exc.strerror}") from None
    return WheelResult(path, shipped.gpus, len(files), _dispatch.file_sha256(path))


def check_record(wheel: Path) -> list[str]:
    """Every entry of a wheel whose bytes differ from RECORD, or which RECORD lacks or names in vain."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        records = [n for n in names if n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            return [f"{wheel}: expected one .dist-info/RECORD, found {sorted(records)}"]
        listed = {}
        for line in zf.read(records[0]).decode().splitlines():
            name, digest, _size = line.rsplit(",", 2)
            listed[name] = digest
        bad = [f"{n}: not in RECORD" for n in sorted(names - set(listed))]
        bad += [f"{n}: in RECORD, not in the wheel" for n in sorted(set(listed) - names)]
        bad += [f"{n}: sha256 differs from RECORD" for n in sorted(names & set(listed))
                if listed[n] and _record_hash(zf.read(n)) != listed[n]]
    return bad
