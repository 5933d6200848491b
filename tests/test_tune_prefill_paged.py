"""The third family, chunked prefill over the paged cache (prefill_paged), through the product
loop on the CPU: `tune --interpret --family prefill_paged` on a tiny problem stores gated,
wall-clock-timed rows (one lengths fill: no partial p50); `emit` puts its winners in the CPU
table and the runtime selects them; `bench --interpret --family prefill_paged` times the
shipped function, the default, the autotune pick and the reference. Plus the option errors
and the default buckets.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import indexer_logits as K
from cli import main
from indexer_logits import _dispatch
from tuner.bench import read_rows
from tuner.buckets import parse_sizes
from tuner.families import family_of
from tuner.inputs import make_prefill_paged_inputs
from indexer_logits._identity import Bucket, Problem
from tuner.reference import paged_mqa_logits_chunked_ref, relative_error
from tuner.space import grid_points, is_feasible, tied

from conftest import INTERPRET

PROBLEM = Problem(family="prefill_paged", page_size=32, heads=16, head_dim=32)  # fp8, page-blocked
DOT = ("fp16",)  # the interpreter's dot dtype for fp8 (what the CPU runtime selects)
TINY = ["--family", "prefill_paged", "--heads", "16", "--head-dim", "32", "--page-size", "32"]
needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels in-process under the interpreter")


def _invoke(args, env=None):
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output + "".join(__import__("traceback").format_exception(*result.exc_info))
    return result


def _rows(db: Path, table: str = "trials") -> list[dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(f"select * from {table}")]
    finally:
        con.close()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One tiny tuning run: rows 8 and 16 against a 128-token table. (Every point of this
    problem's space is statically feasible, so every verdict comes from the gates and the timer;
    head_sum 'chain' on q_rows is no point of it: the space ties it to 'tree'.)"""
    assert all(is_feasible(PROBLEM, c) for c in grid_points(PROBLEM, DOT) if tied(PROBLEM, c) == c)
    base = tmp_path_factory.mktemp("prefill_paged_tune")
    db = base / "trials.sqlite"
    result = _invoke(["tune", "--interpret", *TINY, "--batch", "8,16", "--context", "128", "--trials", "2",
                      "--ask-batch", "2", "--replays", "10", "--quiet", "--db", str(db), "--model-seeds", "0"])
    return {"db": db, "output": result.output, "base": base}


def test_tune_stores_gated_wall_clock_rows(tuned):
    rows = _rows(tuned["db"])
    assert {r["family"] for r in rows} == {"prefill_paged"}
    assert {(r["bucket_batch"], r["bucket_context"]) for r in rows} == {(8, 128), (16, 128)}
    for batch in (8, 16):
        mine = [r for r in rows if r["bucket_batch"] == batch]
        assert {r["status"] for r in mine} == {"ok"} and len(mine) == 2
        assert any('"block_m":4' in r["config_json"] and r["source"] == "seed:default" for r in mine)
    for r in rows:
        assert r["gpu_slug"] == "cpu" and r["problem_key"] == PROBLEM.key and r["template_hash"]
        if r["status"] != "ok":
            assert r["p50_ms"] is None and r["reason"]
            continue
        assert r["timer"] == "wall_clock" and '"dot_dtype":"fp16"' in r["config_json"]
        assert 0 < r["p20_ms"] <= r["p50_ms"] <= r["p80_ms"]
        assert r["partial_p50_ms"] is None and r["score_ms"] == r["p50_ms"]  # one fill, as prefill_ragged
        assert r["rel_err"] is not None and r["rel_err"] < 1e-3
    gates = _rows(tuned["db"], "gates")
    assert gates and {g["status"] for g in gates} == {"ok"}  # reference, poison and graph gates passed
    assert "b8_c128" in tuned["output"] and "b16_c128" in tuned["output"]
    assert "fp8_pg32_h16_d32" in tuned["output"]


