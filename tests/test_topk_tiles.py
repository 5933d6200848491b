"""The two-pass selection over tiles (indexer_logits._topk_tiles, path "tiles") on what is its own:
the bound prunes (the buffer's window is shorter than the row), the pick never keeps 2k tiles or
more, top scores clustered in a few tiles (a bound far below the k-th score), tile maxima tied at
the bound (the first k tied tiles in key order), partial tiles at both window ends, and paged
decode and ragged prefill end to end. Exactness is against a stable descending sort of the same
logits (tests/test_topk.py's assert_same_topk); every test asserts the kernels, not torch, served.
The generic cases (every kind of scores, every k, both slot claims) run this path through
tests/test_topk.py's S.PATHS."""

import pytest
import torch

import indexer_logits as K
from indexer_logits import _topk, _topk_kernels, _topk_select as S, _topk_tiles as TT
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from tuner.space import Problem

from test_topk import _row_windows_decode, _select, assert_same_topk, launches, needs_interpreter  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    yield


@pytest.fixture
def scratch(monkeypatch):
    """The tiles path's buffers of the last call (ntiles and the buffer's windows read after it)."""
    seen = []
    real = S._tiles_scratch

    def keep(*a, **kw):
        seen.append(real(*a, **kw))
        return seen[-1]

    monkeypatch.setattr(S, "_tiles_scratch", keep)
    return seen


@pytest.fixture
def kernels_run(monkeypatch):
    """The names of the kernels select_rows launches (plainly, as on CPU tensors), in order."""
    names = []

    def watch(tag, inputs, key, launches, out_index):
        def launch(fn, grid, *args, **kw):
            names.append(fn.fn.__name__)
            return S._recorded_launches.plain(fn, grid, *args, **kw)
        return launches(launch)
    monkeypatch.setattr(S._recorded_launches, "run", watch)
    return names


def _full(rows, width):
    return torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)


@needs_interpreter
@pytest.mark.parametrize("tile, merge", [(8, False), (16, False), (8, True), (16, True)])
def test_the_bound_prunes_and_stays_exact(tile, merge, scratch, monkeypatch):
    """Random rows 40x longer than k: the picked tiles' keys are a fraction of the row, at most
    2k tiles, and the answer is torch's (the pick gathering the tiles, MERGE, or the gather kernel)."""
    monkeypatch.setattr(TT, "TILE", tile)
    monkeypatch.setattr(TT, "MERGE", merge)
    monkeypatch.setattr(TT, "PICK_BLOCK", 128)  # the pick in several chunks a row
    rows, width, k = 3, 10240, 256
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(1))
    lo, hi = _full(rows, width)
    lo[1], hi[2] = 37, width - 5      # partial tiles at the window's start and end
    idx, val = _select(x, k, lo, hi, path="tiles")
    assert_same_topk(idx, val, x, k, lo, hi)
    cand_len = scratch[-1][5]
    n = (hi - lo).tolist()
    assert scratch[-1][7].shape[1] >= 2 * 3, "the pick must run in more than two chunks a row here"
    for r in range(rows):
        assert k <= int(cand_len[r]) <= 2 * k * tile, f"row {r}: {int(cand_len[r])} keys picked"
        assert int(cand_len[r]) < n[r] // 2, f"row {r}: the bound pruned nothing ({int(cand_len[r])} of {n[r]})"


@needs_interpreter
def test_top_scores_clustered_in_a_few_tiles(scratch):
    """The k best scores in one run of k keys: the k-th tile maximum lies far below the k-th score,
    so the pick keeps about 2k tiles, and the selection over them is still exact."""
    rows, width, k = 2, 12000, 300
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(2))
    x[0, 5000:5000 + k] += 50.0
    x[1, 7:7 + 2 * k] += 50.0
    lo, hi = _full(rows, width)
    idx, val = _select(x, k, lo, hi, path="tiles")
    assert_same_topk(idx, val, x, k, lo, hi)
    assert sorted(idx[0].tolist()) == list(range(5000, 5000 + k))


@needs_interpreter
@pytest.mark.parametrize("levels, merge, rank_tile", [(2, False, 32), (5, False, 32), (2, True, 32), (5, True, 32),
                                                      (5, True, 0)])
