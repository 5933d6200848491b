"""DeepGEMM as a bench baseline (tuner/baselines.py, tuner/bench.py, tuner/report.py): on CPU,
the rows say why it is absent (no CUDA device, not installed, a crashing or failing import, an
unsupported problem, not asked for), a stand-in deep_gemm module takes the timed path (checked
against ours before timing; a wrong one is not timed), and the report renders ours / DeepGEMM
from synthetic rows or says why DeepGEMM did not run. On a GPU where deep_gemm imports, the
bench rows carry DeepGEMM's figures."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from indexer_logits._identity import Bucket, Problem
from tuner import baselines
from tuner.bench import BenchRow, append_rows, bench_bucket, read_rows
from tuner.envinfo import current
from tuner.reference import paged_mqa_logits_ref

SHA = "477618cd51baffca09c4b0b87e97c03fe827ef03"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    import tuner.bench
    import tuner.measure

    # small pools: the bench's default (larger than a GPU's L2) takes seconds to fill on a CPU
    monkeypatch.setattr(tuner.bench, "timing_inputs", lambda *a, **k: tuner.measure.timing_inputs(
        *a, **dict(k, min_pool_bytes=1 << 16, sets=2)))
    baselines._FOUND.clear()
    monkeypatch.delenv(baselines.ENV_DEEPGEMM, raising=False)
    yield
    baselines._FOUND.clear()


def _bench(p, methods, device="cpu"):
    return bench_bucket(p, Bucket(2, 128), "full", candidates=[], timer="wall_clock", device=device, copy_bw=1e11,
                        matmul_rate=1e11, env=current(), run_id="t", created_at="2026-01-01T00:00:00+00:00",
                        replays=3, dot_dtype="fp16", methods=methods)


def _fake_package(root, body: str, version_file: bool = True):
    pkg = root / "deep_gemm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    if version_file:
        (root / "VERSION").write_text(f"deep_gemm {SHA}\ncutlass f3fde58\n")
    return root


# -- why it is absent -----------------------------------------------------------------------------

def test_rows_say_why_deepgemm_is_absent_on_cpu(device):
    if device != "cpu":
        pytest.skip("the CPU path")
    rows = _bench(Problem(heads=16, head_dim=32), ("reference", "deepgemm"))
    assert [r.method for r in rows] == ["reference"]
    r = rows[0]
    assert r.deepgemm_us is None and r.ratio_to_deepgemm is None and r.deepgemm_version is None
    assert "cpu" in r.deepgemm_absent and "CUDA" in r.deepgemm_absent
    rows = _bench(Problem(heads=16, head_dim=32), ("reference",))
    assert rows[0].deepgemm_absent == "not asked for (--methods)"


def test_reasons_for_absence(monkeypatch):
    monkeypatch.setenv(baselines.ENV_DEEPGEMM, "0")
    assert baselines.deepgemm("cuda").reason == f"{baselines.ENV_DEEPGEMM}=0"
    monkeypatch.delenv(baselines.ENV_DEEPGEMM)
    baselines._FOUND.clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert baselines.deepgemm("cuda").reason == "no CUDA device"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(baselines.importlib.util, "find_spec", lambda name: None)
    assert "not installed" in baselines._find("cuda", probe=True).reason
    assert not baselines._find("cuda", probe=True)


def test_probe_reports_a_crashing_and_a_failing_import(tmp_path, monkeypatch):
    crash = _fake_package(tmp_path / "crash", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(crash))
    why = baselines.probe_import()
    assert why.startswith("import deep_gemm died of SIGSEGV") and "libstdc++" in why
    fail = _fake_package(tmp_path / "fail", "raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(fail))
    assert baselines.probe_import() == ("import deep_gemm failed: ImportError: libcudart.so.12: cannot open "
                                        "shared object file")
    # the whole lookup: the crash costs the column (with why), not the process
    monkeypatch.setenv("PYTHONPATH", str(crash))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.syspath_prepend(str(crash))
    assert "died of SIGSEGV" in baselines._find("cuda", probe=True).reason
    assert "deep_gemm" not in sys.modules


def test_found_module_and_its_version(tmp_path, monkeypatch):
    body = "__version__ = '2.3.0'\n" + "".join(f"def {n}(*a, **k): pass\n" for n in baselines.NEEDED)
    root = _fake_package(tmp_path / "ok", body)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delitem(sys.modules, "deep_gemm", raising=False)
    try:
        dg = baselines._find("cuda", probe=False)
        assert dg and dg.version == "2.3.0+477618c" and dg.reason is None
        (root / "VERSION").unlink()
        assert baselines.version_of(dg.module) == "2.3.0 (commit unknown)"
    finally:
        sys.modules.pop("deep_gemm", None)
    partial = _fake_package(tmp_path / "partial", "__version__ = '2.3.0'\ndef get_num_sms(): return 132\n")
    monkeypatch.syspath_prepend(str(partial))
    try:
        why = baselines._find("cuda", probe=False).reason
    finally:
        sys.modules.pop("deep_gemm", None)
    assert "lacks fp8_paged_mqa_logits, fp8_mqa_logits, get_paged_mqa_logits_metadata" in why


def test_unsupported_problems():
    assert baselines.unsupported(Problem()) is None
    assert baselines.unsupported(Problem(family="prefill_ragged", page_size=0)) is None
    assert baselines.unsupported(Problem(next_n=2)) is None
    assert "fp8 only" in baselines.unsupported(Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none"))
    assert "64-token pages" in baselines.unsupported(Problem(page_size=32))
    assert "next_n 1 or 2" in baselines.unsupported(Problem(next_n=4))
    assert "page-blocked" in baselines.unsupported(Problem(scale_layout="token_interleaved"))
    assert "chunked prefill" in baselines.unsupported(Problem(family="prefill_paged"))


def test_check_on_the_valid_region():
    a = torch.randn(3, 8)
    valid = torch.ones(3, 8, dtype=torch.bool)
    valid[:, 6:] = False
    b = a.clone()
    b[:, 6:] = float("-inf")  # outside the region: ignored
    assert baselines.check(a, b, valid) == pytest.approx(0.0, abs=1e-12)
    assert baselines.check(-a, b, valid) > 1.0
    with pytest.raises(ValueError, match="not finite"):
        baselines.check(b, a, torch.ones(3, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\[3, 7\]"):
        baselines.check(a[:, :7], a, valid)


# -- the timed path with a stand-in deep_gemm -------------------------------------------------------

def _stand_in(scale: float = 1.0):
    calls = []

    def paged(q, kv, w, lens, bt, meta, width, clean):
        calls.append(meta.shape)
        return paged_mqa_logits_ref(q, kv, w, lens, bt, width) * scale

    mod = SimpleNamespace(get_num_sms=lambda: 4, fp8_paged_mqa_logits=paged,
                          get_paged_mqa_logits_metadata=lambda lens, page, sms: torch.zeros(sms + 1, 2, dtype=torch.int32))
    return baselines.DeepGEMM(mod, "2.3.0+477618c"), calls


def test_bench_times_a_stand_in_deepgemm_and_records_it(device, monkeypatch):
    if device != "cpu":
        pytest.skip("the CPU path")
    dg, calls = _stand_in()
    monkeypatch.setattr(baselines, "deepgemm", lambda device="cuda", probe=True: dg)
    rows = _bench(Problem(heads=16, head_dim=32), ("deepgemm", "reference"))
    by = {r.method: r for r in rows}
    assert set(by) == {"deepgemm", "reference"}
    assert calls and calls[0] == (5, 2)  # the schedule from get_paged_mqa_logits_metadata(lens, 64, num_sms)
    d = by["deepgemm"]
    assert d.variant == "deep_gemm 2.3.0+477618c" and d.deepgemm_absent is None
    assert d.deepgemm_diff == pytest.approx(0.0, abs=1e-9)
    for r in rows:
        assert r.deepgemm_version == "2.3.0+477618c"
        assert r.deepgemm_us == pytest.approx(d.p50_ms * 1e3)
        assert r.ratio_to_deepgemm == pytest.approx(r.p50_ms / d.p50_ms)


def test_a_wrong_deepgemm_is_not_timed(device, monkeypatch):
    if device != "cpu":
        pytest.skip("the CPU path")
    dg, _ = _stand_in(scale=-1.0)
    monkeypatch.setattr(baselines, "deepgemm", lambda device="cuda", probe=True: dg)
    rows = _bench(Problem(heads=16, head_dim=32), ("deepgemm", "reference"))
    assert [r.method for r in rows] == ["reference"]
    assert "differ from ours" in rows[0].deepgemm_absent and rows[0].deepgemm_diff > 1
    rows = _bench(Problem(heads=16, head_dim=32, page_size=32), ("deepgemm", "reference"))
    assert "64-token pages" in rows[0].deepgemm_absent


# -- the report -------------------------------------------------------------------------------------

def _row(method, ms, batch, context, **kw):
    base = dict(run_id="r1", created_at="2026-01-02T00:00:00+00:00", gpu_slug="nvidia_h200", gpu_name="NVIDIA H200",
                family="decode_paged", problem_json=Problem().to_json(), bucket_batch=batch, bucket_context=context,
                lens="full", method=method, variant="v", timer="cuda_graph", p20_ms=ms, p50_ms=ms, p80_ms=ms,
                floor_ms=ms / 2, frac_of_floor=0.5, ratio_to_shipped=None, copy_bw=4e12, matmul_rate=None,
                torch_version="2.11", triton_version="3.6.0")
    base.update(kw)
    return BenchRow(**base)


def test_report_shows_ours_over_deepgemm(tmp_path):
    from tuner.report import write_report

    dg = dict(deepgemm_version="2.3.0+477618c", deepgemm_diff=2e-6)
    rows = [_row("shipped", 0.020, 64, 8192, deepgemm_us=25.0, **dg), _row("deepgemm", 0.025, 64, 8192, deepgemm_us=25.0, **dg),
            _row("torch_fullwidth", 0.900, 64, 8192, **dg),
            _row("shipped", 0.060, 64, 32768, deepgemm_us=50.0, **dg), _row("deepgemm", 0.050, 64, 32768, **dg),
            _row("shipped", 0.010, 1, 8192, deepgemm_absent="DeepGEMM failed at this bucket: RuntimeError: x")]
    path = tmp_path / "bench.jsonl"
    append_rows(path, rows)
    text = write_report([path], None, tmp_path / "REPORT.md", tmp_path / "plots").read_text()
    assert "## Against DeepGEMM" in text
    assert "| NVIDIA H200 | " in text and "| 20.0 us | 25.0 us | 0.80 | 2.3.0+477618c | 2.0e-06 | cuda_graph |" in text
    assert "| 60.0 us | 50.0 us | 1.20 |" in text
    assert "DeepGEMM: not run at " in text and "B=1 8192 full (DeepGEMM failed at this bucket: RuntimeError: x)" in text
    assert "ours / DeepGEMM |" in text.splitlines()[[i for i, ln in enumerate(text.splitlines())
                                                      if ln.startswith("| GPU | problem | bucket | lens | shipped")][0]]
    assert "| 45.0x | 0.80 |" in text  # the per-method table's fallback / shipped and ours / DeepGEMM cells
    assert (tmp_path / "plots" / "vs_deepgemm.png").stat().st_size > 1000
    assert "plots/vs_deepgemm.png" in text


def test_report_says_why_deepgemm_did_not_run(tmp_path):
    from tuner.report import write_report

    path = tmp_path / "bench.jsonl"
    append_rows(path, [_row("shipped", 0.02, 64, 8192, deepgemm_absent="deep_gemm is not installed (no module on sys.path)")])
    text = write_report([path], None, tmp_path / "REPORT.md", tmp_path / "plots").read_text()
    assert "DeepGEMM: not run (deep_gemm is not installed (no module on sys.path))." in text
    assert not (tmp_path / "plots" / "vs_deepgemm.png").exists()
    old = tmp_path / "old.jsonl"  # rows written before DeepGEMM was a baseline have no such fields
    d = _row("shipped", 0.02, 64, 8192).to_dict()
    for k in [k for k in d if k.startswith("deepgemm") or k == "ratio_to_deepgemm"]:
        del d[k]
    old.write_text(json.dumps(d) + "\n")
    assert len(read_rows(old)) == 1
    text = write_report([old], None, tmp_path / "R2.md", tmp_path / "plots2").read_text()
    assert "DeepGEMM: not run (these bench rows predate the DeepGEMM baseline)." in text


def test_bench_cli_lists_deepgemm_as_a_method():
    from click.testing import CliRunner

    import cli

    out = CliRunner().invoke(cli.main, ["bench", "--help"])
    assert out.exit_code == 0 and "deepgemm" in out.output


# -- on the GPU, where deep_gemm imports --------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("family,batch,context", [("decode_paged", 64, 8192), ("prefill_ragged", 1024, 8192)])
def test_gpu_rows_carry_deepgemm(family, batch, context):
    dg = baselines.deepgemm("cuda")
    if not dg:
        pytest.skip(f"DeepGEMM not available: {dg.reason}")
    rows = bench_bucket(Problem(family=family, page_size=64 if family == "decode_paged" else 0), Bucket(batch, context), "full" if family == "decode_paged" else "causal",
                        candidates=[], timer="cuda_graph", device="cuda", copy_bw=4e12, matmul_rate=1e15, env=current(),
                        run_id="t", created_at="2026-01-01T00:00:00+00:00", replays=10, methods=("shipped", "deepgemm"))
    by = {r.method: r for r in rows}
    assert set(by) == {"shipped", "deepgemm"}, rows[0].deepgemm_absent
    d, s = by["deepgemm"], by["shipped"]
    assert d.deepgemm_version == dg.version and "+" in dg.version and d.timer == "cuda_graph"
    assert d.deepgemm_diff < baselines.MAX_DIFF
    assert 0 < d.p50_ms and s.deepgemm_us == pytest.approx(d.p50_ms * 1e3)
    assert s.ratio_to_deepgemm == pytest.approx(s.p50_ms / d.p50_ms)
