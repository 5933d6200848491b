"""Tables side by side per Triton version: which one the runtime serves, and its one log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from indexer_logits import _dispatch, _versions

SLUG = "fake_gpu"


def _write_table(d: Path, triton_version, tag: str, entries: list = (), modules: dict | None = None) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    prov = {"gpu_slug": SLUG, "gpu_name": "Fake GPU", "kind": "tuned", "notes": [tag]}
    if triton_version is not None:
        prov["triton_version"] = triton_version
    table = {"format": _dispatch.FORMAT, "provenance": prov, "modules": modules or {}, "entries": list(entries),
             "defaults": {}}
    (d / "dispatch.json").write_text(json.dumps(table))
    return table


@pytest.fixture
def tables(tmp_path, monkeypatch):
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(tmp_path))
    _dispatch.clear_cache()
    yield tmp_path
    _dispatch.clear_cache()


def _serve(root: Path, running: str, monkeypatch):
    monkeypatch.setattr(_versions, "running_triton", lambda: running)
    dev = _dispatch._Device("cuda:0", SLUG, None, False)
    table = _dispatch._table(_dispatch.table_root(), SLUG, dev, strict=True)
    return table, _dispatch._table_dir(_dispatch.table_root(), SLUG, dev)


def test_minor_parsing():
    assert _versions.minor_of("3.6.0") == (3, 6)
    assert _versions.minor_of("3.8.0+git1a2b") == (3, 8)
    assert _versions.minor_of("nightly") is None and _versions.minor_of(None) is None
    assert _versions.version_dir_name("3.9.0") == "triton-3.9"


def test_matching_version_is_preferred(tables, monkeypatch, caplog):
    _write_table(tables / SLUG, "3.6.0", "primary")
    _write_table(tables / SLUG / "triton-3.8", "3.8.0", "t38")
    _write_table(tables / SLUG / "triton-3.9", "3.9.0", "t39")
    with caplog.at_level(logging.WARNING, logger="indexer_logits"):
        table, tdir = _serve(tables, "3.8.1", monkeypatch)
    assert table["provenance"]["notes"] == ["t38"] and tdir == tables / SLUG / "triton-3.8"
    assert not [r for r in caplog.records if r.name == "indexer_logits"]
    _dispatch.clear_cache()
    table, tdir = _serve(tables, "3.6.0", monkeypatch)
    assert table["provenance"]["notes"] == ["primary"] and tdir == tables / SLUG


def test_nearest_is_served_and_logged_once(tables, monkeypatch, caplog):
    _write_table(tables / SLUG, "3.6.0", "primary")
    _write_table(tables / SLUG / "triton-3.8", "3.8.0", "t38")
    with caplog.at_level(logging.WARNING, logger="indexer_logits"):
        for _ in range(3):
            table, tdir = _serve(tables, "3.9.0", monkeypatch)
        dev = _dispatch._Device("cuda:1", SLUG, None, False)  # a second device, same table
        _dispatch._table(_dispatch.table_root(), SLUG, dev, strict=True)
    assert table["provenance"]["notes"] == ["t38"] and tdir == tables / SLUG / "triton-3.8"
    records = [r for r in caplog.records if r.name == "indexer_logits"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.WARNING
    msg = records[0].getMessage()
    assert "Triton 3.8.0" in msg and "Triton 3.9.0" in msg and str(tdir / "dispatch.json") in msg
    _dispatch.clear_cache()
    table, _ = _serve(tables, "3.5.1", monkeypatch)  # below every table: the nearest is the primary 3.6
    assert table["provenance"]["notes"] == ["primary"]


def test_tie_prefers_older_and_major_outweighs_minor(tables, monkeypatch):
    _write_table(tables / SLUG / "triton-3.6", "3.6.0", "t36")
    _write_table(tables / SLUG / "triton-3.8", "3.8.0", "t38")
    _write_table(tables / SLUG / "triton-4.0", "4.0.0", "t40")
    assert _serve(tables, "3.7.0", monkeypatch)[0]["provenance"]["notes"] == ["t36"]
    _dispatch.clear_cache()
    assert _serve(tables, "3.99.0", monkeypatch)[0]["provenance"]["notes"] == ["t38"]


def test_table_without_triton_version_still_loads(tables, monkeypatch, caplog):
    _write_table(tables / SLUG, None, "unversioned")
    with caplog.at_level(logging.WARNING, logger="indexer_logits"):
        table, tdir = _serve(tables, "3.9.0", monkeypatch)
    assert table["provenance"]["notes"] == ["unversioned"] and tdir == tables / SLUG
    assert not [r for r in caplog.records if r.name == "indexer_logits"]


def test_running_triton_is_the_imported_one():
    import triton
    assert _versions.running_triton() == triton.__version__


def _table_with(d: Path, triton_version: str, families: tuple[str, ...]) -> dict:
    """A table in `d` holding the committed H200 3.8 table's first entry of each family named."""
    src = json.loads((Path(_dispatch.TABLES_DIR) / "nvidia_h200" / "triton-3.8" / "dispatch.json").read_text())
    entries = [next(e for e in src["entries"] if e["problem"]["family"] == f) for f in families]
    return _write_table(d, triton_version, d.name, entries, {e["variant"]: src["modules"][e["variant"]] for e in entries})


