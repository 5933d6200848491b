"""The shipped runtime (indexer_logits): public API against the reference, the out= buffer,
the fallback ladder on a synthetic dispatch table, the backend switch, refusal of tampered
modules and foreign tables, argument errors, and byte-for-byte reproducible emission.

CPU tests run the kernels under TRITON_INTERPRET=1 (conftest), where the runtime picks the
fp16/fp32-dot variants; the tables here are emitted from a small Store built by hand.
"""

from __future__ import annotations

import json
import shutil
import unittest.mock
import warnings
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import indexer_logits as K
from indexer_logits import _checks, _dispatch
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from indexer_logits._identity import Bucket, Config, Problem, variant_name
from tuner.reference import mqa_logits_ref, paged_mqa_logits_ref, relative_error
from tuner.render import template_hash
from tuner.store import Store, TrialRow, trial_key
from tuner.tables import default_problems, emit_defaults, emit_gpu

from conftest import INTERPRET

REPO_GENERATED = Path(_dispatch.TABLES_DIR)
FP8_N1 = Problem()  # fp8, page 64, page_blocked, H=64, D=128, next_n=1, 1-D lens
FP8_N2 = Problem(next_n=2)
FP8_N3 = Problem(next_n=3)  # no default: 3 * 64 query rows is not a power of two
BF16_PREFILL = Problem(family="prefill_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=0, scale_layout="none")
# The synthetic CPU table: fp16-dot variants the interpreter computes exactly, told apart by config.
CFG_SMALL = Config(block_t=64, tiles_per_program=2, dot_dtype="fp16")  # bucket (2, 256)
CFG_LARGE = Config(block_t=128, tiles_per_program=2, dot_dtype="fp16")  # bucket (64, 8192)
CFG_SLOWER = Config(block_t=64, tiles_per_program=1, dot_dtype="fp16")  # bucket (2, 256), worse score
CFG_WRONG = Config(block_t=64, tiles_per_program=4, num_warps=8, dot_dtype="fp16")  # fastest, but wrong_answer
CFG_PREFILL = Config(block_t=64, tiles_per_program=2, block_m=2, dot_dtype="fp32")
SMALL, LARGE = (2, 256), (64, 8192)
needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")


# ---------------------------------------------------------------------------------------------
# A synthetic trial store and the tables emitted from it.


def make_row(slug: str, problem: Problem, bucket, config: Config, score: float, *, status: str = "ok",
             created_at: str = "2026-01-02T03:04:05+00:00", gpu_name: str = "no GPU", cc: str = "",
             sms: int = 0) -> TrialRow:
    th = template_hash(problem.family)
    return TrialRow(
        trial_key=trial_key(slug, problem, Bucket(*bucket), config, th, "cuda_graph"), run_id="run-synthetic",
        created_at=created_at, gpu_slug=slug, family=problem.family, problem_json=problem.to_json(),
        problem_key=problem.key, bucket_batch=bucket[0], bucket_context=bucket[1], config_json=config.to_json(),
        config_key=config.key, variant=variant_name(problem, config), status=status, timer="cuda_graph",
        p20_ms=score * 0.95, p50_ms=score, p80_ms=score * 1.1,
        partial_p50_ms=score / 3 if problem.is_decode else None,
        score_ms=score + (score / 3 if problem.is_decode else 0.0), floor_ms=score * 0.7, frac_of_floor=0.7,
        partial_frac_of_floor=0.5 if problem.is_decode else None, rel_err=1e-7, gpu_name=gpu_name,
        compute_capability=cc, sm_count=sms, driver="", cuda_version="", torch_version=torch.__version__,
        triton_version="3.6.0", template_hash=th, tool_version="0.1.0", source="test",
    )


def build_store(path: Path) -> Store:
    store = Store(path)
    rows = [
        make_row("cpu", FP8_N1, SMALL, CFG_SMALL, 0.010),
        make_row("cpu", FP8_N1, SMALL, CFG_SLOWER, 0.020, created_at="2026-01-02T05:00:00+00:00"),
        make_row("cpu", FP8_N1, SMALL, CFG_WRONG, 0.001, status="wrong_answer"),
        make_row("cpu", FP8_N1, LARGE, CFG_LARGE, 0.300),
        make_row("cpu", BF16_PREFILL, (8, 256), CFG_PREFILL, 0.050),
        make_row("nvidia_h200", FP8_N1, LARGE, Config(block_t=128, tiles_per_program=4), 0.040,
                 gpu_name="NVIDIA H200", cc="9.0", sms=132),
    ]
    for r in rows:
        store.record(r)
    return store


def emit_all(store: Store, root: Path) -> None:
    for slug in ("cpu", "nvidia_h200"):
        emit_gpu(store, slug, root)
    emit_defaults(root)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    base = tmp_path_factory.mktemp("synthetic")
    store = build_store(base / "trials.sqlite")
    root = base / "tables"
    emit_all(store, root)
    return {"db": base / "trials.sqlite", "root": root, "store": store}


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    """Every test here starts and ends with a clean runtime (conftest.clean_runtime)."""
    yield


@pytest.fixture
def tables(synthetic, monkeypatch):
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(synthetic["root"]))
    return synthetic["root"]


