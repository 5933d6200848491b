"""The row path's candidates ranked by a second histogram (indexer_logits._topk_row, SUB): exact against torch on
CPU (Triton's interpreter) in each of its branches, the one it was built for asserted by a model of its sub-bins:
the few of the last sub-bin ranked pairwise, or more than RANK_SUB there (ties) and the sort; -inf among the
candidates; against SUB 0 (the sort alone) on the same rows."""

import pytest
import torch

from indexer_logits import _topk_row as R, _topk_select as S

from test_topk import assert_same_topk, needs_interpreter


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    yield


def _ukeys(x: torch.Tensor) -> torch.Tensor:
    """The kernels' unsigned keys of float32 scores, as int64 (the same order as the scores)."""
    s = x.contiguous().view(torch.int32).long()
    key = torch.where(s < 0, s ^ 0x7FFFFFFF, s)
    return key + (1 << 31)


def _last_sub_bin(row: torch.Tensor, k: int, bins: int, sub: int) -> int:
    """How many candidates the sub-bin holding the last one needed has (_rank_by_sub_bins' in2), the row's first
    histogram computed as _mapping and _digits do (the candidates are its bin t, as the kernel writes them)."""
    finite = row[torch.isfinite(row)]
    m, span = float(finite.min()), float(finite.max() - finite.min())
    y = ((row - m) * (bins / span)).clamp(0, bins * (1 - 2 ** -24)).nan_to_num(0.0).long()
    counts = torch.bincount(y, minlength=bins)
    suffix = counts.flip(0).cumsum(0).flip(0)
    t = int((suffix >= k).nonzero().max())
    need = k - int(counts[t + 1:].sum())
    u = _ukeys(row[y == t])
    span_u, shift = int(u.max() - u.min()), 0
    while span_u >> shift >= sub:
        shift += 1
    d2 = (u - u.min()) >> shift
    c2 = torch.bincount(d2, minlength=sub)
    suffix2 = c2.flip(0).cumsum(0).flip(0)
    return int(c2[int((suffix2 >= need).nonzero().max())])


def _row_select(x, k, lo, hi, sub):
    rows = x.shape[0]
    idx, val = torch.full((rows, k), 7, dtype=torch.int32), torch.full((rows, k), 7.0)
    settings = {"SUB": sub, "CAP": 1024, "BINS": 64, "BLOCK": 1024, "NUM_WARPS": 4}
    assert S.select_rows(x, k, S.WINDOW_RAGGED, idx, val, S.workspace(rows, "cpu"), lo=lo, hi=hi, path="row",
                         settings=settings) == "row"
    return idx, val


@needs_interpreter
@pytest.mark.parametrize("kind", ["normal", "ties", "neginf"])
def test_sub_bins_rank_exactly_in_each_branch(kind):
    """normal: the last sub-bin holds a few (<= RANK_SUB: ranked pairwise, asserted by the model); ties: scores
    of 3 values, the last sub-bin all of one value (> RANK_SUB: the sort); neginf: -inf the lowest candidates (a
    key like any other). Exact at SUB 64 and 32, as at SUB 0 (the sort alone), partial windows included."""
    rows, width, k = 3, 6000, 1500
    g = torch.Generator().manual_seed(5)
    x = torch.randn(rows, width, generator=g)
    if kind == "ties":
        x = torch.randint(0, 3, (rows, width), generator=g).float()
    elif kind == "neginf":
        x = torch.randn(rows, width, generator=g).clamp(min=0.0) - 0.3
        x[x < 0] = float("-inf")  # ~62% -inf: the k-th score and its bin among them
    lo = torch.tensor([0, 11, 0], dtype=torch.int32)
    hi = torch.tensor([width, width, width - 100], dtype=torch.int32)
    if kind == "normal":
        assert all(_last_sub_bin(x[r, :width - 100], k, 64, 64) <= R.RANK_SUB for r in (2,))
        assert _last_sub_bin(x[0], k, 64, 64) <= R.RANK_SUB
    if kind == "ties":
        assert _last_sub_bin(x[0], k, 64, 64) > R.RANK_SUB
    for sub in (64, 32, 0):
        idx, val = _row_select(x, k, lo, hi, sub)
        assert_same_topk(idx, val, x, k, lo, hi)


def test_sub_bins_allowed_in_tables():
    """SUB is a row-path setting a table may name (0: the sort), part of the launch's key."""
    from indexer_logits import _topk_table as T
    assert T.ALLOWED["row"]["SUB"] == (0, 32, 64)
    assert S.path_settings("row", {"SUB": 0})["SUB"] == 0 and S.path_settings("row")["SUB"] == R.SUB
