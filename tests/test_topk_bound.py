"""The selection bounded by the tile maxima (indexer_logits._topk_bound, path "bound") on what is
its own: the bound admits a few percent of a long row's keys and the answer stays torch's; rows
with fewer than k tiles, of at most k keys, empty, and partial windows; long runs of tied scores at
the bound (the candidates overflow into the exact radix); a row of one value (the maxima's range
empty); the workspace left zero; the maxima and their range given by the kernel before. Exactness
is against a stable descending sort (tests/test_topk.py's assert_same_topk); the kernels, not
torch, serve every call. The generic cases (every kind of scores, every k, both slot claims) run
this path through tests/test_topk.py's S.PATHS; the decode epilogue through
tests/test_topk_epilogue.py."""

import os
import random

import pytest
import torch

from indexer_logits import _topk_bound as B, _topk_select as S, _topk_tiles as TT
from indexer_logits import _topk_launch
from indexer_logits._topk_launch import chunk_size

from test_topk import _select, assert_same_topk, needs_interpreter
from test_topk_epilogue import _range_words
from test_topk_tiles import kernels_run  # noqa: F401 (a fixture)


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    yield


@pytest.fixture(params=[(False, False, False, False, False), (True, False, False, False, False),
                        (True, True, False, False, False), (True, False, True, False, False),
                        (True, False, False, True, False), (True, True, False, True, False),
                        (True, False, False, False, True), (True, False, False, True, True),
                        (True, False, True, False, True), (False, False, False, False, True),
                        (True, False, False, "vote", False), (True, False, False, "vote", True)],
                ids=["chunks", "segments", "prefetch", "lanes", "ballot", "ballot-prefetch", "early",
                     "ballot-early", "lanes-early", "chunks-early", "vote", "vote-early"])
def segments(request, monkeypatch):
    """The compaction reading its chunk of the row, or the keys' count's segments (SEGMENTS); the
    count loading a step ahead (COUNT_PREFETCH) in steps of 1,024 keys (COUNT_STEP), or filling a
    sub-segment a row of 32 keys of a step (COUNT_LANES), or claiming its slots from a counter
    (COUNT_BALLOT), or filling a sub-segment a warp by votes (COUNT_VOTE), or none of these; the count's and
    the compaction's independent loads first (COUNT_EARLY, COMPACT_EARLY) or not."""
    seg, ahead, lanes, ballot, early = request.param
    monkeypatch.setattr(B, "COUNT_VOTE", ballot == "vote")
    ballot = ballot is True
    monkeypatch.setattr(B, "COUNT_EARLY", early)
    monkeypatch.setattr(B, "COMPACT_EARLY", early)
    monkeypatch.setattr(B, "SEGMENTS", seg)
    monkeypatch.setattr(B, "COUNT_PREFETCH", ahead)
    monkeypatch.setattr(B, "COUNT_STEP", 1024 if ahead else 0)
    monkeypatch.setattr(B, "COUNT_LANES", lanes)
    monkeypatch.setattr(B, "COUNT_BALLOT", ballot)
    return seg


def _keys_counted(logits, k, lo, hi, settings, monkeypatch) -> list:
    """Per row, the keys the bound admitted (the keys' histogram of step 3, read before the
    compaction, which is not launched here)."""
    rows = logits.shape[0]
    ws = S.workspace(rows, logits.device)

    def until_compaction(tag, inputs, key, launches, out_index):
        def launch(fn, grid, *args, **kw):
            if fn.fn.__name__ != "topk_bound_compact_kernel":
                S._recorded_launches.plain(fn, grid, *args, **kw)
        return launches(launch)
    with monkeypatch.context() as m:
        m.setattr(S._recorded_launches, "run", until_compaction)
        idx = torch.empty(rows, k, dtype=torch.int32, device=logits.device)
        S.select_rows(logits, k, S.WINDOW_RAGGED, idx, None, ws, lo=lo, hi=hi, path="bound", settings=settings)
    s = S.path_settings("bound", settings)
    per_row, bins = S.state_words(s), 2 * s["BINS"]  # (the keys' histogram spans both of the state's)
    return [int(ws.view(-1)[r * per_row + 16:r * per_row + 16 + bins].sum()) for r in range(rows)]


