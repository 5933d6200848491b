"""Hardening against foreign or damaged artefacts: dispatch tables, generated modules, trial stores.

Faults are injected into private copies (tmp_path; INDEXER_LOGITS_TABLE_DIR points at them),
never into the committed indexer_logits/tables/. What must happen:
- load_table refuses every damaged or foreign table with a DispatchTableError naming the file
  and what is wrong;
- the runtime (INDEXER_LOGITS_BACKEND=auto) skips a refused table or module with one
  DispatchWarning naming the file and serves the call from the next rung of its ladder
  (nearest entry, family default, reference) with the right answer; a forced backend
  (tuned/default) raises instead of falling back;
- a trial store of another schema version, or a file that is not a trial store, is refused
  with a message naming it, by tuner.store.Store and by every command that opens one.
Complements tests/test_runtime.py (foreign slug in the cpu table, format 2, tampered module
bytes, compute capability through load_table) and tests/test_ship.py.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import cli
import indexer_logits as K
from indexer_logits import _dispatch
from tuner.inputs import make_decode_inputs
from indexer_logits._identity import variant_name
from tuner.reference import paged_mqa_logits_ref, relative_error
from tuner.store import SCHEMA_VERSION, Store

from conftest import INTERPRET
from test_runtime import CFG_LARGE, CFG_SMALL, FP8_N1, FP8_N2, build_store, emit_all

needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

SMALL_VARIANT = variant_name(FP8_N1, CFG_SMALL)  # the cpu table's entry at bucket (2, 256)
LARGE_VARIANT = variant_name(FP8_N1, CFG_LARGE)  # the cpu table's entry at bucket (64, 8192)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    base = tmp_path_factory.mktemp("hardening_tables")
    emit_all(build_store(base / "trials.sqlite"), base / "tables")
    return base / "tables"


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    """Every test here starts and ends with a clean runtime (conftest.clean_runtime)."""
    yield


@pytest.fixture
def tables(emitted, tmp_path, monkeypatch):
    """A private copy of the emitted tables (cpu/, nvidia_h200/, default/) to damage."""
    root = tmp_path / "tables"
    shutil.copytree(emitted, root)
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(root))
    return root


def edit_table(path: Path, change) -> None:
    table = json.loads(path.read_text())
    change(table)
    path.write_text(json.dumps(table, sort_keys=True, indent=1) + "\n")


def dispatch_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, K.DispatchWarning)]


def call_and_check(inputs) -> tuple[K.Selection, list[str]]:
    """Run the decode API on inputs (checking the answer); return what served it and the warnings."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = K.fp8_paged_mqa_logits(*inputs.args()[:5], None, inputs.max_context_len, True)
    ref = paged_mqa_logits_ref(*inputs.args())
    valid = inputs.valid_mask()
    assert relative_error(out, ref, valid) < 1e-3
    assert torch.equal(torch.isneginf(out), ~valid)
    return K.paged_selection(*inputs.args()), dispatch_warnings(record)


EXACT = make_decode_inputs(FP8_N1, 2, 256, seed=21)  # the cpu table's exact bucket


# ---------------------------------------------------------------------------------------------
# Damaged or foreign tables: refused on load, skipped by the ladder.


def _entry_variant(t):
    t["entries"][0]["variant"] = "decode_paged__gone__bt1__00000000"


def _entry_bucket(t):
    t["entries"][0]["bucket"]["batch"] = 0


def _entry_problem(t):
    t["entries"][0]["problem"]["next_n"] = 2  # its problem_key no longer matches


def _module_path(t):
    t["modules"][SMALL_VARIANT]["file"] = "../default/" + t["modules"][SMALL_VARIANT]["file"]


def _module_no_sha(t):
    del t["modules"][SMALL_VARIANT]["sha256"]


def _defaults_missing(t):
    t["defaults"] = {FP8_N1.key: "decode_paged__gone__bt1__00000000"}


def _defaults_wrong_key(t):
    t["defaults"] = {FP8_N2.key: SMALL_VARIANT}  # a module filed under another problem


def _no_entries(t):
    del t["entries"]


