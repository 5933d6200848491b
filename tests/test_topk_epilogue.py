"""The decode template's epilogue writes the top-k's tile maxima (launch(..., tile_max=...)), and
the decode top-k uses it where the tiles path serves (indexer_logits._topk.EPILOGUE). Under the
interpreter: the logits are those of the launch without it, bit for bit; the maxima and tile counts
are what the tiles path's own first pass computes (every orientation, the run store, next_n 1 and 2,
1-D and 2-D lengths, rows whose limit cuts a tile) and their range what its range kernel leaves;
select_rows fed them selects exactly; a persistent grid's module refuses it. Through
fp8_paged_mqa_topk: no maxima kernel and no range kernel run, the answer is torch's, and a module
that cannot write them (a persistent grid) leaves the selection its own first pass."""

import dataclasses
import tempfile
from pathlib import Path

import pytest
import torch

import indexer_logits as K
from indexer_logits import _decode, _topk, _topk_select as S, _topk_tiles as TT
from indexer_logits._tile_max_rule import rows_width, tile_max_block
from indexer_logits._identity import Config, Problem
from tuner.inputs import make_decode_inputs
from tuner.render import load_module, render

from test_topk import _row_windows_decode, assert_same_topk, needs_interpreter
from test_topk_tiles import kernels_run  # noqa: F401 (a fixture)

K_ROWS = dict(block_t=64, tiles_per_program=4, num_stages=3, orient="k_rows", dot_dtype="fp16")


@pytest.fixture(scope="module")
def rendered():
    gen = Path(tempfile.mkdtemp())

    def module(problem, config):
        path = gen / f"{problem.slug}__{config.slug}.py"
        path.write_text(render(problem, config))
        return load_module(path)
    return module