def test_tile_maxima_tied_at_the_bound(levels, merge, rank_tile, scratch, monkeypatch):
    """Scores of a few values: most tiles' maxima equal the bound, so the pick takes the first k
    of them in key order (the tied count carried across steps and chunks: a dozen or more chunks a
    row, several steps each here), and ties at the k-th score go to the smallest indices. With
    MERGE the second selection's compaction writes keys from each of its writes: the scores above
    its bin, the candidates ranked in tiles (rank_tile 32) or one at a time (0), and the overflow
    path (two levels: more ties than its candidate buffer holds)."""
    monkeypatch.setattr(TT, "PICK_BLOCK", 16)
    monkeypatch.setattr(TT, "MERGE", merge)
    monkeypatch.setattr(_topk_kernels, "RANK_TILE", rank_tile)
    rows, width, k = 2, 9000, 200
    x = torch.randint(0, levels, (rows, width), generator=torch.Generator().manual_seed(3)).float()
    lo, hi = _full(rows, width)
    hi[1] = width - 3
    idx, val = _select(x, k, lo, hi, path="tiles")
    assert_same_topk(idx, val, x, k, lo, hi)
    tile = TT.tile_for(width, k)
    chunks, blocks = scratch[-1][7].shape[1] // 2, -(-TT.tiles_for(width, tile) // 16)
    assert 6 <= chunks < blocks, "several chunks a row, some of several steps"
    for r in range(rows):
        assert int(scratch[-1][5][r]) <= 2 * k * tile


def _levels(maxima, ntiles, k: int, cap: int, bins: int) -> list:
    """_topk_digits._fit's level of each row, from its tile maxima, in the kernels' float32 steps."""
    levels = []
    for r in range(maxima.shape[0]):
        m = maxima[r, :int(ntiles[r])].float()
        if m.numel() <= k:
            levels.append(1)
            continue
        finite = m[m > float("-inf")]
        span = m.max() - finite.min()
        ok = bool(span > 0) and bool(span < float("inf"))
        scale = torch.tensor(float(bins)) / span if ok else torch.tensor(0.0)
        y = ((m - (finite.min() if ok else 0.0)) * scale).clamp(0.0, bins * (1.0 - 2.0 ** -24))
        d1 = y.to(torch.int32)
        d2 = ((y - d1.float()) * bins).to(torch.int32).clamp(max=bins - 1)
        h1 = torch.bincount(d1, minlength=bins)
        t1 = max(b for b in range(bins) if int(h1[b:].sum()) >= k)
        above1 = int(h1[t1 + 1:].sum())
        if above1 + int(h1[t1]) <= cap:
            levels.append(1)
            continue
        h2 = torch.bincount(d2[d1 == t1], minlength=bins)
        t2 = max(b for b in range(bins) if int(h2[b:].sum()) >= k - above1)
        levels.append(2 if above1 + int(h2[t2:].sum()) <= cap else 0)
    return levels


@needs_interpreter
@pytest.mark.parametrize("cap, fit, level, merge", [(None, True, 1, False), (4, True, 2, False), (-1, True, 0, False),
                                                    (None, False, 0, False), (4, True, 2, True), (-1, True, 0, True)])
def test_the_pick_stops_at_the_bin_that_fits(cap, fit, level, merge, scratch, monkeypatch):
    """The selection over the maxima stops where its threshold bin fits the pick: after round 1
    (the buffer's 2k tiles hold every maximum at or above its bin), after round 2 (a cap that
    round 1's bin overfills, k + 4 here), or not at all (a cap under k, or FIT off: tau, the k-th
    largest maximum, found exactly). Each is the level the kernels' own arithmetic gives
    (_levels), the rows that stopped early keep no tau, the workspace is left zero (_select), and
    every answer is torch's."""
    if cap is not None:
        monkeypatch.setattr(TT, "fit_cap", lambda k: k + cap)
    monkeypatch.setattr(TT, "FIT", fit)
    monkeypatch.setattr(TT, "MERGE", merge)  # (then the last compaction zeroes the first selection's state)
    rows, width, k = 3, 10240, 256
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(5))
    lo, hi = _full(rows, width)
    hi[2] = width - 100
    idx, val = _select(x, k, lo, hi, path="tiles")
    assert_same_topk(idx, val, x, k, lo, hi)
    maxima, ntiles, tau = scratch[-1][0], scratch[-1][1], scratch[-1][8]
    if fit:
        got = _levels(maxima, ntiles, k, TT.fit_cap(k), S.path_settings("tiles")["BINS"])
        assert got == [level] * rows, f"levels {got}, expected {level} in every row"
    for r in range(rows):
        kth = torch.sort(maxima[r, :int(ntiles[r])], descending=True).values[k - 1]
        assert float(tau[r]) == (float("inf") if level else float(kth)), f"row {r}"