def _other_gpu(t):
    t["provenance"]["gpu_slug"] = "nvidia_b200"


def _format(value):
    def change(t):
        if value is None:
            del t["format"]
        else:
            t["format"] = value
    return change


TABLE_FAULTS = {  # name: (how to damage cpu/dispatch.json, what load_table says)
    "truncated": ("truncate", "not valid JSON"),
    "empty file": ("empty", "not valid JSON"),
    "a JSON list": ("list", "expected a JSON object"),
    "format 2 (newer)": (_format(2), "format: expected 1, got 2"),
    "format 0 (older)": (_format(0), "format: expected 1, got 0"),
    "no format": (_format(None), "format: expected 1, got None"),
    "format as a string": (_format("1"), "format: expected 1, got '1'"),
    "entries section missing": (_no_entries, "missing the 'entries' section"),
    "entry names a missing variant": (_entry_variant, r"entries\[0\]: variant 'decode_paged__gone__bt1__00000000' is not in modules"),
    "entry bucket batch 0": (_entry_bucket, r"entries\[0\]: expected bucket"),
    "entry problem edited": (_entry_problem, r"entries\[0\]: problem_key does not match its problem"),
    "module file outside its folder": (_module_path, "must be a plain module file name"),
    "module without sha256": (_module_no_sha, "expected file, sha256, problem and config"),
    "default names a missing variant": (_defaults_missing, "is not in modules"),
    "default under another problem": (_defaults_wrong_key, "key does not match module"),
    "made for another GPU": (_other_gpu, "made for GPU 'nvidia_b200'.*refusing a foreign table"),
}


