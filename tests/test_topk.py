"""The device top-k (indexer_logits._topk_kernels) against torch: exact sets, the tie rule, short
and empty windows, the overflow path, the workspace left zero, and every entry point end to end.

CPU: the selection kernels run under the interpreter (conftest); each test asserts that they, not
the torch fallback, served the call, and the selection tests run every path (S.PATHS: the
four-kernel one, the two-kernel one, the one-program-a-row one; "auto" picks among the first and
the last by shape)."""

import pytest
import torch

import indexer_logits as K
from indexer_logits import _topk, _topk_kernels, _topk_select as S
from _helpers import launches_of
from conftest import INTERPRET
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
from tuner.space import Problem

needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    yield


@pytest.fixture
def launches(monkeypatch):
    """How many times the selection kernels ran (the wrapped launcher), and which path each time."""
    count = {"n": 0, "paths": []}
    real = _topk.select_rows

    def counted(*a, **kw):
        count["n"] += 1
        path = real(*a, **kw)
        count["paths"].append(path)
        return path

    monkeypatch.setattr(_topk, "select_rows", counted)
    return count


def _select(logits, k, lo, hi, values=True, path=None):
    rows = logits.shape[0]
    ws = S.workspace(rows, logits.device)
    idx = torch.full((rows, k), 7, dtype=torch.int32)
    val = torch.full((rows, k), 7.0) if values else None
    served = S.select_rows(logits, k, S.WINDOW_RAGGED, idx, val, ws, lo=lo, hi=hi, path=path)
    assert served == (path or S.pick_path(rows, logits.shape[1], logits.device))
    assert int(ws.abs().sum()) == 0, "the kernels must leave the workspace zero for the next block"
    return idx, val


def assert_same_topk(idx, val, logits, k, lo, hi):
    """Index sets equal torch's under the tie rule (smallest index wins), scores match them,
    -1 / -inf exactly past the window's keys."""
    ref_idx, ref_val = _topk.topk_reference(logits, k, lo, hi)
    for r in range(logits.shape[0]):
        n = max(0, min(int(hi[r]), logits.shape[1]) - max(int(lo[r]), 0))
        got = idx[r].tolist()
        assert sorted(got) == sorted(ref_idx[r].tolist()), f"row {r}: index sets differ"
        assert got.count(-1) == max(0, k - n), f"row {r}: {got.count(-1)} pads for {n} keys"
        if val is not None:
            for i, v in zip(got, val[r].tolist()):
                want = float("-inf") if i < 0 else float(logits[r, int(lo[r]) + i])
                assert v == want, f"row {r}: score {v} beside index {i}, expected {want}"


def _windows(rows, width, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, width + 1, (rows,), generator=g)
    b = torch.randint(0, width + 1, (rows,), generator=g)
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    lo[0], hi[0] = 0, width            # the full row
    lo[1], hi[1] = 5, 5                # empty
    return lo.to(torch.int32), hi.to(torch.int32)


@needs_interpreter
@pytest.mark.parametrize("kind", ["randn", "small_ints", "all_equal", "negative", "with_inf", "tiny", "outlier",
                                  "inf_nan_free_extremes"])
