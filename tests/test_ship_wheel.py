"""`ship --wheel` writes a reproducible wheel that `pip install`s into a fresh venv and serves the
shipped table's kernel from there; a tampered installed module or wheel entry is caught."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
from indexer_logits._identity import variant_name
from tuner.wheel import check_record

from test_runtime import CFG_SMALL, FP8_N1
from test_ship import BLOCKED_IMPORT_CHECK, emitted  # noqa: F401  (emitted: the fixture)

WHEEL = "indexer_logits-0.1.0-py3-none-any.whl"


def _build(out: Path, root: Path, *extra: str):
    return CliRunner().invoke(cli.main, ["ship", "--wheel", "--out", str(out), "--root", str(root), *extra])


@pytest.fixture(scope="module")
def installed(emitted, tmp_path_factory):  # noqa: F811
    """(wheel, venv python, venv site-packages) with the cpu table's wheel pip-installed."""
    base = tmp_path_factory.mktemp("wheel")
    res = _build(base / "dist", emitted, "--gpu", "cpu")
    assert res.exit_code == 0, res.output
    wheel = base / "dist" / WHEEL
    venv = base / "venv"
    # no ensurepip (seconds): this interpreter's pip installs into the venv with --python
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # --system-site-packages sees the base interpreter's packages, not this venv's; torch and triton
    # live here. A bare path line appends the directory without running its .pth files, so the
    # checkout's editable install stays out of the new venv.
    (site / "_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--no-deps",
                           "--disable-pip-version-check", "--no-cache-dir", str(wheel)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return wheel, py, site


def _call(py: Path, site: Path, cwd: Path, **env_extra: str) -> subprocess.CompletedProcess:
    script = cwd / "use_wheel.py"
    script.write_text(BLOCKED_IMPORT_CHECK)  # asserts indexer_logits came from argv[1]: the venv's site-packages
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INDEXER_LOGITS_", "VIRTUAL_ENV"))}
    env.update(TRITON_INTERPRET="1", PYTHONPATH="", **env_extra)
    return subprocess.run([str(py), "-W", "ignore", str(script), str(site)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_installed_wheel_serves_the_shipped_table(installed, tmp_path):
    wheel, py, site = installed
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"indexer_logits", "indexer_logits-0.1.0.dist-info"}, tops  # no tuner/, commands/, templates/
    assert names[-1].endswith("RECORD") and names[:-1] == sorted(names[:-1])
    assert "indexer_logits/tables/cpu/dispatch.json" in names and not any("nvidia_h200" in n for n in names)
    assert check_record(wheel) == []
    proc = _call(py, site, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, rung, variant, err, bad = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT")).split(" ", 4)
    assert rung == "exact" and variant == variant_name(FP8_N1, CFG_SMALL)
    assert float(err) < 1e-3 and bad == "[]"
    # the installed distribution declares the runtime's two requirements
    meta = subprocess.run([str(py), "-c", "from importlib.metadata import requires; print(requires('indexer_logits'))"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    assert meta.stdout.strip() == "['torch>=2.4', 'triton>=3.6']", meta.stdout + meta.stderr


def test_installed_tampered_module_is_refused(installed, tmp_path):
    _, py, site = installed
    module = site / "indexer_logits" / "tables" / "cpu" / f"{variant_name(FP8_N1, CFG_SMALL)}.py"
    original = module.read_bytes()
    module.write_bytes(original + b"# edited after install\n")
    try:
        proc = _call(py, site, tmp_path, INDEXER_LOGITS_BACKEND="tuned")
    finally:
        module.write_bytes(original)
    assert proc.returncode != 0
    assert f"{module}: sha256" in proc.stderr and "refusing a modified module" in proc.stderr, proc.stderr[-2000:]


def test_wheel_is_reproducible_and_record_catches_an_edit(emitted, tmp_path):  # noqa: F811
    assert _build(tmp_path / "a", emitted).exit_code == 0
    assert _build(tmp_path / "b", emitted).exit_code == 0
    a, b = (tmp_path / d / WHEEL for d in "ab")
    assert a.read_bytes() == b.read_bytes()
    edited = tmp_path / "edited.whl"
    target = "indexer_logits/tables/cpu/dispatch.json"
    with zipfile.ZipFile(a) as src, zipfile.ZipFile(edited, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data.replace(b'"sha256"', b'"sha256" ') if item.filename == target else data)
    assert check_record(edited) == [f"{target}: sha256 differs from RECORD"]


def test_wheel_errors_name_the_argument(emitted, tmp_path):  # noqa: F811
    res = _build(tmp_path / "o", emitted, "--gpu", "b200")
    assert res.exit_code != 0 and "--gpu: no table for ['b200']" in res.output, res.output
    afile = tmp_path / "afile"
    afile.write_text("")
    res = _build(afile, emitted)
    assert res.exit_code != 0 and "--out" in res.output, res.output
    res = _build(afile / "sub", emitted)
    assert res.exit_code != 0 and "--out" in res.output, res.output
    root = tmp_path / "tables"
    shutil.copytree(emitted, root)
    module = root / "cpu" / f"{variant_name(FP8_N1, CFG_SMALL)}.py"
    module.write_text(module.read_text() + "# edited\n")
    res = _build(tmp_path / "o", root)
    assert res.exit_code != 0 and str(module) in res.output and not (tmp_path / "o" / WHEEL).exists()


def test_side_by_side_tables_ship_and_are_checked(emitted, tmp_path):  # noqa: F811
    root = tmp_path / "tables"
    shutil.copytree(emitted, root)
    shutil.copytree(root / "cpu", root / "cpu" / "triton-3.8")  # a table tuned under another Triton
    assert _build(tmp_path / "o", root, "--gpu", "cpu").exit_code == 0
    module = f"{variant_name(FP8_N1, CFG_SMALL)}.py"
    with zipfile.ZipFile(tmp_path / "o" / WHEEL) as zf:
        names = set(zf.namelist())
    assert {f"indexer_logits/tables/cpu/triton-3.8/{n}" for n in ("dispatch.json", module)} <= names
    edited = root / "cpu" / "triton-3.8" / module
    edited.write_text(edited.read_text() + "# edited\n")
    res = _build(tmp_path / "p", root, "--gpu", "cpu")
    assert res.exit_code != 0 and str(edited) in res.output, res.output


def test_the_checkouts_own_tables_make_a_wheel(tmp_path):
    res = CliRunner().invoke(cli.main, ["ship", "--wheel", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert {n.split("/")[0] for n in names} == {"indexer_logits", "indexer_logits-0.1.0.dist-info"}
    assert "indexer_logits/tables/default/dispatch.json" in names and check_record(wheel) == []
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