@pytest.fixture
def tables_copy(synthetic, tmp_path, monkeypatch):
    """A private copy of the synthetic tables, to tamper with."""
    root = tmp_path / "tables"
    shutil.copytree(synthetic["root"], root)
    monkeypatch.setenv(_dispatch.ENV_TABLE_DIR, str(root))
    return root


# ---------------------------------------------------------------------------------------------
# Helpers.


def decode_call(inputs, clean: bool = True, meta=None, **kw):
    fn = K.fp8_paged_mqa_logits if inputs.q.dtype == torch.float8_e4m3fn else K.bf16_paged_mqa_logits
    if meta is None:
        meta = K.get_paged_mqa_logits_metadata(inputs.context_lens, 64, 8)
    kw.setdefault("scale_layout", inputs.scale_layout)
    return fn(inputs.q, inputs.kv_cache, inputs.weights, inputs.context_lens, inputs.block_table, meta,
              inputs.max_context_len, clean, **kw)


def assert_matches_decode(out, inputs, clean: bool) -> None:
    ref = paged_mqa_logits_ref(*inputs.args(), scale_layout=inputs.scale_layout)
    valid = inputs.valid_mask()
    assert out.shape == ref.shape
    assert bool(torch.isfinite(out[valid]).all())
    err = relative_error(out, ref, valid)
    assert err < 1e-3, err
    if clean:
        assert torch.equal(torch.isneginf(out), ~valid)


def selection_of(inputs) -> K.Selection:
    return K.paged_selection(*inputs.args(), scale_layout=inputs.scale_layout)


def shape_only_inputs(problem: Problem, batch: int, context: int):
    """Tensors with the right shapes and dtypes for selection only (never launched)."""
    from tuner.inputs import DecodeInputs

    pages = -(-context // problem.page_size)
    q = torch.zeros(batch, problem.next_n, problem.heads, problem.head_dim).to(torch.float8_e4m3fn)
    kv = torch.zeros(1, problem.page_size, 1, problem.head_dim + 4, dtype=torch.uint8)
    return DecodeInputs(q, kv, torch.zeros(batch * problem.next_n, problem.heads),
                        torch.ones(batch, dtype=torch.int32), torch.zeros(batch, pages, dtype=torch.int32), context,
                        "page_blocked")


def dispatch_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, K.DispatchWarning)]


# ---------------------------------------------------------------------------------------------
# Identities (indexer_logits._identity, which the tuner imports too).


def test_problem_key_of_a_table_dict_is_the_problem_key():
    problems = default_problems() + [Problem(page_size=32, scale_layout="token_interleaved", heads=32, head_dim=64)]
    for p in problems:
        assert _dispatch.problem_key(p.to_dict()) == p.key
        assert _dispatch.problem_key({**p.to_dict(), "extra": 1}) == p.key  # only the Problem fields count
    with pytest.raises(ValueError, match="missing fields"):
        _dispatch.problem_key({"family": "decode_paged"})
    names = {"NVIDIA H200": "nvidia_h200", "NVIDIA GeForce RTX 5090": "nvidia_geforce_rtx_5090",
             "NVIDIA B200 (MIG 1g.23gb)": "nvidia_b200_mig_1g_23gb", "???": "unknown"}
    assert {n: _dispatch.slugify(n) for n in names} == names
    assert _dispatch.FORMAT == 1


