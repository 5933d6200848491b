"""Programmatic dependent launch (PDL) of the decode kernels: `enable_pdl=` / INDEXER_LOGITS_PDL.

Off unless asked for; asked for, it needs an sm_90+ CUDA device and a module emitted with PDL
support, and says so by name otherwise. The kernel side (a `griddepcontrol.wait` before the first
read, only when PDL is on) is checked by a real cross-compile for sm_90; the GPU side (a graph in
which a kernel writes q right before each PDL launch) by tests/test_gpu_pdl.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import indexer_logits as K
from indexer_logits import _api, _dispatch
from indexer_logits._dispatch import Selection
from tuner.inputs import make_decode_inputs
from indexer_logits._identity import Config, Problem
from tuner.reference import paged_mqa_logits_ref
from tuner.render import emit, load_module

from conftest import INTERPRET

ROOT = Path(__file__).resolve().parent.parent
DECODE = Problem()  # fp8, H=64, D=128, page 64, page-blocked, next_n 1
X = make_decode_inputs(DECODE, 2, 192, lens=[70, 192], seed=11)


@pytest.fixture(autouse=True)
def clean_runtime(monkeypatch):
    for name in (_dispatch.ENV_BACKEND, _dispatch.ENV_TABLE_DIR, _api.ENV_CHECK_VALUES, _api.ENV_PDL):
        monkeypatch.delenv(name, raising=False)
    K.clear_cache()
    yield
    K.clear_cache()


def _call(**kw):
    return K.fp8_paged_mqa_logits(X.q, X.kv_cache, X.weights, X.context_lens, X.block_table, None, X.max_context_len,
                                  True, **kw)


@pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")
@pytest.mark.parametrize("how", ["default", "argument_off", "env_off"])
def test_pdl_off_runs_the_kernel(how, monkeypatch):
    if how == "env_off":
        monkeypatch.setenv(_api.ENV_PDL, "0")
    out = _call(**({"enable_pdl": False} if how == "argument_off" else {}))
    ref = paged_mqa_logits_ref(*X.args(), True, scale_layout=X.scale_layout)
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
    torch.testing.assert_close(out[~torch.isinf(ref)], ref[~torch.isinf(ref)], rtol=2e-3, atol=2e-3)


def test_pdl_on_a_cpu_tensor_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match=r"^enable_pdl=True: programmatic dependent launch needs a CUDA device of "
                                         r"compute capability 9\.0 or newer, got cpu"):
        _call(enable_pdl=True)
    monkeypatch.setenv(_api.ENV_PDL, "1")
    with pytest.raises(ValueError, match=r"^INDEXER_LOGITS_PDL=1: programmatic dependent launch needs"):
        _call()


@pytest.mark.parametrize("value, match", [("maybe", r"^INDEXER_LOGITS_PDL: expected one of"),
                                          ("auto", r"^INDEXER_LOGITS_PDL: expected one of")])
def test_pdl_env_value_is_checked(value, match, monkeypatch):
    monkeypatch.setenv(_api.ENV_PDL, value)
    with pytest.raises(ValueError, match=match):
        _call()


@pytest.mark.parametrize("value", [1, "yes", 1.0])
def test_pdl_argument_must_be_a_bool(value):
    with pytest.raises(ValueError, match=r"^enable_pdl: expected True, False or None, got"):
        _call(enable_pdl=value)


def _selection(supports: bool, rung: str = "exact") -> Selection:
    return Selection(rung, {}, (2, 192), None if rung == "reference" else "decode_x", "t/dispatch.json", None,
                     None, supports)


@pytest.mark.parametrize("cc, supports, rung, expect", [
    ("9.0", True, "exact", True),
    ("12.0", True, "default", True),
    ("9.0", True, "reference", False),  # nothing to launch early: the reference is torch ops
    ("8.9", True, "exact", "compute capability 9.0 or newer, got cuda:0 \\(sm_89\\)"),
    ("9.0", False, "exact", "predates PDL support; re-emit the table"),
])
def test_pdl_decision(cc, supports, rung, expect, monkeypatch):
    monkeypatch.setattr(_api, "device_compute_capability", lambda device: cc)
    cuda0 = torch.device("cuda", 0)
    assert _api._want_pdl(False, cuda0, _selection(supports, rung)) is False
    assert _api._want_pdl(None, cuda0, _selection(supports, rung)) is False  # off by default
    if isinstance(expect, bool):
        assert _api._want_pdl(True, cuda0, _selection(supports, rung)) is expect
    else:
        with pytest.raises(ValueError, match=expect):
            _api._want_pdl(True, cuda0, _selection(supports, rung))


def test_shipped_decode_modules_support_pdl():
    """Every decode module a committed table names takes pdl= (else enable_pdl=True would fail
    on it); prefill modules are not PDL launches."""
    root = Path(K._dispatch.TABLES_DIR)
    seen = 0
    for table_file in root.glob("*/dispatch.json"):
        table = _dispatch.load_table(table_file)
        for variant, info in table["modules"].items():
            text = (table_file.parent / info["file"]).read_text()
            is_decode = info["problem"]["family"] == "decode_paged"
            assert ("\nSUPPORTS_PDL = True\n" in text) == is_decode, (table_file, variant)
            if is_decode:
                assert "pdl=False" in text and "launch_pdl=bool(pdl)" in text, variant
                seen += 1
    assert seen > 0


@pytest.mark.skipif(not INTERPRET, reason="loads the module under the interpreter")
def test_module_launch_takes_pdl_and_the_selection_knows(tmp_path):
    module = load_module(emit(DECODE, Config(block_t=64, tiles_per_program=2, num_warps=4, num_stages=2,
                                             orient="k_rows", dot_dtype="fp16"), tmp_path))
    assert module.SUPPORTS_PDL is True and _dispatch._supports_pdl(module)
    out = torch.full((2, X.max_context_len), float("nan"))
    module.launch(X.q, X.kv_cache, X.weights, X.context_lens, X.block_table, out, X.max_context_len, True, pdl=False)
    assert not torch.isnan(out).any()
    sel = K.paged_selection(X.q, X.kv_cache, X.weights, X.context_lens, X.block_table, X.max_context_len)
    assert sel.supports_pdl and not sel.is_reference


XCOMPILE = textwrap.dedent("""
    import sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from indexer_logits._identity import Config, Problem
    from tuner.render import emit, load_module
    from tuner.signature import build_signature
    cfg = Config(block_t=64, tiles_per_program=8, num_warps=4, num_stages=3, orient="k_rows")
    for pdl in (False, True):
        with tempfile.TemporaryDirectory() as d:
            fn = load_module(emit(Problem(), cfg, d))._decode_paged_kernel
            sig, consts, attrs = build_signature(fn, Problem(), constexprs={"PDL": pdl}, config=cfg)
            k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
            ptx = k.asm["ptx"]
            body = ptx[ptx.index(".entry"):]
            wait = body.find("griddepcontrol.wait")
            first_load = min(i for i in (body.find("ld.global"), body.find("cp.async.bulk")) if i >= 0)
            print(f"PDL={pdl} wait={wait >= 0} wait_before_loads={0 <= wait < first_load}")