@needs_interpreter
def test_emit_then_the_runtime_selects_the_tuned_entry(tuned, monkeypatch):
    tables = tuned["base"] / "tables"
    _invoke(["emit", "--db", str(tuned["db"]), "--gpu", "cpu", "--out", str(tables)])
    import json

    table = json.loads((tables / "cpu" / "dispatch.json").read_text())
    entries = {(e["bucket"]["batch"], e["bucket"]["context"]): e for e in table["entries"]}
    assert set(entries) == {(8, 128), (16, 128)}
    best = min((r for r in _rows(tuned["db"]) if r["status"] == "ok" and r["bucket_batch"] == 8),
               key=lambda r: (r["score_ms"], r["trial_key"]))
    assert entries[(8, 128)]["variant"] == best["variant"]
    assert entries[(8, 128)]["problem"]["family"] == "prefill_paged"

    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(tables))
    monkeypatch.delenv(_dispatch.ENV_BACKEND, raising=False)
    K.clear_cache()
    try:
        x = make_prefill_paged_inputs(PROBLEM, 8, 128, chunk_lens=[3, 5], seed=7)
        sel = K.chunked_selection(*x.args())
        assert (sel.rung, sel.variant, sel.entry_bucket) == ("exact", best["variant"], (8, 128))
        out = K.fp8_paged_mqa_logits_chunked(*x.args())
        ref = paged_mqa_logits_chunked_ref(*x.args(), scale_layout=x.scale_layout)
        valid = x.valid_mask()
        assert relative_error(out, ref, valid) < 1e-3 and torch.equal(torch.isneginf(out), ~valid)
        y = make_prefill_paged_inputs(PROBLEM, 12, 200, seed=8)
        assert K.chunked_selection(*y.args()).rung == "nearest"
    finally:
        K.clear_cache()


@needs_interpreter
@pytest.mark.filterwarnings("ignore::indexer_logits.DispatchWarning")  # shipped may serve the reference
def test_bench_rows_for_every_method(tmp_path):
    out = tmp_path / "bench.jsonl"
    result = _invoke(["bench", "--interpret", *TINY, "--batch", "8", "--context", "128", "--candidates", "2",
                      "--replays", "3", "--methods", "shipped,default,autotune,reference", "--out", str(out)])
    rows = read_rows(out)
    assert {r["method"] for r in rows} == {"shipped", "default", "autotune", "reference"}  # no torch_fullwidth
    for r in rows:
        assert r["family"] == "prefill_paged" and r["lens"] == "full"
        assert (r["bucket_batch"], r["bucket_context"]) == (8, 128)
        assert r["p50_ms"] > 0 and r["floor_ms"] > 0 and r["ratio_to_shipped"] is not None
    assert "prefill_paged__fp8_pg32_h16_d32__" in next(r["variant"] for r in rows if r["method"] == "default")
    assert "fp8_pg32_h16_d32" in result.output


# ---------------------------------------------------------------------------------------------
# Options and buckets (no worker processes).


@pytest.mark.parametrize("command, args, option", [
    ("tune", ["--next-n", "2"], "--next-n"),
    ("tune", ["--lens-mode", "2d"], "--lens-mode"),
    ("tune", ["--page-size", "48"], "--page-size"),
    ("tune", ["--dtype", "bf16", "--scale-layout", "page_blocked"], "--scale-layout"),
    ("bench", ["--lens", "quarter"], "--lens"),
    ("bench", ["--page-size", "48"], "--page-size"),
])
def test_bad_options_name_the_option(command, args, option):
    result = CliRunner().invoke(main, [command, "--interpret", "--family", "prefill_paged", *args])
    assert result.exit_code == 2, result.output
    assert option in result.output


def test_default_buckets_and_rows_past_the_width():
    family = family_of("prefill_paged")
    rows, widths = family.default_batches, family.default_contexts
    assert rows == (4096,) and widths == (22528, 131072) == parse_sizes("22K,128K", "context")
    # More query rows than the table is wide: chunked prefill splits them over requests.
    assert family.buckets((4096,), (1024,)) == [Bucket(4096, 1024)]
    # ... which prefill over ragged K refuses (causal windows need as many keys as rows)
    with pytest.raises(ValueError, match="context: prefill keys must be >= query rows"):
        family_of("prefill_ragged").buckets((4096,), (1024,))
