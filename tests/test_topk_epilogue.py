"""experiments/topk_epilogue: the decode template whose epilogue writes the top-k's tile maxima
(launch(..., tile_max=(maxima, ntiles, TILE))). Under the interpreter: the logits are the
current template's, bit for bit; the maxima and tile counts are what the tiles path's own first
pass computes (every orientation, the run store, next_n 1 and 2, 1-D and 2-D lengths, rows whose
limit cuts a tile); and select_rows fed them (tile_maxima) selects exactly. A persistent grid's
module refuses it. The candidate with tile_max=None is gated like every candidate
(tests/test_experiments.py)."""

import tempfile
from pathlib import Path

import pytest
import torch

from bench._common import overlay
from indexer_logits import _topk_select as S, _topk_tiles as TT
from indexer_logits._identity import Config, Problem
from tuner.inputs import make_decode_inputs
from tuner.render import TEMPLATE_DIR, load_module, render

from test_topk import assert_same_topk, needs_interpreter

ROOT = Path(__file__).resolve().parent.parent
K_ROWS = dict(block_t=64, tiles_per_program=4, num_stages=3, orient="k_rows", dot_dtype="fp16")


@pytest.fixture(scope="module")
def candidate():
    alt, gen = overlay(ROOT / "experiments" / "topk_epilogue"), Path(tempfile.mkdtemp())

    def module(problem, config, which="alt"):
        path = gen / f"{which}__{problem.slug}__{config.slug}.py"
        path.write_text(render(problem, config, alt if which == "alt" else TEMPLATE_DIR))
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


@needs_interpreter
@pytest.mark.parametrize("next_n, lens_mode", [(1, "1d"), (2, "1d"), (2, "2d")])
@pytest.mark.parametrize("config, tile", [(Config(**K_ROWS), 8), (Config(**K_ROWS, store="run"), 16),
                                          (Config(block_t=32, tiles_per_program=2, dot_dtype="fp16"), 8)],
                         ids=["k_rows", "k_rows-run", "q_rows"])
@pytest.mark.parametrize("merge_range", [False, True], ids=["maxima", "maxima+range"])
def test_the_epilogue_writes_the_paths_tile_maxima(candidate, next_n, lens_mode, config, tile, merge_range):
    """... and with a state (tile_max's 4th and 5th), the maxima's range merged into it as the
    first selection's range kernel would: select_rows(tile_maxima=(maxima, ntiles, True))."""
    problem = Problem(next_n=next_n, lens_mode=lens_mode)
    mod, current = candidate(problem, config), candidate(problem, config, "current")
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
    extra = (first_state, per_row) if merge_range else ()
    mod.launch(*args, out, width, False, tile_max=(maxima, ntiles, tile, *extra))
    current.launch(*args, ref, width, False)
    want_max, want_nt, window, flat = _path_maxima(ref, inp.context_lens, next_n, tile)
    r = torch.arange(rows)
    hi = (flat.long() if window == S.WINDOW_LIMIT else flat.long()[r // next_n] - next_n + r % next_n + 1).clamp(0, width)
    assert torch.equal(ntiles, want_nt)
    for r in range(rows):  # (the logits past a row's limit are unspecified: clean_logits False)
        assert torch.equal(out[r, :int(hi[r])], ref[r, :int(hi[r])])
        assert torch.equal(maxima[r, :int(want_nt[r])], want_max[r, :int(want_nt[r])]), f"row {r}"
    state = first_state.view(rows, per_row)
    if merge_range:
        assert torch.equal(state[:, 10:12], _range_words(want_max, want_nt))
        assert int(state[:, :10].abs().sum()) == int(state[:, 12:].abs().sum()) == 0
    else:
        assert int(ws.abs().sum()) == 0
    idx = torch.full((rows, k), 7, dtype=torch.int32)
    S.select_rows(out, k, window, idx, None, ws, lens=flat, next_n=next_n, path="tiles", settings={"TILE": tile},
                  tile_maxima=(maxima, ntiles, True) if merge_range else (maxima, ntiles))
    assert_same_topk(idx, None, out, k, torch.zeros_like(hi), hi)
    assert int(ws.abs().sum()) == 0


@needs_interpreter
def test_a_persistent_grid_refuses_tile_maxima(candidate):
    problem = Problem()
    mod = candidate(problem, Config(block_t=64, tiles_per_program=1, programs_per_sm=2, dot_dtype="fp16"))
    assert mod.SUPPORTS_TILE_MAX is False
    inp = make_decode_inputs(problem, 2, 512, "random", seed=1)
    out = torch.empty(2, 512)
    with pytest.raises(ValueError, match="tile_max"):
        mod.launch(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, out, 512, False,
                   tile_max=(torch.empty(2, 64), torch.empty(2, dtype=torch.int32), 8))
