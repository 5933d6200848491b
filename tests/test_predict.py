"""cli.py predict on a small problem set (no GPU): a loadable predicted table whose entries were
cross-compiled within the target's limits, served by the runtime's predicted rung; the compile
cache; the refusals."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

import cli
from indexer_logits import _dispatch
from indexer_logits._identity import Problem
from tuner.devices import device
from tuner.space import TARGETS
from tuner.xcompile import MAX_SPILL_BYTES

ARGS = ["predict", "--gpu", "rtx_pro_6000", "--family", "decode_paged", "--dtype", "fp8", "--next-n", "1",
        "--lens-mode", "1d", "--batch", "8", "--context", "4096,32768", "--top", "1", "--jobs", "2"]


@pytest.fixture(scope="module")
def predicted(tmp_path_factory):
    base = tmp_path_factory.mktemp("predict")
    result = CliRunner().invoke(cli.main, ARGS + ["--out", str(base / "tables"), "--cache", str(base / "cache.jsonl")])
    assert result.exit_code == 0, result.output
    return base, result.output


def test_the_table_loads_and_every_entry_fits_the_target(predicted):
    base, output = predicted
    rtx = device("rtx_pro_6000")
    tdir = base / "tables" / rtx.slugs[0] / "predicted"
    table = _dispatch.load_table(tdir / "dispatch.json", rtx.slugs[0], "12.0")
    prov = table["provenance"]
    assert prov["kind"] == "predicted" and prov["cross_compiled_for"] == "sm_120" and prov["model_version"]
    assert prov["device"]["sm_count"] == 188 and prov["triton_version"] and set(prov["gpu_slugs"]) == set(rtx.slugs)
    assert [(e["bucket"]["batch"], e["bucket"]["context"]) for e in table["entries"]] == [(8, 4096), (8, 32768)]
    for e in table["entries"]:
        assert e["spills"] <= MAX_SPILL_BYTES and e["shared_bytes"] <= TARGETS["sm_120"].max_shared_bytes
        assert 0 < e["registers"] <= 255 and e["predicted_score_us"] > 0
        info = table["modules"][e["variant"]]
        module = _dispatch.load_kernel(tdir, e["variant"], info)
        assert module.VARIANT == e["variant"] and "sm_120" in info["fits_targets"]
    assert (base / "tables" / rtx.slugs[1] / "predicted" / "same_as").read_text().strip() == rtx.slugs[0]
    assert "2 entries" in output


def test_a_second_run_compiles_nothing_and_changes_no_byte(predicted):
    base, _ = predicted
    result = CliRunner().invoke(cli.main, ARGS + ["--out", str(base / "tables"), "--cache", str(base / "cache.jsonl")])
    assert result.exit_code == 0, result.output
    assert "0 cross-compiled" in result.output and "unchanged" in result.output


def test_the_runtime_serves_it_on_either_edition(predicted, monkeypatch, clean_runtime):
    base, _ = predicted
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(base / "tables"))
    monkeypatch.setattr(_dispatch, "interpreting", lambda: False)
    problem = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 1, "1d")
    for slug in device("rtx_pro_6000").slugs:
        monkeypatch.setattr(_dispatch, "_device_info", lambda d, s=slug: _dispatch._Device("cuda:0", s, "12.0", False))
        _dispatch.clear_cache()
        sel = _dispatch.select(torch.device("cuda:0"), problem.to_dict(), (8, 32768))
        assert sel.rung == "predicted" and sel.entry_bucket == (8, 32768)
    info = cli.serving_table("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", base / "tables")
    assert info[0] == "predicted"


@pytest.mark.parametrize("extra, message", [
    (["--gpu", "h300"], "Invalid value for '--gpu'"),
    (["--gpu", "h200", "--batch", "x"], "batch"),
    (["--gpu", "h200", "--family", "prefill_ragged", "--dtype", "fp8", "--next-n", "1", "--context", "3"], None),
])
def test_refusals(tmp_path, extra, message):
    result = CliRunner().invoke(cli.main, ["predict", *extra, "--out", str(tmp_path), "--cache",
                                           str(tmp_path / "c.jsonl")])
    if message is None:  # a filter that leaves no bucket: an empty table, said so
        assert result.exit_code == 0 and "0 entries" in result.output, result.output
    else:
        assert result.exit_code == 2 and message in result.output, result.output


def test_ship_takes_the_predicted_table_and_the_pointer(predicted, tmp_path):
    from tuner.ship import available_gpus, ship

    base, _ = predicted
    rtx = device("rtx_pro_6000")
    root = base / "tables"
    from tuner.tables import emit_defaults

    emit_defaults(root)
    assert set(rtx.slugs) <= set(available_gpus(root))
    result = ship(tmp_path / "out", [rtx.slugs[1]], root=root)  # the Server Edition: only a pointer of its own
    files = set(result.files)
    assert f"tables/{rtx.slugs[1]}/predicted/same_as" in files
    assert f"tables/{rtx.slugs[0]}/predicted/dispatch.json" in files
    table = json.loads((result.package_dir / "tables" / rtx.slugs[0] / "predicted" / "dispatch.json").read_text())
    assert all(f"tables/{rtx.slugs[0]}/predicted/{m['file']}" in files for m in table["modules"].values())


def test_if_stale_knows_a_table_that_would_not_change(predicted):
    import dataclasses

    from tuner.predicted_table import DEFAULT_SCOPE, same_inputs

    base, _ = predicted
    rtx = device("rtx_pro_6000")
    prov = json.loads((base / "tables" / rtx.slugs[0] / "predicted" / "dispatch.json").read_text())["provenance"]
    assert prov["scope"].startswith("--family decode_paged --dtype fp8") and not same_inputs(prov, rtx)
    full = {**prov, "scope": DEFAULT_SCOPE}
    assert same_inputs(full, rtx)
    assert not same_inputs(full, device("rtx_pro_6000", sm=170))
    assert not same_inputs({**full, "model_version": "0"}, rtx)
    assert not same_inputs(full, dataclasses.replace(rtx, latency_us=2.0))


def _fake_compile(points, device, cache, jobs, out, on_line):
    """tuner.predict._compile without a compiler: every point 'ok' with the model's estimated resources."""
    from tuner import predict as P, xcompile
    from tuner.model import estimate_resources

    for p, c in points:
        res = estimate_resources(p, c, device)
        cache.put(P.CompileCache.key(p, c, device),
                  xcompile.CompileResult(variant=c.slug, target=device.target, status="ok", registers=res.registers,
                                         spills=0, shared_bytes=res.shared_bytes, mma="wgmma", problem=p, config=c))


