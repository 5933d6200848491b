"""bench/pdl.py: the PDL variants it patches into a decode module (each a valid module with the
wait or the trigger where its name says), the table module's config read back from its header,
the command line before the GPU, and on a GPU a run whose safe variants score the q written just
before them."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import pdl
from bench._common import module_config
from indexer_logits._identity import Config, Problem
from tuner.render import render

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [Config(block_t=64, tiles_per_program=16, num_warps=4, num_stages=3, orient="k_rows", store="run"),
           Config(block_t=128, tiles_per_program=2, num_warps=4, num_stages=2, orient="k_rows"),
           Config(block_t=64, tiles_per_program=1, programs_per_sm=2)]
WAIT, TRIGGER = "tl_cuda.gdc_wait()", "tl_cuda.gdc_launch_dependents()"


def _lines(text, what):
    return [i for i, ln in enumerate(text.splitlines()) if what in ln]


@pytest.mark.parametrize("config", CONFIGS, ids=[c.slug for c in CONFIGS])
def test_variants_put_the_wait_and_trigger_where_they_say(config):
    text = render(Problem(), config)
    (wait,) = _lines(text, WAIT)
    (clean,) = [i for i, ln in enumerate(text.splitlines()) if ln == pdl.CLEAN_ANCHOR.strip("\n")]
    if config.programs_per_sm:  # a persistent grid loads q inside its loop: no split-grid q load to wait after
        assert not [i for i, ln in enumerate(text.splitlines()) if ln.startswith(pdl.Q_ANCHOR.strip("\n"))]
        with pytest.raises(ValueError, match="split-grid q load"):
            pdl.patched_source(text, "wait_after_lens")
    variants = {v: pdl.patched_source(text, v) for v in pdl.VARIANTS if v != "wait_after_lens" or not config.programs_per_sm}
    for v, src in variants.items():
        ast.parse(src)
    assert variants["shipped"] == variants["wait"] == text  # the template's own path, launched with pdl
    trig = variants["trigger"]
    assert _lines(trig, WAIT) == [wait] and _lines(trig, TRIGGER) == [wait + 1]  # right after the wait
    end = variants["trigger_end"]
    (t,) = _lines(end, TRIGGER)
    assert _lines(end, WAIT) == [wait] and t > wait and end.splitlines()[t + 1] == pdl.CLEAN_ANCHOR.strip("\n")
    nowait = variants["nowait"]
    assert not _lines(nowait, WAIT) and _lines(nowait, TRIGGER) == [wait]  # the negative control
    assert clean > wait
    if "wait_after_lens" in variants:
        lens = variants["wait_after_lens"]
        (w,) = _lines(lens, WAIT)
        assert w > wait and lens.splitlines()[w + 1].startswith(pdl.Q_ANCHOR.strip("\n"))
        assert not _lines(lens, TRIGGER) and lens.splitlines()[wait] == "        pass"


def test_a_module_without_the_anchors_is_refused():
    with pytest.raises(ValueError, match="PDL wait / CLEAN branch"):
        pdl.patched_source("def f():\n    pass\n", "trigger")
    text = render(Problem(), CONFIGS[0]).replace(pdl.Q_ANCHOR, "\n    q_rows_moved = 0")
    with pytest.raises(ValueError, match="split-grid q load"):
        pdl.patched_source(text, "wait_after_lens")


def test_module_config_reads_the_header_of_the_table_modules():
    table = json.loads((ROOT / "indexer_logits/tables/nvidia_h200/dispatch.json").read_text())
    for variant, info in list(table["modules"].items())[:5]:
        text = (ROOT / "indexer_logits/tables/nvidia_h200" / info["file"]).read_text()
        assert module_config(text) == Config.from_dict(info["config"]), variant
    with pytest.raises(ValueError, match="no '# config:' header"):
        module_config("import torch\n")


def _tool(*args):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.pdl", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def test_command_line():
    bad = _tool("--buckets", "8x8192:full,")
    assert bad.returncode == 2 and "--buckets" in bad.stderr
    if not torch.cuda.is_available():
        proc = _tool("--buckets", "8x8192:full")
        assert proc.returncode == 2 and "no CUDA device" in proc.stderr


@pytest.mark.gpu
def test_pdl_variants_on_one_bucket(tmp_path):
    """On a GPU (sm_90+): every variant but `nowait` scores the q written just before it, in both
    settings after a q writer; the rows go to --out."""
    from tuner.pdl_gate import pdl_capable

    if not pdl_capable("cuda"):
        pytest.skip("PDL needs sm_90+")
    out = tmp_path / "pdl.json"
    proc = _tool("--buckets", "8x8192:full", "--replays", "5", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    for v in ("shipped", "wait", "trigger", "trigger_end", "wait_after_lens"):
        assert row[f"{v}_after_bad_rows"] == 0 and row[f"{v}_after_pdl_bad_rows"] == 0, v
        assert row[f"{v}_alone_us"] > 0