@pytest.mark.parametrize("path", S.PATHS)
def test_selection_exact(kind, path):
    rows, width, k = 6, 9000, 256
    g = torch.Generator().manual_seed(3)
    x = torch.randn(rows, width, generator=g)
    if kind == "small_ints":
        x = torch.randint(0, 7, (rows, width), generator=g).float()   # ties at the k-th value
    elif kind == "all_equal":
        x = torch.zeros(rows, width)                                   # every key ties: overflow path
    elif kind == "negative":
        x = -x.abs() - 1.0
    elif kind == "with_inf":
        x[:, ::3] = float("-inf")
    elif kind == "tiny":
        x = x * 1e-38                                                  # subnormals and zeros
    elif kind == "outlier":
        x[:, 7] = 1e30                                                 # one score stretches the range
    elif kind == "inf_nan_free_extremes":
        x[:, 0], x[:, 1] = float("inf"), -3e38                         # an infinite range: exact overflow path
    lo, hi = _windows(rows, width)
    idx, val = _select(x, k, lo, hi, path=path)
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("kind", ["randn", "small_ints", "with_inf", "outlier", "cands"])
@pytest.mark.parametrize("width", [2048, 1500, 700])
def test_row_path_held_in_registers(kind, width, monkeypatch):
    """The row path with its row held in registers (HOLD, where the block is at most two steps wide: steps of
    1,024 here): the launch holds it, and the answer is torch's for full, partial and empty windows, ties at
    the k-th value, -inf keys, an outlier stretching the range (the exact rounds, which read the row again),
    and a threshold bin of near-equal scores (the candidates' sort)."""
    rows, k = 5, 256
    g = torch.Generator().manual_seed(11)
    x = torch.randn(rows, width, generator=g)
    if kind == "small_ints":
        x = torch.randint(0, 5, (rows, width), generator=g).float()
    elif kind == "with_inf":
        x[:, ::3] = float("-inf")
    elif kind == "outlier":
        x[:, 7] = 1e30
    elif kind == "cands":
        base = torch.tensor(1.0).view(torch.int32)
        x[:, :] = -5.0
        x[:, 0] = 3.0
        x[:, 100:100 + 400] = (base + torch.arange(400, dtype=torch.int32) % 3).view(torch.float32)[:width - 100]
    lo, hi = _windows(rows, width, seed=2)
    launched = launches_of(monkeypatch, "topk_row_kernel")
    ws = S.workspace(rows, "cpu")
    idx, val = torch.full((rows, k), 7, dtype=torch.int32), torch.full((rows, k), 7.0)
    assert S.select_rows(x, k, S.WINDOW_RAGGED, idx, val, ws, lo=lo, hi=hi, path="row",
                         settings={"BLOCK": 1024, "HOLD": True}) == "row"
    assert [kw["HOLD_"] for kw in launched] == [True]
    assert [kw["INLINE_"] for kw in launched] == [False]  # (inline PTX on CUDA only: tl.store's form here)
    assert_same_topk(idx, val, x, k, lo, hi)


def test_row_path_holds_only_rows_of_two_steps_of_few_keys_a_thread():
    """HOLD holds a row of at most two steps, each at most 8 keys a thread (more spilled, cross-compiled)."""
    from indexer_logits import _topk_row as R
    assert R.holds(True, 8192, 4096, 16) and R.holds(True, 4096, 2048, 8) and R.holds(True, 100, 4096, 16)
    assert not R.holds(True, 8193, 4096, 16)  # three steps
    assert not R.holds(True, 8192, 4096, 8) and not R.holds(True, 16384, 8192, 16)  # 16 keys a thread a step
    assert not R.holds(False, 8192, 4096, 16) and not R.holds(None, 8192, 4096, 16)


@needs_interpreter
@pytest.mark.parametrize("path", S.PATHS)
def test_selection_overflow_and_candidates(path):
    """More near-equal keys than the candidate buffer at the threshold (overflow path), and just
    under it (sorted candidates), give the same exact answer."""
    rows, width, k = 2, 6000, 300
    x = torch.randn(rows, width)
    x[0, :] = 1.0
    x[0, 100:350] = 2.0                          # 250 above the threshold; 5750 ties at 1.0
    base = torch.tensor(1.0).view(torch.int32)
    ties = _topk_kernels.CAP - 10               # near-equal scores, one bin: sorted candidates
    x[1, :] = -5.0
    x[1, 0] = 3.0
    x[1, 1000:1000 + ties] = (base + torch.arange(ties, dtype=torch.int32) % 3).view(torch.float32)
    lo = torch.tensor([0, 0], dtype=torch.int32)
    hi = torch.tensor([width, width], dtype=torch.int32)
    idx, val = _select(x, k, lo, hi, path=path)
    assert_same_topk(idx, val, x, k, lo, hi)
    assert sorted(i for i in idx[0].tolist() if x[0, i] == 1.0) == list(range(50)), "ties go to the smallest index"