def _path_maxima(logits, lens, next_n, tile):
    """The tiles path's own first pass (topk_tile_max_kernel) over these logits."""
    rows, width = logits.shape
    nt = TT.tiles_for(width, tile)
    maxima = torch.full((rows, nt), float("-inf"))
    ntiles = torch.empty(rows, dtype=torch.int32)
    window = S.WINDOW_LIMIT if lens.dim() == 2 else S.WINDOW_CAUSAL
    flat = lens.reshape(-1) if lens.dim() == 2 else lens
    win = S._window_args(logits, maxima, None, None, flat, next_n)
    TT.topk_tile_max_kernel[(rows, 1)](*win, maxima, maxima.stride(0), ntiles, nt * tile, WINDOW=window, TILE_=tile,
                                       STEP=max(1, 2048 // tile))
    return maxima, ntiles, window, flat


def _range_words(maxima, ntiles):
    """Words 10 and 11 of each row's state as the range kernel leaves them over its maxima: the
    largest order key and the complement of the smallest finite one, as unsigned keys (key + 2**31)
    in int32 bits; zero (an empty range) where the row has no tile."""
    def int32(u):
        return u - (1 << 32) if u >= 1 << 31 else u
    out = torch.zeros(maxima.shape[0], 2, dtype=torch.int32)
    for r in range(maxima.shape[0]):
        m = maxima[r, :int(ntiles[r])]
        if m.numel():
            key = m.view(torch.int32).long()
            key = torch.where(key < 0, key ^ 0x7FFFFFFF, key)
            out[r, 0] = int32((int(key.max()) + (1 << 31)) & 0xFFFFFFFF)
            out[r, 1] = int32(0xFFFFFFFF - ((int(key[m > float("-inf")].min()) + (1 << 31)) & 0xFFFFFFFF))
    return out


def watched(real, written: list):
    """`real` (a logits call returning (logits, whether the maxima were written)), run once a call, its
    second item appended to `written`."""
    def call(*a):
        r = real(*a)
        written.append(r[1])
        return r
    return call


def assert_range_state(state, ws, merge_range, want_max, want_nt):
    """The first selection's state after a launch with tile_max: the maxima's range in words 10 and 11 and
    nothing else (merge_range), or the whole workspace untouched."""
    if merge_range:
        assert torch.equal(state[:, 10:12], _range_words(want_max, want_nt))
        assert int(state[:, :10].abs().sum()) == int(state[:, 12:].abs().sum()) == 0
    else:
        assert int(ws.abs().sum()) == 0


@needs_interpreter
@pytest.mark.parametrize("next_n, lens_mode", [(1, "1d"), (2, "1d"), (2, "2d")])
@pytest.mark.parametrize("config, tile", [(Config(**K_ROWS), 8), (Config(**K_ROWS, store="run"), 16),
                                          (Config(block_t=32, tiles_per_program=2, dot_dtype="fp16"), 8)],
                         ids=["k_rows", "k_rows-run", "q_rows"])
@pytest.mark.parametrize("merge_range", [False, True], ids=["maxima", "maxima+range"])
def test_the_epilogue_writes_the_paths_tile_maxima(rendered, next_n, lens_mode, config, tile, merge_range):
    """... and with a state (tile_max's 4th to 6th: the workspace, the first selection's offset and
    row stride), the maxima's range merged into it as the first selection's range kernel would:
    select_rows(tile_maxima=(maxima, ntiles, True))."""
    problem = Problem(next_n=next_n, lens_mode=lens_mode)
    mod = rendered(problem, config)
    batch, width, k = 3, 1400, 64
    inp = make_decode_inputs(problem, batch, width, "random", seed=next_n)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table)
    rows = batch * next_n
    out, ref = torch.empty(rows, width), torch.empty(rows, width)
    maxima = torch.full((rows, TT.tiles_for(width, tile) + 3), 7.0)  # wider than the tiles: never read there
    ntiles = torch.full((rows,), -5, dtype=torch.int32)
    ws = S.workspace(rows, "cpu")
    per_row = S.kernels().STATE + 2 * S.path_settings("tiles")["BINS"]
    first_state = ws.view(-1)[rows * per_row:2 * rows * per_row]
    extra = (ws, rows * per_row, per_row) if merge_range else ()
    mod.launch(*args, out, width, False, tile_max=(maxima, ntiles, tile, *extra))
    mod.launch(*args, ref, width, False)
    want_max, want_nt, window, flat = _path_maxima(ref, inp.context_lens, next_n, tile)
    r = torch.arange(rows)
    hi = (flat.long() if window == S.WINDOW_LIMIT else flat.long()[r // next_n] - next_n + r % next_n + 1).clamp(0, width)
    assert torch.equal(ntiles, want_nt)
    for r in range(rows):  # (the logits past a row's limit are unspecified: clean_logits False)
        assert torch.equal(out[r, :int(hi[r])], ref[r, :int(hi[r])])
        assert torch.equal(maxima[r, :int(want_nt[r])], want_max[r, :int(want_nt[r])]), f"row {r}"
    assert_range_state(first_state.view(rows, per_row), ws, merge_range, want_max, want_nt)
    idx = torch.full((rows, k), 7, dtype=torch.int32)
    S.select_rows(out, k, window, idx, None, ws, lens=flat, next_n=next_n, path="tiles", settings={"TILE": tile},
                  tile_maxima=(maxima, ntiles, True) if merge_range else (maxima, ntiles))
    assert_same_topk(idx, None, out, k, torch.zeros_like(hi), hi)
    assert int(ws.abs().sum()) == 0


@needs_interpreter
def test_a_persistent_grid_refuses_tile_maxima(rendered):
    problem = Problem()
    mod = rendered(problem, Config(block_t=64, tiles_per_program=1, programs_per_sm=2, dot_dtype="fp16"))
    assert mod.SUPPORTS_TILE_MAX is False
    inp = make_decode_inputs(problem, 2, 512, "random", seed=1)
    out = torch.empty(2, 512)
    with pytest.raises(ValueError, match="tile_max"):
        mod.launch(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, out, 512, False,
                   tile_max=(torch.empty(2, 64), torch.empty(2, dtype=torch.int32), 8))


def _paged_call(next_n=2, lens_mode="1d", seed=4):
    inp = make_decode_inputs(Problem(next_n=next_n, lens_mode=lens_mode), 3, 8192, seed=seed)
    return inp, (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)


@needs_interpreter
@pytest.mark.parametrize("next_n, lens_mode", [(1, "1d"), (2, "1d"), (2, "2d")])
@pytest.mark.parametrize("path", ["tiles", "bound"])
def test_paged_topk_takes_the_first_pass_from_the_logits_kernel(kernels_run, next_n, lens_mode, path, monkeypatch):
    """The tiles or bound path serving a decode top-k: the logits launch writes the maxima and their
    range (tile_max), the selection launches neither the maxima kernel nor a range kernel, and the
    answer is torch's on the same logits; with EPILOGUE off, the path's own first pass again."""
    monkeypatch.setattr(S, "PATH", path)
    # the interpreter's default modules store per tile, where the runtime does not ask (too dear on the
    # GPU: test_the_epilogue_is_asked_of_run_store_modules_only); this test is of the wiring
    real_selection = _decode._decode_selection
    monkeypatch.setattr(_decode, "_decode_selection", lambda *a: dataclasses.replace(real_selection(*a),
                                                                                    tile_max_block=64))
    inp, args = _paged_call(next_n, lens_mode)
    written = []
    real = _decode._paged_logits
    monkeypatch.setattr(_decode, "_paged_logits", watched(real, written))
    idx, val = K.fp8_paged_mqa_topk(*args, 256, return_values=True)
    assert written == [True]
    assert "topk_tile_max_kernel" not in kernels_run and "topk_range_kernel" not in kernels_run
    logits = K.fp8_paged_mqa_logits(*args, True)
    rows = logits.shape[0]
    if lens_mode == "2d":
        lo, hi = torch.zeros(rows, dtype=torch.long), inp.context_lens.reshape(-1).long()
    else:
        lo, hi = _row_windows_decode(inp.context_lens, next_n, rows)
    assert_same_topk(idx, val, logits, 256, lo, hi)
    kernels_run.clear()
    monkeypatch.setattr(_topk, "EPILOGUE", False)
    idx_off = K.fp8_paged_mqa_topk(*args, 256)
    assert written[-1] is False
    assert kernels_run.count("topk_tile_max_kernel") == 1 and kernels_run.count("topk_range_kernel") == 1
    assert_same_topk(idx_off, None, logits, 256, lo, hi)


@needs_interpreter
def test_a_module_without_the_epilogue_leaves_the_selection_its_first_pass(kernels_run, monkeypatch):
    """A serving module that cannot write the maxima (a persistent grid, an older table's module:
    Selection.tile_max_block 0): the logits alone, the selection's own maxima and range kernels, the
    same answer; the call's shape is remembered, so later calls do not ask again."""
    monkeypatch.setattr(S, "PATH", "tiles")
    monkeypatch.setattr(_topk, "_NO_EPILOGUE", set())
    real = _decode._decode_selection
    monkeypatch.setattr(_decode, "_decode_selection",
                        lambda *a: dataclasses.replace(real(*a), tile_max_block=0))
    asked = []
    real_logits = _decode._paged_logits
    monkeypatch.setattr(_decode, "_paged_logits", lambda *a: asked.append(a[-1] is not None) or real_logits(*a))
    inp, args = _paged_call()
    idx = K.fp8_paged_mqa_topk(*args, 256)
    assert kernels_run.count("topk_tile_max_kernel") == 1 and kernels_run.count("topk_range_kernel") == 1
    logits = K.fp8_paged_mqa_logits(*args, True)
    assert_same_topk(idx, None, logits, 256, *_row_windows_decode(inp.context_lens, 2, logits.shape[0]))
    K.fp8_paged_mqa_topk(*args, 256)
    assert asked[0] is True and asked[-1] is False and len(_topk._NO_EPILOGUE) == 1


def test_the_epilogue_is_asked_of_run_store_modules_and_of_per_tile_ones_for_few_long_rows(rendered):
    """Selection.tile_max_block: the key tile of a split-grid module that stores its logits once a
    run; of one that stores per tile only for at most 16 rows of 256K keys or more (elsewhere the
    per-tile maxima cost the logits kernel more than they save: 8-30% on the H200); 0 for a persistent
    grid (which stores per tile: store "run" is the split grid's) whatever the shape."""
    problem = Problem()
    run = rendered(problem, Config(**K_ROWS, store="run"))
    tile = rendered(problem, Config(**K_ROWS))
    persistent = rendered(problem, Config(block_t=64, tiles_per_program=1, programs_per_sm=2, dot_dtype="fp16"))
    for rows, width, expect in ((64, 32768, [64, 0, 0]), (64, 1 << 20, [64, 0, 0]), (17, 1 << 18, [64, 0, 0]),
                                (16, (1 << 18) - 1, [64, 0, 0]), (16, 1 << 18, [64, 64, 0]), (1, 1 << 20, [64, 64, 0])):
        assert [tile_max_block(m, rows, width) for m in (run, tile, persistent)] == expect, (rows, width)
    assert [tile_max_block(m) for m in (run, tile, persistent)] == [64, 0, 0]  # no shape: run store only
    assert rows_width({"next_n": 2}, (8, 1 << 18)) == (16, 1 << 18)  # rows are batch x next_n


def test_clear_cache_forgets_the_shapes_whose_module_could_not_write_the_maxima():
    """clear_cache() (tables replaced): a shape once served by a module without the epilogue is asked again."""
    _topk._NO_EPILOGUE.add(("a call shape",))
    K.clear_cache()
    assert not _topk._NO_EPILOGUE
