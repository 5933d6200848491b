"""The runtime's ladder with a predicted table: tuned > predicted > family defaults, on a simulated
GPU (selection only: nothing runs), over a synthetic tables dir; and a board's second name served
through its same_as pointer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import indexer_logits as K
from indexer_logits import _dispatch
from indexer_logits._identity import Bucket, Config, Problem, variant_name
from tuner.tables import FORMAT, _module_info, emit_defaults, table_text
from tuner.render import emit as render_emit

SLUG, OTHER = "fake_gpu_workstation", "fake_gpu_server"
N1 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 1, "1d")
N2 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 2, "1d")
TUNED = Config(block_t=64, tiles_per_program=16, num_warps=4, num_stages=3, block_m=1, dot_dtype="native",
               orient="k_rows", store="run")
PREDICTED = Config(block_t=64, tiles_per_program=8, num_warps=4, num_stages=3, block_m=1, dot_dtype="native",
                   orient="k_rows")


def write_table(directory: Path, kind: str, rows, slugs=(SLUG,)) -> Path:
    """A table of `kind` with one entry per (problem, bucket, config), modules rendered beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    modules, entries = {}, []
    for problem, bucket, config in rows:
        variant = variant_name(problem, config)
        modules[variant] = _module_info(problem, config, render_emit(problem, config, directory))
        entries.append({"problem_key": problem.key, "problem": problem.to_dict(),
                        "bucket": {"batch": bucket.batch, "context": bucket.context}, "variant": variant})
    prov = {"kind": kind, "gpu_slug": slugs[0], "gpu_slugs": list(slugs), "compute_capability": "12.0",
            "triton_version": "3.6.0"}
    (directory / "dispatch.json").write_text(table_text({"format": FORMAT, "provenance": prov, "modules": modules,
                                                         "entries": entries, "defaults": {}}))
    return directory


@pytest.fixture(scope="module")
def defaults_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("predicted_ladder")
    emit_defaults(root)
    return root


@pytest.fixture
def root(defaults_root, tmp_path, monkeypatch, clean_runtime):
    import shutil

    root = tmp_path / "tables"
    shutil.copytree(defaults_root, root)
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(root))
    monkeypatch.setattr(_dispatch, "interpreting", lambda: False)
    return root


def on_gpu(monkeypatch, slug: str = SLUG, cc: str = "12.0"):
    dev = _dispatch._Device("cuda:0", slug, cc, False)
    monkeypatch.setattr(_dispatch, "_device_info", lambda device: dev)
    K.clear_cache()

    def select(problem: Problem, bucket=(64, 8192), backend=None):
        return _dispatch.select(torch.device("cuda:0"), problem.to_dict(), bucket, backend)

    return select


def test_tuned_wins_over_predicted_which_wins_over_defaults(root, monkeypatch):
    write_table(root / SLUG, "tuned", [(N1, Bucket(64, 8192), TUNED)])
    write_table(root / SLUG / "predicted", "predicted", [(N1, Bucket(64, 8192), PREDICTED),
                                                         (N2, Bucket(64, 8192), PREDICTED)])
    select = on_gpu(monkeypatch)
    tuned = select(N1)
    assert tuned.rung == "exact" and tuned.variant == variant_name(N1, TUNED)
    assert select(N1, (1, 4096)).rung == "nearest"  # a tuned entry of the problem still beats a predicted one
    predicted = select(N2)
    assert predicted.rung == "predicted" and predicted.variant == variant_name(N2, PREDICTED)
    assert predicted.table.endswith(str(Path(SLUG) / "predicted" / "dispatch.json"))
    assert select(N2, (2, 1048576)).entry_bucket == (64, 8192)  # the nearest predicted bucket
    n4 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 4, "1d")
    assert select(n4).rung == "default"
    assert select(N2, backend=_dispatch.Backend.PREDICTED).rung == "predicted"
    with pytest.raises(_dispatch.NoKernelError, match="predicted"):
        select(n4, backend=_dispatch.Backend.PREDICTED)


def test_predicted_alone_serves_and_defaults_follow(root, monkeypatch):
    write_table(root / SLUG / "predicted", "predicted", [(N1, Bucket(64, 8192), PREDICTED)])
    select = on_gpu(monkeypatch)
    assert select(N1).rung == "predicted"
    with pytest.raises(_dispatch.NoKernelError):
        select(N1, backend=_dispatch.Backend.TUNED)
    assert select(N1, backend=_dispatch.Backend.DEFAULT).rung == "default"


def test_second_edition_is_served_through_same_as(root, monkeypatch):
    write_table(root / SLUG / "predicted", "predicted", [(N1, Bucket(64, 8192), PREDICTED)], slugs=(SLUG, OTHER))
    (root / OTHER / "predicted").mkdir(parents=True)
    (root / OTHER / "predicted" / "same_as").write_text(SLUG + "\n")
    select = on_gpu(monkeypatch, OTHER)
    sel = select(N1)
    assert sel.rung == "predicted" and sel.table.endswith(str(Path(SLUG) / "predicted" / "dispatch.json"))


def test_a_tuned_table_in_predicted_and_a_foreign_one_are_refused(root, monkeypatch):
    write_table(root / SLUG / "predicted", "tuned", [(N1, Bucket(64, 8192), PREDICTED)])
    select = on_gpu(monkeypatch)
    with pytest.warns(_dispatch.DispatchWarning, match="expected 'predicted'"):
        assert select(N1).rung == "default"
    write_table(root / "elsewhere" / "predicted", "predicted", [(N1, Bucket(64, 8192), PREDICTED)], slugs=("elsewhere",))
    (root / OTHER / "predicted").mkdir(parents=True)
    (root / OTHER / "predicted" / "same_as").write_text("elsewhere\n")  # a table that does not list this slug
    select = on_gpu(monkeypatch, OTHER)
    with pytest.warns(_dispatch.DispatchWarning, match="foreign"):
        assert select(N1).rung == "default"