@needs_interpreter
@pytest.mark.parametrize("tile", [4, 8, 16])
def test_the_bound_admits_few_keys_and_stays_exact(tile, segments, kernels_run, monkeypatch):
    """Random rows 40x longer than k, two with partial windows: the bound admits between k and a
    few k keys a row (the model: about 1.2k-1.4k where a row has 2k-4k tiles; at 10 tiles a k a bit
    more), the answer is torch's, and the path launches its five kernels."""
    rows, width, k = 3, 10240, 256
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(1))
    lo, hi = torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)
    lo[1], hi[2] = 37, width - 5
    settings = {"TILE": tile, "PROGRAMS_PER_SM": 1}
    counted = _keys_counted(x, k, lo, hi, settings, monkeypatch)
    for r, c in enumerate(counted):
        assert k <= c <= 4 * k, f"row {r}: the bound admitted {c} keys of {int(hi[r] - lo[r])} (tile {tile})"
    kernels_run.clear()
    rows_ws = S.workspace(rows, "cpu")
    idx, val = torch.empty(rows, k, dtype=torch.int32), torch.empty(rows, k)
    S.select_rows(x, k, S.WINDOW_RAGGED, idx, val, rows_ws, lo=lo, hi=hi, path="bound", settings=settings)
    assert kernels_run == ["topk_tile_max_kernel", "topk_range_kernel", "topk_hist_kernel",
                           "topk_bound_count_kernel", "topk_bound_compact_kernel"]
    assert int(rows_ws.abs().sum()) == 0, "the path must leave both states zero"
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
def test_short_windows_few_tiles_and_empty_rows(segments):
    """Windows of 0, 1, k - 1, k, k + 1 keys, one of fewer than k tiles but more than k keys (no
    bound: bin 0 is below the smallest maximum), and a long one, in one call."""
    k, width = 128, 4096
    sizes = [0, 1, k - 1, k, k + 1, 3 * k, width]
    rows = len(sizes)
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(2))
    lo = torch.tensor([0, 5, 100, 0, 7, 1000, 0], dtype=torch.int32)
    hi = lo + torch.tensor(sizes, dtype=torch.int32)
    assert 3 * k // B.tile_for(width, k) < k  # (row 5: fewer than k tiles)
    idx, val = _select(x, k, lo, hi, path="bound")
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("levels", [3, 40, 1000])
def test_ties_at_the_bound(levels, segments):
    """Scores of a few values (long runs of equal keys at the k-th score, the bound's bin all ties:
    the candidates overflow CAP into the exact radix where there are few values), and bf16-like
    rounding: the smallest indices win, the state is left zero (_select checks)."""
    rows, width, k = 2, 6144, 200
    g = torch.Generator().manual_seed(levels)
    x = torch.randint(0, levels, (rows, width), generator=g).float() / levels
    lo, hi = torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)
    idx, val = _select(x, k, lo, hi, path="bound")
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
def test_one_value_and_outliers(segments):
    """A row of one value (the maxima's range a single value: every key in bin 0, the radix), a row
    with one huge outlier (the bound's bins stretched by it), a row of -inf but a few."""
    rows, width, k = 3, 4096, 64
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(3))
    x[0] = 0.25
    x[1, 1234] = 1e30
    x[2] = float("-inf")
    x[2, ::97] = torch.arange(len(range(0, width, 97))).float()
    lo, hi = torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)
    idx, val = _select(x, k, lo, hi, path="bound")
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("early", [False, True], ids=["", "early"])
@pytest.mark.parametrize("mode", ["segment", "lanes", "ballot", "vote"])
@pytest.mark.parametrize("cap", [1, 7, None])
def test_segments_hold_the_admitted_keys_or_the_chunk_is_read(cap, mode, early, monkeypatch):
    """SEGMENTS: each program's count is the keys it admitted (their sum the keys' histogram's), its
    segment their positions in key order; a program whose segment overflows (a cap of 1 or 7) reads
    its chunk instead, and the answer is torch's either way. With COUNT_LANES, a step's row of 32 keys
    fills a sub-segment (caps of 1 or 7 a sub-segment), copied to the segment in row order: the
    segment holds the admitted keys, each row's in key order; a program with a sub-segment overflowed
    counts its segment's slots + 1. With COUNT_BALLOT the slots are claimed from the program's count:
    the segment holds its admitted keys, each once, in the claims' order, and the count is every key
    the program admitted, past its slots where it overflowed. With COUNT_EARLY and COMPACT_EARLY the
    same (the compaction's early load of its segment's first block is unused where it overflowed). With
    COUNT_VOTE each warp's admitted keys fill a sub-segment of its own (caps of 1 or 7 a warp), in key order (the
    interpreter's warps: a quarter of each step), and a count a warp, past its slots where it overflowed."""
    lanes, ballot, vote = mode == "lanes", mode == "ballot", mode == "vote"
    monkeypatch.setattr(B, "COUNT_EARLY", early)
    monkeypatch.setattr(B, "COMPACT_EARLY", early)
    monkeypatch.setattr(B, "SEGMENTS", True)
    monkeypatch.setattr(B, "COUNT_LANES", lanes)
    monkeypatch.setattr(B, "COUNT_BALLOT", ballot)
    monkeypatch.setattr(B, "COUNT_VOTE", vote)
    step = S.BLOCK  # (the count's step: COUNT_STEP 0)
    rows_a_step = step // 32 if lanes else S.NUM_WARPS if vote else 1
    if cap is not None:
        monkeypatch.setattr(B, "seg_cap", lambda k, width, chunk: cap * rows_a_step)
    kept = []
    real = S._bound_scratch
    monkeypatch.setattr(S, "_bound_scratch", lambda *a, **kw: kept.append(real(*a, **kw)) or kept[-1])
    rows, width, k = 3, 10240, 256
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(6))
    lo, hi = torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)
    lo[2] = 100
    settings = {"PROGRAMS_PER_SM": 1}
    counted = _keys_counted(x, k, lo, hi, settings, monkeypatch)
    seg, counts = kept[-1][2], kept[-1][3]
    if vote:  # a count a warp: each warp's keys in its sub-segment, in key order, within its share of each step
        warps, sub = S.NUM_WARPS, seg.shape[2] // S.NUM_WARPS
        assert counts.shape[2] == warps and counts.sum((1, 2)).tolist() == counted
        if cap is None:
            chunk = chunk_size(rows, width, S.BLOCK, 1)
            for r in range(rows):
                for c in range(counts.shape[1]):
                    for w in range(warps):
                        got = seg[r, c, w * sub:w * sub + int(counts[r, c, w])].long()
                        assert bool(((got >= c * chunk) & (got < (c + 1) * chunk)).all())
                        assert bool(((got - max(c * chunk, int(lo[r]))) % step // (step // warps) == w).all())
                        assert bool((got[1:] > got[:-1]).all())
        else:
            assert int(counts.max()) > cap  # some warp overflowed its sub-segment
    elif cap is None:  # every segment held its keys: they are the admitted ones, in key order (a row's)
        assert counts.sum(1).tolist() == counted
        chunk = chunk_size(rows, width, S.BLOCK, 1)
        for r in range(rows):
            for c in range(counts.shape[1]):
                got = seg[r, c, :int(counts[r, c])].long()
                assert bool(((got >= c * chunk) & (got < (c + 1) * chunk)).all())
                if ballot:  # (the claims' order: each admitted key once)
                    assert got.unique().numel() == got.numel()
                    continue
                lane_row = (got - max(c * chunk, int(lo[r]))) % step // 32 if lanes else torch.zeros_like(got)
                assert bool((lane_row[1:] >= lane_row[:-1]).all())  # rows one after another
                same = lane_row[1:] == lane_row[:-1]
                assert bool((got[1:] > got[:-1])[same].all())  # and a row's keys in key order
    elif lanes:
        assert int(counts.max()) == seg.shape[2] + 1  # some program overflowed a sub-segment
    else:
        assert counts.sum(1).tolist() == counted
        assert int(counts.max()) > cap  # some program overflowed its segment
    idx, val = _select(x, k, lo, hi, path="bound")
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("group,cap", [(4, None), (8, None), (4, 1), (None, None)],
                         ids=["4", "8-halved", "4-overflow", "model"])
@pytest.mark.parametrize("mode", ["segment", "lanes", "ballot", "vote", "chunks"])
def test_a_compaction_program_reads_a_group_of_segments(mode, group, cap, monkeypatch):
    """COMPACT_GROUP: the compaction launches a program a group of the count's programs (a group of 8 halved to 4
    where the row's 20 count programs are no multiple of 8, and where the voted count's 4 warps would make 32
    sub-segments; None, the model's: 8 at ~13 keys a count program, halved to 4 alike), reads the group's segments
    as one list (every count form: a segment a program, rows of 32 keys, claimed slots, a sub-segment a warp), or
    its group's chunks where any segment overflowed (a cap of 1 a sub-segment) or there are none (SEGMENTS off); the
    answer is torch's and the workspace left zero (_select)."""
    monkeypatch.setattr(B, "SEGMENTS", mode != "chunks")
    monkeypatch.setattr(B, "COUNT_LANES", mode == "lanes")
    monkeypatch.setattr(B, "COUNT_BALLOT", mode == "ballot")
    monkeypatch.setattr(B, "COUNT_VOTE", mode == "vote")
    monkeypatch.setattr(B, "COMPACT_GROUP", group)
    monkeypatch.setattr(S, "PROGRAMS_PER_SM", 1)
    monkeypatch.setattr(_topk_launch, "get_num_sms", lambda: 60)  # (20 count programs a row of 10,240 keys)
    if cap is not None:
        sub = S.BLOCK // 32 if mode == "lanes" else S.NUM_WARPS if mode == "vote" else 1
        monkeypatch.setattr(B, "seg_cap", lambda k, width, chunk: cap * sub)
    grids = {}

    def watch(tag, inputs, key, launches, out_index):
        def launch(fn, grid, *args, **kw):
            grids[fn.fn.__name__] = tuple(grid)
            return S._recorded_launches.plain(fn, grid, *args, **kw)
        return launches(launch)
    monkeypatch.setattr(S._recorded_launches, "run", watch)
    rows, width, k = 3, 10240, 256
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(7))
    lo, hi = torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)
    lo[1], hi[2] = 700, width - 900  # (windows that start and end inside a group)
    idx, val = _select(x, k, lo, hi, path="bound")
    programs = grids["topk_bound_compact_kernel"][1]
    assert grids["topk_bound_count_kernel"] == (rows, 20)
    assert programs == 20 // min(group or 8, 4), f"{programs} compaction programs a row for a group of {group}"
    assert_same_topk(idx, val, x, k, lo, hi)


