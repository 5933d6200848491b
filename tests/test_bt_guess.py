"""The decode template's block-table guess (docs/PERF.md, "The block table read beside the lengths"):
each split-grid program of next_n = 1 with more than one tile reads the entries of the run a full
request would give it before the lengths arrive, and uses them only where its real run starts at
the same tile. A wrong guess must cost time, never a wrong logit; the guess's reads must stay
inside the table; and the rendering rule (next_n = 1, several tiles, tiles inside a page) holds.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from _helpers import check_output, checked_module, relative_error

from tuner.inputs import make_decode_inputs, poison_block_table
from indexer_logits._identity import Config, Problem
from tuner.reference import paged_mqa_logits_ref
from tuner.render import render

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

PROBLEM = Problem(q_dtype="fp8", cache_dtype="fp8", scale_layout="page_blocked", page_size=64, heads=16, head_dim=32)


def _config(dot: str, store: str, tiles: int = 2, block_t: int = 64) -> Config:
    return Config(block_t=block_t, tiles_per_program=tiles, num_warps=4, num_stages=2, dot_dtype=dot,
                  orient="k_rows", store=store)


def _run(module, inp, width: int, clean: bool = True, pad: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    rows = inp.q.shape[0] * inp.q.shape[1]
    buf = torch.full((rows, width + pad), float("nan"), device=inp.q.device)
    out = buf[:, :width]
    module.launch(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, out, width, clean)
    return buf, out


def _spy_on_loads(monkeypatch) -> list[int]:
    """Addresses of every element the Triton interpreter loads (masked-off lanes excluded)."""
    from triton.runtime.interpreter import InterpreterBuilder

    reads: list[int] = []
    real = InterpreterBuilder.create_masked_load

    def spy(self, ptrs, mask, *args, **kwargs):
        addresses, on = np.broadcast_arrays(np.asarray(ptrs.data), np.asarray(mask.data, dtype=bool))
        reads.extend(addresses[on].tolist())
        return real(self, ptrs, mask, *args, **kwargs)

    monkeypatch.setattr(InterpreterBuilder, "create_masked_load", spy)
    return reads


def _reference(inp, width: int) -> torch.Tensor:
    return paged_mqa_logits_ref(inp.q.cpu(), inp.kv_cache.cpu(), inp.weights.cpu(), inp.context_lens.cpu(),
                                inp.block_table.cpu(), width, True, scale_layout=inp.scale_layout)


@pytest.mark.parametrize("store", ["tile", "run"])
@pytest.mark.parametrize("guess", ["right", 0, 1, 3, 1000])
def test_a_wrong_guess_costs_time_never_a_logit(store, guess, kernel_dir, device, dot_dtype_for, monkeypatch):
    """guess_per is the host's forecast of a full request's run; any other value (the kernel
    then reads its own entries wherever the forecast misses) must give the same bytes. Lengths:
    full, partial, one page, one token, zero."""
    module = checked_module(PROBLEM, _config(dot_dtype_for("fp8"), store), kernel_dir)
    width = 640  # 10 pages: grid width 5 at 2 tiles a program
    inp = make_decode_inputs(PROBLEM, 5, width, [640, 640, 300, 64, 1], seed=3, device=device)
    buf_right, out_right = _run(module, inp, width)
    check_output(buf_right, out_right, _reference(inp, width).to(device), inp.valid_mask(), True, "the valid rule")
    if guess != "right":
        monkeypatch.setattr(module, "_guess_per", lambda max_context_len: guess)
        buf, _ = _run(module, inp, width)
        torch.testing.assert_close(buf, buf_right, rtol=0, atol=0, equal_nan=True)
        buf, _ = _run(module, poison_block_table(inp), width)  # wild ids past the valid pages
        torch.testing.assert_close(buf, buf_right, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("store", ["tile", "run"])
def test_a_width_past_the_tables_capacity_with_the_guess(store, kernel_dir, device, dot_dtype_for, monkeypatch):
    """max_context_len past the table's capacity: the guessed columns of the programs past the
    table lie outside it (bt_cols masks them); the columns after the table in memory hold wild
    ids, and the answer must still be the reference's. Under the interpreter a spy on its loads
    checks that no column past the table is read at all."""
    module = checked_module(PROBLEM, _config(dot_dtype_for("fp8"), store), kernel_dir)
    inp = make_decode_inputs(PROBLEM, 2, 256, [256, 200], seed=4, device=device)  # a 4-page table
    wide = torch.full((2, 12), 2**31 - 1, dtype=torch.int32, device=device)
    wide[:, :4] = inp.block_table
    width = 700  # grid width 6: programs 2-5 guess columns 4-10, past the table's 4
    reads = _spy_on_loads(monkeypatch) if device == "cpu" else None
    buf, out = _run(module, replace(inp, block_table=wide[:, :4], max_context_len=width), width)
    if reads is not None:  # no read of the wide tensor's memory past the table's 4 columns
        base, end = wide.data_ptr(), wide.data_ptr() + wide.numel() * wide.element_size()
        in_wide = [a for a in reads if base <= a < end]
        assert in_wide, "the spy saw no block-table read"
        columns = {(a - base) // wide.element_size() % wide.shape[1] for a in in_wide}
        assert max(columns) < 4, f"read block-table columns {sorted(columns)} of a 4-column table"
    assert bool(torch.isnan(buf[:, width:]).all()), "wrote past the output width"
    valid = inp.valid_mask().cpu()
    assert relative_error(out[:, :256].cpu(), _reference(inp, 256), valid) < 1e-3
    assert torch.equal(torch.isneginf(out[:, :256]).cpu(), ~valid)
    assert bool(torch.isneginf(out[:, 256:]).all())

def test_the_guess_is_rendered_where_it_applies_only():
    """next_n = 1, more than one tile, tiles inside a page, the split grid: elsewhere the kernel
    reads its entries after the lengths, as before (next_n = 2 timed 3-5% slower with it)."""
    def has_guess(problem: Problem, config: Config) -> bool:
        return "page_guess = tl.load(" in render(problem, config)

    assert has_guess(PROBLEM, _config("native", "run"))
    assert has_guess(PROBLEM, _config("native", "tile", tiles=16))
    assert not has_guess(PROBLEM, _config("native", "run", tiles=1))
    assert not has_guess(PROBLEM, _config("native", "tile", block_t=128))
    n2 = Problem(q_dtype="fp8", cache_dtype="fp8", scale_layout="page_blocked", page_size=64, heads=16, head_dim=32,
                 next_n=2)
    assert not has_guess(n2, _config("native", "run"))
    persistent = Config(block_t=64, tiles_per_program=1, num_warps=4, num_stages=2, orient="k_rows", programs_per_sm=2)
    assert not has_guess(PROBLEM, persistent)