@needs_interpreter
def test_the_recorded_launches_key_holds_what_the_launch_code_reads(monkeypatch):
    """A call's launches are replayed by key on a GPU (indexer_logits._recorded_launches), so the key
    must change with everything the tiles launch code reads: its settings (FIT, OWN_PDL among them)
    and the module's pick step and cap. (An A/B that patched one of those between calls and kept
    the key replayed one variant for both: docs/perf_logs/topk_fit_h200/README.md.)"""
    keys = []
    real = S._recorded_launches.run

    def keep(tag, inputs, key, launches, out_index):
        keys.append(key)
        return real(tag, inputs, key, launches, out_index)
    monkeypatch.setattr(S._recorded_launches, "run", keep)
    x = torch.randn(2, 4096, generator=torch.Generator().manual_seed(6))
    lo, hi = _full(2, 4096)
    _select(x, 64, lo, hi, path="tiles")
    monkeypatch.setattr(TT, "PICK_BLOCK", 128)
    _select(x, 64, lo, hi, path="tiles")
    monkeypatch.setattr(TT, "fit_cap", lambda k: k + 4)
    _select(x, 64, lo, hi, path="tiles")
    monkeypatch.setattr(TT, "FIT", False)
    _select(x, 64, lo, hi, path="tiles")
    monkeypatch.setattr(TT, "OWN_PDL", True)
    _select(x, 64, lo, hi, path="tiles")
    monkeypatch.setattr(TT, "MERGE", True)
    _select(x, 64, lo, hi, path="tiles")
    assert len(set(keys)) == len(keys) == 6, keys


@needs_interpreter
@pytest.mark.parametrize("merge", [False, True])
def test_merge_launches_the_pick_that_gathers(merge, kernels_run, monkeypatch):
    """MERGE: the pick copies the tiles (topk_tile_pick_gather_kernel) and the second selection's
    compaction writes keys (topk_compact_remap_kernel, which zeroes the first selection's state):
    no gather, no remap kernel. Off: the pick, the gather, the plain compaction, the remap. Ten
    launches or twelve, the answer torch's either way and the workspace left zero (_select)."""
    monkeypatch.setattr(TT, "MERGE", merge)
    rows, width, k = 2, 6000, 128
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(8))
    lo, hi = _full(rows, width)
    hi[1] = width - 7
    idx, val = _select(x, k, lo, hi, path="tiles")
    assert_same_topk(idx, val, x, k, lo, hi)
    assert ("topk_tile_pick_gather_kernel" in kernels_run) == merge
    assert ("topk_tile_gather_kernel" in kernels_run) == ("topk_tile_pick_kernel" in kernels_run) == (not merge)
    assert len(kernels_run) == (10 if merge else 12) and ("topk_tile_remap_kernel" in kernels_run) == (not merge)
    assert ("topk_compact_remap_kernel" in kernels_run) == merge
    assert kernels_run[-1] == ("topk_compact_remap_kernel" if merge else "topk_tile_remap_kernel")


@needs_interpreter
def test_rows_shorter_than_k_tiles():
    """Windows of fewer than k tiles (the bound is -inf: every tile picked), of fewer than k keys
    (-1 pads), and empty."""
    rows, width, k = 4, 6000, 512
    x = torch.randn(rows, width)
    lo = torch.tensor([0, 100, 3, 9], dtype=torch.int32)
    tile = TT.tile_for(width, k)
    assert tile == 8
    hi = torch.tensor([6000, 100 + k * tile - 9, 300, 9], dtype=torch.int32)  # k - 1 tiles
    idx, val = _select(x, k, lo, hi, path="tiles")
    assert_same_topk(idx, val, x, k, lo, hi)


def test_auto_picks_tiles_for_many_long_rows(monkeypatch):
    """PATH "auto": tiles from TILES_MIN_WIDTH keys, TILES_MIN_ROWS rows and TILES_MIN_KEYS keys in
    all (the H200's crossover), never for one row; prefill's blocks then count its buffers."""
    cpu = torch.device("cpu")
    assert [S.pick_path(r, w, cpu) for r, w in ((1, 1 << 20), (16, 1 << 18), (16, 1 << 19), (64, 1 << 18),
                                                (2048, 1 << 17))] == ["rounds", "bound", "tiles", "tiles", "bound"]
    plain = _topk.scratch_rows(2048, 1 << 20)
    counted = _topk.scratch_rows(2048, 1 << 20, None, 2048, cpu)
    per_row = (1 << 20) * 4 + TT.scratch_bytes(1, 1 << 20, 2048, TT.tile_for(1 << 20, 2048), 0)
    assert counted == 2048 * (1 << 20) * 4 // 20 // per_row < plain
    monkeypatch.setattr(S, "PATH", "rounds")
    assert _topk.scratch_rows(2048, 1 << 20, None, 2048, cpu) == plain


