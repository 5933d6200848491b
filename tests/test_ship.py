"""`ship` makes a folder that imports with only torch and triton; `verify` re-checks what a table
ships (under the interpreter here) and fails on a tampered module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
from indexer_logits import _dispatch
from indexer_logits._identity import Config, variant_name
from tuner.store import Store
from tuner.tables import emit_defaults, emit_gpu

from test_runtime import CFG_SMALL, FP8_N1, make_row

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """A cpu table with one fp16-dot entry, an H200 table with one native-dot entry, and defaults."""
    base = tmp_path_factory.mktemp("ship")
    store = Store(base / "trials.sqlite")
    store.record(make_row("cpu", FP8_N1, (2, 256), CFG_SMALL, 0.01))
    store.record(make_row("nvidia_h200", FP8_N1, (64, 8192), Config(block_t=128, tiles_per_program=4), 0.04,
                          gpu_name="NVIDIA H200", cc="9.0", sms=132))
    root = base / "tables"
    emit_gpu(store, "cpu", root)
    emit_gpu(store, "nvidia_h200", root)
    emit_defaults(root)
    return root


BLOCKED_IMPORT_CHECK = textwrap.dedent("""
    import importlib.abc, os, sys
    BLOCKED = {"jinja2", "optuna", "sqlite_utils", "tuner", "click"}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"blocked import of {name}")
            return None

    sys.meta_path.insert(0, Block())
    sys.path.insert(0, sys.argv[1])
    import torch
    import indexer_logits as IL
    from indexer_logits._reference import paged_mqa_logits_ref
    # the shipped copy, not this checkout's runtime of the same name
    assert os.path.realpath(IL.__file__).startswith(os.path.realpath(sys.argv[1])), IL.__file__

    torch.manual_seed(0)
    B, N, H, D, PAGE, W = 2, 1, 64, 128, 64, 256
    pages = 8
    k = torch.randn(pages, PAGE, D)
    scale = k.abs().amax(-1).clamp_min(1e-4) / 448
    k8 = (k / scale[..., None]).to(torch.float8_e4m3fn)
    buf = torch.empty(pages, PAGE * (D + 4), dtype=torch.uint8)
    buf[:, : PAGE * D] = k8.view(torch.uint8).reshape(pages, -1)
    buf[:, PAGE * D :] = scale.contiguous().view(torch.uint8).reshape(pages, -1)
    kv_cache = buf.view(pages, PAGE, 1, D + 4)
    q = (torch.randn(B, N, H, D) * 4).to(torch.float8_e4m3fn)
    weights = torch.randn(B * N, H) / H
    lens = torch.tensor([250, 7], dtype=torch.int32)
    table = torch.tensor([[5, 2, 7, 4], [0, 1, 3, 6]], dtype=torch.int32)
    meta = IL.get_paged_mqa_logits_metadata(lens, PAGE, 4)
    out = IL.fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, meta, W, True)
    ref = paged_mqa_logits_ref(q, kv_cache, weights, lens, table, W)
    valid = torch.isfinite(ref)
    err = float((out[valid] - ref[valid]).norm() / ref[valid].norm())
    assert torch.equal(torch.isneginf(out), ~valid)
    sel = IL.paged_selection(q, kv_cache, weights, lens, table, W)
    bad = [m for m in sys.modules if m.split(".")[0] in BLOCKED]
    print("RESULT", sel.rung, sel.variant, err, bad)
