"""The cached launch on a GPU (indexer_logits._fastpath): a shape's second call is its recorded
launch over the call's own tensors, and computes exactly what the full path computes.

Each case calls once (the full path records), then calls again with other inputs of the same
shapes (other addresses, other values) and compares with INDEXER_LOGITS_FAST_LAUNCH=0's full
path bit for bit; the replay's counter proves which path served. Run on the GPU host:
`python3 -m pytest -q -m gpu tests/test_fastpath_gpu.py`."""

from __future__ import annotations

import pytest
import torch
import triton

import indexer_logits as K
from indexer_logits import _fastpath
from indexer_logits._identity import Problem
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _clean(clean_runtime, monkeypatch):
    monkeypatch.delenv(_fastpath.ENV_FAST_LAUNCH, raising=False)
    _fastpath.clear()
    yield
    _fastpath.clear()


def _full_path(monkeypatch, fn):
    monkeypatch.setenv(_fastpath.ENV_FAST_LAUNCH, "0")
    try:
        return fn()
    finally:
        monkeypatch.delenv(_fastpath.ENV_FAST_LAUNCH)


def _served_by_replay(before: int) -> int:
    calls = sum(r.calls for r in _fastpath.replays().values())
    assert calls == before + 1, f"the call was not served by a recorded launch ({calls - before} replays)"
    return calls


DECODE = [("fp8", 1, "1d", False), ("fp8", 2, "1d", False), ("fp8", 2, "2d", False), ("bf16", 1, "1d", False),
          ("fp8", 1, "1d", True)]


@pytest.mark.parametrize("dtype,next_n,lens,pdl", DECODE, ids=["-".join(map(str, c)) for c in DECODE])
def test_decode_replay_matches_the_full_path(dtype, next_n, lens, pdl, monkeypatch):
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, next_n=next_n, lens_mode=lens,
                      scale_layout="page_blocked" if dtype == "fp8" else "none")
    fn = K.fp8_paged_mqa_logits if dtype == "fp8" else K.bf16_paged_mqa_logits
    kw = {"enable_pdl": True} if pdl else {}
    first = make_decode_inputs(problem, 16, 4096, seed=1, device="cuda")
    a = first.args()
    fn(*a[:5], None, a[5], True, **kw)
    assert len(_fastpath.replays()) == 1, _fastpath._UNCACHEABLE
    x = make_decode_inputs(problem, 16, 4096, seed=2, device="cuda")
    b = x.args()
    got = fn(*b[:5], None, b[5], True, **kw)
    _served_by_replay(0)
    want = _full_path(monkeypatch, lambda: fn(*b[:5], None, b[5], True, **kw))
    assert torch.equal(got, want)
    assert torch.equal(torch.isneginf(got), ~x.valid_mask())


def test_decode_replay_writes_a_wider_out_buffer_and_returns_its_view(monkeypatch):
    problem = Problem()
    x = make_decode_inputs(problem, 8, 2048, seed=3, device="cuda")
    a = x.args()
    buf = torch.full((8, 2048 + 64), 7.0, device="cuda")
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, out=buf)
    buf2 = torch.full((8, 2048 + 64), 7.0, device="cuda")
    got = K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, out=buf2)
    _served_by_replay(0)
    assert got.shape == (8, 2048) and got.data_ptr() == buf2.data_ptr()
    assert torch.equal(buf2, buf) and bool((buf2[:, 2048:] == 7.0).all())


def test_decode_replay_in_a_cuda_graph_and_without_a_sync(monkeypatch):
    problem = Problem()
    x = make_decode_inputs(problem, 32, 8192, seed=4, device="cuda")
    a = x.args()
    out = torch.empty(32, 8192, device="cuda")
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, out=out)  # records
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, out=out)  # a replay: no host synchronisation
    finally:
        torch.cuda.set_sync_debug_mode(0)
    calls = _served_by_replay(0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, out=out)
    _served_by_replay(calls)
    y = make_decode_inputs(problem, 32, 8192, seed=5, device="cuda")
    assert y.kv_cache.shape == x.kv_cache.shape and y.block_table.shape == x.block_table.shape
    for name in ("q", "kv_cache", "weights", "context_lens", "block_table"):
        getattr(x, name).copy_(getattr(y, name))
    out.zero_()
    graph.replay()
    b = y.args()
    want = _full_path(monkeypatch, lambda: K.fp8_paged_mqa_logits(*b[:5], None, b[5], True))
    assert torch.equal(out, want)


