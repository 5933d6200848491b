"""`cli.py retime` (tuner.retime) and the two tune paths it stands on: `tune --seeds-only` (time the
configs given and nothing else) and `emit --by-triton` (a store of one Triton into
<gpu>/triton-X.Y/). The GPU run itself is refused under the interpreter; its loop runs here through
tuner.retime.run(interpret=True) on a tiny problem."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from cli import main
from indexer_logits._identity import Bucket, Config, Problem
from indexer_logits._versions import running_triton
from tuner import retime as rt
from tuner import tables
from tuner.store import Store, trial_key

from test_runtime import make_row

PROBLEM = Problem(heads=16, head_dim=32, page_size=32)  # fp8 decode, next_n 1
KR = Config(block_t=32, tiles_per_program=2, num_stages=2, orient="k_rows", dot_dtype="fp16")


def _table(slug: str, entries, triton="3.5.0") -> dict:
    modules, rows = {}, []
    for problem, bucket, config in entries:
        name = f"v_{config.slug}"
        modules[name] = {"config": config.to_dict()}
        rows.append({"problem": problem.to_dict(), "bucket": {"batch": bucket[0], "context": bucket[1]}, "variant": name})
    return {"provenance": {"kind": "tuned", "gpu_slug": slug, "triton_version": triton}, "modules": modules,
            "entries": rows}


def _row(slug, problem, bucket, config, score, triton="3.6.0"):
    return replace(make_row(slug, problem, bucket, config, score), triton_version=triton)


def test_candidates_are_the_shipped_config_the_stores_best_and_their_twins(tmp_path):
    store = Store(tmp_path / "t.sqlite")
    others = [replace(KR, tiles_per_program=t) for t in (4, 8, 16)]
    q_rows = replace(KR, orient="q_rows")
    for config, score in ((others[0], 0.010), (others[1], 0.020), (others[2], 0.030), (q_rows, 0.015), (KR, 0.040)):
        store.record(_row("gpu_x", PROBLEM, (2, 256), config, score))
    store.record(_row("gpu_y", PROBLEM, (2, 256), replace(KR, num_warps=8), 0.001))  # another GPU's
    (item,) = rt.candidates(_table("gpu_x", [(PROBLEM, (2, 256), KR)]), store, top=3)
    chain = lambda c: replace(c, head_sum="chain")
    # shipped first, then by score (distinct), then the twins; q_rows has none (it sums across warps)
    assert item.configs == (KR, others[0], q_rows, chain(KR), chain(others[0]))
    (bare,) = rt.candidates(_table("gpu_x", [(PROBLEM, (2, 256), KR)]), None, top=3, twins=False)
    assert bare.configs == (KR,)
    lines = rt.plan_lines([item])
    assert lines[-1].startswith("total: 1 buckets, 5 timings") and "min" in lines[-1]


def test_plan_of_the_h200_table_runs_anywhere():
    result = CliRunner().invoke(main, ["retime", "--table", "nvidia_h200", "--plan"])
    assert result.exit_code == 0, result.output
    assert "prefill_ragged fp8: 2 buckets" in result.output and "total: 198 buckets" in result.output


def test_refuses_the_interpreter_and_tables_that_are_not_tuned(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = CliRunner().invoke(main, ["retime", "--table", "nvidia_h200", "--top", "1", "--family", "prefill_ragged"])
    assert result.exit_code == 2 and "the interpreter's times say nothing" in result.output
    result = CliRunner().invoke(main, ["retime", "--table", "default", "--plan"])
    assert result.exit_code == 2 and "is not a tuned table" in result.output


def test_refuses_the_tables_own_triton_and_a_store_of_another(tmp_path):
    running = running_triton()
    with pytest.raises(ValueError, match="re-tune it"):
        rt.check_versions(_table("gpu_x", [], triton=running), running, None, "gpu_x")
    store = Store(tmp_path / "t.sqlite")
    store.record(_row("gpu_x", PROBLEM, (2, 256), KR, 0.01, triton="3.1.0"))
    with pytest.raises(ValueError, match="needs a store of its own"):
        rt.check_versions(_table("gpu_x", []), running, store, "gpu_x")
    assert rt.default_db(tmp_path, "3.8.0") == tmp_path / "triton-3.8" / "trials.sqlite"


def test_emit_by_triton_writes_beside_the_primary_table_and_refuses_a_mixed_store(tmp_path):
    store = Store(tmp_path / "t.sqlite")
    store.record(_row("gpu_x", PROBLEM, (2, 256), KR, 0.01, triton="3.8.0"))
    result = tables.emit_gpu(store, "gpu_x", tmp_path / "out", by_triton=True)
    assert result.directory == tmp_path / "out" / "gpu_x" / "triton-3.8" and result.entries == 1
    table = json.loads((result.directory / "dispatch.json").read_text())
    assert table["provenance"]["triton_version"] == "3.8.0"
    assert not (tmp_path / "out" / "gpu_x" / "dispatch.json").exists()
    other = replace(_row("gpu_x", PROBLEM, (4, 256), KR, 0.01, triton="3.9.0"),
                    trial_key=trial_key("gpu_x", PROBLEM, Bucket(4, 256), KR, "t", "cuda_graph"))
    store.record(other)
    with pytest.raises(ValueError, match="a table per Triton needs a store of one"):
        tables.emit_gpu(store, "gpu_x", tmp_path / "out", by_triton=True)
    cli = CliRunner().invoke(main, ["emit", "--db", str(tmp_path / "t.sqlite"), "--gpu", "gpu_x", "--by-triton",
                                    "--out", str(tmp_path / "out2")])
    assert cli.exit_code == 2 and "--by-triton" in cli.output


def test_seeds_only_needs_seeds(tmp_path):
    result = CliRunner().invoke(main, ["tune", "--interpret", "--heads", "16", "--head-dim", "32", "--seeds-only",
                                       "--db", str(tmp_path / "t.sqlite")])
    assert result.exit_code == 2 and "--seeds-only" in result.output


def test_run_times_exactly_the_candidates_and_emits_the_version_table(tmp_path):
    """The loop end to end on CPU: each bucket's configs, and nothing else (no default, model or
    sampler trials), gated and timed, rows tagged with the running Triton, the table emitted into
    <slug>/triton-X.Y/ with each bucket's best of them."""
    table = _table("cpu", [(PROBLEM, (2, 128), KR), (PROBLEM, (1, 256), replace(KR, tiles_per_program=4))])
    items = rt.candidates(table, None, top=1)
    assert [len(i.configs) for i in items] == [2, 2]  # each shipped config and its chain twin
    db, lines = tmp_path / "triton" / "trials.sqlite", []
    result = rt.run(items, db, tmp_path / "out", interpret=True, replays=3, quiet=True, say=lines.append)
    rows = [r for r in Store(db).trials("1 = 1", [])]
    timed = {(r["bucket_batch"], r["bucket_context"], r["config_key"]) for r in rows}
    assert timed == {(i.bucket.batch, i.bucket.context, c.key) for i in items for c in i.configs}
    assert all(r["status"] == "ok" and r["triton_version"] == running_triton() for r in rows)
    assert lines[0].startswith("[1/1] decode_paged fp8: 2 buckets, 4 timings") and "min left" in lines[0]
    folder = tmp_path / "out" / "cpu" / f"triton-{'.'.join(running_triton().split('.')[:2])}"
    assert result.directory == folder and result.entries == 2
    emitted = json.loads((folder / "dispatch.json").read_text())
    for e in emitted["entries"]:
        best = min((r for r in rows if (r["bucket_batch"], r["bucket_context"]) == (e["bucket"]["batch"],
                                                                                     e["bucket"]["context"])),
                   key=lambda r: (r["score_ms"], r["trial_key"]))
        assert e["variant"] == best["variant"]
    # A second store in the same folder (another Triton's re-time, say) gets its own Optuna studies:
    # before, it shared optuna.sqlite there, found its seeds' studies full and timed nothing.
    other = tmp_path / "triton" / "other.sqlite"
    rt.run(items[:1], other, tmp_path / "out3", interpret=True, replays=3, quiet=True, say=lines.append)
    assert len(Store(other).trials("1 = 1", [])) == len(items[0].configs)
