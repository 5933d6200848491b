"""tuner.tables.PTX_EQUIVALENT_TEMPLATES (issue 30): a trial timed with an older template whose
compiled code equals the current one's still selects its config, with a note saying so; a trial
of any other older template does not."""

from __future__ import annotations

import json
from dataclasses import replace

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

