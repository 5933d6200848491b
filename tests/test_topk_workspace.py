"""The top-k's workspace: a call whose every block the row path serves gets the device's one empty workspace (no
allocation, no fill kernel: _topk_select.call_workspace, SKIP_UNREAD_WORKSPACE); any other call a zeroed one of
at least its largest block's rows, kept from the last call on the same stream (_topk_workspace: the selection's
last kernel leaves it zero again), never one that a call which raised held, one a stream, and in a CUDA graph's
capture one a capture and stream (the capture's first call makes it, a fill node in the graph). The answers are
torch's either way."""

import pytest
import torch

import indexer_logits as K
from indexer_logits import _topk, _topk_select as S, _topk_workspace as W
from indexer_logits._identity import Problem
from tuner.inputs import make_decode_inputs, make_prefill_inputs

from test_topk import _row_windows_decode, assert_same_topk, needs_interpreter

PREFILL = Problem(family="prefill_ragged", page_size=0)


@pytest.fixture
def workspaces(monkeypatch):
    """The workspace each select_rows call of a top-k call was handed; the store emptied first."""
    seen = []
    real = _topk.select_rows

    def spy(logits, k, window, idx, val, ws, **kw):
        seen.append(ws)
        return real(logits, k, window, idx, val, ws, **kw)
    monkeypatch.setattr(_topk, "select_rows", spy)
    monkeypatch.setattr(W, "_KEPT", {})
    return seen


def _decode_args(rows=3, width=4096, device="cpu", seed=2):
    inp = make_decode_inputs(Problem(next_n=2), rows, width, seed=seed, device=device)
    return inp, (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)


def _check(idx, val, inp, args, k):
    ref = K.fp8_paged_mqa_logits(*args, True).cpu()
    assert_same_topk(idx, val, ref, k, *_row_windows_decode(inp.context_lens.cpu(), 2, ref.shape[0]))


@needs_interpreter
@pytest.mark.parametrize("path", ["row", "rounds", "bound"])
def test_a_decode_calls_workspace_is_kept_or_none(path, workspaces, monkeypatch):
    """The row path: the one empty workspace. The others (bound: the logits kernel merging the maxima's range
    into it): a zeroed one of 6 rows in a power of two, the same one for the next call, zero after each."""
    monkeypatch.setattr(S, "PATH", path)
    inp, args = _decode_args()
    idx, val = K.fp8_paged_mqa_topk(*args, 256, return_values=True)
    ws = workspaces[0]
    assert bool((ws == 0).all()), "the selection leaves it zero"
    again = K.fp8_paged_mqa_topk(*args, 256)
    assert workspaces[1] is ws
    if path == "row":
        assert ws.numel() == 0 and not W._KEPT
    else:
        assert tuple(ws.shape) == S.workspace_shape(8) and list(W._KEPT.values()) == [ws]
    _check(idx, val, inp, args, 256)
    assert torch.equal(idx.sort(1).values, again.sort(1).values)
    monkeypatch.setattr(S, "SKIP_UNREAD_WORKSPACE", False)
    monkeypatch.setattr(W, "KEEP", False)
    K.fp8_paged_mqa_topk(*args, 256)
    assert tuple(workspaces[-1].shape) == S.workspace_shape(6) and workspaces[-1] is not ws


@needs_interpreter
def test_a_call_that_raises_gives_no_workspace_back(workspaces, monkeypatch):
    """A call whose `out` is refused after its logits launch (the bound path's logits kernel has merged the
    maxima's range into the workspace by then): its workspace is not kept, and the next call's answer is exact."""
    monkeypatch.setattr(S, "PATH", "bound")
    inp, args = _decode_args()
    with pytest.raises(ValueError, match="^out: expected int32"):
        K.fp8_paged_mqa_topk(*args, 256, out=torch.empty(6, 255, dtype=torch.int32))
    assert not W._KEPT
    idx = K.fp8_paged_mqa_topk(*args, 256)
    _check(idx, None, inp, args, 256)
    assert list(W._KEPT.values()) == [workspaces[-1]]


