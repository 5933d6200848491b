"""The bound path's keys' count on the GPU, in each of its forms (a prefix sum a step, its atomics and stores
inline or not; rows of 32 keys; slots claimed from a counter by a warp's ballot: indexer_logits._topk_bound_count),
where the CPU tests cannot run it (its inline PTX): exact eagerly and in a replayed CUDA graph, the
workspace left zero, and the launch that served asserted to be the form asked for; the scores written beside
the indices."""

import pytest
import torch

from bench.topk import mismatched_rows
from indexer_logits import _topk_select as S

from _helpers import launches_of
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
          "claimed, early": {"COUNT_LANES": False, "COUNT_BALLOT": True, "COUNT_EARLY": True, "COMPACT_EARLY": True}}


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
    settings = dict(COUNTS[count], SEGMENTS=True)
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
    assert seen and all(kw["BALLOT_"] == count.startswith("claimed") and kw["ASM_"] == count.startswith(("rows", "claimed"))
                        and kw["INLINE_"] == count.startswith("prefix sums, inline")
                        and kw["LANES_"] == count.startswith("rows") and kw["PREFETCH_"] == (count == "claimed, ahead")
                        and kw["EARLY_"] == form.get("COUNT_EARLY", False) for kw in seen), seen
    assert compactions and all(kw["EARLY_"] == form.get("COMPACT_EARLY", False) for kw in compactions), compactions
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
