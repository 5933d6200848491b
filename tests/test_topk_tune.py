"""The top-k selection's tuned settings on CPU: the table's validation and nearest entry
(indexer_logits._topk_table), select_rows serving a table entry and explicit settings, and the
tuner's loop (tuner/topk_tune.py: gate, best pick, trials file, table, rerun) under the
interpreter with a fake timer. The tuning itself on a GPU is tests/test_topk_gpu.py's."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import INTERPRET
import indexer_logits as K
from indexer_logits import _tables, _topk_select as S, _topk_table as T
from tuner import topk_tune

needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")


def _table(entries, slug="nvidia_h200"):
    return {"format": 1, "gpu_slug": slug, "gpu_name": "NVIDIA H200", "k": 2048, "entries": entries}


ROUNDS = {"rows": 64, "width": 32768, "path": "rounds", "settings": {"BINS": 32, "RANK_TILE": 32, "PDL": None}}
ROW = {"rows": 128, "width": 8192, "path": "row", "settings": {"CAP": 512, "NUM_WARPS": 16}}


@pytest.mark.parametrize("change, why", [
    (lambda t: t.update(format=2), "format"),
    (lambda t: t.update(gpu_slug="nvidia_b200"), "foreign"),
    (lambda t: t.update(entries={}), "entries"),
    (lambda t: t["entries"][0].update(rows=0), "rows"),
    (lambda t: t["entries"][0].update(width=True), "width"),
    (lambda t: t["entries"][0].update(path="fused"), "path"),
    (lambda t: t["entries"][0]["settings"].update(SAMPLE=2048), "not a setting"),
    (lambda t: t["entries"][0]["settings"].update(BINS=48), "BINS"),
    (lambda t: t["entries"][0]["settings"].update(SCAN_SLOTS=1), "SCAN_SLOTS"),   # 1 is not True
    (lambda t: t["entries"][0]["settings"].update(RANK_TILE=64), "RANK_TILE"),  # 219 registers: never tuned
    (lambda t: t["entries"].__setitem__(0, {"rows": 64, "width": 131072, "path": "bound", "settings": {
        "COUNT_LANES": True, "COUNT_STEP": 4096}}), "COUNT_LANES reads steps of at most 2048"),  # not at call time
], ids=["format", "foreign", "entries", "rows", "width", "path", "setting", "bins", "bool", "rank-tile", "lanes-step"])
def test_a_bad_table_is_refused_naming_the_field(change, why, tmp_path):
    table = _table([json.loads(json.dumps(ROUNDS))])
    change(table)
    with pytest.raises(_tables.DispatchTableError, match=why):
        T.validate(table, tmp_path / "topk.json", expect_slug="nvidia_h200")


def test_the_nearest_entry_that_suits_the_shape_serves():
    table = T.validate(_table([ROUNDS, ROW]), None)
    assert T.entry_for(table, 64, 32768, 132, 32768) is ROUNDS
    assert T.entry_for(table, 120, 8192, 132, 32768) is ROW        # nearest, and one wave of programs
    assert T.entry_for(table, 100, 16384, 132, 32768) is ROW
    assert T.entry_for(table, 128, 20000, 132, 32768) is ROUNDS     # nearer 64 x 32K
    assert T.entry_for(table, 128, 65536, 132, 32768) is ROUNDS     # too wide for the row path
    assert T.entry_for(table, 200, 8192, 132, 32768) is None        # a second wave, and 64 x 32K two octaves off
    assert T.entry_for(table, 204, 65536, 132, 32768) is None       # a prefill block: far from every entry
    assert T.entry_for(None, 64, 32768, 132, 32768) is None
    assert T.entry_for(T.validate(_table([ROW]), None), 512, 8192, 132, 32768) is None


def test_load_reads_the_gpus_table_once_and_refuses_a_broken_one(tmp_path, monkeypatch):
    monkeypatch.setenv(_tables.ENV_TABLE_DIR, str(tmp_path))
    T.clear()
    assert T.load("nvidia_h200") is None
    (tmp_path / "nvidia_h200").mkdir()
    (tmp_path / "nvidia_h200" / "topk.json").write_text(json.dumps(_table([ROUNDS])))
    assert T.load("nvidia_h200") is None  # cached: a table written later is read after clear()
    T.clear()
    assert T.load("nvidia_h200")["entries"] == [ROUNDS]
    (tmp_path / "nvidia_h200" / "topk.json").write_text("{")
    T.clear()
    with pytest.raises(_tables.DispatchTableError, match="topk.json: unreadable"):
        T.load("nvidia_h200")
    T.clear()


def test_a_shapes_entry_is_looked_up_once_until_the_tables_are_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv(_tables.ENV_TABLE_DIR, str(tmp_path))
    (tmp_path / "nvidia_h200").mkdir()
    (tmp_path / "nvidia_h200" / "topk.json").write_text(json.dumps(_table([ROUNDS])))
    T.clear()
    loads = []
    real = T.load
    monkeypatch.setattr(T, "load", lambda slug: loads.append(slug) or real(slug))
    assert T.serving_entry("nvidia_h200", 64, 32768, 132, 32768) == ROUNDS
    assert T.serving_entry("nvidia_h200", 64, 32768, 132, 32768) == ROUNDS
    assert T.serving_entry("nvidia_h200", 512, 8192, 132, 32768) is None
    assert loads == ["nvidia_h200", "nvidia_h200"]  # once per shape
    T.clear()
    assert T.serving_entry("nvidia_h200", 64, 32768, 132, 32768) == ROUNDS and len(loads) == 3
    T.clear()


def test_settings_a_path_does_not_read_are_refused():
    with pytest.raises(ValueError, match="SAMPLE"):
        S.path_settings("rounds", {"SAMPLE": 2048})
    assert S.path_settings("row", {"CAP": 1024})["CAP"] == 1024
    assert S.path_settings("rounds")["RANK_TILE"] == S.kernels().RANK_TILE


@needs_interpreter
def test_select_rows_serves_the_table_entry_with_its_settings(monkeypatch):
    """With PATH "auto" and no path given, a table entry picks the path and its settings; a given
    path (a bench's, a test's) or settings bypass the table."""
    from test_topk import assert_same_topk
    seen = []
    monkeypatch.setattr(S, "_tuned_entry", lambda rows, width, device, kind=None: seen.append((rows, width)) or
                        {"path": "rounds", "settings": {"BINS": 32, "RANK_TILE": 8, "BLOCK": 1024}})
    codes = []
    for name, code in list(S._PATH_CODE.items()):
        monkeypatch.setitem(S._PATH_CODE, name, lambda launch, s, *a, _c=code, _n=name: codes.append((_n, s)) or
                            _c(launch, s, *a))
    x = torch.randn(3, 5000)
    lo = torch.zeros(3, dtype=torch.int32)
    hi = torch.tensor([5000, 3000, 100], dtype=torch.int32)
    idx, val = torch.empty(3, 300, dtype=torch.int32), torch.empty(3, 300)
    assert S.select_rows(x, 300, S.WINDOW_RAGGED, idx, val, S.workspace(3, "cpu"), lo=lo, hi=hi) == "rounds"
    assert seen == [(3, 5000)] and codes[-1][0] == "rounds"
    assert (codes[-1][1]["BINS"], codes[-1][1]["RANK_TILE"], codes[-1][1]["BLOCK"]) == (32, 8, 1024)
    assert_same_topk(idx, val, x, 300, lo, hi)
    assert S.select_rows(x, 300, S.WINDOW_RAGGED, idx, val, S.workspace(3, "cpu"), lo=lo, hi=hi, path="row") == "row"
    assert seen == [(3, 5000)]  # not consulted


@needs_interpreter
def test_the_tuner_gates_picks_the_fastest_exact_and_keeps_every_trial(tmp_path, monkeypatch):
    monkeypatch.setattr(topk_tune, "space", lambda path, rows, width, sms, kind="decode": {
        "rounds": [dict(BINS=32, RANK_TILE=0), dict(BINS=64, RANK_TILE=32), dict(BINS=64, RANK_TILE=8)],
        "row": [dict(CAP=512, NUM_WARPS=4)]}.get(path, []))
    real = S.select_rows

    def broken_for_bins_64_tile_8(*a, settings=None, **kw):  # a setting whose answer is wrong: gated out
        out = real(*a, settings=settings, **kw)
        if settings == dict(BINS=64, RANK_TILE=8):
            a[3][:, 0] = a[3][:, 1]
        return out
    monkeypatch.setattr(S, "select_rows", broken_for_bins_64_tile_8)
    speed = {(None, None): 9.0, (32, 0): 5.0, (64, 32): 4.0, (64, 8): 1.0, (None, 512): 6.0}

    def timer(fn):  # the fake GPU: a prefill block's top-k by the setting it is served with, the logits 10
        seen = []
        real_serving = S._serving
        monkeypatch.setattr(S, "_serving", lambda *a: seen.append(S.SERVING) or real_serving(*a))
        fn()
        monkeypatch.setattr(S, "_serving", real_serving)
        if not seen:
            return 10.0  # the logits call alone
        s = seen[0][1] or {}
        return 10.0 + speed[(s.get("BINS"), s.get("RANK_TILE", s.get("CAP")))]
    lines, served = [], []
    real_topk = K.fp8_mqa_topk  # a prefill bucket's trials run the ragged prefill top-k, one block of rows
    monkeypatch.setattr(K, "fp8_mqa_topk", lambda *a, **kw: served.append(a[0].shape[0]) or real_topk(*a, **kw))
    table, trials = tmp_path / "cpu" / "topk.json", tmp_path / "trials.jsonl"
    entries = topk_tune.run([(2, 4096, "prefill")], 256, table, trials, device="cpu", timer=timer, log=lines.append)
    assert served and set(served) == {2}
    (entry,) = entries
    assert (entry["path"], entry["settings"], entry["us"], entry["default_us"]) == \
        ("rounds", dict(BINS=64, RANK_TILE=32), 4.0, 9.0)
    got = [json.loads(x) for x in trials.read_text().splitlines()]
    assert [t.get("exact") for t in got] == [True, True, False, True]
    assert "us" not in got[2]  # the wrong one is never timed
    assert json.loads(table.read_text())["entries"] == [entry] and "2x4096 prefill: rounds" in lines[-1]
    # a line as each path's settings are done: how many, how many exact, the path's best
    assert lines[0].startswith("  2x4096 prefill, rounds: 3 settings, 2 exact, best 4.0 us (")
    assert lines[1].startswith("  2x4096 prefill, row: 1 setting, 1 exact, best 6.0 us (")
    topk_tune.run([(2, 4096, "prefill")], 256, table, trials, device="cpu", timer=timer, log=lines.append)
    assert "in the table, kept" in lines[-1] and len(trials.read_text().splitlines()) == 4
    speed[(None, None)] = 4.05  # the best no longer beats the built-in choice by MARGIN: the built-in it is
    (entry,) = topk_tune.run([(2, 4096, "prefill")], 256, table, trials, fresh=True, device="cpu", timer=timer,
                             log=lines.append)
    assert (entry["path"], entry["settings"], entry["us"]) == ("rounds", {}, 4.05)
    assert S.path_settings(entry["path"], entry["settings"]) == S.path_settings("rounds")


@needs_interpreter
def test_a_decode_bucket_is_timed_as_the_decode_top_k_serves_it(tmp_path, monkeypatch):
    """A decode bucket: each setting timed through fp8_paged_mqa_topk served by it (S.SERVING, read at
    launch), less the logits call alone; its answer gated too; the entry says its kind, and serves
    decode calls only where an entry of the prefill kind is beside it."""
    monkeypatch.setattr(topk_tune, "space", lambda path, rows, width, sms, kind="decode": {
        "rounds": [dict(BINS=32), dict(BINS=64)], "bound": [dict(TILE=4)]}.get(path, []))
    speed = {None: 50.0, ("rounds", None): 60.0, ("rounds", 32): 59.0, ("rounds", 64): 58.0, ("bound", 4): 55.0}

    def timer(fn):  # the fake GPU: the decode call by the setting it is served with; the logits alone 50
        seen = []
        real = S._serving
        monkeypatch.setattr(S, "_serving", lambda *a: seen.append(S.SERVING) or real(*a))
        fn()
        monkeypatch.setattr(S, "_serving", real)
        if not seen:
            return speed[None]
        path, settings = seen[0]
        return speed[(path, (settings or {}).get("BINS", (settings or {}).get("TILE")))]
    table, trials = tmp_path / "cpu" / "topk.json", tmp_path / "trials.jsonl"
    (entry,) = topk_tune.run([(2, 4096, "decode")], 128, table, trials, device="cpu", timer=timer, log=lambda _: None)
    assert (entry["kind"], entry["path"], entry["settings"], entry["us"], entry["default_us"]) == \
        ("decode", "bound", dict(TILE=4), 5.0, 10.0)
    got = [json.loads(x) for x in trials.read_text().splitlines()]
    assert [(t["path"], t["exact"], t["us"]) for t in got] == [("rounds", True, 9.0), ("rounds", True, 8.0),
                                                              ("bound", True, 5.0)]
    prefill = dict(entry, kind="prefill", path="rounds", settings={})
    both = {"entries": [entry, prefill]}
    assert T.entry_for(both, 2, 4096, 4, S.ROW_MAX_WIDTH, "decode") is entry
    assert T.entry_for(both, 2, 4096, 4, S.ROW_MAX_WIDTH, "prefill") is prefill
    old = {"entries": [{k: v for k, v in entry.items() if k != "kind"}]}  # a table from before kinds: both
    assert T.entry_for(old, 2, 4096, 4, S.ROW_MAX_WIDTH, "prefill") is old["entries"][0]
    # --paths narrows the search: the bound path untried, the fastest round setting is the entry
    narrow = tmp_path / "narrow.jsonl"
    (entry,) = topk_tune.run([(2, 4096, "decode")], 128, table, narrow, fresh=True, device="cpu", timer=timer,
                             log=lambda _: None, paths="rounds")
    assert (entry["path"], entry["settings"], entry["us"]) == ("rounds", dict(BINS=64), 8.0)
    assert [t["path"] for t in map(json.loads, narrow.read_text().splitlines())] == ["rounds", "rounds"]


def test_buckets_parse_or_name_the_option():
    assert topk_tune.parse_buckets("64x32768, 1X1048576,256x65536:prefill") == (
        (64, 32768, "decode"), (1, 1048576, "decode"), (256, 65536, "prefill"))
    assert topk_tune.parse_buckets(None) == topk_tune.DEFAULT_BUCKETS
    for bad in ("64", "64x", "0x8", "ax8", "64x8:train"):
        with pytest.raises(ValueError, match="--buckets"):
            topk_tune.parse_buckets(bad)


def test_paths_parse_in_the_spaces_order_or_name_the_option():
    assert topk_tune.parse_paths("resident, bound") == ("bound", "resident")
    assert topk_tune.parse_paths(["rounds"]) == ("rounds",)
    for bad in ("", "bound,sort", " , "):
        with pytest.raises(ValueError, match="--paths"):
            topk_tune.parse_paths(bad)


def test_the_space_holds_what_the_h200_taught():
    rounds = topk_tune.space("rounds", 64, 32768, 132)
    assert rounds and all(s["RANK_TILE"] <= 32 and s["BINS"] <= 64 for s in rounds)
    assert topk_tune.space("row", 128, 8192, 132) and not topk_tune.space("row", 256, 8192, 132)
    # a step of 8,192 keys spills under Triton 3.8 and 3.9 (docs/perf_logs/topk_row_block_h200/)
    assert all(s["BLOCK"] <= 4096 for s in topk_tune.space("row", 128, 8192, 132))
    assert not topk_tune.space("row", 64, 131072, 132)
    tiles = topk_tune.space("tiles", 16, 1 << 20, 132)
    assert tiles and {s["TILE"] for s in tiles} == {0, 8, 16} and not topk_tune.space("tiles", 64, 32768, 132)
    assert topk_tune.space("tiles", 256, 65536, 132)  # a prefill block of 64K-key rows: tiles is tried there
    assert {s["FIT"] for s in tiles} == {True, False} and {s["OWN_PDL"] for s in tiles} == {True}
    # what the H100's exhaustive tunes never saw win left the space: a default tune tries 268 settings
    # (148, and the bound path's count by rows of 32 keys and its 128 bins at four settings each of its buckets,
    # its count claiming its slots at eight, by votes at eight, its compaction a program a group of the count's
    # at six: the model's and 8 over the plain count, the model's over the votes)
    assert sum(len(topk_tune.space(p, r, w, 132))
               for r, w, _ in topk_tune.DEFAULT_BUCKETS for p in topk_tune.PATHS) == 268
    # every bound setting names its count's votes, so that none is timed as the model would resolve it
    assert all(s["COUNT_VOTE"] in (False, True) for s in topk_tune.space("bound", 256, 1 << 16, 132))
    assert sum(s["COUNT_VOTE"] for s in topk_tune.space("bound", 256, 1 << 16, 132)) == 10
    assert sum(s["BINS"] == 128 and not s.get("COUNT_BALLOT") and not s["COUNT_VOTE"] and s["COMPACT_GROUP"] == 1
               for s in topk_tune.space("bound", 64, 32768, 132)) == 4
    # every bound setting names its compaction's group: 1, 8, or None (the model's) where it is the axis tried
    grouped = [s for s in topk_tune.space("bound", 1, 1 << 20, 132) if s["COMPACT_GROUP"] != 1]
    assert sorted(str(s["COMPACT_GROUP"]) for s in grouped) == ["8", "8", "None", "None", "None", "None"]
    assert [s["COUNT_VOTE"] for s in grouped if s["COMPACT_GROUP"] == 8] == [False, False]
    assert sum(s["COUNT_VOTE"] for s in grouped) == 2
    assert all(s["SEGMENTS"] and s["BLOCK"] == 512 for s in topk_tune.space("bound", 1, 1 << 20, 132))
    assert sum(s.get("COUNT_LANES", False) for s in topk_tune.space("bound", 64, 1 << 17, 132)) == 4
    prefill_bound = topk_tune.space("bound", 256, 1 << 16, 132)  # (the prefill bucket)
    assert sum(s.get("COUNT_LANES", False) for s in prefill_bound) == 4
    assert sum(s.get("COUNT_BALLOT", False) for s in topk_tune.space("bound", 1, 1 << 20, 132)) == 8
    bound = topk_tune.space("bound", 64, 32768, 132)
    assert bound and {s["TILE"] for s in bound} == {0, 4, 16} and {s["BINS"] for s in bound} == {32, 64, 128}
    assert not topk_tune.space("bound", 128, 8192, 132)  # fewer than 2k tiles of 4 a row
    for path, settings in (("tiles", tiles), ("bound", bound)):  # every setting the space names a table may hold
        for s in settings:
            T.validate({"format": 1, "gpu_slug": "x", "k": 2048, "entries": [
                {"rows": 16, "width": 1 << 20, "path": path, "settings": s}]}, "topk.json")


def test_a_workspace_too_small_for_the_bins_is_refused():
    """The four kernels index the workspace by their bins: one narrower than that is an error
    naming it, never a write past its end; workspace() holds the widest bins a table may name."""
    x = torch.randn(4, 1000)
    idx = torch.empty(4, 10, dtype=torch.int32)
    small = torch.zeros(4, 16 + 2 * 32, dtype=torch.int32)
    with pytest.raises(ValueError, match="ws:"):
        S.select_rows(x, 10, S.WINDOW_LIMIT, idx, None, small, lens=torch.full((4,), 1000, dtype=torch.int32),
                      path="rounds", settings={"BINS": 64})
    assert S.workspace(4, "cpu").shape[1] >= 16 + 2 * max(T.ALLOWED["rounds"]["BINS"])


def test_the_committed_h200_table_is_valid_and_reaches_the_issues_shapes():
    from pathlib import Path
    path = Path(T.__file__).parent / "tables" / "nvidia_h200" / T.FILE
    table = T.validate(json.loads(path.read_text()), path, expect_slug="nvidia_h200")
    for rows, width in ((64, 32768), (64, 131072), (1, 1 << 20), (128, 8192)):
        assert T.entry_for(table, rows, width, 132, S.ROW_MAX_WIDTH) is not None, (rows, width)
    assert T.entry_for(table, 204, 65536, 132, S.ROW_MAX_WIDTH) is None  # a prefill block: the built-in choice


def test_fresh_retunes_the_listed_buckets_and_keeps_the_others(tmp_path, monkeypatch):
    """--fresh retunes the buckets it is given; the table's other entries stay (a table tuned for
    another k keeps none, and the log says so)."""
    tuned = []

    def fake_tune(rows, width, k, device, sms, timer, on_trial, paths, kind, progress):
        tuned.append((rows, width))
        return {"rows": rows, "width": width, "path": "rounds", "settings": {}, "us": 1.0,
                "default_path": "rounds", "default_us": 1.0}

    monkeypatch.setattr(topk_tune, "tune_bucket", fake_tune)
    table, trials = tmp_path / "cpu" / "topk.json", tmp_path / "trials.jsonl"
    kw = dict(device="cpu", timer=None, log=lambda line: None)
    topk_tune.run([(2, 4096), (1, 65536)], 256, table, trials, **kw)
    topk_tune.run([(2, 4096)], 256, table, trials, fresh=True, **kw)
    assert tuned == [(2, 4096), (1, 65536), (2, 4096)]
    assert [(e["rows"], e["width"]) for e in json.loads(table.read_text())["entries"]] == [(1, 65536), (2, 4096)]
    lines = []
    topk_tune.run([(2, 4096)], 512, table, trials, device="cpu", timer=None, log=lines.append)
    assert "tuned for k=256, not 512: its 2 entries are replaced" in lines[0]
    assert [(e["rows"], e["width"]) for e in json.loads(table.read_text())["entries"]] == [(2, 4096)]