def test_another_alignment_is_another_key():
    problem = Problem()
    x = make_decode_inputs(problem, 4, 1024, seed=6, device="cuda")
    a = list(x.args())
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True)
    w = torch.empty(a[2].numel() + 1, device="cuda")[1:].view_as(a[2]).copy_(a[2])  # 4 bytes off 16
    got = K.fp8_paged_mqa_logits(a[0], a[1], w, a[3], a[4], None, a[5], True)
    assert len(_fastpath.replays()) == 2 and sum(r.calls for r in _fastpath.replays().values()) == 0
    assert torch.equal(got, K.fp8_paged_mqa_logits(*a[:5], None, a[5], True))


@pytest.mark.parametrize("dtype,scale_2d", [("fp8", False), ("fp8", True), ("bf16", False)])
def test_ragged_prefill_replay_matches_the_full_path(dtype, scale_2d, monkeypatch):
    problem = (Problem(family="prefill_ragged", page_size=0) if dtype == "fp8" else
               Problem(family="prefill_ragged", page_size=0, q_dtype=dtype, cache_dtype=dtype, scale_layout="none"))
    fn = K.fp8_mqa_logits if dtype == "fp8" else K.bf16_mqa_logits

    def inputs(seed):
        x = make_prefill_inputs(problem, 512, 4096, "random", seed=seed, device="cuda")
        kv = x.kv
        if dtype == "fp8" and scale_2d:
            kv = (kv[0], kv[1].reshape(-1, 1))  # DeepGEMM's [Nk, 1] scales
        return x, kv

    x, kv = inputs(7)
    fn(x.q, kv, x.weights, x.cu_seqlen_ks, x.cu_seqlen_ke, clean_logits=True)
    assert len(_fastpath.replays()) == 1, _fastpath._UNCACHEABLE
    y, kv = inputs(8)
    got = fn(y.q, kv, y.weights, y.cu_seqlen_ks, y.cu_seqlen_ke, clean_logits=True)
    _served_by_replay(0)
    want = _full_path(monkeypatch, lambda: fn(y.q, kv, y.weights, y.cu_seqlen_ks, y.cu_seqlen_ke, clean_logits=True))
    assert torch.equal(got, want) and torch.equal(torch.isneginf(got), ~y.valid_mask())


def test_chunked_prefill_replay_matches_the_full_path(monkeypatch):
    problem = Problem(family="prefill_paged")
    x = make_prefill_paged_inputs(problem, 256, 4096, seed=9, device="cuda")
    K.fp8_paged_mqa_logits_chunked(*x.args())
    assert len(_fastpath.replays()) == 1, _fastpath._UNCACHEABLE
    y = make_prefill_paged_inputs(problem, 256, 4096, seed=10, device="cuda")
    if y.block_table.shape != x.block_table.shape or y.kv_cache.shape != x.kv_cache.shape:
        pytest.skip("the seeds gave other shapes")  # the generator sizes the pool from the lengths
    got = K.fp8_paged_mqa_logits_chunked(*y.args())
    _served_by_replay(0)
    want = _full_path(monkeypatch, lambda: K.fp8_paged_mqa_logits_chunked(*y.args()))
    assert torch.equal(got, want)


def test_value_checks_are_never_skipped_by_a_replay():
    problem = Problem()
    x = make_decode_inputs(problem, 4, 1024, seed=11, device="cuda")
    a = x.args()
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, check_values=True)
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True, check_values=True)
    assert _fastpath.replays() == {}
    bad = a[3].clone().fill_(10 ** 6)  # lengths past the table: the value checks refuse them
    with pytest.raises(ValueError):
        K.fp8_paged_mqa_logits(a[0], a[1], a[2], bad, a[4], None, a[5], True, check_values=True)