def test_problem_missing_from_the_running_tritons_table_comes_from_the_nearest(tables, monkeypatch, caplog):
    """A table re-timed for the prefill families alone under 3.9 (`retime --family`) serves those;
    decode, which it lacks, comes from the 3.8 table (not the family defaults), logged once."""
    t39 = _table_with(tables / SLUG / "triton-3.9", "3.9.0", ("prefill_ragged",))
    t38 = _table_with(tables / SLUG / "triton-3.8", "3.8.0", ("prefill_ragged", "decode_paged"))
    _table_with(tables / SLUG, "3.6.0", ("prefill_ragged", "decode_paged"))
    monkeypatch.setattr(_versions, "running_triton", lambda: "3.9.0")
    served = []
    monkeypatch.setattr(_dispatch, "_from_entries", lambda table, tdir, *a: served.append(tdir) or tdir)
    dev = _dispatch._Device("cuda:0", SLUG, None, False)
    root = _dispatch.table_root()
    with caplog.at_level(logging.WARNING, logger="indexer_logits"):
        for table in (t39, t38):
            e = table["entries"][-1]
            for _ in range(2):
                _dispatch._tuned(root, dev, e["problem_key"], e["problem"], (1, 1), False, False)
        # a problem no table has is served by none, and logs nothing more
        assert _dispatch._tuned(root, dev, "no-such-problem", {}, (1, 1), False, False) is None
    assert served == [tables / SLUG / "triton-3.9"] * 2 + [tables / SLUG / "triton-3.8"] * 2
    records = [r.getMessage() for r in caplog.records if r.name == "indexer_logits"]
    assert len(records) == 1 and "Triton 3.8.0" in records[0] and "triton-3.8" in records[0], records
    assert _versions.table_dirs_in_order(tables / SLUG, "3.9.0") == [
        tables / SLUG / "triton-3.9", tables / SLUG / "triton-3.8", tables / SLUG]


def test_running_triton_is_the_package_that_imports_not_the_distribution(tmp_path):
    """Before anything imports triton, the version is the importable package's, not the installed
    distribution's metadata: a Triton put first on PYTHONPATH (no dist-info beside it) was taken
    for the host's, and the H200's 3.9 process picked the 3.6 table (2026-12-03)."""
    import os
    import subprocess
    import sys

    fake = tmp_path / "triton"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "9.7.0"\n')
    code = ("import sys; from indexer_logits import _versions; assert 'triton' not in sys.modules; "
            "print(_versions.running_triton())")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parents[1])]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "9.7.0"