def test_the_model_groups_while_a_group_reads_few_keys():
    """group_for (COMPACT_GROUP None): the largest group up to 8 whose programs read at most COMPACT_KEYS of the
    row's k admitted keys, a count program's share k over its programs: 1 x 1M's ~1,000 count programs (~2 keys
    each) take 8, a 64 x 32K or 64 x 128K row's 16 (128 each) take 2, a 4096 x 64K prefill block's 7 (293 each) none."""
    assert B.COMPACT_GROUP is None and B.COMPACT_KEYS == 256
    assert [B.group_for(2048, p) for p in (1056, 66, 33, 16, 8, 7, 1, 0)] == [8, 8, 4, 2, 1, 1, 1, 1]
    assert [B.group_for(k, 16) for k in (512, 1024, 2048, 4096)] == [8, 4, 2, 1]


@needs_interpreter
def test_the_plan_resolves_the_models_group_from_its_count_programs(monkeypatch):
    """A bound plan whose settings leave COMPACT_GROUP to the model takes group_for over the count's programs a row
    (chunks sized for an H100's 132 SMs at 8 programs an SM); a setting that names it keeps it."""
    monkeypatch.setattr(_topk_launch, "get_num_sms", lambda: 132)

    def group(rows, width, **settings):
        plan = S.plan_selection(rows, width, 2048, S.WINDOW_LIMIT, "cpu", path="bound", kind="decode",
                                settings=dict(PROGRAMS_PER_SM=8, BLOCK=512, **settings))
        return plan.s["COMPACT_GROUP"]
    assert [group(1, 1 << 20), group(64, 32768), group(64, 1 << 17), group(164, 65536)] == [8, 2, 2, 1]
    assert group(1, 1 << 20, COMPACT_GROUP=1) == 1 and group(64, 32768, COMPACT_GROUP=4) == 4