def damage(path: Path, how) -> None:
    text = path.read_text()
    if how == "truncate":
        path.write_text(text[: len(text) // 2])
    elif how == "empty":
        path.write_text("")
    elif how == "list":
        path.write_text("[]\n")
    else:
        edit_table(path, how)


@needs_interpreter
@pytest.mark.parametrize("fault", list(TABLE_FAULTS))
def test_damaged_gpu_table_is_refused_and_the_ladder_goes_on(tables, fault, monkeypatch):
    how, message = TABLE_FAULTS[fault]
    path = tables / "cpu" / "dispatch.json"
    damage(path, how)
    with pytest.raises(K.DispatchTableError, match=message) as info:
        K.load_table(path, "cpu")
    assert str(path) in str(info.value)
    sel, messages = call_and_check(EXACT)
    assert sel.rung == "default" and sel.table == str(tables / "default" / "dispatch.json")
    assert len(messages) == 1 and str(path) in messages[0] and "next rung" in messages[0], messages
    # forced onto the tuned table, the refusal is an error naming the file
    K.clear_cache()
    monkeypatch.setenv(_dispatch.ENV_BACKEND, "tuned")
    with pytest.raises(K.DispatchTableError, match=str(path)):
        K.paged_selection(*EXACT.args())


@needs_interpreter
def test_damaged_default_table_falls_back_to_the_reference(tables, monkeypatch):
    """No tuned entry for the problem and a truncated default/ table: the reference serves, with
    one warning for the table and one for the reference; INDEXER_LOGITS_BACKEND=default raises."""
    path = tables / "default" / "dispatch.json"
    damage(path, "truncate")
    inputs = make_decode_inputs(FP8_N2, 2, 128, seed=22)  # the cpu table has no next_n=2 entry
    sel, messages = call_and_check(inputs)
    assert sel.rung == "reference"
    assert len(messages) == 2 and str(path) in messages[0] and "reference" in messages[1], messages
    K.clear_cache()
    monkeypatch.setenv(_dispatch.ENV_BACKEND, "default")
    with pytest.raises(K.DispatchTableError, match="not valid JSON"):
        K.paged_selection(*inputs.args())


@needs_interpreter
def test_missing_table_folder_runs_the_reference_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(tmp_path / "no_such_folder"))
    sel, messages = call_and_check(EXACT)
    assert sel.rung == "reference"
    assert len(messages) == 1 and "no kernel" in messages[0] and "no_such_folder" in messages[0]


# ---------------------------------------------------------------------------------------------
# Modules that do not match their table.


def _module(tables: Path, variant: str) -> Path:
    return tables / "cpu" / json.loads((tables / "cpu" / "dispatch.json").read_text())["modules"][variant]["file"]


def _set_sha(tables: Path, variant: str, sha: str) -> None:
    def change(t):
        t["modules"][variant]["sha256"] = sha
    edit_table(tables / "cpu" / "dispatch.json", change)


def _fault_table_sha(tables):
    _set_sha(tables, SMALL_VARIANT, "0" * 64)
    return "sha256"


def _fault_missing(tables):
    _module(tables, SMALL_VARIANT).unlink()
    return "missing"


def _fault_swapped(tables):
    """Another variant's module under this one's name, its hash updated in the table."""
    src, dst = _module(tables, LARGE_VARIANT), _module(tables, SMALL_VARIANT)
    shutil.copyfile(src, dst)
    _set_sha(tables, SMALL_VARIANT, _dispatch.file_sha256(dst))
    return "expected a generated module with VARIANT="


def _fault_import_error(tables):
    """A module that does not even import (here a syntax error; in the field: a Triton API the
    installed version lacks), its hash updated in the table."""
    path = _module(tables, SMALL_VARIANT)
    path.write_text(path.read_text() + "\ndef broken(:\n")
    _set_sha(tables, SMALL_VARIANT, _dispatch.file_sha256(path))
    return "failed to import"


MODULE_FAULTS = {"table sha256 edited": _fault_table_sha, "module deleted": _fault_missing,
                 "module swapped for another variant": _fault_swapped, "module fails to import": _fault_import_error}


@needs_interpreter
@pytest.mark.parametrize("fault", list(MODULE_FAULTS))
def test_module_not_matching_its_table_is_refused(tables, fault, monkeypatch):
    """The ladder skips the refused module (one warning naming it) and serves the call from the
    next candidate entry, the nearest bucket; a forced tuned backend raises."""
    expected = MODULE_FAULTS[fault](tables)
    path = _module(tables, SMALL_VARIANT)
    sel, messages = call_and_check(EXACT)
    assert (sel.rung, sel.variant) == ("nearest", LARGE_VARIANT), sel
    assert len(messages) == 1 and str(path) in messages[0] and expected in messages[0], messages
    K.clear_cache()
    monkeypatch.setenv(_dispatch.ENV_BACKEND, "tuned")
    with pytest.raises(K.DispatchTableError, match=expected):
        K.paged_selection(*EXACT.args())


# ---------------------------------------------------------------------------------------------
# A table made on another GPU or compute capability, met on a (simulated) GPU.


@pytest.fixture
def fake_gpu(monkeypatch):
    """Select as if on cuda:0 with a given name and capability (selection only: nothing runs)."""

    def use(slug: str, cc: str):
        dev = _dispatch._Device("cuda:0", slug, cc, False)
        monkeypatch.setattr(_dispatch, "_device_info", lambda device: dev)
        monkeypatch.setattr(_dispatch, "interpreting", lambda: False)
        K.clear_cache()
        return lambda: _dispatch.select(torch.device("cuda:0"), FP8_N1.to_dict(), (64, 8192))

    return use


def test_foreign_gpu_tables_are_refused_on_a_gpu(tables, fake_gpu, monkeypatch):
    select = fake_gpu("nvidia_h200", "9.0")
    sel = select()
    assert sel.rung == "exact" and sel.table.endswith(str(Path("nvidia_h200") / "dispatch.json"))

    select = fake_gpu("nvidia_h200", "12.0")  # same name, another compute capability (e.g. a renamed part)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        sel = select()
    messages = dispatch_warnings(record)
    assert sel.rung == "default" and sel.table.endswith(str(Path("default") / "dispatch.json"))
    assert len(messages) == 1 and "compute capability 9.0" in messages[0] and "foreign" in messages[0]

    shutil.copytree(tables / "nvidia_h200", tables / "nvidia_b200")  # an H200 table filed under a B200
    select = fake_gpu("nvidia_b200", "10.0")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        sel = select()
    messages = dispatch_warnings(record)
    assert sel.rung == "default"
    assert len(messages) == 1 and "made for GPU 'nvidia_h200'" in messages[0]

    monkeypatch.setenv(_dispatch.ENV_BACKEND, "tuned")
    select = fake_gpu("nvidia_h200", "12.0")
    with pytest.raises(K.DispatchTableError, match="compute capability 9.0"):
        select()


# ---------------------------------------------------------------------------------------------
# Shipping and verifying damaged tables.


def test_ship_refuses_damaged_tables(tables, tmp_path):
    damage(tables / "cpu" / "dispatch.json", "truncate")
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(tmp_path / "out"), "--root", str(tables), "--gpu", "cpu"])
    assert res.exit_code == 1 and "not valid JSON" in res.output and "cpu" in res.output, res.output
    assert not (tmp_path / "out").exists()
    shutil.rmtree(tables / "cpu")
    damage(tables / "default" / "dispatch.json", _format(2))
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(tmp_path / "out"), "--root", str(tables)])
    assert res.exit_code == 1 and "format: expected 1, got 2" in res.output, res.output


