"""bench.template_ptx (no GPU): a committed module and the current template's render of its config
compile to the same PTX body (debug lines aside); a module whose code differs is found and fails the run."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import template_ptx as T

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "indexer_logits" / "tables" / "nvidia_h200"


def test_ptx_body_drops_the_debug_lines():
    ptx = ".version 8.7\n.visible .entry k(\n)\n{\n\t.loc 1 2 3\n\tmov.u32 %r1, 0;\n.file 1 \"x.py\"\n}\n// end"
    assert T.ptx_body(ptx) == ".entry k(\n)\n{\n\tmov.u32 %r1, 0;"


def _run(*args) -> subprocess.CompletedProcess:
    """The tool in a process of its own: it compiles, and the interpreter (these tests') and real
    compilation cannot share a process."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.template_ptx", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)


def _one_module_table(tmp_path: Path) -> tuple[Path, Path]:
    table = json.loads((H200 / "dispatch.json").read_text())
    variant = next(v for v, m in sorted(table["modules"].items())
                   if m["problem"]["family"] == "decode_paged" and m["config"].get("programs_per_sm", 0) == 0)
    record = table["modules"][variant]
    shutil.copy(H200 / record["file"], tmp_path / record["file"])
    (tmp_path / "dispatch.json").write_text(json.dumps({"modules": {variant: record}}))
    return tmp_path, tmp_path / record["file"]


@pytest.mark.slow
def test_a_committed_module_compiles_as_its_render_and_a_changed_one_does_not(tmp_path):
    table, module = _one_module_table(tmp_path)
    proc = _run("--table", str(table), "--jobs", "1", "--json", str(tmp_path / "same.json"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["same"] for r in json.loads((tmp_path / "same.json").read_text())["rows"]] == [True]
    text = module.read_text()
    assert 'float("-inf")' in text
    module.write_text(text.replace('float("-inf")', 'float("inf")'))  # another constant in the PTX
    proc = _run("--table", str(table), "--jobs", "1")
    assert proc.returncode == 1 and "DIFFERS" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_the_epilogue_on_compiles_without_a_spill(tmp_path):
    """--tile-max: the current render with the top-k's epilogue on (tiles of 8, the range merged)."""
    table, _ = _one_module_table(tmp_path)
    proc = _run("--table", str(table), "--jobs", "1", "--tile-max", "8", "--json", str(tmp_path / "on.json"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads((tmp_path / "on.json").read_text())["rows"]
    assert row["same"] and row["spills"] == 0 and min(row["registers"]) > 0
