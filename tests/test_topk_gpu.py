"""The device top-k on the GPU: exact against a stable sort of the same logits at the issue's
shapes, CUDA-graph replay with other lengths, no host synchronisation, and the prefill's memory
bound at 2048 x 1M."""

from collections import Counter

import pytest
import torch

import indexer_logits as K
from bench.topk import mismatched_rows, sampled_mismatches
from indexer_logits import _topk, _topk_fused as F, _topk_select as S
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
from tuner.space import Problem
from test_topk_epilogue import watched

pytestmark = pytest.mark.gpu


@pytest.fixture(params=S.PATHS)
def path(request, monkeypatch):
    """Each selection path in turn serves the entry points (four kernels, two, one program a row)."""
    monkeypatch.setattr(S, "PATH", request.param)
    return request.param


def _decode(batch, ctx, next_n=1, lens_2d=False, dtype="fp8", lens="full", seed=0):
    layout = "page_blocked" if dtype == "fp8" else "none"
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, scale_layout=layout, next_n=next_n,
                      lens_mode="2d" if lens_2d else "1d")
    inp = make_decode_inputs(problem, batch, ctx, lens=lens, device="cuda", seed=seed, max_pool_bytes=2 << 30)
    return inp, (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx), layout


def _decode_windows(context_lens, next_n, rows):
    r = torch.arange(rows, device="cuda")
    if context_lens.dim() == 2:
        hi = context_lens.reshape(-1).int()
    else:
        hi = (context_lens.long()[r // next_n] - next_n + r % next_n + 1).int()
    return torch.zeros_like(hi), hi.clamp(min=0)


@pytest.mark.parametrize("batch,ctx,next_n,lens_2d,dtype,lens", [
    (64, 32768, 1, False, "fp8", "full"), (1, 1048576, 1, False, "fp8", "full"),
    (128, 8192, 1, False, "fp8", "random"), (32, 8192, 2, True, "fp8", "random"),
    (16, 16384, 2, False, "fp8", "random"), (8, 8192, 1, False, "bf16", "random")])
def test_decode_topk_exact(batch, ctx, next_n, lens_2d, dtype, lens, path):
    inp, args, layout = _decode(batch, ctx, next_n, lens_2d, dtype, lens)
    logits_fn = K.fp8_paged_mqa_logits if dtype == "fp8" else K.bf16_paged_mqa_logits
    topk_fn = K.fp8_paged_mqa_topk if dtype == "fp8" else K.bf16_paged_mqa_topk
    logits = logits_fn(*args, False, scale_layout=layout)
    idx, val = topk_fn(*args, 2048, return_values=True, scale_layout=layout)
    lo, hi = _decode_windows(inp.context_lens, next_n, logits.shape[0])
    assert mismatched_rows(idx, logits, lo, hi, 2048) == 0
    safe = idx.clamp(min=0).long()
    want = torch.where(idx >= 0, logits.gather(1, safe), torch.full_like(val, float("-inf")))
    assert torch.equal(val, want)


def test_decode_topk_graph_replay_no_sync(path):
    inp, args, _ = _decode(32, 16384, lens="random", seed=1)
    out = torch.empty(32, 2048, dtype=torch.int32, device="cuda")
    K.fp8_paged_mqa_topk(*args, 2048, out=out)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        K.fp8_paged_mqa_topk(*args, 2048, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        K.fp8_paged_mqa_topk(*args, 2048, out=out)
    for lens in (torch.full_like(inp.context_lens, 1), torch.full_like(inp.context_lens, 16384),
                 torch.randint(1, 16385, inp.context_lens.shape, device="cuda", dtype=torch.int32)):
        inp.context_lens.copy_(lens)
        g.replay()
        torch.cuda.synchronize()
        logits = K.fp8_paged_mqa_logits(*args, False)
        lo, hi = _decode_windows(inp.context_lens, 1, 32)
        assert mismatched_rows(out, logits, lo, hi, 2048) == 0
    prefill = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 64, 4096, device="cuda").args()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        K.fp8_paged_mqa_topk(*args, 2048, out=out)
        K.fp8_mqa_topk(*prefill, 512)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("next_n", [1, 2])
def test_decode_topk_takes_the_tile_maxima_from_the_logits_kernel(next_n, monkeypatch):
    """Where the tiles path serves (the H200's top-k table: 64 rows of 128K) and the logits module
    stores per run (Selection.tile_max_block: on the H200 next_n 1's, not next_n 2's), the logits
    launch writes its first pass (indexer_logits._topk.EPILOGUE), on the first call, on the recorded
    launch that serves the second, and in a CUDA graph replayed with other lengths; exact each time,
    with or without it."""
    from indexer_logits import _decode as D
    written = []
    monkeypatch.setattr(D, "_paged_logits", watched(D._paged_logits, written))
    batch, ctx = 64 // next_n, 131072
    inp, args, _ = _decode(batch, ctx, next_n, lens="random", seed=7)
    if not S.tiles_first_pass(64, ctx, 2048, "cuda")[0]:
        monkeypatch.setattr(S, "PATH", "tiles")  # a GPU whose table serves this shape by another path
    expect = bool(K.paged_selection(*args[:5], ctx).tile_max_block)
    if torch.cuda.get_device_name().startswith("NVIDIA H200"):
        assert expect == (next_n == 1), "the committed H200 table's 64 x 128K configs: run store at next_n 1 only"
    out = torch.empty(64, 2048, dtype=torch.int32, device="cuda")
    lo, hi = _decode_windows(inp.context_lens, next_n, 64)
    for _ in range(2):
        K.fp8_paged_mqa_topk(*args, 2048, out=out)
        assert written.pop() is expect
        logits = K.fp8_paged_mqa_logits(*args, False)
        assert mismatched_rows(out, logits, lo, hi, 2048) == 0
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        K.fp8_paged_mqa_topk(*args, 2048, out=out)
    assert written.pop() is expect
    for lens in (torch.full_like(inp.context_lens, next_n), torch.randint(next_n, ctx + 1, inp.context_lens.shape,
                                                                          device="cuda", dtype=torch.int32)):
        inp.context_lens.copy_(lens)
        g.replay()
        torch.cuda.synchronize()
        logits = K.fp8_paged_mqa_logits(*args, False)
        lo, hi = _decode_windows(inp.context_lens, next_n, 64)
        assert mismatched_rows(out, logits, lo, hi, 2048) == 0


def test_ragged_topk_random_windows_exact():
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 300, 20000, windows="random",
                              device="cuda", seed=2)
    idx = K.fp8_mqa_topk(*inp.args(), 1024, max_scratch_bytes=64 * 20000 * 4)  # 5 blocks of rows
    logits = K.fp8_mqa_logits(*inp.args(), False)
    assert mismatched_rows(idx, logits, inp.cu_seqlen_ks, inp.cu_seqlen_ke, 1024) == 0


@pytest.mark.parametrize("num_seqs", [1, 3])
def test_ragged_topk_takes_the_tile_maxima_from_the_logits_kernel(num_seqs, monkeypatch):
    """The bound path serving every block of a 64K-key prefill: each block's logits launch writes the
    maxima over absolute keys and their range (windows from key 0, and from past it with three
    sequences), first through the launch code, then as the fast path's recorded launch; exact.
    (RAGGED_EPILOGUE forced on, as it is by default.)"""
    monkeypatch.setattr(S, "PATH", "bound")
    monkeypatch.setattr(_topk, "RAGGED_EPILOGUE", True)
    rows, keys = 600, 65536
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda",
                              num_seqs=num_seqs, seed=num_seqs)
    written = []
    real = _topk.topk_ragged_logits
    monkeypatch.setattr(_topk, "topk_ragged_logits", watched(real, written))
    logits = K.fp8_mqa_logits(*inp.args(), False)
    for _ in range(2):  # the second call replays the recorded launches
        idx = K.fp8_mqa_topk(*inp.args(), 2048, max_scratch_bytes=128 * keys * 4)
        assert mismatched_rows(idx, logits, inp.cu_seqlen_ks, inp.cu_seqlen_ke, 2048) == 0
    assert len(written) == 2 * -(-rows // _topk.scratch_rows(rows, keys, 128 * keys * 4, 2048, "cuda"))
    assert all(written)


def test_chunked_topk_exact():
    inp = make_prefill_paged_inputs(Problem(family="prefill_paged"), 500, 32768, device="cuda", seed=3)
    args = (inp.q, inp.kv_cache, inp.weights, inp.row_request, inp.row_limit, inp.block_table, inp.max_context_len)
    idx = K.fp8_paged_mqa_topk_chunked(*args, 2048, max_scratch_bytes=128 * 32768 * 4)
    logits = K.fp8_paged_mqa_logits_chunked(*args, False)
    assert mismatched_rows(idx, logits, torch.zeros_like(inp.row_limit), inp.row_limit, 2048) == 0


def test_prefill_topk_memory_2048x1m():
    rows, keys = 2048, 1 << 20
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device="cuda")
    out = torch.empty(rows, 2048, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    K.fp8_mqa_topk(*inp.args(), 2048, out=out)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    assert extra <= rows * keys * 4 // 16, f"{extra / 2**20:.0f} MiB extra"
    bad, checked = sampled_mismatches(inp, out, 2048)
    assert checked >= 4 * 64 and bad == 0


def _scores_of_kind(kind, rows, width, seed):
    """(scores, the generator after them) that send a selection down each branch: candidates in the
    buffer (randn), ties at the k-th score and the overflow path (small_ints), a range stretched by
    one score (outlier), a top the fused path's sampled range never saw (unsampled_top), one value."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, width, device="cuda", generator=g)
    if kind == "small_ints":
        x = torch.randint(0, 50, (rows, width), device="cuda", generator=g).float()
    elif kind == "outlier":
        x[:, 12345 % width] = 1e30
    elif kind == "unsampled_top":
        t = torch.arange(width, device="cuda")
        x[:, (t % (width // (F.SAMPLE // 32)) >= 32) & (t % (width // (F.SAMPLE // 32)) < 72)] += 100.0
    elif kind == "all_equal":
        x = torch.zeros(rows, width, device="cuda")
    return x, g


@pytest.mark.parametrize("kind", ["randn", "small_ints", "outlier", "unsampled_top", "all_equal"])
def test_selection_compiled_kinds(kind, path):
    """The compiled selection (atomics across programs, the last program's reads) on rows that send
    it down each branch: candidates in the buffer, ties at the k-th score, the overflow path, a
    top the sampled range never saw; 16 rows of 64K keys, k 2048, every path."""
    rows, width, k = 16, 65536, 2048
    x, g = _scores_of_kind(kind, rows, width, seed=7)
    lo = torch.zeros(rows, dtype=torch.int32, device="cuda")
    hi = torch.randint(1, width + 1, (rows,), dtype=torch.int32, device="cuda", generator=g)
    hi[0] = width
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")
    assert S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=hi) == path
    assert mismatched_rows(idx, x, lo, hi, k) == 0
    assert int(ws.abs().sum()) == 0


@pytest.mark.parametrize("fit, own_pdl, merge", [(False, False, False), (True, False, False), (False, True, False),
                                                 (True, True, False), (True, False, True), (False, True, True)])
@pytest.mark.parametrize("kind", ["randn", "small_ints", "outlier"])
def test_tiles_settings_exact_eager_and_in_a_graph(kind, fit, own_pdl, merge):
    """The tiles path with its first selection stopping at the bin that fits (FIT) or finding tau,
    its own kernels launched with PDL or not (OWN_PDL), its pick gathering the tiles or a gather
    kernel after it (MERGE), on rows that stop at a bin (randn) or do not (ties: small_ints; an
    outlier's range): exact eagerly and in a CUDA graph replayed over other scores, the workspace
    left zero each time. 16 rows of 64K keys, k 2048."""
    rows, width, k = 16, 65536, 2048
    g = torch.Generator(device="cuda").manual_seed(11)

    def scores():
        x = torch.randn(rows, width, device="cuda", generator=g)
        if kind == "small_ints":
            x = torch.randint(0, 50, (rows, width), device="cuda", generator=g).float()
        elif kind == "outlier":
            x[:, 4321] = 1e30
        return x
    x = scores()
    lo = torch.zeros(rows, dtype=torch.int32, device="cuda")
    hi = torch.randint(k, width + 1, (rows,), dtype=torch.int32, device="cuda", generator=g)
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")
    settings = {"FIT": fit, "OWN_PDL": own_pdl, "MERGE": merge}

    def select():
        return S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=hi, path="tiles", settings=settings)
    assert select() == "tiles"
    assert mismatched_rows(idx, x, lo, hi, k) == 0 and int(ws.abs().sum()) == 0
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        select()
    for _ in range(2):
        x.copy_(scores())
        idx.fill_(-7)
        graph.replay()
        torch.cuda.synchronize()
        assert mismatched_rows(idx, x, lo, hi, k) == 0 and int(ws.abs().sum()) == 0


def test_a_second_call_is_served_by_its_recorded_launches(path):
    """A shape's second top-k call launches the first one's CompiledKernels again (every launch of
    the path, Triton 3.6.0's C launcher directly) and selects what the first call's launch code
    selected, for decode and for every block of a prefill."""
    from indexer_logits import _direct_launch, _recorded_launches as R
    R.clear()
    inp, args, _ = _decode(64, 8192, lens="random", seed=2)
    first, first_val = K.fp8_paged_mqa_topk(*args, 2048, return_values=True)
    (seq,) = R.sequences().values()
    # tiles: twelve launches, ten where the logits kernel wrote the maxima and their range (EPILOGUE);
    # bound: five, three there
    epilogue = 2 * bool(K.paged_selection(*args[:5], 8192).tile_max_block) if path in ("tiles", "bound") else 0
    assert seq.calls == 0 and len(seq.replays) == {"rounds": 4, "fused": 2, "row": 1, "tiles": 12 - epilogue,
                                                   "bound": 5 - epilogue, "resident": 1}[path]
    if _direct_launch.triton_version() in _direct_launch.SUPPORTED:
        assert all(r.direct is not None for r in seq.replays)
    out, val = torch.full_like(first, 7), torch.empty_like(first_val)
    second = K.fp8_paged_mqa_topk(*args, 2048, return_values=True, out=out, values_out=val)
    assert seq.calls == 1 and second[0] is out
    order = first.sort(1).indices  # slots are taken in no fixed order: compare (index, score) pairs
    assert torch.equal(first.sort(1).values, out.sort(1).values)
    assert torch.equal(first_val.gather(1, order), val.gather(1, out.sort(1).indices))
    R.clear()
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 300, 8192, windows="random",
                              device="cuda", seed=4)
    budget = 64 * 8192 * 4  # blocks of 64 rows (tiles: fewer, its buffers counted in the budget)
    idx = K.fp8_mqa_topk(*pre.args(), 1024, max_scratch_bytes=budget)
    # a full block's key holds its ks / ke slices' addresses mod 16 (4-byte rows): each full block
    # after the first of its alignment replays; a shorter last block is a key of its own
    step = _topk.scratch_rows(300, 8192, budget, 1024, "cuda")
    aligned = Counter(i * step * 4 % 16 for i in range(300 // step))
    assert sorted(s.calls for s in R.sequences().values()) == sorted(
        [n - 1 for n in aligned.values()] + ([0] if 300 % step else []))
    logits = K.fp8_mqa_logits(*pre.args(), False)
    assert mismatched_rows(idx, logits, pre.cu_seqlen_ks, pre.cu_seqlen_ke, 1024) == 0


def test_the_tuned_table_is_written_exact_and_served(tmp_path, monkeypatch, request):
    """tune-topk's loop on the GPU (two settings a path, one bucket): the table it writes names an
    exact setting, and the runtime's "auto" path serves that entry for the bucket's shape."""
    import json
    from indexer_logits import _topk_table
    from tuner import topk_tune
    monkeypatch.setattr(topk_tune, "space", lambda path, rows, width, sms: {
        "rounds": [dict(BINS=32, RANK_TILE=0), dict(BINS=64, RANK_TILE=32)],
        "row": [dict(CAP=512, NUM_WARPS=16), dict(CAP=1024, NUM_WARPS=8)]}.get(path, []))
    slug_dir = tmp_path / "tables" / "gpu"
    (entry,) = topk_tune.run([(64, 8192)], 2048, slug_dir / "topk.json", tmp_path / "trials.jsonl", log=print)
    assert entry["us"] > 0 and entry["default_us"] > 0
    trials = [json.loads(x) for x in (tmp_path / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 4 and all(t["exact"] for t in trials)
    table = _topk_table.validate(json.loads((slug_dir / "topk.json").read_text()), slug_dir / "topk.json")
    monkeypatch.setattr(_topk_table, "load", lambda slug: table)
    _topk_table.clear()  # the shapes' answers kept from the real table, before and after this one
    request.addfinalizer(_topk_table.clear)
    served = []
    real = S._PATH_CODE[entry["path"]]
    monkeypatch.setitem(S._PATH_CODE, entry["path"], lambda launch, s, *a: served.append(s) or real(launch, s, *a))
    monkeypatch.setattr(S, "PATH", "auto")
    # an earlier test's call of this shape under the same path and settings (where the tune kept the
    # built-in ones) left its launches recorded, and a replay runs no launch code: forget them
    S._recorded_launches.clear()
    inp, args, _ = _decode(64, 8192, lens="random", seed=6)
    idx = K.fp8_paged_mqa_topk(*args, 2048)
    assert served and all(served[-1][n] == v for n, v in entry["settings"].items())
    logits = K.fp8_paged_mqa_logits(*args, False)
    lo, hi = _decode_windows(inp.context_lens, 1, 64)
    assert mismatched_rows(idx, logits, lo, hi, 2048) == 0


@pytest.mark.parametrize("rows, width", [(1, 1 << 20), (64, 32768), (128, 8192), (5, 100000)])
@pytest.mark.parametrize("kind", ["randn", "small_ints", "outlier", "all_equal"])
def test_resident_exact_eager_and_in_a_graph(rows, width, kind):
    """The one-launch selection's barrier across a row's programs (1 x 1M: 128 programs a row; 64 x
    32K: 2; 128 x 8K: 1): exact eagerly and in a replayed CUDA graph (new lengths written between
    replays), the workspace left zero, and the path that served asserted."""
    x, g = _scores_of_kind(kind, rows, width, seed=11)
    lens = torch.full((rows,), width, dtype=torch.int32, device="cuda")
    lo = torch.zeros_like(lens)
    idx = torch.empty(rows, 2048, dtype=torch.int32, device="cuda")
    ws = S.workspace(rows, "cuda")

    def call():
        return S.select_rows(x, 2048, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path="resident")
    assert call() == "resident"
    assert mismatched_rows(idx, x, lo, lens, 2048) == 0 and int(ws.abs().sum()) == 0
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for new in (torch.randint(1, width + 1, (rows,), device="cuda", generator=g, dtype=torch.int32), lens * 0 + 7):
        lens.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        assert mismatched_rows(idx, x, lo, lens, 2048) == 0 and int(ws.abs().sum()) == 0


def test_resident_falls_back_where_its_programs_cannot_all_be_resident():
    rows = torch.cuda.get_device_properties(0).multi_processor_count + 1
    x = torch.randn(rows, 4096, device="cuda")
    lens = torch.full((rows,), 4096, dtype=torch.int32, device="cuda")
    idx = torch.empty(rows, 512, dtype=torch.int32, device="cuda")
    assert S.select_rows(x, 512, S.WINDOW_LIMIT, idx, None, S.workspace(rows, "cuda"), lens=lens,
                         path="resident") == "rounds"
    assert mismatched_rows(idx, x, torch.zeros_like(lens), lens, 512) == 0