def test_the_compaction_group_divides_the_count_programs():
    assert [B.compact_group(g, 20) for g in (0, 1, 2, 4, 8, 16)] == [1, 1, 2, 4, 4, 4]
    assert [B.compact_group(g, 7) for g in (2, 4, 8)] == [1, 1, 1]
    assert B.compact_group(8, 1056) == 8 and B.compact_group(16, 1056) == 16
    # at most COMPACT_SUBSEGMENTS sub-segments: a voted count's 4 warps each hold one
    assert [B.compact_group(g, 1056, 4) for g in (2, 4, 8, 16)] == [2, 4, 4, 4]


@needs_interpreter
def test_lanes_pack_at_most_sub_slots(monkeypatch):
    """The count by rows packs its sub-segments through registers of at most SUB_SLOTS slots: with 4 a
    sub-segment (SUB_SLOTS 64 over a step's 16 rows), where its segment would hold ~4x more, a row of 32
    keys admitting more than 4 overflows (the program counts its segment's slots + 1 and the compaction
    reads its chunk); the answer is torch's."""
    monkeypatch.setattr(B, "SEGMENTS", True)
    monkeypatch.setattr(B, "COUNT_LANES", True)
    monkeypatch.setattr(B, "SUB_SLOTS", 64)
    kept = []
    real = S._bound_scratch
    monkeypatch.setattr(S, "_bound_scratch", lambda *a, **kw: kept.append(real(*a, **kw)) or kept[-1])
    rows, width, k = 2, 10240, 256
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(11))
    lo, hi = torch.zeros(rows, dtype=torch.int32), torch.full((rows,), width, dtype=torch.int32)
    idx, val = _select(x, k, lo, hi, path="bound")
    seg, counts = kept[-1][2], kept[-1][3]
    assert seg.shape[2] // (S.BLOCK // 32) > 4, "the segment alone would give each row more than 4 slots"
    assert int(counts.max()) == seg.shape[2] + 1  # some program overflowed a 4-slot sub-segment
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
def test_lanes_model(monkeypatch):
    """COUNT_LANES left to the model (None): on for a decode call or a prefill block whose count programs
    read at least LANES_MIN_STEPS steps, off for fewer and for a call of no kind; a setting given is
    kept; the launches run with what was resolved, and the answer is torch's."""
    assert B.COUNT_LANES is None
    for kind in ("decode", "prefill"):
        assert B.lanes_for(kind, B.LANES_MIN_STEPS) and not B.lanes_for(kind, B.LANES_MIN_STEPS - 1)
    assert not B.lanes_for(None, 1 << 10)
    seen = []
    real = S._PATH_CODE["bound"]
    monkeypatch.setitem(S._PATH_CODE, "bound", lambda launch, s, *a, **kw: seen.append(s["COUNT_LANES"]) or
                        real(launch, s, *a, **kw))
    rows, width, k = 2, 8192, 128
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(9))
    lens = torch.full((rows,), width, dtype=torch.int32)
    s = S.path_settings("bound")
    steps = -(-chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"]) // s["BLOCK"])
    for min_steps, kind, given, want in ((steps, "decode", None, True), (steps + 1, "decode", None, False),
                                         (steps, "prefill", None, True), (steps + 1, "prefill", None, False),
                                         (steps, None, None, False), (steps, "decode", False, False),
                                         (steps + 1, "prefill", True, True)):
        monkeypatch.setattr(B, "LANES_MIN_STEPS", min_steps)
        idx = torch.empty(rows, k, dtype=torch.int32)
        S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, S.workspace(rows, "cpu"), lens=lens, path="bound",
                      settings=None if given is None else {"COUNT_LANES": given}, kind=kind)
        assert seen[-1] is want, (min_steps, kind, given)
        assert_same_topk(idx, None, x, k, torch.zeros(rows, dtype=torch.int32), lens)


