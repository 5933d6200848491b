"""`verify --record` writes each entry's result into its table's `verified` field (and the pool
cases into `verified_pool`) and nothing else; the runtime, `ship` and `verify` itself ignore the
fields; `emit` keeps a record while its entry and module are unchanged and drops it otherwise."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import triton
from click.testing import CliRunner

import cli
import indexer_logits as K
from indexer_logits import _dispatch
from indexer_logits._identity import Config, variant_name
from tuner.inputs import make_decode_inputs
from tuner.ship import ship as ship_package
from tuner.store import Store
from tuner.tables import emit_defaults, emit_gpu
from tuner.verify import VerifyRow
from tuner.verify_bucket import BucketCheck
from tuner.verify_record import carry_records, record_rows

from test_runtime import CFG_SMALL, FP8_N1, make_row

interpreter_only = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                      reason="records a CPU run into the cpu table")
H200_CONFIG = Config(block_t=128, tiles_per_program=4)
FIELDS = ("verified", "verified_pool")


@pytest.fixture(scope="module")
def store_and_tables(tmp_path_factory):
    base = tmp_path_factory.mktemp("record")
    store = Store(base / "trials.sqlite")
    store.record(make_row("cpu", FP8_N1, (2, 256), CFG_SMALL, 0.01))
    store.record(make_row("nvidia_h200", FP8_N1, (64, 8192), H200_CONFIG, 0.04, gpu_name="NVIDIA H200", cc="9.0",
                          sms=132))
    root = base / "tables"
    emit_gpu(store, "cpu", root)
    emit_gpu(store, "nvidia_h200", root)
    emit_defaults(root)
    return store, root


@pytest.fixture
def tables(store_and_tables, tmp_path):
    root = tmp_path / "tables"
    shutil.copytree(store_and_tables[1], root)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def without_records(table: dict) -> dict:
    table = json.loads(json.dumps(table))
    for field in FIELDS:
        table.pop(field, None)
    for e in table["entries"]:
        e.pop("verified", None)
    return table


@pytest.fixture(scope="module")
def recorded(store_and_tables, tmp_path_factory):
    """A copy of the tables after `verify --record` under the interpreter, and the copy before."""
    root = tmp_path_factory.mktemp("recorded") / "tables"
    shutil.copytree(store_and_tables[1], root)
    before = snapshot(root)
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(root), "--no-defaults", "--record"])
    return root, before, res


@interpreter_only
def test_record_writes_the_cpu_tables_entries_and_nothing_else(recorded):
    root, before, res = recorded
    assert res.exit_code == 0, res.output
    assert "recorded in" in res.output and "1 entries, 1 pool cases" in res.output
    assert "not recorded in nvidia_h200/: that table is for nvidia_h200, this run is on cpu" in res.output
    after = snapshot(root)
    changed = sorted(k for k in before if before[k] != after[k])
    assert changed == [str(Path("cpu") / "dispatch.json")] and sorted(after) == sorted(before)  # no module touched
    old, new = (json.loads(x[str(Path("cpu") / "dispatch.json")]) for x in (before, after))
    assert without_records(new) == old  # sha256s, modules, entries: all as emitted
    record = new["entries"][0]["verified"]
    assert record["ok"] is True and record["calc_diff"] < 1e-3 and record["rel_err"] < 1e-3
    assert record["shape"] == "B=2 N=1 ctx=256" and record["rows_checked"] == [0, 1] and record["rows"] == 2
    assert record["mask"] == "exact, every row" and record["poisoned_table"] == "same bits"
    assert record["triton"] == triton.__version__ and record["device"] == "cpu (interpreter)"
    assert record["how"] == "interpreter, as shipped" and record["date"].endswith("Z") and "rel err" in record["gates"]
    pool = new["verified_pool"][variant_name(FP8_N1, CFG_SMALL)]
    assert pool["ok"] is True and "past" in pool["case"] and pool["calc_diff"] < 1e-3


@interpreter_only
def test_recorded_table_loads_dispatches_ships_and_verifies(recorded, tmp_path, clean_runtime, monkeypatch):
    root, _, _ = recorded
    table = _dispatch.load_table(root / "cpu" / "dispatch.json", "cpu")
    assert "verified" in table["entries"][0]
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(root))
    _dispatch.clear_cache()
    x = make_decode_inputs(FP8_N1, 2, 256, seed=1)
    sel = K.paged_selection(*x.args(), scale_layout=x.scale_layout)
    assert (sel.rung, sel.variant) == ("exact", variant_name(FP8_N1, CFG_SMALL))
    shipped = ship_package(tmp_path / "out", ["cpu"], root=root)
    copy = json.loads((shipped.package_dir / "tables" / "cpu" / "dispatch.json").read_text())
    assert copy["entries"][0]["verified"]["ok"] is True
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(tmp_path / "wheel"), "--root", str(root), "--gpu", "cpu",
                                        "--wheel"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(root), "--no-defaults", "--gpu", "cpu", "--no-pool"])
    assert res.exit_code == 0 and "1 checked, 1 ok" in res.output, res.output


def _row(slug, variant, table, what="entry", ok=True, full=None):
    entry = table["entries"][0]
    return VerifyRow(slug, what, "p", "b", variant, "GPU, as shipped", "B=2 ctx=256", ok, "detail",
                     entry["problem_key"], (entry["bucket"]["batch"], entry["bucket"]["context"]), full, "rel err 1e-7")


def test_a_skipped_check_keeps_the_old_record_and_a_failure_is_recorded(tables):
    path = tables / "cpu" / "dispatch.json"
    table = json.loads(path.read_text())
    variant = table["entries"][0]["variant"]
    table["entries"][0]["verified"] = {"ok": True, "calc_diff": 1e-9, "date": "old"}
    path.write_text(json.dumps(table, sort_keys=True, indent=1) + "\n")
    skipped = BucketCheck((2, 256), "B=2 N=1 ctx=256", 1 << 40, skipped="needs about 1024 GiB, 80 GiB free")
    env = {"device": "X", "triton": "3.6.0", "torch": "2"}
    notes = record_rows(tables, [_row("cpu", variant, table, full=skipped)], "cpu", env, 0, when="now")
    assert "1 not recorded: skipped" in notes[0]
    assert json.loads(path.read_text())["entries"][0]["verified"]["date"] == "old"
    failed = BucketCheck((2, 256), "B=2 N=1 ctx=256", 1, error="error: RuntimeError: boom")
    record_rows(tables, [_row("cpu", variant, table, ok=False, full=failed)], "cpu", env, 0, when="now")
    record = json.loads(path.read_text())["entries"][0]["verified"]
    assert record["ok"] is False and record["error"] == "error: RuntimeError: boom" and record["date"] == "now"
    _dispatch.load_table(path, "cpu")  # still a valid table


def test_emit_keeps_a_record_while_the_entry_is_unchanged(store_and_tables, tables):
    store, _ = store_and_tables
    path = tables / "nvidia_h200" / "dispatch.json"
    table = json.loads(path.read_text())
    variant = table["entries"][0]["variant"]
    table["entries"][0]["verified"] = {"ok": True, "calc_diff": 2e-9}
    table["verified_pool"] = {variant: {"ok": True}}
    text = json.dumps(table, sort_keys=True, indent=1, ensure_ascii=True) + "\n"
    path.write_text(text)
    result = emit_gpu(store, "nvidia_h200", tables)
    assert not result.changed and path.read_text() == text  # re-emitted byte for byte, records and all
    table["modules"][variant]["sha256"] = "0" * 64  # as if the module had been another one
    path.write_text(json.dumps(table, sort_keys=True, indent=1) + "\n")
    emit_gpu(store, "nvidia_h200", tables)
    fresh = json.loads(path.read_text())
    assert "verified" not in fresh["entries"][0] and "verified_pool" not in fresh


def test_carry_records_matches_problem_bucket_variant_and_bytes():
    entry = {"problem_key": "k", "bucket": {"batch": 1, "context": 8}, "variant": "v"}
    old = {"modules": {"v": {"sha256": "a"}}, "entries": [{**entry, "verified": {"ok": True}}]}
    same = {"modules": {"v": {"sha256": "a"}}, "entries": [dict(entry)]}
    assert carry_records(old, same) == 1 and same["entries"][0]["verified"] == {"ok": True}
    other_bucket = {"modules": {"v": {"sha256": "a"}}, "entries": [{**entry, "bucket": {"batch": 2, "context": 8}}]}
    assert carry_records(old, other_bucket) == 0 and "verified" not in other_bucket["entries"][0]
    assert carry_records(None, dict(same)) == 0
