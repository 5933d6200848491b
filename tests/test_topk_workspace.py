"""A call whose every block the row path serves gets the device's one empty workspace (no allocation, no fill
kernel: _topk_select.call_workspace, SKIP_UNREAD_WORKSPACE); any other call, or a call of blocks not all the row
path's, a zeroed one of its largest block's rows. The answers are torch's either way."""

import pytest
import torch

import indexer_logits as K
from indexer_logits import _topk, _topk_select as S
from indexer_logits._identity import Problem
from tuner.inputs import make_decode_inputs, make_prefill_inputs

from test_topk import _row_windows_decode, assert_same_topk, needs_interpreter

PREFILL = Problem(family="prefill_ragged", page_size=0)


@pytest.fixture
def workspaces(monkeypatch):
    """The workspace each select_rows call of a top-k call was handed."""
    seen = []
    real = _topk.select_rows

    def spy(logits, k, window, idx, val, ws, **kw):
        seen.append(ws)
        return real(logits, k, window, idx, val, ws, **kw)
    monkeypatch.setattr(_topk, "select_rows", spy)
    return seen


@needs_interpreter
@pytest.mark.parametrize("path", ["row", "rounds"])
def test_a_decode_call_of_the_row_path_takes_no_workspace(path, workspaces, monkeypatch):
    monkeypatch.setattr(S, "PATH", path)
    inp = make_decode_inputs(Problem(next_n=2), 3, 4096, seed=2)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx, val = K.fp8_paged_mqa_topk(*args, 256, return_values=True)
    again = K.fp8_paged_mqa_topk(*args, 256)
    ws = workspaces[0]
    if path == "row":
        assert ws.numel() == 0 and workspaces[1] is ws, "the device's one empty workspace"
    else:
        assert tuple(ws.shape) == S.workspace_shape(6) and bool((ws == 0).all()) and workspaces[1] is not ws
    ref = K.fp8_paged_mqa_logits(*args, True)
    assert_same_topk(idx, val, ref, 256, *_row_windows_decode(inp.context_lens, 2, ref.shape[0]))
    assert torch.equal(idx.sort(1).values, again.sort(1).values)
    monkeypatch.setattr(S, "SKIP_UNREAD_WORKSPACE", False)
    K.fp8_paged_mqa_topk(*args, 256)
    assert tuple(workspaces[-1].shape) == S.workspace_shape(6)


@needs_interpreter
def test_a_prefill_whose_last_block_another_path_serves_takes_a_workspace(workspaces, monkeypatch):
    """Blocks of 3 rows the row path's, the last of 2 the four kernels': a zeroed workspace of 3 rows for all;
    every block the row path's: the empty one."""
    monkeypatch.setattr(S, "_serving", lambda rows, *a: ("rounds", None) if rows == 2 else ("row", None))
    inp = make_prefill_inputs(PREFILL, 20, 1500, seed=4, num_seqs=2)
    budget = 3 * 1500 * 4
    assert _topk.scratch_rows(20, 1500, budget, 128, "cpu") == 3
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=budget)
    assert len(workspaces) == 7 and all(ws is workspaces[0] for ws in workspaces)
    assert tuple(workspaces[0].shape) == S.workspace_shape(3)
    logits = K.fp8_mqa_logits(*inp.args())
    assert_same_topk(idx, None, logits, 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
    monkeypatch.setattr(S, "_serving", lambda rows, *a: ("row", None))
    workspaces.clear()
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=2 * 1500 * 4)
    assert len(workspaces) == 10 and workspaces[0].numel() == 0
    assert_same_topk(idx, None, logits, 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
