"""The bound path's keys' count on the GPU, in each of its forms (a prefix sum a step, its atomics and stores
inline or not; rows of 32 keys; slots claimed from a counter by a warp's ballot; a sub-segment a warp by votes:
indexer_logits._topk_bound_count),
where the CPU tests cannot run it (its inline PTX): exact eagerly and in a replayed CUDA graph, the
workspace left zero, and the launch that served asserted to be the form asked for; the scores written beside
the indices."""

import pytest
import torch

from bench.topk import mismatched_rows
from indexer_logits import _topk_bound as B
from indexer_logits import _topk_select as S
from indexer_logits._topk_launch import chunk_size

from _helpers import launches_of
from test_topk_bound import _keys_counted
from test_topk_gpu import _scores_of_kind

pytestmark = pytest.mark.gpu

COUNTS = {"prefix sums": {"COUNT_LANES": False, "COUNT_BALLOT": False, "COUNT_INLINE": False},
          "prefix sums, inline": {"COUNT_LANES": False, "COUNT_BALLOT": False, "COUNT_INLINE": True},
          "rows": {"COUNT_LANES": True, "COUNT_BALLOT": False},
          "claimed": {"COUNT_LANES": False, "COUNT_BALLOT": True},
          "claimed, 1024 a step": {"COUNT_BALLOT": True, "COUNT_STEP": 1024},
          "claimed, ahead": {"COUNT_BALLOT": True, "COUNT_PREFETCH": True},
          # the count's and the compaction's independent loads first (COUNT_EARLY, COMPACT_EARLY)
          "prefix sums, inline, early": {"COUNT_LANES": False, "COUNT_BALLOT": False, "COUNT_INLINE": True,
                                         "COUNT_EARLY": True, "COMPACT_EARLY": True},
          "rows, early": {"COUNT_LANES": True, "COUNT_BALLOT": False, "COUNT_EARLY": True, "COMPACT_EARLY": True},
          "claimed, early": {"COUNT_LANES": False, "COUNT_BALLOT": True, "COUNT_EARLY": True, "COMPACT_EARLY": True},
          # a sub-segment a warp, slots by votes (COUNT_VOTE, over the claims and the rows where set too)
          "voted": {"COUNT_VOTE": True},
          "voted, over claims": {"COUNT_VOTE": True, "COUNT_BALLOT": True, "COUNT_LANES": True},
          "voted, 1024 a step": {"COUNT_VOTE": True, "COUNT_STEP": 1024},
          "voted, 8 warps": {"COUNT_VOTE": True, "NUM_WARPS": 8},
          "voted, ahead": {"COUNT_VOTE": True, "COUNT_PREFETCH": True},
          "voted, early": {"COUNT_VOTE": True, "COUNT_EARLY": True, "COMPACT_EARLY": True},
          # the compaction a program a group of the count's programs (COMPACT_GROUP; None: the model's,
          # _topk_bound.group_for; every form above names 1)
          "prefix sums, grouped": {"COUNT_LANES": False, "COUNT_BALLOT": False, "COUNT_INLINE": False,
                                   "COMPACT_GROUP": None},
          "rows, grouped by 8": {"COUNT_LANES": True, "COUNT_BALLOT": False, "COMPACT_GROUP": 8},
          "claimed, grouped": {"COUNT_BALLOT": True, "COMPACT_GROUP": None},
          "voted, grouped": {"COUNT_VOTE": True, "COMPACT_GROUP": None}}


