"""The ragged prefill template's epilogue writes the top-k bound path's tile maxima over absolute keys
(launch(..., tile_max=...)), and fp8_/bf16_mqa_topk use it where the bound path serves a block
(indexer_logits._topk.RAGGED_EPILOGUE, forced on here). Under the interpreter: the logits are those of the launch without it,
bit for bit; each run of TILE keys' maximum over the row's window (-inf for a run outside it, and for
the runs a program skips), each row's run count up to its window's end, and their range as the range
kernel over those maxima leaves it; select_rows fed them selects exactly. Through fp8_mqa_topk: no
maxima kernel and no range kernel run, blocks of rows with windows that start past key 0, and the
answer is torch's; with RAGGED_EPILOGUE off, the path's own first pass."""

import pytest
import torch

import indexer_logits as K
from indexer_logits import _topk, _topk_select as S
from indexer_logits._identity import Config, Problem
from tuner.inputs import make_prefill_inputs

from test_topk import assert_same_topk, needs_interpreter
from test_topk_epilogue import assert_range_state, rendered, watched  # noqa: F401 (a fixture)
from test_topk_tiles import kernels_run  # noqa: F401 (a fixture)

PREFILL = Problem(family="prefill_ragged", page_size=0)


def _windows(rows: int, keys: int, seed: int):
    """Random windows: empty ones, ones starting past key 0 and mid-tile, full ones."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, keys + 1, (rows,), generator=g)
    b = torch.randint(0, keys + 1, (rows,), generator=g)
    ks, ke = torch.minimum(a, b), torch.maximum(a, b)
    ks[0], ke[0] = 0, keys       # a full window
    ks[1], ke[1] = 37, 37        # an empty one
    ks[2], ke[2] = 1, keys - 3   # cut inside its first and last runs
    return ks.to(torch.int32), ke.to(torch.int32)


def _want_maxima(logits, ks, ke, tile):
    """Each run of `tile` absolute keys' maximum over the row's window, and the runs a row counts."""
    rows, keys = logits.shape
    t = torch.arange(keys)
    x = logits.masked_fill(~((t[None, :] >= ks[:, None].long()) & (t[None, :] < ke[:, None].long())), float("-inf"))
    nt = -(-keys // tile)
    x = torch.nn.functional.pad(x, (0, nt * tile - keys), value=float("-inf"))
    maxima = x.view(rows, nt, tile).amax(dim=2)
    ntiles = torch.where(ke > ks, (ke.clamp(max=keys) + tile - 1) // tile, 0).to(torch.int32)
    return maxima, ntiles


def _launch_args(inp):
    k, k_scale = inp.kv
    return inp.q, k, k_scale, inp.weights, inp.cu_seqlen_ks, inp.cu_seqlen_ke


@needs_interpreter
@pytest.mark.parametrize("config, tile", [
    (Config(block_t=64, tiles_per_program=4, block_m=4, orient="k_rows", dot_dtype="fp16"), 16),
    (Config(block_t=64, tiles_per_program=2, block_m=2, orient="k_rows", dot_dtype="fp16"), 8),
    (Config(block_t=32, tiles_per_program=4, block_m=4, orient="q_rows", dot_dtype="fp16"), 8)],
    ids=["k_rows-16", "k_rows-8", "q_rows-8"])
@pytest.mark.parametrize("merge_range", [False, True], ids=["maxima", "maxima+range"])
def test_the_epilogue_writes_the_bound_paths_tile_maxima(rendered, config, tile, merge_range):
    """... and with a state (tile_max's 4th to 6th: the workspace, the first selection's offset and row
    stride), the maxima's range merged into it as the range kernel over them would."""
    mod = rendered(PREFILL, config)
    assert mod.SUPPORTS_TILE_MAX is True and mod.TILE_MAX_ANY_SHAPE is True
    rows, keys, k = 7, 1000, 64
    inp = make_prefill_inputs(PREFILL, rows, keys, seed=3)
    ks, ke = _windows(rows, keys, seed=3)
    inp = type(inp)(inp.q, inp.kv, inp.weights, ks, ke)
    out, ref = torch.full((rows, keys), 5.0), torch.full((rows, keys), 5.0)
    maxima = torch.full((rows, -(-keys // tile) + 3), 7.0)  # wider than the runs: never read there
    ntiles = torch.full((rows,), -5, dtype=torch.int32)
    ws = S.workspace(rows, "cpu")
    per_row = S.state_words(S.path_settings("bound"))
    first_state = ws.view(-1)[rows * per_row:2 * rows * per_row]
    extra = (ws, rows * per_row, per_row) if merge_range else ()
    mod.launch(*_launch_args(inp), out, True, tile_max=(maxima, ntiles, tile, *extra))
    mod.launch(*_launch_args(inp), ref, True)
    assert torch.equal(out, ref), "the logits as without the epilogue, bit for bit"
    want_max, want_nt = _want_maxima(ref, ks, ke, tile)
    assert torch.equal(ntiles, want_nt)
    for r in range(rows):
        assert torch.equal(maxima[r, :int(want_nt[r])], want_max[r, :int(want_nt[r])]), f"row {r}"
    assert bool((maxima[:, -3:] == 7.0).all()), "nothing stored past the runs"
    assert_range_state(first_state.view(rows, per_row), ws, merge_range, want_max, want_nt)
    idx = torch.full((rows, k), 7, dtype=torch.int32)
    S.select_rows(out, k, S.WINDOW_RAGGED, idx, None, ws, lo=ks, hi=ke, path="bound", settings={"TILE": tile},
                  tile_maxima=(maxima, ntiles, True) if merge_range else (maxima, ntiles))
    assert_same_topk(idx, None, ref, k, ks, ke)
    assert int(ws.abs().sum()) == 0


@needs_interpreter
def test_a_tile_that_does_not_divide_the_key_tile_is_refused(rendered):
    mod = rendered(PREFILL, Config(block_t=32, tiles_per_program=2, block_m=2, dot_dtype="fp16"))
    inp = make_prefill_inputs(PREFILL, 2, 100, seed=1)
    with pytest.raises(ValueError, match="tile_max: tiles of 64 keys"):
        mod.launch(*_launch_args(inp), torch.empty(2, 100), False,
                   tile_max=(torch.empty(2, 2), torch.empty(2, dtype=torch.int32), 64))


@needs_interpreter
@pytest.mark.parametrize("cache", ["fp8", "bf16"])
def test_ragged_topk_takes_the_first_pass_from_the_logits_kernel(kernels_run, cache, monkeypatch):
    """The bound path serving every block of a prefill top-k: each block's logits launch writes the maxima
    and their range, the selection launches neither the maxima kernel nor a range kernel, and the answer
    is torch's over windows that start past key 0 (two sequences) and empty ones; RAGGED_EPILOGUE off: the
    path's own first pass again, the same answer."""
    monkeypatch.setattr(S, "PATH", "bound")
    monkeypatch.setattr(_topk, "RAGGED_EPILOGUE", True)
    problem = PREFILL if cache == "fp8" else Problem(family="prefill_ragged", q_dtype="bf16", cache_dtype="bf16",
                                                      page_size=0, scale_layout="none")
    inp = make_prefill_inputs(problem, 20, 1500, seed=4, num_seqs=2)
    ks, ke = inp.cu_seqlen_ks.clone(), inp.cu_seqlen_ke.clone()
    ke[5] = ks[5]  # an empty window
    inp = type(inp)(inp.q, inp.kv, inp.weights, ks, ke)
    topk, logits_fn = (K.fp8_mqa_topk, K.fp8_mqa_logits) if cache == "fp8" else (K.bf16_mqa_topk, K.bf16_mqa_logits)
    written = []
    real = _topk.topk_ragged_logits
    monkeypatch.setattr(_topk, "topk_ragged_logits", watched(real, written))
    idx, val = topk(*inp.args(), 128, return_values=True, max_scratch_bytes=7 * 1500 * 4)
    assert len(written) > 1 and all(written), "every block's logits launch wrote the maxima"
    assert "topk_tile_max_kernel" not in kernels_run and "topk_range_kernel" not in kernels_run
    assert kernels_run.count("topk_bound_count_kernel") == len(written)
    logits = logits_fn(*inp.args())
    # Index sets against one call's logits; the values within rounding only: under the interpreter a row's
    # logits move in the last bits with the rows sharing its program (numpy's matmul by column position),
    # and the blocks of 7 rows group them unlike one call's programs of 4.
    assert_same_topk(idx, None, logits, 128, ks, ke)
    got = idx >= 0
    at = (idx.long() + ks.long()[:, None]).clamp(min=0)  # the indices count from the row's window start
    torch.testing.assert_close(val[got], logits.gather(1, at)[got], rtol=1e-5, atol=1e-6)
    assert bool((val[~got] == float("-inf")).all())
    kernels_run.clear()
    monkeypatch.setattr(_topk, "RAGGED_EPILOGUE", False)
    idx_off = topk(*inp.args(), 128, max_scratch_bytes=7 * 1500 * 4)
    assert kernels_run.count("topk_tile_max_kernel") == kernels_run.count("topk_bound_count_kernel") > 1
    assert_same_topk(idx_off, None, logits, 128, ks, ke)


@needs_interpreter
def test_ragged_topk_on_another_path_asks_no_maxima(kernels_run, monkeypatch):
    """Where rounds serves the blocks (or tiles: its tiles start at each row's window), the logits launch
    is asked nothing and the selection runs as before."""
    monkeypatch.setattr(S, "PATH", "rounds")
    monkeypatch.setattr(_topk, "RAGGED_EPILOGUE", True)
    inp = make_prefill_inputs(PREFILL, 6, 900, seed=5)
    asked = []
    real = _topk.topk_ragged_logits
    monkeypatch.setattr(_topk, "topk_ragged_logits", lambda *a: asked.append(a[-1]) or real(*a))
    idx = K.fp8_mqa_topk(*inp.args(), 64)
    assert asked == [None]
    assert S.tiles_first_pass(6, 900, 64, "cpu", "prefill") == (0, 0)
    monkeypatch.setattr(S, "PATH", "tiles")
    assert S.tiles_first_pass(6, 900, 64, "cpu", "prefill") == (0, 0)
    assert S.tiles_first_pass(6, 900, 64, "cpu", "decode")[0] > 0
    assert_same_topk(idx, None, K.fp8_mqa_logits(*inp.args()), 64, inp.cu_seqlen_ks, inp.cu_seqlen_ke)


@pytest.mark.parametrize("flag", ["RAGGED_EPILOGUE", "EPILOGUE"])
@needs_interpreter
def test_ragged_epilogue_is_on_by_default_and_either_flag_turns_it_off(flag, kernels_run, monkeypatch):
    """On by default (measured: docs/perf_logs/topk_prefill_blocks/call4_*): a prefill block served by the
    bound path asks its logits launch for the maxima; with RAGGED_EPILOGUE or EPILOGUE off, the path's own
    first pass runs and the logits launch is asked nothing."""
    monkeypatch.setattr(S, "PATH", "bound")
    assert _topk.RAGGED_EPILOGUE is True and _topk.EPILOGUE is True
    asked = []
    real = _topk.topk_ragged_logits
    monkeypatch.setattr(_topk, "topk_ragged_logits", lambda *a: asked.append(a[-1]) or real(*a))
    inp = make_prefill_inputs(PREFILL, 6, 900, seed=5)
    K.fp8_mqa_topk(*inp.args(), 64)
    assert asked[-1] is not None and "topk_tile_max_kernel" not in kernels_run
    monkeypatch.setattr(_topk, flag, False)
    idx = K.fp8_mqa_topk(*inp.args(), 64)
    assert asked[-1] is None and kernels_run.count("topk_tile_max_kernel") == 1
    assert_same_topk(idx, None, K.fp8_mqa_logits(*inp.args()), 64, inp.cu_seqlen_ks, inp.cu_seqlen_ke)


@needs_interpreter
@pytest.mark.parametrize("path", ["bound", "rounds"])
def test_a_calls_blocks_share_one_selection_plan_a_row_count(path, kernels_run, monkeypatch):
    """SHARE_PLANS: the blocks of one prefill top-k (the bound path's of 3 rows, its buffers counted in the
    budget, the last of 2; the four kernels' of 7, the last of 6) make the selection's plan twice, once a row
    count (the bound path's with the maxima the logits kernel wrote in place of its own, block after block),
    and give the answer of a plan a block; a plan refuses maxima it was not built for."""
    monkeypatch.setattr(S, "PATH", path)
    made = []
    real = S.plan_selection
    monkeypatch.setattr(S, "plan_selection", lambda rows, *a, **kw: made.append(rows) or real(rows, *a, **kw))
    inp = make_prefill_inputs(PREFILL, 20, 1500, seed=4, num_seqs=2)
    budget = 7 * 1500 * 4
    step = _topk.scratch_rows(20, 1500, budget, 128, "cpu")
    assert step == (3 if path == "bound" else 7)
    blocks = [step] * (20 // step) + [20 % step]
    assert _topk.SHARE_PLANS is True
    idx, val = K.fp8_mqa_topk(*inp.args(), 128, return_values=True, max_scratch_bytes=budget)
    assert made == [step, 20 % step]
    if path == "bound":
        assert kernels_run.count("topk_bound_count_kernel") == len(blocks)
        assert "topk_tile_max_kernel" not in kernels_run, "each block's maxima from its logits kernel"
        given_plan = real(step, 1500, 128, S.WINDOW_RAGGED, "cpu", kind="prefill", maxima_given=True)
        assert given_plan.scratch[:2] == (None, None), "no maxima of its own where the logits kernel writes them"
    monkeypatch.setattr(_topk, "SHARE_PLANS", False)
    made.clear()
    idx_own, val_own = K.fp8_mqa_topk(*inp.args(), 128, return_values=True, max_scratch_bytes=budget)
    assert made == blocks
    assert torch.equal(idx.sort(1).values, idx_own.sort(1).values) and torch.equal(val.sort(1).values,
                                                                                  val_own.sort(1).values)
    assert_same_topk(idx, None, K.fp8_mqa_logits(*inp.args()), 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)
    if path == "bound":
        plan = real(7, 1500, 128, S.WINDOW_RAGGED, "cpu", kind="prefill")  # built without given maxima
        given = (torch.zeros(7, plan.tile_shape), torch.zeros(7, dtype=torch.int32), True)
        with pytest.raises(ValueError, match="^tile_maxima: given for a plan built without them"):
            plan.run(torch.zeros(7, 1500), torch.empty(7, 128, dtype=torch.int32), None, S.workspace(7, "cpu"),
                     None, None, torch.full((7,), 1500, dtype=torch.int32), given)
