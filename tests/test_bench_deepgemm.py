"""bench.deepgemm: the DeepGEMM tree that travels to the GPU host is the pinned commits' files,
laid out where DeepGEMM's setup.py reads them, with a VERSION file the bench rows take their
version from; and `build` refuses a missing tarball by name. (The build itself runs on the GPU
host only: `python3 -m bench.deepgemm build`.)"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from bench import deepgemm
from tuner import baselines


def _repo(path: Path, files: dict[str, str]) -> str:
    """A git repository with one commit holding `files`; its sha."""
    path.mkdir()
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    return subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_assemble_lays_out_the_pinned_trees(tmp_path):
    dg = _repo(tmp_path / "dg", {"setup.py": "# dg", "deep_gemm/__init__.py": "__version__ = '2.3.0'\n",
                                 "third-party/cutlass/.keep": ""})
    cutlass = _repo(tmp_path / "cutlass", {"include/cute/tensor.hpp": "cute", "include/cutlass/gemm.h": "g",
                                           "media/big.png": "not wanted"})
    fmt = _repo(tmp_path / "fmt", {"include/fmt/base.h": "fmt", "src/format.cc": "src", "test/t.cc": "no"})
    pins = {"deepgemm": (dg, deepgemm.PINS["deepgemm"][1]), "cutlass": (cutlass, deepgemm.PINS["cutlass"][1]),
            "fmt": (fmt, deepgemm.PINS["fmt"][1])}
    out = deepgemm.assemble({"deepgemm": tmp_path / "dg", "cutlass": tmp_path / "cutlass", "fmt": tmp_path / "fmt"},
                            tmp_path / "out" / "dg.tar.xz", pins=pins)
    with tarfile.open(out) as tar:
        files = {m.name for m in tar.getmembers() if m.isfile()}
        version = tar.extractfile("VERSION").read().decode()
    assert files == {"setup.py", "deep_gemm/__init__.py", "third-party/cutlass/include/cute/tensor.hpp",
                     "third-party/cutlass/include/cutlass/gemm.h", "third-party/fmt/include/fmt/base.h",
                     "third-party/fmt/src/format.cc", "VERSION"}
    assert version.splitlines() == [f"deep_gemm {dg}", f"cutlass {cutlass}", f"fmt {fmt}"]
    assert not list(out.parent.glob("*.partial"))

    # the bench rows' version comes from that file, next to the package
    root = tmp_path / "unpacked"
    with tarfile.open(out) as tar:
        tar.extractall(root, filter="data")
    module = type("M", (), {"__version__": "2.3.0", "__file__": str(root / "deep_gemm" / "__init__.py")})
    assert baselines.version_of(module) == f"2.3.0+{dg[:7]}"


def test_assemble_names_a_missing_commit(tmp_path):
    _repo(tmp_path / "dg", {"setup.py": ""})
    with pytest.raises(SystemExit, match="git archive 477618c"):
        deepgemm.assemble({name: tmp_path / "dg" for name in deepgemm.PINS}, tmp_path / "dg.tar.xz")
    assert not list(tmp_path.glob("dg.tar.xz*"))


def test_build_refuses_a_missing_tarball(tmp_path):
    with pytest.raises(SystemExit, match="--tar: .*not found"):
        deepgemm.build(tmp_path / "none.tar.xz", tmp_path / "into")