@needs_interpreter
def test_a_prefill_whose_last_block_another_path_serves_takes_a_workspace(workspaces, monkeypatch):
    """Blocks of 3 rows the row path's, the last of 2 the four kernels': a zeroed workspace of 3 rows (4, in a
    power of two) for all, kept; every block the row path's: the empty one."""
    monkeypatch.setattr(S, "_serving", lambda rows, *a: ("rounds", None) if rows == 2 else ("row", None))
    inp = make_prefill_inputs(PREFILL, 20, 1500, seed=4, num_seqs=2)
    budget = 3 * 1500 * 4
    assert _topk.scratch_rows(20, 1500, budget, 128, "cpu") == 3
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=budget)
    assert len(workspaces) == 7 and all(ws is workspaces[0] for ws in workspaces)
    assert tuple(workspaces[0].shape) == S.workspace_shape(4) and list(W._KEPT.values()) == [workspaces[0]]
    logits = K.fp8_mqa_logits(*inp.args())
    assert_same_topk(idx, None, logits, 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
    monkeypatch.setattr(S, "_serving", lambda rows, *a: ("row", None))
    workspaces.clear()
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=2 * 1500 * 4)
    assert len(workspaces) == 10 and workspaces[0].numel() == 0
    assert_same_topk(idx, None, logits, 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)


def test_the_store_keeps_one_a_stream_and_size_and_at_most_max_kept(monkeypatch):
    """take: a kept workspace leaves the store (two calls at once never hold one), sizes in powers of two;
    give_back: at most MAX_KEPT, none without a key."""
    monkeypatch.setattr(W, "_KEPT", {})
    monkeypatch.setattr(W, "MAX_KEPT", 2)
    made = []
    make = lambda n: made.append(n) or torch.zeros(2 * n, 4, dtype=torch.int32)  # noqa: E731
    cpu = torch.device("cpu")
    a, key_a = W.take(5, cpu, make)
    assert made == [8] and key_a == ("cpu", 8)
    b, key_b = W.take(7, cpu, make)
    assert made == [8, 8] and b is not a, "the first is out of the store until given back"
    W.give_back(key_a, a)
    assert W.take(6, cpu, make)[0] is a and made == [8, 8]
    W.give_back(key_a, a)
    W.give_back(("cpu", 16), torch.zeros(1))
    W.give_back(("cpu", 32), torch.zeros(1))
    assert len(W._KEPT) == 2
    W.give_back(None, b)
    assert len(W._KEPT) == 2
    monkeypatch.setattr(W, "KEEP", False)
    assert W.take(5, cpu, make)[1] is None and made[-1] == 5


def test_a_capture_is_keyed_by_its_id_and_a_streams_later_capture_drops_its_earlier_ones(monkeypatch):
    """_stream_key while a stream captures: (device, stream, capture id), None where the driver does not say the id
    or KEEP_CAPTURED is off. give_back of a capture's workspace drops the same stream's other captures' (that
    stream's earlier captures have ended), not another stream's, nor an eager call's."""
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0xBEEF, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 1, raising=False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    monkeypatch.setattr(W, "_capture_id", lambda stream: 77 if stream == 0xBEEF else None)
    gpu = torch.device("cuda", 1)
    assert W._stream_key(gpu) == (1, 0xBEEF, 77)
    assert W._stream_key(torch.device("cuda", 0)) is None, "not the current device"
    monkeypatch.setattr(W, "KEEP_CAPTURED", False)
    assert W._stream_key(gpu) is None
    monkeypatch.setattr(W, "KEEP_CAPTURED", True)
    monkeypatch.setattr(W, "_capture_id", lambda stream: None)
    assert W._stream_key(gpu) is None, "no id, no keeping"
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert W._stream_key(gpu) == (1, 0xBEEF)

    monkeypatch.setattr(W, "_KEPT", {})
    eager, other_stream, first = (1, 0xBEEF, 8), (1, 0xCAFE, 5, 8), (1, 0xBEEF, 5, 8)
    for key in (eager, other_stream, first, (1, 0xBEEF, 5, 16)):
        W.give_back(key, torch.zeros(1))
    assert len(W._KEPT) == 4, "one capture keeps one a size"
    W.give_back((1, 0xBEEF, 6, 8), torch.zeros(1))
    assert set(W._KEPT) == {eager, other_stream, (1, 0xBEEF, 6, 8)}


