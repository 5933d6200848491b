"""Tables side by side per Triton version: which one the runtime serves, and its one log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from indexer_logits import _dispatch, _versions

SLUG = "fake_gpu"


def _write_table(d: Path, triton_version, tag: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    prov = {"gpu_slug": SLUG, "gpu_name": "Fake GPU", "kind": "tuned", "notes": [tag]}
    if triton_version is not None:
        prov["triton_version"] = triton_version
    table = {"format": _dispatch.FORMAT, "provenance": prov, "modules": {}, "entries": [], "defaults": {}}
    (d / "dispatch.json").write_text(json.dumps(table))
    return d


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