""")


def test_pdl_wait_is_compiled_in_before_any_load_only_when_asked():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # a real compile
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", XCOMPILE], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PDL=False wait=False wait_before_loads=False" in proc.stdout, proc.stdout
    assert "PDL=True wait=True wait_before_loads=True" in proc.stdout, proc.stdout


def test_pdl_gate_applies_only_to_pdl_modules_on_sm90_cuda(tmp_path):
    from types import SimpleNamespace

    from tuner.pdl_gate import pdl_capable, pdl_supported

    assert not pdl_capable("cpu")
    assert not pdl_supported(SimpleNamespace(SUPPORTS_PDL=True), "cpu")
    assert not pdl_supported(SimpleNamespace(), "cpu")
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9:
        assert pdl_supported(SimpleNamespace(SUPPORTS_PDL=True), "cuda")
        assert not pdl_supported(SimpleNamespace(), "cuda")  # a module emitted before the switch


@pytest.mark.skipif(not INTERPRET, reason="the plain launch under the interpreter (PDL launches need sm_90+)")
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.bfloat16])
def test_q_writer_copies_q_byte_for_byte(dtype):
    """tuner.pdl_gate.write_q: the predecessor of the PDL gate, the GPU test and bench/pdl.py."""
    from tuner.pdl_gate import write_q

    q = torch.zeros(3, 2, 64, 128).to(dtype)
    src = (torch.randn(3, 2, 64, 128) * 0.5).to(dtype)
    write_q(src, q, pdl=False)
    assert torch.equal(q.view(torch.uint8), src.view(torch.uint8))


def test_gates_launch_passes_pdl_only_when_asked_and_only_to_decode():
    """tuner.gates.launch: pdl=True reaches a decode module's launch(); without it, no pdl= at all
    (modules emitted before PDL support take none); a prefill module refuses it by name."""
    from types import SimpleNamespace

    from tuner.gates import launch
    from tuner.inputs import make_prefill_inputs

    seen = []
    module = SimpleNamespace(launch=lambda *args, **kw: seen.append(kw))
    launch(module, X, None, True)
    launch(module, X, None, True, pdl=True)
    assert seen == [{}, {"pdl": True}]
    p = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0, heads=16, head_dim=32), 4, 64, seed=1)
    with pytest.raises(ValueError, match="^pdl: only decode modules"):
        launch(module, p, None, True, pdl=True)