def test_the_default_stays_unless_predicted_clearly_faster(monkeypatch):
    """DEFAULT_MARGIN: a bucket whose best point is predicted within the margin of the family default keeps
    the default (the H100's ragged prefill: its three best points, 0.8-2.4% ahead by the model, ran behind
    it); a clear decode gain is taken."""
    from indexer_logits._identity import Bucket
    from tuner import predict as P
    from tuner.space import default_config

    monkeypatch.setattr(P, "_compile", _fake_compile)
    margin, h100 = P.DEFAULT_MARGIN, device("h100_sxm")
    ragged = Problem("prefill_ragged", "fp8", "fp8", 0, "page_blocked", 64, 128, 1, "1d")
    decode = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 1, "1d")
    for problem, bucket in ((ragged, Bucket(4096, 65536)), (decode, Bucket(1, 4096))):
        got = P.predict_problem(h100, problem, [bucket], P.CompileCache(None))
        best_t, best_c = got.ranked[(problem, bucket)][0]
        default = default_config(problem)
        t_default = dict((c, t) for t, c in got.ranked[(problem, bucket)])[default]
        assert best_c != default
        within = t_default <= best_t * (1 + P.DEFAULT_MARGIN)
        assert got.choices[0].config == (default if within else best_c)
        assert within == (problem is ragged)  # the margin decides the prefill bucket, not the decode one
        monkeypatch.setattr(P, "DEFAULT_MARGIN", 0.0)
        assert P.predict_problem(h100, problem, [bucket], P.CompileCache(None)).choices[0].config == best_c
        monkeypatch.setattr(P, "DEFAULT_MARGIN", margin)