@needs_interpreter
@pytest.mark.parametrize("rank_tile", [0, 16, 64])
@pytest.mark.parametrize("ties,need", [(3, 2), (70, 50), (200, 133)])
def test_candidates_ranked_in_tiles_or_one_at_a_time(rank_tile, ties, need, monkeypatch):
    """The four-kernel path's last step ranks the candidates left in the final bin: RANK_TILE
    against RANK_TILE a step (one step, several, a partial last tile) or one at a time (0), the
    same exact answer, ties at the k-th score to the smallest index."""
    monkeypatch.setattr(_topk_kernels, "RANK_TILE", rank_tile)
    width = 6000
    x = torch.full((1, width), -5.0)
    x[0, :250] = 3.0 + torch.arange(250) / 64   # 250 certainly above the final bin
    base = torch.tensor(1.0).view(torch.int32)
    x[0, 1000:1000 + ties] = (base + torch.arange(ties, dtype=torch.int32) % 3).view(torch.float32)
    lo = torch.tensor([0], dtype=torch.int32)
    hi = torch.tensor([width], dtype=torch.int32)
    idx, val = _select(x, 250 + need, lo, hi, path="rounds")
    assert_same_topk(idx, val, x, 250 + need, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("scan_slots", [False, True])
@pytest.mark.parametrize("path", S.PATHS)
def test_selection_slot_claims(scan_slots, path, monkeypatch):
    """Both ways of claiming output slots (per-score atomics, per-block prefix sums) are exact."""
    monkeypatch.setattr(S, "SCAN_SLOTS", scan_slots)
    x = torch.randint(0, 50, (3, 7000)).float()
    lo, hi = _windows(3, 7000, seed=9)
    idx, val = _select(x, 700, lo, hi, path=path)
    assert_same_topk(idx, val, x, 700, lo, hi)


def test_trigger_only_where_the_dependents_launch_with_pdl():
    """TRIGGER lets a kernel's dependent launch early only where the path launches them with PDL (on CPU
    tensors never: the interpreter cannot run griddepcontrol)."""
    from indexer_logits._topk_paths import _trigger
    assert _trigger({"TRIGGER": True}, True)
    assert not _trigger({"TRIGGER": True}, False) and not _trigger({"TRIGGER": False}, True)
    assert not _trigger({}, True)  # (the paths without the setting: row, fused, resident)
    assert "TRIGGER" in S.path_settings("bound") and "TRIGGER" in S.path_settings("tiles")
    # None (the built-in): on for decode calls, off for prefill blocks and the selection alone
    for kind, want in (("decode", True), ("prefill", False), (None, False)):
        plan = S.plan_selection(64, 32768, 2048, S.WINDOW_LIMIT, "cpu", kind=kind, path="bound",
                                settings={"TRIGGER": None})
        assert plan.s["TRIGGER"] is want, kind


def test_early_loads_for_decode_calls_only_where_not_set():
    """COUNT_EARLY and COMPACT_EARLY None (the built-in): on for decode calls, off for prefill blocks and the
    selection alone; set (a table's entry or the module's), as set."""
    assert S.path_settings("bound")["COUNT_EARLY"] is None and S.path_settings("bound")["COMPACT_EARLY"] is None
    for kind, want in (("decode", True), ("prefill", False), (None, False)):
        plan = S.plan_selection(64, 32768, 2048, S.WINDOW_LIMIT, "cpu", kind=kind, path="bound")
        assert plan.s["COUNT_EARLY"] is want and plan.s["COMPACT_EARLY"] is want, kind
        plan = S.plan_selection(64, 32768, 2048, S.WINDOW_LIMIT, "cpu", kind=kind, path="bound",
                                settings={"COUNT_EARLY": False, "COMPACT_EARLY": True})
        assert plan.s["COUNT_EARLY"] is False and plan.s["COMPACT_EARLY"] is True, kind


@needs_interpreter
@pytest.mark.parametrize("path", ["rounds", "tiles", "bound"])
def test_selection_with_trigger_set(path, monkeypatch):
    """TRIGGER set (a table's setting or the module's) changes no answer and no launch on CPU tensors."""
    monkeypatch.setattr(S, "TRIGGER", True)
    x = torch.randn(2, 20000)
    lo, hi = _windows(2, 20000, seed=4)
    idx, val = _select(x, 256, lo, hi, path=path)
    assert_same_topk(idx, val, x, 256, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("k", [1, 512, 1000, 2048])
@pytest.mark.parametrize("path", S.PATHS)
def test_selection_k_values(k, path):
    x = torch.randn(3, 5000)
    lo = torch.tensor([0, 10, 0], dtype=torch.int32)
    hi = torch.tensor([5000, 4000, 700], dtype=torch.int32)
    idx, _ = _select(x, k, lo, hi, values=False, path=path)
    assert_same_topk(idx, None, x, k, lo, hi)


def test_auto_picks_the_row_path_where_one_wave_of_programs_fills_the_sms():
    """PATH "auto": one program a row where the rows fill 85-100% of the SMs once (the H200's
    crossover, docs/PERF.md "Top-k"), the four kernels otherwise; the interpreter counts 4 SMs."""
    cpu = torch.device("cpu")
    assert S.PATH == "auto"
    assert [S.pick_path(r, 8192, cpu) for r in (1, 3, 4, 5, 64)] == ["rounds", "rounds", "row", "rounds", "rounds"]
    assert S.pick_path(4, S.ROW_MAX_WIDTH, cpu) == "row" and S.pick_path(4, S.ROW_MAX_WIDTH + 1, cpu) == "rounds"
    with pytest.raises(ValueError, match="^path: "):
        S.select_rows(torch.zeros(1, 8), 2, S.WINDOW_LIMIT, torch.zeros(1, 2, dtype=torch.int32), None,
                      S.workspace(1, cpu), lens=torch.ones(1, dtype=torch.int32), path="nope")


def test_auto_picks_the_bound_path_from_2m_keys_of_rows_of_32k_or_more():
    """A GPU with no table entry for the shape: bound where the H100's crossover had it ahead of rounds
    (2M keys in all, rows of 32K keys or more), not where row or tiles serve (docs/PERF.md)."""
    cpu = torch.device("cpu")
    cases = {(64, 32768): "bound", (63, 32768): "rounds", (4, 1 << 19): "bound", (4, 32768): "row", (8, 1 << 18): "bound",
             (1, 1 << 21): "bound", (1, 1 << 20): "rounds", (128, 16384): "rounds", (256, 65536): "bound",
             (2048, 1 << 20): "tiles"}
    assert {shape: S.pick_path(*shape, cpu) for shape in cases} == cases  # (4 rows: the interpreter's 4 SMs)
    # a decode call of few long rows: the logits kernel writes the maxima, so bound from 512K keys a row
    decode = {(1, 1 << 19): "bound", (3, 1 << 19): "bound", (1, (1 << 19) - 1): "rounds", (1, 1 << 20): "bound",
              (16, 1 << 19): "tiles", (4, 8192): "row"}
    assert {shape: S.pick_path(*shape, cpu, "decode") for shape in decode} == decode
    assert S.pick_path(1, 1 << 20, cpu, "prefill") == S.pick_path(1, 1 << 20, cpu) == "rounds"


@needs_interpreter
def test_paged_topk_on_the_row_path(launches):
    """Four rows of next_n 1 decode (the interpreter's 4 SMs, filled once): "auto" serves the call
    by the one-kernel path, exact."""
    inp = make_decode_inputs(Problem(), 4, 1024, seed=8)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx, val = K.fp8_paged_mqa_topk(*args, 300, return_values=True)
    assert launches["paths"] == ["row"]
    logits = K.fp8_paged_mqa_logits(*args, True)
    lo, hi = _row_windows_decode(inp.context_lens, 1, logits.shape[0])
    assert_same_topk(idx, val, logits, 300, lo, hi)


def test_bad_arguments():
    with pytest.raises(ValueError, match="^k: "):
        _topk.check_k(0)
    with pytest.raises(ValueError, match="^k: "):
        _topk.check_k(2.0)
    with pytest.raises(ValueError, match="^out: expected int32"):
        _topk.top_k_output(torch.empty(2, 3), 2, 3, "cpu")
    with pytest.raises(ValueError, match="^max_scratch_bytes"):
        _topk.scratch_rows(4, 10, max_scratch_bytes=0)


def test_scratch_rows_bound_memory():
    # 4096 x 64K: the full logits are 1 GiB; the scratch is at most a 20th of them
    assert _topk.scratch_rows(4096, 65536) == 4096 // 20
    assert _topk.scratch_rows(16, 512) == 16                       # small prefills: one block
    assert _topk.scratch_rows(100, 1000, max_scratch_bytes=4000 * 3) == 3


# ---------------------------------------------------------------------------------------------
# Entry points, end to end (logits by whatever serves them on CPU, then the device selection).

def _row_windows_decode(lens, next_n, rows):
    r = torch.arange(rows)
    if lens.dim() == 2:
        return torch.zeros(rows, dtype=torch.int32), lens.reshape(-1).to(torch.int32)
    hi = lens.long()[r // next_n] - next_n + r % next_n + 1
    return torch.zeros(rows, dtype=torch.int32), hi.to(torch.int32)


@needs_interpreter
@pytest.mark.parametrize("dtype,next_n,lens_2d", [("fp8", 1, False), ("fp8", 2, False), ("fp8", 2, True),
                                                  ("bf16", 1, False)])
def test_paged_topk(dtype, next_n, lens_2d, launches):
    layout = "page_blocked" if dtype == "fp8" else "none"
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, scale_layout=layout, next_n=next_n,
                      lens_mode="2d" if lens_2d else "1d")
    inp = make_decode_inputs(problem, 3, 1024, seed=2)
    fn = K.fp8_paged_mqa_topk if dtype == "fp8" else K.bf16_paged_mqa_topk
    logits_fn = K.fp8_paged_mqa_logits if dtype == "fp8" else K.bf16_paged_mqa_logits
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx, val = fn(*args, 300, return_values=True, scale_layout=layout)
    assert launches["paths"] == ["rounds"], "6+ rows on the interpreter's 4 'SMs': the four kernels serve the call"
    logits = logits_fn(*args, True, scale_layout=layout)
    lo, hi = _row_windows_decode(inp.context_lens, next_n, logits.shape[0])
    assert_same_topk(idx, val, logits, 300, lo, hi)


@needs_interpreter
def test_ragged_topk_blocks(launches):
    """Blocks of rows through one scratch buffer give the answer of one block."""
    problem = Problem(family="prefill_ragged", page_size=0)
    inp = make_prefill_inputs(problem, 20, 1500, windows="random", seed=4)
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=7 * 1500 * 4)
    assert launches["paths"] == ["rounds"] * 3          # 20 rows in blocks of 7
    logits = K.fp8_mqa_logits(*inp.args())
    assert_same_topk(idx, None, logits, 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
    bf = make_prefill_inputs(Problem(family="prefill_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=0,
                                     scale_layout="none"), 5, 700, seed=5)
    idx, val = K.bf16_mqa_topk(*bf.args(), 64, return_values=True)
    assert_same_topk(idx, val, K.bf16_mqa_logits(*bf.args()), 64, bf.cu_seqlen_ks, bf.cu_seqlen_ke)


@needs_interpreter
def test_chunked_topk(launches):
    problem = Problem(family="prefill_paged")
    inp = make_prefill_paged_inputs(problem, 12, 1024, num_requests=2, seed=6)
    args = (inp.q, inp.kv_cache, inp.weights, inp.row_request, inp.row_limit, inp.block_table, inp.max_context_len)
    idx = K.fp8_paged_mqa_topk_chunked(*args, 200, max_scratch_bytes=5 * 1024 * 4)
    assert launches["paths"] == ["rounds"] * 3
    logits = K.fp8_paged_mqa_logits_chunked(*args)
    assert_same_topk(idx, None, logits, 200, torch.zeros_like(inp.row_limit), inp.row_limit)


def test_reference_backend_serves_torch(monkeypatch, launches):
    monkeypatch.setenv("INDEXER_LOGITS_BACKEND", "reference")
    problem = Problem(family="prefill_ragged", page_size=0)
    inp = make_prefill_inputs(problem, 4, 300, seed=7)
    idx = K.fp8_mqa_topk(*inp.args(), 50)
    assert launches["n"] == 0
    assert_same_topk(idx, None, K.fp8_mqa_logits(*inp.args()), 50, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