def test_tile_model():
    """At least 2k tiles where the row is long enough; a power of two from 4 to 64."""
    assert B.tile_for(32768, 2048) == 8 and B.tile_for(131072, 2048) == 32
    assert B.tile_for(1 << 20, 2048) == 64 and B.tile_for(8192, 2048) == 4 and B.tile_for(65536, 2048) == 16
    for width in (1, 100, 5000, 1 << 16, 1 << 22):
        t = B.tile_for(width, 2048)
        assert t in (4, 8, 16, 32, 64)
        assert t == 4 or TT.tiles_for(width, t) >= 2 * 2048


@needs_interpreter
def test_tile_maxima_given_by_the_kernel_before(kernels_run, segments):
    """select_rows(tile_maxima=...): with the maxima alone, the range kernel over them runs; with
    their range merged too (the decode epilogue's), neither it nor the maxima kernel does."""
    rows, width, k = 2, 8192, 128
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(5))
    lens = torch.full((rows,), width, dtype=torch.int32)
    tile = B.tile_for(width, k)
    nt = TT.tiles_for(width, tile)
    maxima = x.view(rows, nt, tile).amax(2)
    ntiles = torch.full((rows,), nt, dtype=torch.int32)
    for merged in (False, True):
        ws = S.workspace(rows, "cpu")
        if merged:  # the range words as the epilogue merges them into the maxima's state
            per_row = S.state_words(S.path_settings("bound"))
            ws.view(-1)[rows * per_row:2 * rows * per_row].view(rows, per_row)[:, 10:12] = _range_words(maxima, ntiles)
        kernels_run.clear()
        idx = torch.empty(rows, k, dtype=torch.int32)
        S.select_rows(x, k, S.WINDOW_LIMIT, idx, None, ws, lens=lens, path="bound",
                      tile_maxima=(maxima, ntiles, True) if merged else (maxima, ntiles))
        assert "topk_tile_max_kernel" not in kernels_run
        assert ("topk_range_kernel" in kernels_run) is not merged
        assert int(ws.abs().sum()) == 0
        assert_same_topk(idx, None, x, k, torch.zeros(rows, dtype=torch.int32), lens)


