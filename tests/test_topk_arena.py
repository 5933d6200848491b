"""A top-k call's own buffers from one allocation (indexer_logits._topk_arena, _topk_buffers.ONE_ALLOCATION):
the views own distinct, aligned, non-overlapping bytes; a decode call's logits, workspace, tile maxima and
selection buffers, and a prefill call's scratch, workspace, maxima and every block's plan buffers are views of
one allocation, the plans made once a row count before the first logits launch; the answers are those of a
buffer each (and torch's), the workspace zeroed as before."""

import dataclasses

import pytest
import torch

import indexer_logits as K
from indexer_logits import _decode, _topk, _topk_buffers, _topk_select as S
from indexer_logits._identity import Problem
from indexer_logits._topk_arena import ALIGN, Arena, Reserved
from tuner.inputs import make_decode_inputs, make_prefill_inputs

from test_topk import _row_windows_decode, assert_same_topk, needs_interpreter

PREFILL = Problem(family="prefill_ragged", page_size=0)


def test_an_arenas_views_own_distinct_aligned_bytes():
    """Each view at a multiple of ALIGN bytes, at least ALIGN of them its own (no two inputs of a recorded
    launch at one address), of its shape and dtype, contiguous, all of one allocation (an empty view's address
    is 0, as an empty allocation's)."""
    arena = Arena("cpu")
    specs = [((3, 5), torch.int32), ((0, 4), torch.float32), ((2, 7), torch.int64), ((1,), torch.float32),
             ((4, 0, 9), torch.int32), ((65,), torch.float32)]
    reserved = [arena(shape, dtype) for shape, dtype in specs]
    assert all(isinstance(r, Reserved) for r in reserved) and [r.at for r in reserved] == list(range(len(specs)))
    views = arena.carve()
    base = views[0].untyped_storage().data_ptr()
    spans = []
    for v, (shape, dtype) in zip(views, specs):
        assert tuple(v.shape) == shape and v.dtype == dtype and v.is_contiguous()
        assert v.untyped_storage().data_ptr() == base, "one allocation"
        if v.numel() == 0:
            continue
        start = v.data_ptr() - base
        assert start % ALIGN == 0
        spans.append((start, start + max(v.numel() * v.element_size(), ALIGN)))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "no two views overlap or share an address"
    views[2].fill_(-1)
    views[0].fill_(7)
    assert bool((views[2] == -1).all())
    with pytest.raises(ValueError, match="^shape: expected sizes >= 0"):
        arena((2, -1), torch.int32)


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    """Every arena's bytes garbage when carved (-7 in integer views, NaN in float ones): a call reading a buffer
    it did not write, or a workspace it did not zero, fails."""
    real = Arena.carve

    def carve(self):
        views = real(self)
        for v in views:
            v.fill_(float("nan") if v.dtype.is_floating_point else -7)
        return views
    monkeypatch.setattr(Arena, "carve", carve)


@pytest.fixture
def selections(monkeypatch):
    """Each select_rows call of a top-k call: (logits, ws, plans, tile_maxima)."""
    seen = []
    real = _topk.select_rows

    def spy(logits, k, window, idx, val, ws, **kw):
        seen.append((logits, ws, kw.get("plans"), kw.get("tile_maxima")))
        return real(logits, k, window, idx, val, ws, **kw)
    monkeypatch.setattr(_topk, "select_rows", spy)
    return seen


def _storage(t) -> int:
    return t.untyped_storage().data_ptr()


def _plan_buffers(plans: dict) -> list:
    return [t for plan in plans.values() for t in (plan.cands, *plan.scratch) if isinstance(t, torch.Tensor)]