@pytest.mark.parametrize("count", list(COUNTS))
@pytest.mark.parametrize("rows, width", [(16, 65536), (1, 1 << 20)])
@pytest.mark.parametrize("kind", ["randn", "small_ints", "outlier"])
def test_bound_count_forms_exact_eager_and_in_a_graph(kind, rows, width, count, monkeypatch):
    """randn: a few percent of the keys admitted, the candidates ranked; small_ints: ties at the bound,
    segments overflowing into their chunks and the overflow path; outlier: a range stretched by one
    score. Windows of random lengths (k of them at least), k 2048."""
    k = 2048
    x, g = _scores_of_kind(kind, rows, width, seed=5)
    lo = torch.zeros(rows, dtype=torch.int32, device="cuda")
    hi = torch.randint(k, width + 1, (rows,), dtype=torch.int32, device="cuda", generator=g)
    hi[0] = width
    idx = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    val = torch.empty(rows, k, device="cuda")
    ws = S.workspace(rows, "cuda")
    settings = dict({"COMPACT_GROUP": 1, "SEGMENTS": True}, **COUNTS[count])
    S._recorded_launches.clear()  # (else a shape's second test replays the first one's launches, unseen)
    seen = launches_of(monkeypatch, "topk_bound_count_kernel")
    compactions = launches_of(monkeypatch, "topk_bound_compact_kernel")

    def select():
        return S.select_rows(x, k, S.WINDOW_LIMIT, idx, val, ws, lens=hi, path="bound", settings=settings)

    def exact() -> bool:
        want = torch.where(idx >= 0, x.gather(1, idx.clamp(min=0).long()), torch.full_like(val, float("-inf")))
        return mismatched_rows(idx, x, lo, hi, k) == 0 and torch.equal(val, want) and int(ws.abs().sum()) == 0
    assert select() == "bound"
    form = COUNTS[count]
    voted = form.get("NUM_WARPS", S.NUM_WARPS) if count.startswith("voted") else 0
    # the compaction's group (the model's resolved over the count's programs a row, then fitted to them) reads
    # its programs' sub-segments, a warp's each where the count votes, as one list
    s = S.path_settings("bound", settings)
    programs = -(-width // chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"]))
    group = B.compact_group(B.group_for(k, programs) if s["COMPACT_GROUP"] is None else s["COMPACT_GROUP"],
                            programs, voted)
    if rows == 1:  # (1 x 1M's 1,024 count programs: the model's 8, 4 over the votes; the forms above 1)
        assert (group > 1) == ("group" in count), (count, group)
    listed = group * max(voted, 1) if group > 1 else voted
    assert seen and all(kw["BALLOT_"] == count.startswith("claimed")
                        and kw["ASM_"] == count.startswith(("rows", "claimed", "voted"))
                        and kw["INLINE_"] == count.startswith("prefix sums, inline")
                        and kw["LANES_"] == count.startswith("rows") and kw["VOTE_"] == voted
                        and kw["PREFETCH_"] == form.get("COUNT_PREFETCH", False)
                        and kw["EARLY_"] == form.get("COUNT_EARLY", False) for kw in seen), seen
    assert compactions and all(kw["EARLY_"] == form.get("COMPACT_EARLY", False) and kw["VOTE_"] == listed
                               for kw in compactions), compactions
    assert exact()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        select()
    for seed in (1, 2):
        x.copy_(_scores_of_kind(kind, rows, width, seed=seed)[0])
        idx.fill_(-7)
        graph.replay()
        torch.cuda.synchronize()
        assert exact()


@pytest.mark.parametrize("warps, step", [(4, 512), (4, 1024), (8, 512)])
def test_voted_sub_segments_hold_each_admitted_key_once(warps, step, monkeypatch):
    """COUNT_VOTE on the GPU (its votes are inline PTX, which the CPU tests cannot run): with the compaction not
    launched, each program's warps' counts sum to the keys the row's histogram counted, no warp overflowed on
    these scores, and each sub-segment holds distinct positions of its program's chunk."""
    rows, width, k = 16, 65536, 2048
    x = torch.randn(rows, width, device="cuda", generator=torch.Generator("cuda").manual_seed(9))
    lo = torch.zeros(rows, dtype=torch.int32, device="cuda")
    hi = torch.full((rows,), width, dtype=torch.int32, device="cuda")
    settings = {"SEGMENTS": True, "COUNT_VOTE": True, "NUM_WARPS": warps, "COUNT_STEP": step}
    kept = []
    real = S._bound_scratch
    monkeypatch.setattr(S, "_bound_scratch", lambda *a, **kw: kept.append(real(*a, **kw)) or kept[-1])
    S._recorded_launches.clear()
    counted = _keys_counted(x, k, lo, hi, settings, monkeypatch)
    seg, counts = kept[-1][2].cpu(), kept[-1][3].cpu()
    s = S.path_settings("bound", settings)
    sub = seg.shape[2] // warps
    assert counts.shape[2] == warps and counts.sum((1, 2)).tolist() == counted and min(counted) > 0
    assert int(counts.max()) <= sub, "these scores should not overflow a warp's sub-segment"
    chunk = chunk_size(rows, width, s["BLOCK"], s["PROGRAMS_PER_SM"])  # (the count's chunks: the launch's)
    for r in range(rows):
        for c in range(counts.shape[1]):
            got = torch.cat([seg[r, c, w * sub:w * sub + int(counts[r, c, w])] for w in range(warps)]).long()
            assert got.unique().numel() == got.numel()
            assert bool(((got >= c * chunk) & (got < (c + 1) * chunk)).all())