def test_tile_maxima_refused_by_paths_that_do_not_read_them():
    x = torch.zeros(2, 64)
    with pytest.raises(ValueError, match="tiles and bound paths"):
        S.select_rows(x, 8, S.WINDOW_LIMIT, torch.empty(2, 8, dtype=torch.int32), None, S.workspace(2, "cpu"),
                      lens=torch.full((2,), 64, dtype=torch.int32), path="rounds",
                      tile_maxima=(torch.zeros(2, 8), torch.zeros(2, dtype=torch.int32)))


@needs_interpreter
def test_ragged_prefill_blocks_count_the_paths_buffers(segments, monkeypatch):
    """fp8_mqa_topk served by the bound path: its maxima (and segments) count in a block's scratch, so a
    budget of 7 rows of logits holds fewer rows with them; the blocks' answers are the whole call's."""
    import indexer_logits as K
    from indexer_logits import _topk
    from tuner.inputs import make_prefill_inputs
    from tuner.space import Problem
    monkeypatch.setattr(S, "PATH", "bound")
    width, budget = 1500, 7 * 1500 * 4
    per_row = S.scratch_bytes_per_row(7, width, 128, "cpu")
    maxima = 4 * (TT.tiles_for(width, B.tile_for(width, 128)) + 1)  # the maxima and the tile count, a row
    assert per_row > maxima if segments else per_row == maxima
    assert _topk.scratch_rows(20, width, budget, 128, "cpu") == budget // (width * 4 + per_row) < 7
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 20, width, windows="random", seed=4)
    idx = K.fp8_mqa_topk(*inp.args(), 128, max_scratch_bytes=budget)
    assert_same_topk(idx, None, K.fp8_mqa_logits(*inp.args()), 128, inp.cu_seqlen_ks, inp.cu_seqlen_ke)


