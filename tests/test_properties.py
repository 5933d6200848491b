"""Property-based tests (hypothesis).

1. The runtime's kernels against the reference, under the interpreter (CPU) or on the GPU:
   random batch, next_n, lens mode, page layout, lengths (0, 1, the full width, non page
   multiples), output width, block tables wider than needed and poisoned past the valid pages,
   clean_logits. The valid region must match the reference (SPEC.md's relative error < 1e-3,
   here also per row) and, with clean_logits, the -inf mask must be exactly the invalid region.
   H=64, D=128 and the layouts a generated kernel serves (fp8 page-blocked, bf16): every call
   must be served by a kernel of its problem (the selection's rung is not "reference", and the
   runtime's reference fallback is made to fail during the call), so a kernel that stopped
   serving cannot pass on the fallback. token_interleaved has no kernel: its reference rung is
   checked on its own.
2. tuner.layouts: pack_pages / unpack_pages round trips (exact for bf16 and for the fp8 bytes
   and scales; within fp8 rounding of K), gap bytes untouched, any page subset.
3. Problem / Config: any field values either build an object that survives its canonical JSON
   round trip (same object, same key, an identifier for a variant name) or raise ValueError
   naming a field; from_json of arbitrary JSON never raises anything but ValueError.

Examples are few and small (the interpreter takes 0.05-0.5 s a call); deadline=None, no
example database is written.
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import indexer_logits as K
from indexer_logits import _chunked, _decode, _prefill
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs, poison_block_table
from tuner.layouts import CacheLayout, layout_of, pack_pages, quantize_tokens, unpack_pages
from indexer_logits._identity import DOT_DTYPES, ORIENTS, Config, Problem, canonical_json, sha256_hex, variant_name
from tuner.reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref, relative_error

from conftest import INTERPRET

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

DEVICE = "cpu" if INTERPRET else "cuda"
KERNEL_SETTINGS = settings(deadline=None, database=None, derandomize=True, print_blob=True,
                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FAST_SETTINGS = settings(deadline=None, database=None, derandomize=True, max_examples=150)


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    """Every test here starts and ends with a clean runtime (conftest.clean_runtime)."""
    yield


def assert_rows_match(out, ref, valid, clean: bool) -> None:
    out, ref, valid = out.cpu(), ref.cpu(), valid.cpu()
    assert out.shape == ref.shape
    assert bool(torch.isfinite(out[valid]).all()), "a valid position is not finite (unwritten?)"
    assert relative_error(out, ref, valid) < 1e-3
    for r in range(out.shape[0]):  # per row too: a short row must not hide behind a long one
        if bool(valid[r].any()):
            err = relative_error(out[r : r + 1], ref[r : r + 1], valid[r : r + 1])
            assert err < 1e-3 or float(ref[r][valid[r]].abs().max()) < 1e-6, (r, err)
    if clean:
        assert torch.equal(torch.isneginf(out), ~valid), "-inf mask differs from the valid region"


# ---------------------------------------------------------------------------------------------
# 1. The runtime's kernels against the reference.

LAYOUTS = [("fp8", "page_blocked"), ("fp8", "token_interleaved"), ("bf16", "none")]
KERNEL_LAYOUTS = [LAYOUTS[0], LAYOUTS[2]]  # the layouts generated kernels serve


def assert_kernel_serves(sel, problem: Problem) -> None:
    """The selection is a generated kernel of this very problem (family, dtype, page, H, D,
    next_n, lens mode), not the torch reference; under the interpreter it is the family default
    (there is no tuned table for the CPU), an fp16- or fp32-dot variant."""
    assert sel.rung != "reference", f"the reference serves {problem.family} {problem.slug}"
    assert sel.launch is not None
    assert sel.variant.startswith(f"{problem.family}__{problem.slug}__"), (sel.variant, problem.slug)
    if INTERPRET:
        assert sel.rung == "default", sel


def _no_fallback(*args, **kwargs):
    raise AssertionError("the runtime fell back to the torch reference")


@contextmanager
def kernel_only():
    """During the call: the runtime's reference fallbacks fail, and a DispatchWarning (a skipped
    rung, a fallback) is an error."""
    with mock.patch.object(_decode, "paged_mqa_logits_ref", _no_fallback), \
            mock.patch.object(_prefill, "mqa_logits_ref", _no_fallback), \
            mock.patch.object(_chunked, "paged_mqa_logits_chunked_ref", _no_fallback), warnings.catch_warnings():
        warnings.simplefilter("error", K.DispatchWarning)
        yield


@st.composite
def decode_cases(draw):
    dtype, layout = draw(st.sampled_from(KERNEL_LAYOUTS))
    next_n = draw(st.sampled_from([1, 2, 4]))
    lens_mode = draw(st.sampled_from(["1d", "2d"]))
    batch = draw(st.integers(1, 3))
    width = draw(st.one_of(st.sampled_from([1, 63, 64, 65, 128, 256]), st.integers(1, 256)))
    length = st.one_of(st.sampled_from([0, 1, width, max(0, width - 1)]), st.integers(0, width))
    lengths = draw(st.lists(length, min_size=batch, max_size=batch))
    return dict(problem=Problem(q_dtype=dtype, cache_dtype=dtype, scale_layout=layout, next_n=next_n,
                                lens_mode=lens_mode),
                batch=batch, width=width, lengths=lengths, clean=draw(st.booleans()),
                extra_columns=draw(st.integers(0, 2)), seed=draw(st.integers(0, 2**16)))


@settings(KERNEL_SETTINGS, max_examples=80)
@given(case=decode_cases())
def test_decode_runtime_matches_reference(case):
    p = case["problem"]
    x = make_decode_inputs(p, case["batch"], case["width"], lens=case["lengths"], seed=case["seed"], device=DEVICE)
    if case["extra_columns"]:  # a table wider than the width: columns the kernel must never read
        pad = torch.zeros(case["batch"], case["extra_columns"], dtype=torch.int32, device=DEVICE)
        x = replace(x, block_table=torch.cat([x.block_table, pad], dim=1))
    ref = paged_mqa_logits_ref(*x.args(), scale_layout=x.scale_layout)
    bad = poison_block_table(x)  # every id past the valid pages is wild: must be neither read nor checked
    fn = K.fp8_paged_mqa_logits if p.cache_dtype == "fp8" else K.bf16_paged_mqa_logits
    meta = K.get_paged_mqa_logits_metadata(bad.context_lens, 64, 4)
    assert_kernel_serves(K.paged_selection(*bad.args(), scale_layout=x.scale_layout), p)
    with kernel_only():
        out = fn(bad.q, bad.kv_cache, bad.weights, bad.context_lens, bad.block_table, meta, x.max_context_len,
                 case["clean"], scale_layout=x.scale_layout)
    assert_rows_match(out, ref, x.valid_mask(), case["clean"])


def test_token_interleaved_decode_is_served_by_the_reference():
    """No generated kernel reads the token-interleaved layout: the runtime says so (a
    DispatchWarning naming the problem) and runs the reference, which test_reference.py holds to
    the loop oracle."""
    p = Problem(scale_layout="token_interleaved", next_n=2)
    x = make_decode_inputs(p, 2, 130, lens=[0, 77], seed=5, device=DEVICE)
    meta = K.get_paged_mqa_logits_metadata(x.context_lens, 64, 4)
    with pytest.warns(K.DispatchWarning, match="no kernel for decode_paged fp8 .* token_interleaved"):
        out = K.fp8_paged_mqa_logits(*x.args()[:5], meta, x.max_context_len, True, scale_layout=x.scale_layout)
    sel = K.paged_selection(*x.args(), scale_layout=x.scale_layout)
    assert sel.rung == "reference" and sel.variant is None
    assert_rows_match(out, paged_mqa_logits_ref(*x.args(), scale_layout=x.scale_layout), x.valid_mask(), True)


@st.composite
def prefill_cases(draw):
    dtype = draw(st.sampled_from(["fp8", "bf16"]))
    rows = draw(st.integers(1, 8))
    keys = draw(st.one_of(st.sampled_from([1, 64, 65, 256]), st.integers(1, 256)))
    return dict(problem=Problem(family="prefill_ragged", q_dtype=dtype, cache_dtype=dtype, page_size=0,
                                scale_layout="page_blocked" if dtype == "fp8" else "none"),
                rows=rows, keys=keys, clean=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))


@settings(KERNEL_SETTINGS, max_examples=30)
@given(case=prefill_cases())
def test_prefill_runtime_matches_reference(case):
    p = case["problem"]
    x = make_prefill_inputs(p, case["rows"], case["keys"], "random", seed=case["seed"], device=DEVICE)
    fn = K.fp8_mqa_logits if p.cache_dtype == "fp8" else K.bf16_mqa_logits
    assert_kernel_serves(K.ragged_selection(*x.args()), p)
    with kernel_only():
        out = fn(*x.args(), case["clean"])
    assert_rows_match(out, mqa_logits_ref(*x.args()), x.valid_mask(), case["clean"])


@st.composite
def chunked_cases(draw):
    dtype, layout = draw(st.sampled_from(KERNEL_LAYOUTS))
    width = draw(st.integers(8, 256))
    requests = draw(st.integers(1, 3))
    chunk_lens = draw(st.lists(st.integers(0, min(6, width)), min_size=requests, max_size=requests))
    if sum(chunk_lens) == 0:  # at least one query row
        chunk_lens[-1] = 1
    return dict(problem=Problem(family="prefill_paged", q_dtype=dtype, cache_dtype=dtype, scale_layout=layout),
                width=width, chunk_lens=chunk_lens, clean=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))


@settings(KERNEL_SETTINGS, max_examples=25)
@given(case=chunked_cases())
def test_chunked_prefill_runtime_matches_reference(case):
    p = case["problem"]
    x = make_prefill_paged_inputs(p, sum(case["chunk_lens"]), case["width"], chunk_lens=case["chunk_lens"],
                                  seed=case["seed"], device=DEVICE)
    fn = K.fp8_paged_mqa_logits_chunked if p.cache_dtype == "fp8" else K.bf16_paged_mqa_logits_chunked
    bad = poison_block_table(x)
    assert_kernel_serves(K.chunked_selection(*bad.args(), scale_layout=x.scale_layout), p)
    with kernel_only():
        out = fn(*bad.args(), case["clean"], scale_layout=x.scale_layout)
    ref = paged_mqa_logits_chunked_ref(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in x.args()],
                                       scale_layout=x.scale_layout)
    assert_rows_match(out, ref, x.valid_mask(), case["clean"])


# ---------------------------------------------------------------------------------------------
# 2. Cache layouts: pack / unpack.


@st.composite
def pack_cases(draw):
    dtype, layout = draw(st.sampled_from(LAYOUTS))
    page = draw(st.sampled_from([1, 2, 32, 64]))
    head_dim = draw(st.sampled_from([4, 32, 64, 128]))
    gap = draw(st.integers(0, 16)) * 4
    return dict(layout=CacheLayout(dtype, page, layout, head_dim), pages=draw(st.integers(1, 4)), gap=gap,
                ue8m0=draw(st.booleans()), magnitude=draw(st.sampled_from([0.0, 1e-6, 1e-3, 1.0, 1e3, 3e4])),
                seed=draw(st.integers(0, 2**16)))


@FAST_SETTINGS
@given(case=pack_cases())
def test_pack_unpack_round_trip(case):
    layout, pages, gap = case["layout"], case["pages"], case["gap"]
    g = torch.Generator().manual_seed(case["seed"])
    k = torch.randn(pages, layout.page_size, layout.head_dim, generator=g) * case["magnitude"]
    if pages > 1:
        k[0, 0] = 0.0  # an all-zero token (its scale is clamped at 1e-4 / 448)
    stride = layout.page_bytes + gap
    cache = pack_pages(k, layout, stride, ue8m0=case["ue8m0"])

    # geometry: the view callers pass, with the page stride asked for; the layout is recovered
    assert tuple(cache.shape) == (pages, layout.page_size, 1, layout.view_last_dim)
    assert cache.dtype == layout.torch_dtype and cache.stride(0) * cache.element_size() == stride
    assert layout_of(cache, layout.scale_layout) == layout

    values, scales = unpack_pages(cache, layout)
    if layout.cache_dtype == "bf16":
        assert torch.equal(values, k.to(torch.bfloat16).float()) and bool((scales == 1).all())
    else:
        k_fp8, scale = quantize_tokens(k, case["ue8m0"])
        assert torch.equal(values, k_fp8.float()) and torch.equal(scales, scale)
        assert bool((scales > 0).all())
        if case["ue8m0"]:
            assert torch.equal(scales, torch.exp2(torch.round(torch.log2(scales))))
        err = (values * scales[..., None] - k).abs()
        assert bool((err <= 0.0625 * k.abs() + scales[..., None] * 2.0**-9 + 1e-30).all())

    # gap bytes between pages are never written (0xFF as packed)
    raw = torch.empty(0, dtype=torch.uint8).set_(cache.untyped_storage())
    assert bool((raw.view(pages, stride)[:, layout.page_bytes:] == 0xFF).all())

    # any subset of pages, in any order, reads the same as the full read-back
    order = torch.randperm(pages, generator=g)[: max(1, pages - 1)]
    sub_v, sub_s = unpack_pages(cache, layout, order.to(torch.int32))
    assert torch.equal(sub_v, values[order]) and torch.equal(sub_s, scales[order])


# ---------------------------------------------------------------------------------------------
# 3. Problem and Config: build or refuse, and canonical JSON round trips.

ANY = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False, width=32),
                st.integers(-4, 300), st.text(max_size=6), st.lists(st.integers(0, 3), max_size=2))


def mostly(valid, invalid=ANY):
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid), invalid)


PROBLEM_FIELDS = dict(
    family=mostly(["decode_paged", "prefill_ragged", "prefill_paged"]),
    q_dtype=mostly(["fp8", "bf16"]), cache_dtype=mostly(["fp8", "bf16"]),
    page_size=mostly([0, 1, 32, 64, 128]), scale_layout=mostly(["page_blocked", "token_interleaved", "none"]),
    heads=mostly([8, 16, 32, 64, 128]), head_dim=mostly([32, 64, 128]), next_n=mostly([1, 2, 3, 4]),
    lens_mode=mostly(["1d", "2d"]),
)
CONFIG_FIELDS = dict(
    block_t=mostly([16, 32, 64, 128, 256]), tiles_per_program=mostly([1, 2, 4, 8]), num_warps=mostly([2, 4, 8]),
    num_stages=mostly([1, 2, 3, 4]), block_m=mostly([1, 2, 4]), dot_dtype=mostly(list(DOT_DTYPES)),
    orient=mostly(list(ORIENTS)), programs_per_sm=mostly([0, 1, 2]),
)


def _build_or_refuse(cls, fields: dict, names):
    try:
        return cls(**fields)
    except ValueError as exc:
        head = str(exc).split(":", 1)[0]
        assert any(name in head for name in names), f"{cls.__name__} refused without naming a field: {exc}"
        return None


def _round_trips(obj) -> None:
    cls = type(obj)
    text = obj.to_json()
    assert text == canonical_json(json.loads(text)) and " " not in text
    assert list(json.loads(text)) == sorted(json.loads(text))
    assert cls.from_json(text) == obj and cls.from_dict(obj.to_dict()) == obj
    assert obj.key == sha256_hex(text) == cls.from_json(text).key
    assert hash(cls.from_json(text)) == hash(obj)


@FAST_SETTINGS
@given(fields=st.fixed_dictionaries(PROBLEM_FIELDS), config_fields=st.fixed_dictionaries(CONFIG_FIELDS))
def test_problem_and_config_build_or_refuse_and_round_trip(fields, config_fields):
    problem = _build_or_refuse(Problem, fields, list(PROBLEM_FIELDS) + ["bucket"])
    config = _build_or_refuse(Config, config_fields, list(CONFIG_FIELDS))
    if problem is not None:
        _round_trips(problem)
        assert problem.to_dict()["family"] == problem.family and isinstance(problem.family, str)
    if config is not None:
        _round_trips(config)
    if problem is not None and config is not None:
        name = variant_name(problem, config)
        assert name.isidentifier() and name.startswith(problem.family + "__")
        assert name == variant_name(Problem.from_json(problem.to_json()), Config.from_json(config.to_json()))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 300) | st.text(max_size=8)
                           | st.floats(allow_nan=False, allow_infinity=False),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=8)


@FAST_SETTINGS
@given(value=st.one_of(JSON_VALUES, st.fixed_dictionaries({}, optional={**PROBLEM_FIELDS, **CONFIG_FIELDS})))
def test_from_json_of_anything_builds_or_raises_value_error(value):
    """Configs reach from_json from the store and from `tune --try-config` (user text): any JSON
    value is either a valid object or a ValueError, never a TypeError or a crash."""
    text = json.dumps(value)
    for cls in (Problem, Config):
        try:
            obj = cls.from_json(text)
        except ValueError:
            continue
        _round_trips(obj)