@pytest.mark.parametrize("addresses", [True, False], ids=["addresses", "tensors"])
def test_cached_tensor_maps_follow_the_pool(monkeypatch, addresses):
    """Decode 64x8K on the H200 takes a TMA kernel: under Triton 3.6.0 its replay calls the C launcher
    with a tensor map cached per pool address (indexer_logits._direct_launch). Two pools of one shape
    at two addresses, then a pool freed and another allocated (the caching allocator's same address,
    or another), each with other contents: the replay's logits are the full path's, bit for bit."""
    from indexer_logits import _direct_launch
    monkeypatch.setattr(_direct_launch, "ADDRESSES", addresses)  # tensors handed over as ints, or as tensors
    problem = Problem()
    x = make_decode_inputs(problem, 64, 8192, seed=12, device="cuda")
    a = x.args()
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True)  # records
    (replay,) = _fastpath.replays().values()
    direct = replay.direct is not None and bool(replay.direct.map_slots)
    assert replay.direct is None or replay.direct.addresses == addresses
    if triton.__version__ in _direct_launch.SUPPORTED and not direct:
        pytest.skip("the kernel selected for 64x8K takes no TMA descriptor here")
    calls = 0

    def check(pool):
        nonlocal calls
        got = K.fp8_paged_mqa_logits(a[0], pool, a[2], a[3], a[4], None, a[5], True)
        calls = _served_by_replay(calls)
        want = _full_path(monkeypatch, lambda: K.fp8_paged_mqa_logits(a[0], pool, a[2], a[3], a[4], None, a[5], True))
        assert torch.equal(got, want)

    first = x.kv_cache

    def other_pool(shift):
        """Other pages at each index, at another address, in first's own layout: its strides (pages
        padded to their stride) and alignment, so that the call's key is the same."""
        pool = torch.empty_strided(first.size(), first.stride(), dtype=first.dtype, device=first.device)
        return pool.copy_(first.roll(shift, 0))

    second = other_pool(1)
    assert second.data_ptr() != first.data_ptr() and second.data_ptr() % 16 == first.data_ptr() % 16
    for pool in (first, second, first, second):
        check(pool)
    if direct:
        maps = replay.direct.map_slots[0][2]
        assert {first.data_ptr(), second.data_ptr()} <= set(maps)
    address = second.data_ptr()
    del second
    torch.cuda.synchronize()
    third = other_pool(2)  # very likely at the freed pool's address
    check(third)
    if direct and third.data_ptr() == address:
        assert len(replay.direct.map_slots[0][2]) == 2  # the address's map reused: it depends on nothing else


def test_the_guard_index_serves_default_calls_without_their_exact_key(monkeypatch):
    """On the GPU host's torch the guard index is on, and a shape's second call, decode and prefill,
    is found by it (the exact key is never built), and computes what the full path computes."""
    from indexer_logits import _call_key
    assert _call_key.GUARDS is not None, "TensorGuards failed its self-test under this torch"
    problem = Problem()
    x = make_decode_inputs(problem, 16, 4096, seed=12, device="cuda")
    a = x.args()
    K.fp8_paged_mqa_logits(*a[:5], None, a[5], True)
    pre = Problem(family="prefill_ragged", page_size=0)
    p = make_prefill_inputs(pre, 256, 2048, "random", seed=13, device="cuda")
    K.fp8_mqa_logits(p.q, p.kv, p.weights, p.cu_seqlen_ks, p.cu_seqlen_ke)
    assert len(_fastpath.replays()) == 2, _fastpath._UNCACHEABLE
    y = make_decode_inputs(problem, 16, 4096, seed=14, device="cuda")
    b = y.args()
    r = make_prefill_inputs(pre, 256, 2048, "random", seed=15, device="cuda")
    with monkeypatch.context() as m:
        m.setattr(_fastpath, "exact_of", lambda *args: pytest.fail("the exact key was built"))
        got = K.fp8_paged_mqa_logits(*b[:5], None, b[5], True)
        got_prefill = K.fp8_mqa_logits(r.q, r.kv, r.weights, r.cu_seqlen_ks, r.cu_seqlen_ke)
    assert sum(rp.calls for rp in _fastpath.replays().values()) == 2
    assert torch.equal(got, _full_path(monkeypatch, lambda: K.fp8_paged_mqa_logits(*b[:5], None, b[5], True)))
    assert torch.equal(got_prefill, _full_path(
        monkeypatch, lambda: K.fp8_mqa_logits(r.q, r.kv, r.weights, r.cu_seqlen_ks, r.cu_seqlen_ke)))