def test_the_capture_id_is_none_off_a_capture():
    """The null stream captures nothing: None, whether or not this machine has libcuda."""
    assert W._capture_id(0) is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_one_workspace_a_capture_each_graph_exact_from_garbage(workspaces, monkeypatch):
    """Three calls captured in one graph share one workspace, made in the capture (its fill a node of the graph),
    none an eager call's; a second graph captured on the same stream makes its own and the store drops the
    first's. With garbage in both workspaces, the two graphs replayed at once on two streams are exact."""
    monkeypatch.setattr(S, "PATH", "bound")
    assert W._capture_info() is not None, "this driver should say a capture's id (cuStreamGetCaptureInfo)"
    inp, args = _decode_args(rows=4, width=8192, device="cuda")
    K.fp8_paged_mqa_topk(*args, 512)
    torch.cuda.synchronize()
    eager = dict(W._KEPT)
    graphs, outs, made = [], [], []
    for _ in range(2):
        out = [torch.empty(8, 512, dtype=torch.int32, device="cuda") for _ in range(3)]
        graph = torch.cuda.CUDAGraph()
        seen = len(workspaces)
        with torch.cuda.graph(graph):
            for o in out:
                K.fp8_paged_mqa_topk(*args, 512, out=o)
        mine = workspaces[seen:]
        assert len(mine) == 3 and all(ws is mine[0] for ws in mine), "one workspace a capture"
        assert all(mine[0] is not ws for ws in eager.values())
        graphs.append(graph), outs.append(out), made.append(mine[0])
    assert made[1] is not made[0]
    captured = {k: v for k, v in W._KEPT.items() if len(k) == 4}
    assert list(captured.values()) == [made[1]], "the stream's later capture dropped the earlier one's"
    assert {k: v for k, v in W._KEPT.items() if len(k) != 4} == eager
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for _ in range(2):
        for ws in made:
            ws.fill_(-123456789)
        for out in outs:
            for o in out:
                o.fill_(-7)
        torch.cuda.synchronize()
        for graph, stream in zip(graphs, streams):
            with torch.cuda.stream(stream):
                graph.replay()
        torch.cuda.synchronize()
        for out in outs:
            for o in out:
                _check(o.cpu(), None, inp, args, 512)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_a_workspace_a_stream_and_none_kept_in_capture(workspaces, monkeypatch):
    """Two calls on the current stream share one kept workspace; a call on another stream takes another; with
    KEEP_CAPTURED off a call captured in a CUDA graph takes a new one and keeps none, and the graph's replay is
    exact."""
    monkeypatch.setattr(W, "KEEP_CAPTURED", False)
    monkeypatch.setattr(S, "PATH", "rounds")
    inp, args = _decode_args(rows=4, width=8192, device="cuda")
    K.fp8_paged_mqa_topk(*args, 512)
    idx = K.fp8_paged_mqa_topk(*args, 512)
    assert workspaces[1] is workspaces[0] and len(W._KEPT) == 1
    _check(idx.cpu(), None, inp, args, 512)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        K.fp8_paged_mqa_topk(*args, 512)
    torch.cuda.current_stream().wait_stream(side)
    assert workspaces[2] is not workspaces[0] and len(W._KEPT) == 2
    kept = dict(W._KEPT)
    out = torch.empty(8, 512, dtype=torch.int32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        K.fp8_paged_mqa_topk(*args, 512, out=out)
    assert all(workspaces[-1] is not ws for ws in kept.values()) and W._KEPT == kept
    out.fill_(-7)
    graph.replay()
    torch.cuda.synchronize()
    _check(out.cpu(), None, inp, args, 512)
