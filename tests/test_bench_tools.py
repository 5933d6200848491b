"""bench/ as a whole: every tool runs as `python -m bench.<tool>` from the repository root and
answers --help; none patches sys.path or imports a sibling as a top-level module; no file is named
after one GPU model; every tool has its tests/test_bench_<tool>.py."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
TOOLS = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_"))
GPU_MODEL = re.compile(r"(?i)(^|[_\-.])(h100|h200|h800|h20|a100|a800|a10|l40s?|l4|b100|b200|gb200|gb300|mi\d{3}x?|"
                       r"rtx\w*|x[248])([_\-.]|$)")


def test_the_tools():
    assert TOOLS == ["blind_tune", "ceilings", "checks", "chunked_prefill", "deepgemm", "eager", "eager_topk", "fastpath", "host", "model_fit",
                     "pdl", "predicted", "runs", "sweep", "table_configs", "template_ab", "template_ptx", "timeline", "topk",
                     "topk_xcompile", "triton_serve", "triton_versions", "workers", "xcompile_ir"]
    assert (BENCH / "__init__.py").is_file() and not (ROOT / "scripts").exists()


@pytest.mark.parametrize("tool", TOOLS)
def test_help(tool):
    proc = subprocess.run([sys.executable, "-W", "ignore", "-m", f"bench.{tool}", "--help"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"usage: python -m bench.{tool} "), proc.stdout[:200]


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_no_path_hacks_and_package_imports(path):
    text = path.read_text()
    assert "sys.path" not in text, path
    siblings = {p.stem for p in BENCH.glob("*.py")} - {"__init__"}
    bare = re.findall(r"^\s*(?:from|import) (\w+)", text, re.M)
    assert not set(bare) & siblings, f"{path.name} imports a sibling without the bench. package: {set(bare) & siblings}"


def test_no_gpu_model_in_a_file_name():
    names = [p.name for p in BENCH.rglob("*") if p.is_file()]
    assert names and not [n for n in names if GPU_MODEL.search(n)]
    assert GPU_MODEL.search("h200_x2_bench.sh") and GPU_MODEL.search("two_gpu_x2.sh")  # the check can tell


@pytest.mark.parametrize("tool", TOOLS)
def test_each_tool_has_its_test(tool):
    test = ROOT / "tests" / f"test_bench_{tool}.py"
    assert test.is_file(), test
    assert f"bench.{tool}" in test.read_text() or f"from bench import {tool}" in test.read_text()
