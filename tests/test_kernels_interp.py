"""The rendered kernels under Triton's CPU interpreter (or compiled, on a GPU) against the
reference: a sample of configs across layouts, dtype paths, page/tile relations, next_n, lens
modes, orientations, split and persistent grids, and clean_logits.

Every launch writes into a NaN-filled buffer whose rows are padded past max_context_len, so a
valid position left unwritten or a write past the width shows up. Each decode case runs again
with the block table poisoned past the valid pages and must give the same bytes.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, replace

import pytest
import torch
from _helpers import check_output, checked_module

from tuner.inputs import make_decode_inputs, make_prefill_inputs, poison_block_table
from indexer_logits._identity import Config, Problem
from tuner.reference import mqa_logits_ref, paged_mqa_logits_ref

PAD = 3  # extra columns per output row, never to be written

# Triton 3.6's interpreter turns 1-element arrays into ints; numpy warns about it on every loop.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def _padded_nan(rows: int, cols: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    buf = torch.full((rows, cols + PAD), float("nan"), device=device)
    return buf, buf[:, :cols]


def _check_output(buf, out, ref, valid, clean: bool) -> None:
    check_output(buf, out, ref, valid, clean, "the valid rule")


# ---------------------------------------------------------------------------------------------
# Decode over the paged cache.


@dataclass(frozen=True)
class DecodeCase:
    layout: str  # page_blocked | token_interleaved | none (bf16)
    page: int
    block_t: int
    tiles: int
    next_n: int
    heads: int
    lens_mode: str
    clean: bool
    orient: str
    width: int
    lens: object = "random"
    warps: int = 4
    pps: int = 0  # programs_per_sm: 0 = split grid, k > 0 = persistent grid
    gap: int = 64  # bytes between pages beyond a page; not a 16-byte multiple: no TMA descriptor
    store: str = "tile"  # "run": the logits written once after the program's run

    @property
    def id(self) -> str:
        rel = "lt" if self.block_t < self.page else ("eq" if self.block_t == self.page else "gt")
        return (f"{self.layout[:5]}-pg{self.page}-bt{self.block_t}{rel}-tp{self.tiles}-n{self.next_n}-h{self.heads}"
                f"-{self.lens_mode}-{'clean' if self.clean else 'dirty'}-{self.orient}-p{self.pps}"
                + (f"-gap{self.gap}" if self.gap != 64 else "") + (f"-store{self.store}" if self.store != "tile" else ""))


def _generated_decode_cases() -> list[DecodeCase]:
    """One case per (layout, page, next_n, lens mode), with the tile/page relation, tiles, grid,
    orientation, clean_logits, width and lengths rotated through deterministically."""
    cases = []
    combos = itertools.product(("page_blocked", "token_interleaved", "none"), (1, 32, 64, 128), (1, 2, 4),
                               ("1d", "2d"))
    for i, (layout, page, n, lens_mode) in enumerate(combos):
        rng = random.Random(i)
        orient = ("q_rows", "k_rows")[(i + i // 5) % 2]
        rel = ("lt", "eq", "gt")[i % 3] if page > 1 else "gt"  # block_t >= 16 > a page of 1
        if rel == "lt":
            block_t = rng.choice([b for b in (16, 32, 64) if b < page])
        elif rel == "eq":
            block_t = page
        else:
            block_t = rng.choice([b for b in (16, 32, 64, 128, 256) if page < b <= 2 * max(page, 64)])
        heads = {1: 16, 2: rng.choice((8, 16)), 4: 8}[n]
        tiles = (1, 2, 4)[(i // 3) % 3]
        pps = 0 if i % 4 != 3 else (1, 2, 3)[(i // 4) % 3]
        if pps:
            tiles = 1  # a persistent grid walks single tiles
        width = rng.randint(max(2, page // 2), min(300, 3 * max(page, block_t) + 17)) if page > 1 else rng.randint(2, 60)
        lens = "random" if i % 5 else tuple(rng.choice((0, 1, width, rng.randint(0, width))) for _ in range(3))
        cases.append(DecodeCase(layout, page, block_t, tiles, n, heads, lens_mode, bool((i // 2 + i // 8) % 2), orient,
                                width, lens, warps=(2, 4, 8)[i % 3], pps=pps))
    return cases


DECODE_CASES = _generated_decode_cases() + [
    DecodeCase("page_blocked", 64, 16, 2, 1, 16, "1d", True, "q_rows", 150),
    DecodeCase("page_blocked", 64, 64, 1, 2, 8, "2d", True, "k_rows", 200, warps=2),
    DecodeCase("page_blocked", 32, 64, 2, 4, 8, "1d", False, "q_rows", 170),
    DecodeCase("page_blocked", 1, 16, 4, 2, 8, "1d", True, "k_rows", 45),
    DecodeCase("page_blocked", 128, 32, 4, 1, 16, "2d", False, "q_rows", 300, warps=8),
    DecodeCase("page_blocked", 64, 32, 2, 2, 8, "1d", True, "q_rows", 150, lens=(0, 1, 150)),
    DecodeCase("token_interleaved", 1, 16, 1, 1, 16, "1d", True, "q_rows", 37),
    DecodeCase("token_interleaved", 32, 16, 4, 2, 8, "2d", True, "q_rows", 130),
    DecodeCase("token_interleaved", 64, 128, 1, 4, 8, "2d", False, "k_rows", 200),
    DecodeCase("token_interleaved", 128, 128, 2, 2, 16, "1d", True, "k_rows", 260),
    DecodeCase("token_interleaved", 32, 32, 1, 4, 8, "2d", True, "q_rows", 97, lens=(2, 0, 97)),
    DecodeCase("none", 32, 32, 2, 1, 16, "1d", True, "q_rows", 100),
    DecodeCase("none", 64, 16, 8, 4, 8, "1d", False, "q_rows", 150),
    DecodeCase("none", 1, 32, 1, 2, 8, "2d", True, "k_rows", 50),
    DecodeCase("none", 128, 256, 1, 1, 16, "2d", True, "q_rows", 270),
    DecodeCase("none", 32, 64, 2, 2, 16, "1d", True, "k_rows", 190),
    DecodeCase("none", 64, 64, 1, 4, 8, "2d", True, "k_rows", 128, lens=(128, 0, 1)),
    # Tiles inside a page of a cache whose page stride TMA cannot take (a 4-byte gap): the
    # per-thread-load fallback of the bulk-copy path.
    DecodeCase("page_blocked", 64, 32, 2, 1, 16, "1d", True, "k_rows", 150, gap=4),
    DecodeCase("page_blocked", 32, 32, 4, 2, 8, "2d", False, "q_rows", 130, lens=(0, 1, 130), gap=4),
    # Long chunks (TILES > 4) of a table that is only partly full: the split grid shares a
    # request's valid tiles out in runs of at least 4 (decode v7), so runs start away from the
    # fixed chunk boundaries and the -inf tails are written by other programs than the scores;
    # the next tile's scales are read ahead (bulk-copy path, its per-thread fallback, and pages
    # smaller than a tile).
    DecodeCase("page_blocked", 64, 16, 8, 1, 16, "1d", True, "k_rows", 600, lens=(600, 70, 0)),
    DecodeCase("page_blocked", 64, 32, 16, 2, 8, "2d", True, "k_rows", 700, lens=(700, 250, 33)),
    DecodeCase("page_blocked", 64, 64, 8, 1, 16, "1d", False, "k_rows", 1500, lens=(1500, 300, 1), gap=4),
    DecodeCase("token_interleaved", 32, 64, 8, 1, 16, "1d", True, "q_rows", 900, lens=(900, 130, 64)),
    # Tiles per program that are no power of two (3, 6, 12: grids that fill one wave): the
    # grid's width, the shared runs (MIN_RUN = 3 at 3 tiles) and the -inf chunks must still tile
    # the output exactly.
    DecodeCase("page_blocked", 64, 64, 3, 1, 16, "1d", True, "k_rows", 700, lens=(700, 130, 0)),
    DecodeCase("page_blocked", 32, 32, 6, 2, 8, "2d", False, "k_rows", 900, lens=(900, 200, 65)),
    DecodeCase("token_interleaved", 64, 64, 12, 1, 16, "1d", True, "q_rows", 1000, lens=(1000, 333, 1)),
    # store="run": each run's logits kept in registers ([TILES rounded up to a power of two,
    # block_t, next_n]) and written once after its last tile: runs shorter than the buffer,
    # partly full tables, both layouts, next_n 1 and 2 (1-D and 2-D lengths), bf16, and the
    # per-thread-load fallback.
    DecodeCase("page_blocked", 64, 64, 3, 1, 16, "1d", True, "k_rows", 700, lens=(700, 130, 0), store="run"),
    DecodeCase("page_blocked", 64, 32, 6, 2, 8, "2d", False, "k_rows", 900, lens=(900, 200, 65), store="run"),
    DecodeCase("page_blocked", 64, 16, 12, 2, 8, "1d", True, "k_rows", 600, lens=(600, 70, 1), gap=4, store="run"),
    DecodeCase("token_interleaved", 32, 32, 4, 1, 16, "2d", True, "k_rows", 300, store="run"),
    DecodeCase("none", 64, 64, 8, 1, 16, "1d", True, "k_rows", 1100, lens=(1100, 64, 0), store="run"),
    # Persistent grids: lengths of 0 and 1 next to full ones, so programs straddle requests.
    DecodeCase("page_blocked", 64, 32, 1, 2, 8, "1d", True, "q_rows", 200, lens=(0, 200, 1), pps=1),
    DecodeCase("token_interleaved", 32, 64, 1, 1, 16, "2d", True, "k_rows", 150, lens=(150, 3, 0), pps=3),
    DecodeCase("none", 1, 16, 1, 4, 8, "1d", True, "q_rows", 40, lens=(1, 0, 40), pps=2),
]


def test_decode_sample_covers_the_axes():
    cases = DECODE_CASES
    assert {c.layout for c in cases} == {"page_blocked", "token_interleaved", "none"}
    assert {c.page for c in cases} == {1, 32, 64, 128}
    assert {c.next_n for c in cases} >= {1, 2, 4}  # next_n=3 is outside the space (3*H rows is no power of two)
    assert {c.lens_mode for c in cases} == {"1d", "2d"}
    assert {c.clean for c in cases} == {True, False}
    assert {c.orient for c in cases} == {"q_rows", "k_rows"}
    assert {c.pps for c in cases} >= {0, 1, 2, 3}
    assert {c.layout for c in cases if c.pps} == {"page_blocked", "token_interleaved", "none"}
    # split-grid chunks long enough for the length-shared runs, with partly full tables
    assert {c.layout for c in cases if not c.pps and c.tiles > 4 and isinstance(c.lens, tuple)} >= {
        "page_blocked", "token_interleaved"}
    assert {c.tiles for c in cases if not c.pps} >= {3, 6, 12}  # the one-wave steps of the space
    assert {c.layout for c in cases if c.store == "run"} == {"page_blocked", "token_interleaved", "none"}
    assert {c.next_n for c in cases if c.store == "run"} >= {1, 2}
    for layout in ("page_blocked", "token_interleaved", "none"):
        rel = {(c.block_t > c.page) - (c.block_t < c.page) for c in cases if c.layout == layout}
        assert rel == {-1, 0, 1}, layout


@pytest.mark.parametrize("case", DECODE_CASES, ids=[c.id for c in DECODE_CASES])
def test_decode_kernel_matches_reference(case: DecodeCase, kernel_dir, device, dot_dtype_for):
    dtype = "bf16" if case.layout == "none" else "fp8"
    problem = Problem(q_dtype=dtype, cache_dtype=dtype, scale_layout=case.layout, page_size=case.page,
                      heads=case.heads, head_dim=32, next_n=case.next_n, lens_mode=case.lens_mode)
    config = Config(block_t=case.block_t, tiles_per_program=case.tiles, num_warps=case.warps, num_stages=2,
                    dot_dtype=dot_dtype_for(dtype), orient=case.orient, programs_per_sm=case.pps, store=case.store)
    module = checked_module(problem, config, kernel_dir)
    batch = 3
    lens = list(case.lens) if isinstance(case.lens, tuple) else case.lens
    inp = make_decode_inputs(problem, batch, case.width, lens, seed=case.width + case.page, device=device,
                             page_gap_bytes=case.gap)
    rows = batch * case.next_n

    buf, out = _padded_nan(rows, case.width, device)
    module.launch(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, out, case.width, case.clean)
    ref = paged_mqa_logits_ref(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in inp.args()],
                               scale_layout=inp.scale_layout)
    valid = inp.valid_mask()
    _check_output(buf, out, ref.to(device), valid, case.clean)

    poisoned = poison_block_table(inp)  # a no-op when every request fills its table
    buf2, out2 = _padded_nan(rows, case.width, device)
    module.launch(poisoned.q, poisoned.kv_cache, poisoned.weights, poisoned.context_lens, poisoned.block_table, out2,
                  case.width, case.clean)
    torch.testing.assert_close(buf2, buf, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# Prefill over ragged K.


@dataclass(frozen=True)
class PrefillCase:
    dtype: str
    block_t: int
    tiles: int
    block_m: int
    heads: int
    rows: int
    keys: int
    windows: str
    num_seqs: int
    clean: bool
    orient: str

    @property
    def id(self) -> str:
        return (f"{self.dtype}-bt{self.block_t}-tp{self.tiles}-m{self.block_m}-h{self.heads}-r{self.rows}-k{self.keys}"
                f"-{self.windows}{self.num_seqs}-{'clean' if self.clean else 'dirty'}-{self.orient}")


def _generated_prefill_cases() -> list[PrefillCase]:
    cases = []
    for i, (dtype, block_m, orient, clean) in enumerate(
            itertools.product(("fp8", "bf16"), (1, 2, 4), ("q_rows", "k_rows"), (True, False))):
        rng = random.Random(1000 + i)
        heads = 16 if block_m == 1 else rng.choice((8, 16))
        rows = rng.randint(1, 14)
        keys = rng.randint(rows, 260)
        windows = ("random", "causal")[i % 2]
        num_seqs = rng.randint(1, rows) if windows == "causal" else 1
        cases.append(PrefillCase(dtype, rng.choice((32, 64, 128, 256)), rng.choice((1, 2, 4)), block_m, heads, rows,
                                 keys, windows, num_seqs, clean, orient))
    return cases


PREFILL_CASES = _generated_prefill_cases() + [
    PrefillCase("fp8", 32, 2, 1, 16, 13, 150, "random", 1, True, "q_rows"),
    PrefillCase("fp8", 64, 1, 2, 8, 11, 140, "causal", 2, True, "k_rows"),
    PrefillCase("fp8", 128, 2, 4, 8, 10, 200, "causal", 1, False, "q_rows"),
    PrefillCase("fp8", 32, 1, 4, 16, 5, 60, "random", 1, True, "k_rows"),
    PrefillCase("bf16", 32, 4, 2, 8, 9, 100, "random", 1, True, "q_rows"),
    PrefillCase("bf16", 64, 2, 1, 16, 7, 90, "causal", 3, True, "k_rows"),
    PrefillCase("bf16", 256, 1, 4, 16, 12, 300, "random", 1, False, "q_rows"),
]


@pytest.mark.parametrize("case", PREFILL_CASES, ids=[c.id for c in PREFILL_CASES])
def test_prefill_kernel_matches_reference(case: PrefillCase, kernel_dir, device, dot_dtype_for):
    layout = "page_blocked" if case.dtype == "fp8" else "none"
    problem = Problem(family="prefill_ragged", q_dtype=case.dtype, cache_dtype=case.dtype, scale_layout=layout,
                      page_size=0, heads=case.heads, head_dim=32)
    config = Config(block_t=case.block_t, tiles_per_program=case.tiles, block_m=case.block_m, num_warps=4,
                    num_stages=2, dot_dtype=dot_dtype_for(case.dtype), orient=case.orient)
    module = checked_module(problem, config, kernel_dir)
    inp = make_prefill_inputs(problem, case.rows, case.keys, case.windows, seed=case.rows, device=device,
                              num_seqs=case.num_seqs)
    k = inp.kv[0]
    k_scale = inp.kv[1] if case.dtype == "fp8" else None
    buf, out = _padded_nan(case.rows, case.keys, device)
    module.launch(inp.q, k, k_scale, inp.weights, inp.cu_seqlen_ks, inp.cu_seqlen_ke, out, case.clean)
    ref = mqa_logits_ref(*inp.args())
    _check_output(buf, out, ref, inp.valid_mask(), case.clean)


# ---------------------------------------------------------------------------------------------
# The bulk-copy (TMA) path of the paged families and its fallback.


@pytest.mark.parametrize("family", ["decode_paged", "prefill_paged"])
def test_cache_descriptor_only_where_tma_can_address_the_pages(family, kernel_dir):
    """Tiles inside one page of an fp8 page-blocked cache load through a TensorDescriptor when
    the base and the page stride are 16-byte multiples, and fall back to per-thread loads
    otherwise (the cases above run both: page gaps of 64 and 4 bytes). Variants the bulk copy
    does not apply to carry no descriptor at all."""
    extra = {"next_n": 1} if family == "decode_paged" else {}
    problem = Problem(family=family, q_dtype="fp8", cache_dtype="fp8", scale_layout="page_blocked", page_size=64,
                      heads=16, head_dim=32, **extra)
    config = Config(block_t=32, tiles_per_program=2, num_warps=4, num_stages=2, dot_dtype="fp16", orient="k_rows")
    module = checked_module(problem, config, kernel_dir)
    pool = torch.zeros(4 * 64 * 36 + 64, dtype=torch.uint8)
    aligned = pool[: 3 * 64 * 36].view(torch.float8_e4m3fn)
    desc, use = module._cache_descriptor(aligned, 3, 64 * 36)
    assert use and list(desc.shape) == [3, 64, 32] and list(desc.strides) == [64 * 36, 32, 1]
    assert list(desc.block_shape) == [1, 32, 32]
    assert module._cache_descriptor(aligned, 3, 64 * 36 + 4) == (None, False)  # page stride 4 mod 16
    offset = pool[4: 4 + 3 * 64 * 36].view(torch.float8_e4m3fn)
    assert offset.data_ptr() % 16 == 4 and module._cache_descriptor(offset, 3, 64 * 36) == (None, False)
    assert module._cache_descriptor(aligned[:0], 0, 64 * 36) == (None, False)  # an empty pool: nothing to read
    desc, use = module._cache_descriptor(aligned[: 64 * 36], 1, module.PAGE * (module.HEAD_DIM + 4))
    assert use and all(type(v) is int for v in desc.strides)  # a one-page pool's constexpr stride
    for other_problem, other_config in [
        (replace(problem, q_dtype="bf16", cache_dtype="bf16", scale_layout="none"), replace(config, dot_dtype="fp32")),
        (replace(problem, scale_layout="token_interleaved"), config),
        (problem, replace(config, block_t=128)),  # a tile spans two pages
    ]:
        assert not hasattr(checked_module(other_problem, other_config, kernel_dir), "_cache_descriptor")
