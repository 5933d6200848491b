"""The two-kernel selection (indexer_logits._topk_fused; not the default since the H200 timed it
slower than the four-kernel one, but kept and served here) on what is its own:
a sampled range that misses the row's spread (candidates in the clamped top bin, in the buffer or
past it), ties at the k-th score inside the candidate buffer, and paged decode end to end
at the engines' k (512, 1024, 2048), next_n 1 and 2, 1-D and 2-D lengths, rows shorter than k
and rows with tied scores. Exactness is against a stable descending sort of the same logits
(tests/test_topk.py's assert_same_topk); every test asserts the kernels, not torch, served."""

import dataclasses

import pytest
import torch

import indexer_logits as K
from indexer_logits import _topk_fused as F, _topk_select as S
from tuner.inputs import make_decode_inputs
from tuner.space import Problem

from test_topk import _row_windows_decode, _select, assert_same_topk, launches, needs_interpreter  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime, monkeypatch):
    monkeypatch.setattr(S, "PATH", "fused")  # the entry points' calls below go through this path
    yield


def _unsampled(width, per_run):
    """per_run positions after each of the round-1 sample's runs of 32, which it never reads."""
    runs = F.SAMPLE // 32
    run_stride = max(-(-width // runs), 32)
    t = torch.arange(width)
    return (t % run_stride >= 32) & (t % run_stride < 32 + per_run), run_stride


@needs_interpreter
@pytest.mark.parametrize("width,per_run,past_cap", [(9000, 10, False), (40000, 80, True)])
def test_sample_misses_the_top(width, per_run, past_cap):
    """High scores only where the sample never looks: they clamp into the top bin, which then
    holds the k-th score; it fits the candidate buffer (read in blocks) or does not (overflow path)."""
    k = 301
    hidden, run_stride = _unsampled(width, per_run)
    assert run_stride >= 32 + per_run
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, width, generator=g)
    x[:, hidden] += 100.0
    n_top = int(hidden.sum())
    assert (n_top > F.CAP) == past_cap and n_top > max(k, F.CB), "the case must exercise the branch it names"
    lo = torch.tensor([0, 0], dtype=torch.int32)
    hi = torch.tensor([width, width], dtype=torch.int32)
    idx, val = _select(x, k, lo, hi, path="fused")
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("need", [51, 1])
def test_ties_in_the_candidates_go_to_the_smallest_index(need):
    """Bin t1 holds 3,000 equal scores (fewer than the buffer): the radix over their indices
    takes the smallest ones, an odd count of them so that no pairing of indices hides a slip."""
    width, above = 9000, 250
    x = torch.full((1, width), -5.0)
    x[0, 0] = -7.0                                  # the range's low end
    x[0, 100:100 + above] = 2.0
    x[0, 1000:4000] = 1.0
    k = above + need
    lo, hi = torch.tensor([0], dtype=torch.int32), torch.tensor([width], dtype=torch.int32)
    idx, val = _select(x, k, lo, hi, path="fused")
    assert_same_topk(idx, val, x, k, lo, hi)
    assert sorted(i for i in idx[0].tolist() if x[0, i] == 1.0) == list(range(1000, 1000 + need))


def _decode_case(next_n, lens_2d, tied, seed):
    problem = Problem(next_n=next_n, lens_mode="2d" if lens_2d else "1d")
    inp = make_decode_inputs(problem, 3, 4096, lens=[4096, 1500, 3001], seed=seed)
    if tied:  # every request reads its first three pages over and over: each score ~21 times
        bt = inp.block_table
        inp = dataclasses.replace(inp, block_table=bt[:, torch.arange(bt.shape[1]) % 3].contiguous())
    return inp


@needs_interpreter
@pytest.mark.parametrize("k", [512, 1024, 2048])
@pytest.mark.parametrize("next_n,lens_2d", [(1, False), (2, False), (2, True)])
def test_paged_topk_two_kernels(k, next_n, lens_2d, launches):
    """Rows of 4,096, 1,500 and 3,001 keys (shorter than k at k = 2048: -1 pads)."""
    inp = _decode_case(next_n, lens_2d, tied=False, seed=k + next_n)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx, val = K.fp8_paged_mqa_topk(*args, k, return_values=True)
    assert launches["paths"] == ["fused"], "the two-kernel selection must serve the call"
    logits = K.fp8_paged_mqa_logits(*args, True)
    lo, hi = _row_windows_decode(inp.context_lens, next_n, logits.shape[0])
    assert int((hi < k).sum()) > 0 or k < 1500, "a row shorter than k when k allows it"
    assert_same_topk(idx, val, logits, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("k,next_n,lens_2d", [(512, 1, False), (1024, 2, True), (2048, 2, False)])
def test_paged_topk_ties(k, next_n, lens_2d, launches):
    """Repeated pages: every score occurs many times, so the k-th is tied (smallest index wins)."""
    inp = _decode_case(next_n, lens_2d, tied=True, seed=5)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, inp.max_context_len)
    idx = K.fp8_paged_mqa_topk(*args, k)
    assert launches["paths"] == ["fused"]
    logits = K.fp8_paged_mqa_logits(*args, True)
    lo, hi = _row_windows_decode(inp.context_lens, next_n, logits.shape[0])
    row0 = logits[0, :int(hi[0])]
    kth = torch.sort(row0, descending=True).values[k - 1]
    assert int((row0 == kth).sum()) > 1, "the k-th score must be tied"
    assert_same_topk(idx, None, logits, k, lo, hi)