def test_a_table_entry_for_tiles_counts_in_the_blocks(monkeypatch):
    """Where the GPU's tuned table serves a shape by tiles (an entry within an octave), a prefill
    block's budget counts that entry's buffers (its tile), as select_rows will serve it; a rounds
    entry allocates none. (The table is for CUDA devices: a stand-in answers here.)"""
    entry = {"path": "tiles", "settings": {"TILE": 8, "BINS": 32}}
    monkeypatch.setattr(S, "_tuned_entry", lambda rows, width, device, kind=None: entry)
    assert S.scratch_bytes_per_row(64, 131072, 2048, "cpu") == TT.scratch_bytes(1, 131072, 2048, 8, 0)
    assert S._serving(64, 131072, torch.device("cpu")) == ("tiles", entry["settings"])
    entry = {"path": "rounds", "settings": {"BINS": 32}}
    assert S.scratch_bytes_per_row(64, 131072, 2048, "cpu") == 0


def test_scratch_is_counted():
    """scratch_bytes is what the path allocates (the pick's list is capped by the row's tiles)."""
    for rows, width, k, tile in ((3, 10240, 256, 16), (2, 1000, 512, 8), (1, 1 << 20, 2048, 32)):
        s = S.path_settings("tiles", {"TILE": tile})
        got = sum(t.numel() * t.element_size() for t in S._tiles_scratch(rows, width, k, s, "cpu"))
        chunks = S._pick_chunks(rows, TT.tiles_for(width, tile), s)[1]
        assert got == TT.scratch_bytes(rows, width, k, tile, chunks)
    assert TT.picked_for(1000, 512, 8) == 125 and TT.picked_for(1 << 20, 2048, 32) == 4096


@needs_interpreter
def test_paged_topk_over_tiles(launches, monkeypatch):
    """fp8 paged decode, next_n 2 with 1-D lengths (causal windows), the tiles path serving."""
    monkeypatch.setattr(S, "PATH", "tiles")
    inp = make_decode_inputs(Problem(next_n=2), 3, 8192, seed=4)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx, val = K.fp8_paged_mqa_topk(*args, 256, return_values=True)
    assert launches["paths"] == ["tiles"]
    logits = K.fp8_paged_mqa_logits(*args, True)
    lo, hi = _row_windows_decode(inp.context_lens, 2, logits.shape[0])
    assert_same_topk(idx, val, logits, 256, lo, hi)


@needs_interpreter
def test_ragged_prefill_over_tiles(launches, monkeypatch):
    """fp8 ragged prefill (random windows) in blocks of rows, the tiles path serving each block."""
    monkeypatch.setattr(S, "PATH", "tiles")
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 20, 6000, windows="random", seed=6)
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=7 * 6000 * 4)
    step = _topk.scratch_rows(20, 6000, 7 * 6000 * 4, 128, "cpu")
    assert step < 7, "the budget holds the tiles path's buffers beside the block's logits"
    assert launches["paths"] == ["tiles"] * -(-20 // step)
    logits = K.fp8_mqa_logits(*inp.args())
    assert_same_topk(idx, None, logits, 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)


@needs_interpreter
def test_tile_maxima_given_replace_the_first_pass(kernels_run, monkeypatch):
    """select_rows' tile_maxima (what the decode logits epilogue writes: tests/test_topk_epilogue.py): the
    tiles path launches no maxima kernel, reads the given ones (a wider buffer too) and stays
    exact; maxima of the wrong form, or for another path, are refused naming the argument."""
    rows, width, k, tile = 3, 9000, 200, 8
    monkeypatch.setattr(TT, "TILE", tile)
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(9))
    lens = torch.tensor([width, width - 13, 5000], dtype=torch.int32)
    ntiles = (lens + tile - 1) // tile
    maxima = torch.full((rows, 1200), 123.0)  # wider than the row's tiles: the rest is never read
    for r in range(rows):
        row = torch.full((int(ntiles[r]) * tile,), float("-inf"))
        row[:int(lens[r])] = x[r, :int(lens[r])]
        maxima[r, :int(ntiles[r])] = row.view(-1, tile).max(1).values
    idx = torch.full((rows, k), 7, dtype=torch.int32)
    ws = S.workspace(rows, "cpu")
    assert S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path="tiles",
                         tile_maxima=(maxima, ntiles.to(torch.int32))) == "tiles"
    assert "topk_tile_max_kernel" not in kernels_run and int(ws.abs().sum()) == 0
    assert_same_topk(idx, None, x, k, torch.zeros_like(lens), lens)
    for bad in ((maxima[:, :10], ntiles.to(torch.int32)), (maxima, ntiles.long()), (maxima.double(), ntiles), maxima,
                (maxima, ntiles.to(torch.int32), "range")):
        with pytest.raises(ValueError, match="tile_maxima"):
            S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path="tiles", tile_maxima=bad)
    with pytest.raises(ValueError, match="tile_maxima: only the tiles and bound paths"):
        S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path="rounds",
                      tile_maxima=(maxima, ntiles.to(torch.int32)))