def test_verify_reports_a_damaged_table_without_crashing(tables):
    damage(tables / "cpu" / "dispatch.json", "truncate")
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(tables), "--gpu", "cpu", "--no-defaults"])
    assert res.exit_code == 1 and not isinstance(res.exception, Exception), res.output  # a verdict, not a crash
    assert "FAIL" in res.output and "not valid JSON" in res.output and "0 ok, 1 failed" in res.output


# ---------------------------------------------------------------------------------------------
# Trial stores of another schema version, and files that are not trial stores.


def _store_with_version(path: Path, version: str) -> Path:
    con = sqlite3.connect(path)
    con.execute("create table meta (key text primary key, value text)")
    con.execute("insert into meta values ('schema_version', ?)", (version,))
    con.execute("create table trials (trial_key text primary key, status text)")  # an older layout
    con.commit()
    con.close()
    return path


def _tables_in(path: Path) -> dict:
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("select name from sqlite_master where type = 'table'")]
        return {n: con.execute(f"select * from {n}").fetchall() for n in sorted(names)}
    finally:
        con.close()


@pytest.mark.parametrize("version", [str(SCHEMA_VERSION - 1), str(SCHEMA_VERSION + 1)])
def test_store_of_another_schema_version_is_refused_untouched(tmp_path, version):
    path = _store_with_version(tmp_path / "old.sqlite", version)
    before = _tables_in(path)
    with pytest.raises(ValueError, match=rf"^db: {path} has schema version {version}, this tool writes {SCHEMA_VERSION}"):
        Store(path)
    assert _tables_in(path) == before  # no table created, no row written


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("these are my notes, not a database\n" * 10)
    with pytest.raises(ValueError, match=rf"^db: {path} is not an SQLite trial store"):
        Store(path)
    assert path.read_text().startswith("these are my notes")


@pytest.mark.parametrize("kind", ["old schema", "not a database"])
@pytest.mark.parametrize("command", [
    ["emit", "--out", "{out}"],
    ["report", "--bench", "{bench}", "--out", "{out}/REPORT.md"],
    ["tune", "--interpret", "--heads", "16", "--head-dim", "32", "--page-size", "32", "--batch", "1",
     "--context", "64", "--trials", "1", "--quiet"],
], ids=["emit", "report", "tune"])
def test_commands_refuse_a_foreign_store_before_any_work(tmp_path, command, kind):
    db = tmp_path / "trials.sqlite"
    if kind == "old schema":
        _store_with_version(db, "0")
    else:
        db.write_bytes(b"\x00garbage" * 64)
    bench = tmp_path / "bench.jsonl"
    bench.write_text("")
    out = tmp_path / "out"
    args = [a.format(out=out, bench=bench) for a in command] + ["--db", str(db)]
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == 2, res.output
    assert "--db" in res.output and str(db) in res.output.replace("\n", "")
    assert ("schema version 0" if kind == "old schema" else "not an SQLite trial store") in res.output
    assert not out.exists(), "wrote output before refusing the store"