""")


def test_ship_is_self_contained(emitted, tmp_path):
    out = tmp_path / "shipped"
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(out), "--gpu", "cpu", "--root", str(emitted)])
    assert res.exit_code == 0, res.output
    pkg = out / "indexer_logits"
    assert (pkg / "tables" / "cpu" / "dispatch.json").is_file() and (pkg / "tables" / "default" / "dispatch.json").is_file()
    assert not (pkg / "tables" / "nvidia_h200").exists()
    runtime = sorted(p.name for p in _dispatch.PACKAGE_DIR.glob("*.py"))
    assert runtime == sorted(p.name for p in pkg.glob("*.py"))
    manifest = json.loads((pkg / "SHIPPED.json").read_text())
    assert manifest["gpus"] == ["cpu"] and manifest["files"]["tables/cpu/dispatch.json"] == _dispatch.file_sha256(
        pkg / "tables" / "cpu" / "dispatch.json")
    script = tmp_path / "use_shipped.py"
    script.write_text(BLOCKED_IMPORT_CHECK)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDEXER_LOGITS_")}
    env.update(TRITON_INTERPRET="1", PYTHONPATH="")
    proc = subprocess.run([sys.executable, "-W", "ignore", str(script), str(out)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    _, rung, variant, err, bad = line.split(" ", 4)
    assert rung == "exact" and variant == variant_name(FP8_N1, CFG_SMALL)  # the shipped cpu table's entry
    assert float(err) < 1e-3 and bad == "[]"
    # shipping again over a shipped folder replaces it; over a foreign folder refuses
    assert CliRunner().invoke(cli.main, ["ship", "--out", str(out), "--root", str(emitted)]).exit_code == 0
    assert (out / "indexer_logits" / "tables" / "nvidia_h200" / "dispatch.json").is_file()
    assert not (out / "indexer_logits" / "tables" / "nvidia_h200" / "topk.json").exists()
    (tmp_path / "other" / "indexer_logits").mkdir(parents=True)
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(tmp_path / "other"), "--root", str(emitted)])
    assert res.exit_code != 0 and "not made by `ship`" in res.output


def test_ship_refuses_a_tampered_module(emitted, tmp_path):
    import shutil

    root = tmp_path / "tables"
    shutil.copytree(emitted, root)
    module = root / "cpu" / f"{variant_name(FP8_N1, CFG_SMALL)}.py"
    module.write_text(module.read_text() + "# edited\n")
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(tmp_path / "o"), "--root", str(root)])
    assert res.exit_code != 0 and str(module) in res.output
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(tmp_path / "o"), "--root", str(root), "--gpu", "b200"])
    assert res.exit_code != 0 and "no table for ['b200']" in res.output


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="checks the interpreter path of verify")
def test_verify_under_the_interpreter(emitted, tmp_path):
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(emitted), "--no-defaults"])
    assert res.exit_code == 0, res.output
    assert "interpreter, as shipped" in res.output  # the cpu table's fp16-dot entry
    assert "interpreter, fp16 tl.dot stand-in for native" in res.output  # the H200 table's native entry
    assert "4 checked, 4 ok, 0 failed" in res.output  # two entries, each paged module once on the large pool
    assert "[3/4] nvidia_h200 entry" in res.output and "ETA" in res.output  # a progress line per entry (stderr)
    assert "at their bucket's own shape: 2 entries checked, 0 skipped; large pool: 2 modules checked" in res.output
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(emitted), "--no-defaults", "--family", "decode_paged",
                                        "--no-pool"])
    assert res.exit_code == 0 and "2 checked, 2 ok, 0 failed" in res.output, res.output
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(emitted), "--no-defaults", "--family", "prefill_paged"])
    assert res.exit_code == 1 and "no entries of family prefill_paged" in res.output, res.output

    import shutil

    root = tmp_path / "tables"
    shutil.copytree(emitted, root)
    module = root / "cpu" / f"{variant_name(FP8_N1, CFG_SMALL)}.py"
    module.write_text(module.read_text() + "# edited\n")
    res = CliRunner().invoke(cli.main, ["verify", "--root", str(root), "--gpu", "cpu", "--no-defaults"])
    assert res.exit_code == 1 and "sha256 differs" in res.output


def test_ship_carries_a_gpus_top_k_table_and_refuses_a_broken_one(emitted, tmp_path):
    import shutil

    root = tmp_path / "tables"
    shutil.copytree(emitted, root)
    topk = {"format": 1, "gpu_slug": "nvidia_h200", "k": 2048, "entries": [
        {"rows": 64, "width": 32768, "path": "rounds", "settings": {"BINS": 64}}]}
    (root / "nvidia_h200" / "topk.json").write_text(json.dumps(topk))
    out = tmp_path / "o"
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(out), "--root", str(root), "--gpu", "nvidia_h200"])
    assert res.exit_code == 0, res.output
    shipped = out / "indexer_logits" / "tables" / "nvidia_h200" / "topk.json"
    assert json.loads(shipped.read_text()) == topk
    assert "tables/nvidia_h200/topk.json" in json.loads((out / "indexer_logits" / "SHIPPED.json").read_text())["files"]
    topk["gpu_slug"] = "nvidia_b200"
    (root / "nvidia_h200" / "topk.json").write_text(json.dumps(topk))
    res = CliRunner().invoke(cli.main, ["ship", "--out", str(out), "--root", str(root), "--gpu", "nvidia_h200"])
    assert res.exit_code != 0 and "foreign" in res.output