def _random_case(seed: int) -> tuple:
    """(scores [rows, width], k, lo, hi, settings) of one random case: k and the width (from 1 key to
    50k, about k, many k), one to three rows with full, partial or empty windows, one of eight kinds of
    scores (normal, relu, 5 values, sorted up or down, a 1e30 spike, -inf but a prefix, values 1e-30
    apart, bf16-rounded), and every setting of the path drawn (TILE, BINS, BLOCK, programs, SEGMENTS,
    the count's step, its loads a step ahead, its rows of 32 keys)."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    k = rng.choice([1, 7, 64, 128, 256])
    width = rng.choice([k, k + 1, 3 * k, 17 * k + 5, 40 * k, rng.randint(1, 50 * k)])
    rows = rng.randint(1, 3)
    kind = rng.choice(["normal", "relu", "few", "sorted", "spike", "neginf", "tiny", "bf16"])
    x = torch.randn(rows, width, generator=g)
    if kind == "relu":
        x = torch.relu(x) * 3
    elif kind == "few":
        x = torch.randint(0, 5, (rows, width), generator=g).float()
    elif kind == "sorted":
        x = torch.arange(width).float().repeat(rows, 1) * rng.choice([1, -1])
    elif kind == "spike":
        x[:, rng.randrange(width)] = 1e30
    elif kind == "neginf":
        x[:, rng.randint(0, width):] = float("-inf")
    elif kind == "tiny":
        x = x * 1e-30 + 5.0
    elif kind == "bf16":
        x = x.bfloat16().float()
    lo = torch.tensor([rng.choice([0, 0, rng.randint(0, width)]) for _ in range(rows)], dtype=torch.int32)
    hi = torch.tensor([rng.choice([width, width, rng.randint(0, width + 3)]) for _ in range(rows)], dtype=torch.int32)
    settings = dict(TILE=rng.choice([0, 4, 8, 16, 32, 64]), BINS=rng.choice([32, 64, 128]), BLOCK=rng.choice([512, 1024]),
                    PROGRAMS_PER_SM=rng.choice([1, 2]), SEGMENTS=rng.random() < 0.5,
                    COUNT_STEP=rng.choice([0, 512, 2048]), COUNT_PREFETCH=rng.random() < 0.5,
                    COUNT_LANES=rng.random() < 0.5, COUNT_BALLOT=rng.random() < 0.3, COUNT_INLINE=rng.random() < 0.3,
                    COUNT_EARLY=rng.random() < 0.5, COMPACT_EARLY=rng.random() < 0.5, COUNT_VOTE=rng.random() < 0.3)
    return x, k, lo, hi, settings


# 40 cases in CI (~10 s); TOPK_RANDOM_CASES=N runs N
@needs_interpreter
@pytest.mark.parametrize("seed", range(int(os.environ.get("TOPK_RANDOM_CASES", "40"))))
def test_random_cases(seed):
    x, k, lo, hi, settings = _random_case(seed)
    rows = x.shape[0]
    ws = S.workspace(rows, "cpu")
    idx, val = torch.full((rows, k), 7, dtype=torch.int32), torch.full((rows, k), 7.0)
    assert S.select_rows(x, k, S.WINDOW_RAGGED, idx, val, ws, lo=lo, hi=hi, path="bound", settings=settings) == "bound"
    assert int(ws.abs().sum()) == 0, "the path must leave both states zero"
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
def test_votes_take_precedence_over_the_claims_and_the_rows(monkeypatch):
    """COUNT_VOTE with COUNT_BALLOT and COUNT_LANES also set launches the voted form alone: the count is told
    neither of the others (its rows' form would skip the first step's early load the votes read), and the
    compaction reads the warps' sub-segments; the answer is torch's."""
    from _helpers import launches_of
    x = torch.randn(2, 40000, generator=torch.Generator().manual_seed(4))
    lo, hi = torch.zeros(2, dtype=torch.int32), torch.full((2,), 40000, dtype=torch.int32)
    counts = launches_of(monkeypatch, "topk_bound_count_kernel")
    compactions = launches_of(monkeypatch, "topk_bound_compact_kernel")
    S._recorded_launches.clear()
    idx, val = torch.full((2, 256), 7, dtype=torch.int32), torch.full((2, 256), 7.0)
    S.select_rows(x, 256, S.WINDOW_RAGGED, idx, val, S.workspace(2, "cpu"), lo=lo, hi=hi, path="bound",
                  settings={"COUNT_VOTE": True, "COUNT_BALLOT": True, "COUNT_LANES": True, "COUNT_EARLY": True,
                            "COMPACT_EARLY": True, "PROGRAMS_PER_SM": 1, "COMPACT_GROUP": 1})  # (a warp's, ungrouped)
    assert counts and all(kw["VOTE_"] == S.NUM_WARPS and not kw["LANES_"] and not kw["BALLOT_"] for kw in counts)
    assert compactions and all(kw["VOTE_"] == S.NUM_WARPS for kw in compactions)
    assert_same_topk(idx, val, x, 256, lo, hi)


@needs_interpreter
def test_the_votes_model_turns_them_on_where_the_count_reads_many_steps(monkeypatch):
    """COUNT_VOTE None: _topk_bound.votes_for's model, resolved by the plan: on for a decode call or prefill block
    whose count programs read VOTE_MIN_STEPS steps or more, off below and for a call of no kind (chunks sized for
    an H100's 132 SMs: 64 x 32K reads 4 steps a program, 64 x 128K 16, a 164-row block of 64K 18)."""
    monkeypatch.setattr(_topk_launch, "get_num_sms", lambda: 132)
    def plan(rows, width, window, kind):
        return S.plan_selection(rows, width, 2048, window, "cpu", path="bound", settings={}, kind=kind)
    few, many = plan(64, 32768, S.WINDOW_LIMIT, "decode"), plan(64, 1 << 17, S.WINDOW_LIMIT, "decode")
    block, alone = plan(164, 65536, S.WINDOW_RAGGED, "prefill"), plan(164, 65536, S.WINDOW_RAGGED, None)
    assert B.COUNT_VOTE is None
    assert [p.s["COUNT_VOTE"] for p in (few, many, block, alone)] == [False, True, True, False]


@needs_interpreter
def test_voted_sub_segments_refuse_a_step_their_op_cannot_hold():
    """COUNT_VOTE's op takes a thread's keys of a step at once (1, 2, 4, 8 or 16 of them: _topk_ptx.VOTE_PACKS):
    a step of 32 keys a thread is refused, naming the setting, before any launch."""
    x = torch.randn(2, 10240, generator=torch.Generator().manual_seed(3))
    lo, hi = torch.zeros(2, dtype=torch.int32), torch.full((2,), 10240, dtype=torch.int32)
    idx = torch.full((2, 256), 7, dtype=torch.int32)
    with pytest.raises(ValueError, match="COUNT_VOTE reads steps of 1, 2, 4, 8 or 16 keys a thread, got 4096 keys"):
        S.select_rows(x, 256, S.WINDOW_RAGGED, idx, None, S.workspace(2, "cpu"), lo=lo, hi=hi, path="bound",
                      settings={"COUNT_VOTE": True, "COUNT_STEP": 4096, "NUM_WARPS": 4})
    assert bool((idx == 7).all())  # (nothing launched)


@needs_interpreter
def test_claimed_slots_refuse_a_step_of_fewer_keys_than_threads():
    """COUNT_BALLOT claims a slot for each key a thread holds: a step of fewer keys than the program's threads
    would put a key in two threads and claim it twice, so the plan refuses it, naming the setting, before any
    launch."""
    x = torch.randn(2, 10240, generator=torch.Generator().manual_seed(3))
    lo, hi = torch.zeros(2, dtype=torch.int32), torch.full((2,), 10240, dtype=torch.int32)
    idx = torch.full((2, 256), 7, dtype=torch.int32)
    with pytest.raises(ValueError, match="COUNT_BALLOT reads steps of at least 32 keys a warp"):
        S.select_rows(x, 256, S.WINDOW_RAGGED, idx, None, S.workspace(2, "cpu"), lo=lo, hi=hi, path="bound",
                      settings={"COUNT_BALLOT": True, "BLOCK": 256, "NUM_WARPS": 16})
    assert bool((idx == 7).all())  # (nothing launched)