@needs_interpreter
@pytest.mark.parametrize("path", ["bound", "rounds"])
def test_a_decode_calls_buffers_are_one_allocation(path, selections, monkeypatch):
    """fp8_paged_mqa_topk with ONE_ALLOCATION (its bytes poisoned when carved): its logits, workspace, the tile maxima
    the logits kernel writes (bound) and its plan's buffers are views of one allocation; the answer is torch's and
    that of a buffer each."""
    monkeypatch.setattr(S, "PATH", path)
    real_selection = _decode._decode_selection  # (the interpreter's modules write the maxima where asked)
    monkeypatch.setattr(_decode, "_decode_selection", lambda *a: dataclasses.replace(real_selection(*a),
                                                                                    tile_max_block=64))
    inp = make_decode_inputs(Problem(next_n=2), 3, 8192, seed=4)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx, val = K.fp8_paged_mqa_topk(*args, 256, return_values=True)
    logits, ws, plans, given = selections[-1]
    assert list(plans) == [(logits.shape[0], inp.max_context_len, True if path == "bound" else None, logits.device)]
    held = [logits, ws, *_plan_buffers(plans), *(given[:2] if given else ())]
    assert (given is not None) == (path == "bound")
    assert len({_storage(t) for t in held}) == 1, "one allocation"
    assert bool((ws == 0).all()), "the selection leaves the workspace zero"
    ref = K.fp8_paged_mqa_logits(*args, True)
    windows = _row_windows_decode(inp.context_lens, 2, ref.shape[0])
    assert_same_topk(idx, val, ref, 256, *windows)
    monkeypatch.setattr(_topk_buffers, "ONE_ALLOCATION", False)
    idx_own, val_own = K.fp8_paged_mqa_topk(*args, 256, return_values=True)
    logits, ws, plans, given = selections[-1]
    assert plans is None and _storage(logits) != _storage(ws)
    assert torch.equal(idx.sort(1).values, idx_own.sort(1).values) and torch.equal(val.sort(1).values,
                                                                                  val_own.sort(1).values)


@needs_interpreter
def test_a_prefill_calls_blocks_share_one_allocation(selections, monkeypatch):
    """fp8_mqa_topk over blocks (the bound path's of 3 rows, the last of 2) with ONE_ALLOCATION: the plans are
    made once a row count before the first block's logits, and every block's logits (the scratch), the
    workspace, the maxima and both plans' buffers are views of one allocation; the answer is torch's and that
    of a buffer each."""
    monkeypatch.setattr(S, "PATH", "bound")
    made = []
    real = S.plan_selection
    monkeypatch.setattr(S, "plan_selection", lambda rows, *a, **kw: made.append(rows) or real(rows, *a, **kw))
    logits_calls = []
    real_logits = _topk.topk_ragged_logits
    monkeypatch.setattr(_topk, "topk_ragged_logits", lambda *a: logits_calls.append(len(made)) or real_logits(*a))
    inp = make_prefill_inputs(PREFILL, 20, 1500, seed=4, num_seqs=2)
    budget = 7 * 1500 * 4
    assert _topk.scratch_rows(20, 1500, budget, 128, "cpu") == 3
    idx, val = K.fp8_mqa_topk(*inp.args(), 128, return_values=True, max_scratch_bytes=budget)
    assert made == [3, 2] and logits_calls[0] == 2, "both plans made before the first block's logits"
    assert len(selections) == 7
    held = [t for logits, ws, plans, given in selections for t in (logits, ws, *given[:2])]
    held += _plan_buffers(selections[0][2])
    assert len({_storage(t) for t in held}) == 1, "one allocation"
    assert_same_topk(idx, None, K.fp8_mqa_logits(*inp.args()), 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
    monkeypatch.setattr(_topk_buffers, "ONE_ALLOCATION", False)
    made.clear()
    idx_own, val_own = K.fp8_mqa_topk(*inp.args(), 128, return_values=True, max_scratch_bytes=budget)
    assert made == [3, 2]  # (made at each row count's first block: SHARE_PLANS)
    assert torch.equal(idx.sort(1).values, idx_own.sort(1).values) and torch.equal(val.sort(1).values,
                                                                                  val_own.sort(1).values)
