"""tuner.tables.PTX_EQUIVALENT_TEMPLATES (issue 30): a trial timed with an older template whose
compiled code equals the current one's still selects its config, with a note saying so; a trial
of any other older template does not."""

from __future__ import annotations

import json
from dataclasses import replace

from indexer_logits import _dispatch
from indexer_logits._identity import Bucket, Config, Problem
from tuner import tables
from tuner.render import template_hash
from tuner.store import Store, trial_key

from test_runtime import make_row

PROBLEM = Problem()
CFG = Config(block_t=64, tiles_per_program=2, dot_dtype="fp16")
OLD, OTHER = "a" * 64, "b" * 64


def _row(config, score, th):
    row = make_row("gpu_x", PROBLEM, (2, 256), config, score)
    return replace(row, template_hash=th, trial_key=trial_key("gpu_x", PROBLEM, Bucket(2, 256), config, th, "cuda_graph"))


def test_equivalent_template_trials_carry_over(tmp_path, monkeypatch):
    current = template_hash(PROBLEM.family)
    monkeypatch.setitem(tables.PTX_EQUIVALENT_TEMPLATES, current, (OLD,))
    store = Store(tmp_path / "trials.sqlite")
    store.record(_row(CFG, 0.010, OLD))
    tables.emit_gpu(store, "gpu_x", tmp_path / "out")
    table = json.loads((tmp_path / "out" / "gpu_x" / "dispatch.json").read_text())
    assert [e["variant"] for e in table["entries"]] == [next(iter(table["modules"]))]
    assert table["modules"][table["entries"][0]["variant"]]["config"] == CFG.to_dict()
    assert any("1 winners were timed with template aaaaaaaaaaaa" in n for n in table["provenance"]["notes"])


def test_other_old_templates_do_not(tmp_path, monkeypatch):
    current = template_hash(PROBLEM.family)
    monkeypatch.setitem(tables.PTX_EQUIVALENT_TEMPLATES, current, (OLD,))
    store = Store(tmp_path / "trials.sqlite")
    store.record(_row(CFG, 0.010, OTHER))
    tables.emit_gpu(store, "gpu_x", tmp_path / "out")
    table = json.loads((tmp_path / "out" / "gpu_x" / "dispatch.json").read_text())
    assert table["entries"] == []
    assert any("skipped, every ok trial was timed with an older template" in n for n in table["provenance"]["notes"])



def test_verify_records_survive_a_template_hash_only_change(tmp_path, monkeypatch):
    """A re-emit whose modules differ from the old ones only in their header's template hash (the
    code verified on the GPU is the same) keeps the entries' `verify --record` fields."""
    from tuner.verify_record import code_digest

    store = Store(tmp_path / "trials.sqlite")
    store.record(_row(CFG, 0.010, template_hash(PROBLEM.family)))
    out = tmp_path / "out"
    tables.emit_gpu(store, "gpu_x", out)
    path = out / "gpu_x" / "dispatch.json"
    table = json.loads(path.read_text())
    table["entries"][0]["verified"] = {"ok": True}
    path.write_text(json.dumps(table))
    module = out / "gpu_x" / table["modules"][table["entries"][0]["variant"]]["file"]
    text = module.read_text()
    stale = text.replace(template_hash(PROBLEM.family), OLD)  # as rendered by the template before
    assert stale != text and code_digest(stale) == code_digest(text)
    module.write_text(stale)  # the module and table an emit under the older template left
    table["modules"][table["entries"][0]["variant"]]["sha256"] = _dispatch.file_sha256(module)
    path.write_text(json.dumps(table))
    tables.emit_gpu(store, "gpu_x", out)
    assert json.loads(path.read_text())["entries"][0]["verified"] == {"ok": True}
    other = stale.replace("tl.maximum(scores, 0.0)", "tl.maximum(scores, 0.5)")  # other code, as the table says
    assert other != stale
    module.write_text(other)
    table = json.loads(path.read_text())
    table["modules"][table["entries"][0]["variant"]]["sha256"] = _dispatch.file_sha256(module)
    path.write_text(json.dumps(table))
    tables.emit_gpu(store, "gpu_x", out)
    assert "verified" not in json.loads(path.read_text())["entries"][0]