def test_get_paged_mqa_logits_metadata_is_a_small_int32_tensor():
    meta = K.get_paged_mqa_logits_metadata(torch.ones(3, dtype=torch.int32), 64, 132)
    assert meta.dtype == torch.int32 and tuple(meta.shape) == (133, 2)
    with pytest.raises(ValueError, match="num_sms"):
        K.get_paged_mqa_logits_metadata(torch.ones(3, dtype=torch.int32), 64, 0)
    with pytest.raises(ValueError, match="context_lens"):
        K.get_paged_mqa_logits_metadata(torch.ones(3, dtype=torch.int64), 64, 4)


# ---------------------------------------------------------------------------------------------
# Public API against the reference, with the repo's shipped default/ table (H=64, D=128).

DECODE_CASES = [  # (dtype, next_n, lens_mode, clean, layout, page)
    ("fp8", 1, "1d", True, "page_blocked", 64),
    ("fp8", 2, "2d", False, "page_blocked", 64),
    ("fp8", 4, "1d", True, "page_blocked", 64),
    ("bf16", 1, "2d", True, "none", 64),
    ("bf16", 4, "2d", False, "none", 64),
    ("fp8", 1, "1d", True, "token_interleaved", 64),  # no default: reference, with a warning
    ("fp8", 2, "1d", True, "page_blocked", 32),  # the fp8 cache's page-32 default
    ("bf16", 2, "1d", True, "none", 32),  # no default (the bf16 cache has page 64 only): reference
]


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: "-".join(map(str, c)))
def test_paged_api_matches_reference(case):
    dtype, n, lens_mode, clean, layout, page = case
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, scale_layout=layout, page_size=page, next_n=n,
                      lens_mode=lens_mode)
    inputs = make_decode_inputs(problem, 2, 200 if n < 4 else 136, seed=n)
    expect_kernel = layout != "token_interleaved" and (page == 64 or (page, dtype) == (32, "fp8"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = decode_call(inputs, clean)
    assert_matches_decode(out, inputs, clean)
    sel = selection_of(inputs)
    if expect_kernel and INTERPRET:
        assert sel.rung == "default", sel
        assert K.load_table(REPO_GENERATED / "default" / "dispatch.json")["modules"][sel.variant]["config"][
            "dot_dtype"] == ("fp16" if dtype == "fp8" else "fp32")
        assert not dispatch_warnings(record)
    elif not expect_kernel:
        assert sel.rung == "reference"
        assert len(dispatch_warnings(record)) == 1


@pytest.mark.parametrize("dtype,clean", [("fp8", True), ("bf16", False), ("bf16", True)])
def test_ragged_api_matches_reference(dtype, clean):
    problem = Problem(family="prefill_ragged", q_dtype=dtype, cache_dtype=dtype, page_size=0,
                      scale_layout="page_blocked" if dtype == "fp8" else "none")
    inputs = make_prefill_inputs(problem, 6, 150, "random" if clean else "causal", seed=3)
    q, kv, w, ks, ke = inputs.args()
    if dtype == "fp8":
        out = K.fp8_mqa_logits(q, kv, w, ks, ke, clean)
    else:
        out = K.bf16_mqa_logits(q, kv[0] if clean else kv, w, ks, ke, clean)
    ref = mqa_logits_ref(*inputs.args())
    valid = inputs.valid_mask()
    assert relative_error(out, ref, valid) < 1e-3
    if clean:
        assert torch.equal(torch.isneginf(out), ~valid)
    if INTERPRET:
        assert K.ragged_selection(*inputs.args()).rung == "default"


@needs_interpreter
def test_out_buffer_is_used_without_allocation():
    inputs = make_decode_inputs(FP8_N2, 2, 130, seed=5)
    buf = torch.full((4, 130 + 7), float("nan"))
    meta = K.get_paged_mqa_logits_metadata(inputs.context_lens, 64, 8)
    decode_call(inputs, True, meta, out=buf)  # first call: selection and module load may allocate
    buf.fill_(float("nan"))

    def no_alloc(*a, **k):
        raise AssertionError("allocated an output inside the call despite out=")

    with unittest.mock.patch.multiple(torch, empty=no_alloc, zeros=no_alloc, full=no_alloc, empty_like=no_alloc):
        out = decode_call(inputs, True, meta, out=buf, check_values=False)
    assert out.data_ptr() == buf.data_ptr() and out.shape == (4, 130)
    assert bool(torch.isnan(buf[:, 130:]).all()), "wrote past max_context_len"
    assert_matches_decode(out, inputs, True)
    # prefill too
    pre = make_prefill_inputs(BF16_PREFILL, 4, 100, seed=1)
    pbuf = torch.full((4, 104), float("nan"))
    res = K.bf16_mqa_logits(*pre.args(), out=pbuf)
    assert res.data_ptr() == pbuf.data_ptr() and bool(torch.isnan(pbuf[:, 100:]).all())
    assert relative_error(res, mqa_logits_ref(*pre.args()), pre.valid_mask()) < 1e-3


# ---------------------------------------------------------------------------------------------
# The ladder, on the synthetic table (slug "cpu": CPU tensors under the interpreter).



@needs_interpreter
def test_emit_picks_the_best_ok_trial(synthetic):
    table = K.load_table(synthetic["root"] / "cpu" / "dispatch.json", "cpu")
    by_bucket = {(e["bucket"]["batch"], e["bucket"]["context"], e["problem"]["family"]): e for e in table["entries"]}
    assert by_bucket[(2, 256, "decode_paged")]["variant"] == variant_name(FP8_N1, CFG_SMALL)
    assert by_bucket[(64, 8192, "decode_paged")]["variant"] == variant_name(FP8_N1, CFG_LARGE)
    assert by_bucket[(8, 256, "prefill_ragged")]["variant"] == variant_name(BF16_PREFILL, CFG_PREFILL)
    assert len(table["entries"]) == 3 and len(table["modules"]) == 3


@needs_interpreter
def test_ladder_exact_nearest_default_reference(tables):
    exact = make_decode_inputs(FP8_N1, 2, 256, seed=1)
    sel = selection_of(exact)
    assert (sel.rung, sel.variant, sel.entry_bucket) == ("exact", variant_name(FP8_N1, CFG_SMALL), SMALL)
    assert_matches_decode(decode_call(exact), exact, True)

    near = make_decode_inputs(FP8_N1, 2, 190, seed=2)
    sel = selection_of(near)
    assert (sel.rung, sel.variant, sel.entry_bucket) == ("nearest", variant_name(FP8_N1, CFG_SMALL), SMALL)
    assert_matches_decode(decode_call(near), near, True)

    far = shape_only_inputs(FP8_N1, 40, 6000)  # nearer (64, 8192) than (2, 256) in log distance
    sel = selection_of(far)
    assert (sel.rung, sel.variant, sel.entry_bucket) == ("nearest", variant_name(FP8_N1, CFG_LARGE), LARGE)

    untuned = make_decode_inputs(FP8_N2, 2, 128, seed=3)
    sel = selection_of(untuned)
    assert sel.rung == "default" and sel.table.endswith(str(Path("default") / "dispatch.json"))
    assert_matches_decode(decode_call(untuned), untuned, True)

    none = make_decode_inputs(FP8_N3, 2, 128, seed=4)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = decode_call(none)
        decode_call(none)
    assert selection_of(none).rung == "reference"
    messages = dispatch_warnings(record)
    assert len(messages) == 1 and "reference" in messages[0] and "next_n=3" in messages[0]
    assert_matches_decode(first, none, True)


@needs_interpreter
def test_selection_is_cached_no_file_io_after_first_call(tables):
    inputs = make_decode_inputs(FP8_N1, 2, 256, seed=1)
    decode_call(inputs)
    with unittest.mock.patch.object(Path, "read_bytes", side_effect=AssertionError("file I/O")), \
            unittest.mock.patch.object(Path, "read_text", side_effect=AssertionError("file I/O")), \
            unittest.mock.patch.object(Path, "is_file", side_effect=AssertionError("file I/O")):
        decode_call(inputs)


@needs_interpreter
@pytest.mark.parametrize("backend,rung", [("tuned", "exact"), ("default", "default"), ("reference", "reference"),
                                          ("auto", "exact"), ("AUTO", "exact")])
def test_backend_env_forces_a_path(tables, monkeypatch, backend, rung):
    monkeypatch.setenv("INDEXER_LOGITS_BACKEND", backend)
    inputs = make_decode_inputs(FP8_N1, 2, 256, seed=6)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = decode_call(inputs)
    assert selection_of(inputs).rung == rung
    assert not dispatch_warnings(record)  # a forced reference is asked for: no warning
    assert_matches_decode(out, inputs, True)


@needs_interpreter
def test_backend_env_errors(tables, monkeypatch):
    inputs = make_decode_inputs(FP8_N2, 2, 64, seed=7)
    monkeypatch.setenv("INDEXER_LOGITS_BACKEND", "tuned")
    with pytest.raises(K.NoKernelError, match="no tuned entry"):
        decode_call(inputs)
    monkeypatch.setenv("INDEXER_LOGITS_BACKEND", "default")
    with pytest.raises(K.NoKernelError, match="no family default"):
        decode_call(make_decode_inputs(FP8_N3, 2, 64, seed=7))
    monkeypatch.setenv("INDEXER_LOGITS_BACKEND", "fastest")
    with pytest.raises(ValueError, match=r"INDEXER_LOGITS_BACKEND: expected one of \['auto', 'tuned', 'predicted', 'default', 'reference'\]"):
        decode_call(inputs)


@needs_interpreter
def test_tampered_module_is_refused(tables_copy, monkeypatch):
    module = tables_copy / "cpu" / f"{variant_name(FP8_N1, CFG_SMALL)}.py"
    module.write_text(module.read_text() + "\n# edited by hand\n")
    inputs = make_decode_inputs(FP8_N1, 2, 256, seed=8)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = decode_call(inputs)
    messages = dispatch_warnings(record)
    assert len(messages) == 1 and str(module) in messages[0] and "sha256" in messages[0]
    sel = selection_of(inputs)
    assert sel.variant != variant_name(FP8_N1, CFG_SMALL) and sel.rung == "nearest"
    assert_matches_decode(out, inputs, True)
    # forced onto the tuned table, a tampered module is an error naming the file
    K.clear_cache()
    monkeypatch.setenv("INDEXER_LOGITS_BACKEND", "tuned")
    with pytest.raises(K.DispatchTableError, match="edited|sha256"):
        decode_call(inputs)


@needs_interpreter
def test_foreign_or_malformed_table_is_refused(tables_copy):
    path = tables_copy / "cpu" / "dispatch.json"
    table = json.loads(path.read_text())
    table["provenance"]["gpu_slug"] = "nvidia_h200"
    path.write_text(json.dumps(table))
    with pytest.raises(K.DispatchTableError, match="made for GPU 'nvidia_h200'.*refusing a foreign table"):
        K.load_table(path, "cpu")
    inputs = make_decode_inputs(FP8_N1, 2, 256, seed=9)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = decode_call(inputs)
    assert selection_of(inputs).rung == "default"
    assert any("foreign" in m and str(path) in m for m in dispatch_warnings(record))
    assert_matches_decode(out, inputs, True)

    table["provenance"]["gpu_slug"] = "cpu"
    table["format"] = 2
    path.write_text(json.dumps(table))
    with pytest.raises(K.DispatchTableError, match="format: expected 1, got 2"):
        K.load_table(path, "cpu")
    path.write_text("{not json")
    with pytest.raises(K.DispatchTableError, match="not valid JSON"):
        K.load_table(path, "cpu")


def test_compute_capability_mismatch_is_refused(synthetic):
    path = synthetic["root"] / "nvidia_h200" / "dispatch.json"
    assert K.load_table(path, "nvidia_h200", "9.0")["provenance"]["sm_count"] == 132
    with pytest.raises(K.DispatchTableError, match="compute capability 9.0"):
        K.load_table(path, "nvidia_h200", "12.0")


# ---------------------------------------------------------------------------------------------
# Argument errors name the argument.


def _bad_decode_calls(inputs):
    q, kv, w, lens, bt, width = inputs.args()
    meta = None
    f = K.fp8_paged_mqa_logits
    yield "q", lambda: f(q.to(torch.bfloat16), kv, w, lens, bt, meta, width)
    yield "weights", lambda: f(q, kv, w[:1], lens, bt, meta, width)
    yield "block_table", lambda: f(q, kv, w, lens, bt.long(), meta, width)
    yield "context_lens", lambda: f(q, kv, w, torch.full_like(lens, 10_000), bt, meta, width)
    yield "max_context_len", lambda: f(q, kv, w, lens, bt, meta, 0)
    yield "schedule_meta", lambda: f(q, kv, w, lens, bt, [1, 2], width)
    yield "out", lambda: f(q, kv, w, lens, bt, meta, width, out=torch.empty(2, width, dtype=torch.float64))
    yield "out", lambda: f(q, kv, w, lens, bt, meta, width, out=torch.empty(2, width - 1))
    yield "out", lambda: f(q, kv, w, lens, bt, meta, width, out=torch.empty(width, 2).t())
    yield "kv_cache", lambda: f(q, kv[..., :100], w, lens, bt, meta, width)
    yield "logits_dtype", lambda: f(q, kv, w, lens, bt, meta, width, logits_dtype=torch.float16)


@pytest.mark.parametrize("index", range(11))
def test_bad_decode_arguments_raise_naming_the_argument(index):
    inputs = make_decode_inputs(FP8_N1, 2, 128, seed=10)
    name, call = list(_bad_decode_calls(inputs))[index]
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_bad_prefill_arguments_raise_naming_the_argument():
    fp8 = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 4, 64, seed=1)
    q, kv, w, ks, ke = fp8.args()
    with pytest.raises(ValueError, match="^cu_seq_len_k_end"):
        K.fp8_mqa_logits(q, kv, w, ke, ks)  # ke < ks
    with pytest.raises(ValueError, match="^kv"):
        K.fp8_mqa_logits(q, kv[0], w, ks, ke)
    with pytest.raises(ValueError, match="^q"):
        K.bf16_mqa_logits(q, kv, w, ks, ke)
    bf = make_prefill_inputs(BF16_PREFILL, 4, 64, seed=1)
    q, kv, w, ks, ke = bf.args()
    with pytest.raises(ValueError, match="^kv"):
        K.bf16_mqa_logits(q, (kv[0], kv[0]), w, ks, ke)
    with pytest.raises(ValueError, match="^weights"):
        K.bf16_mqa_logits(q, kv, w.t().contiguous(), ks, ke)


@needs_interpreter
def test_value_checks_can_be_skipped(monkeypatch):
    inputs = make_decode_inputs(FP8_N1, 2, 64, seed=11)
    calls = []
    real = _checks.check_decode_values
    monkeypatch.setattr(_checks, "check_decode_values", lambda *a: calls.append(1) or real(*a))
    decode_call(inputs)
    assert len(calls) == 1
    decode_call(inputs, check_values=False)
    monkeypatch.setenv("INDEXER_LOGITS_CHECK_VALUES", "0")
    decode_call(inputs)
    assert len(calls) == 1
    monkeypatch.setenv("INDEXER_LOGITS_CHECK_VALUES", "maybe")
    with pytest.raises(ValueError, match="INDEXER_LOGITS_CHECK_VALUES"):
        decode_call(inputs)


# ---------------------------------------------------------------------------------------------
# Emission: deterministic, byte for byte.


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_emit_is_byte_for_byte_reproducible(synthetic, tmp_path):
    first = _snapshot(synthetic["root"])
    # again into the same folder: nothing written
    store = Store(synthetic["db"])
    results = [emit_gpu(store, s, synthetic["root"]) for s in ("cpu", "nvidia_h200")] + [emit_defaults(synthetic["root"])]
    assert not any(r.changed for r in results), [(r.slug, r.written, r.removed) for r in results]
    assert _snapshot(synthetic["root"]) == first
    # into a fresh folder through the CLI: the same bytes
    import cli

    fresh = tmp_path / "fresh"
    res = CliRunner().invoke(cli.main, ["emit", "--db", str(synthetic["db"]), "--out", str(fresh)])
    assert res.exit_code == 0, res.output
    assert _snapshot(fresh) == first
    # a module no table names any more is removed; a stale table is rewritten
    stray = fresh / "cpu" / f"{variant_name(FP8_N2, CFG_SMALL)}.py"
    stray.write_text("# stray\n")
    (fresh / "cpu" / "dispatch.json").write_text("{}")
    res = CliRunner().invoke(cli.main, ["emit", "--db", str(synthetic["db"]), "--out", str(fresh), "--gpu", "cpu"])
    assert res.exit_code == 0, res.output
    assert _snapshot(fresh) == first


def test_emitted_table_provenance_and_hashes(synthetic):
    root = synthetic["root"]
    table = K.load_table(root / "nvidia_h200" / "dispatch.json", "nvidia_h200", "9.0")
    prov = table["provenance"]
    assert prov["gpu_name"] == "NVIDIA H200" and prov["compute_capability"] == "9.0" and prov["sm_count"] == 132
    assert prov["tuned_at"] == "2026-01-02T03:04:05+00:00"  # the latest trial, not the clock
    assert set(prov["template_hashes"]) == {"decode_paged", "prefill_ragged", "prefill_paged"}
    (entry,) = table["entries"]
    assert entry["bucket"] == {"batch": 64, "context": 8192} and entry["p50_ms"] == 0.04
    assert entry["partial_p50_ms"] == pytest.approx(0.04 / 3) and entry["frac_of_floor"] == 0.7
    assert entry["timer"] == "cuda_graph"
    for info in table["modules"].values():
        assert _dispatch.file_sha256(root / "nvidia_h200" / info["file"]) == info["sha256"]
    cpu = K.load_table(root / "cpu" / "dispatch.json", "cpu")
    assert cpu["provenance"]["tuned_at"] == "2026-01-02T05:00:00+00:00"
    text = (root / "cpu" / "dispatch.json").read_text()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n"


def test_default_table_covers_the_common_problems(synthetic):
    table = K.load_table(synthetic["root"] / "default" / "dispatch.json", "default")
    assert table["entries"] == []
    problems = [p for p in default_problems() if p.next_n != 3]
    served = {p.key for p in problems}
    assert set(table["defaults"]) == served and set(table["interpreter_defaults"]) == served
    by_key = {p.key: p for p in problems}
    too_big_for_sm120 = set()
    for key, variant in table["defaults"].items():
        info = table["modules"][variant]
        assert info["config"]["dot_dtype"] == "native"
        if "sm_120" not in info["fits_targets"]:
            # Only where the query tile alone (next_n * heads rows of head_dim, never split in
            # decode) exceeds sm_120's shared memory: no config of the family could fit there.
            p = by_key[key]
            elem = 1 if p.cache_dtype == "fp8" else 2
            assert p.family == "decode_paged" and p.next_n * p.heads * p.head_dim * elem > 101_376, variant
            too_big_for_sm120.add(variant)
    assert table["provenance"]["fit_all_targets"] is (not too_big_for_sm120)
    skipped = {s["problem_slug"] for s in table["provenance"]["not_emitted"]}
    assert skipped and all("_n3" in slug for slug in skipped)
    assert all(s["reason"].startswith("not_pow2") for s in table["provenance"]["not_emitted"])


def test_committed_default_table_is_up_to_date(synthetic):
    """indexer_logits/tables/default/ must be what the current templates render (run
    `python cli.py emit --defaults-only` after changing a template or the tool version)."""
    committed = _snapshot(REPO_GENERATED / "default")
    fresh = _snapshot(synthetic["root"] / "default")
    stale = sorted(set(committed) ^ set(fresh) | {k for k in committed.keys() & fresh.keys() if committed[k] != fresh[k]})
    assert not stale, f"stale files in indexer_logits/tables/default (run `python cli.py emit --defaults-only`): {stale}"


# ---------------------------------------------------------------------------------------------
# On a GPU: graph capture with out=, no allocation, the device's own default rung.


@pytest.mark.gpu
def test_gpu_graph_capture_with_out_buffer():
    inputs = make_decode_inputs(FP8_N1, 8, 4096, seed=12, device="cuda")
    q, kv, w, lens, bt, width = inputs.args()
    meta = K.get_paged_mqa_logits_metadata(lens, 64, torch.cuda.get_device_properties(0).multi_processor_count)
    out = torch.full((8, width), float("nan"), device="cuda")
    K.fp8_paged_mqa_logits(q, kv, w, lens, bt, meta, width, True, out=out)  # warm-up: selection, compile
    torch.cuda.synchronize()
    # With out= the call allocates nothing on the device, not even temporarily.
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    K.fp8_paged_mqa_logits(q, kv, w, lens, bt, meta, width, True, out=out, check_values=False)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() == before
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        K.fp8_paged_mqa_logits(q, kv, w, lens, bt, meta, width, True, out=out)  # value checks skipped in capture
    for new_len in (1, 97, width):
        lens.fill_(new_len)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches_decode(out, inputs, True)
