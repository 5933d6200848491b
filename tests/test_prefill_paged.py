"""Chunked prefill over the paged cache (family prefill_paged): the row helper, the reference
(against a naive per-row oracle, and its peak memory at 4,096 rows x H=64 x D=128 x a 22K
table), the rendered kernel under the interpreter (or compiled, on a GPU) across page layouts,
dtypes, tile/page relations, orientations and row blocks that span requests, the gates, the
public runtime functions and their argument checks.

Every kernel launch writes into a NaN-filled buffer whose rows are padded past max_context_len,
so a valid position left unwritten or a write past the width shows up; each case runs again
with the block table poisoned past each request's valid pages and must give the same bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from _helpers import check_output, checked_module

import indexer_logits as K
from indexer_logits._layout import layout_of, unpack_pages
from tuner.families import run_all_gates
from tuner.gates import GateFailure
from tuner.inputs import PrefillPagedInputs, make_prefill_paged_inputs, poison_block_table
from indexer_logits._identity import Config, Problem
from tuner.reference import paged_mqa_logits_chunked_ref, relative_error
from tuner.roofline import floor_ms, prefill_flops
from tuner.space import check, default_config

from conftest import INTERPRET

REPO = Path(__file__).resolve().parent.parent
PAD = 3  # extra columns per output row, never to be written

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def _problem(layout: str, page: int, heads: int = 8, head_dim: int = 32) -> Problem:
    dtype = "bf16" if layout == "none" else "fp8"
    return Problem(family="prefill_paged", q_dtype=dtype, cache_dtype=dtype, page_size=page, scale_layout=layout,
                   heads=heads, head_dim=head_dim)


def _launch_padded(module, x: PrefillPagedInputs, clean: bool) -> tuple[torch.Tensor, torch.Tensor]:
    rows = x.q.shape[0]
    buf = torch.full((rows, x.max_context_len + PAD), float("nan"), device=x.q.device)
    out = buf[:, : x.max_context_len]
    module.launch(x.q, x.kv_cache, x.weights, x.row_request, x.row_limit, x.block_table, out, x.max_context_len,
                  clean)
    return buf, out


def _ref(x: PrefillPagedInputs) -> torch.Tensor:
    cpu = [a.cpu() if isinstance(a, torch.Tensor) else a for a in x.args()]
    return paged_mqa_logits_chunked_ref(*cpu, scale_layout=x.scale_layout)


def _check_output(buf, out, ref, valid, clean: bool) -> None:
    check_output(buf, out, ref, valid, clean, "the row limits")


# ---------------------------------------------------------------------------------------------
# The problem, the space, the row helper.


def test_problem_and_default_config():
    p = _problem("page_blocked", 64, heads=64, head_dim=128)
    assert p.slug == "fp8_pg64_h64_d128" and p.is_paged and not p.is_decode
    assert _problem("token_interleaved", 32).slug == "fp8_pg32_ti_h8_d32"
    for bad, field in ((dict(page_size=0), "page_size"), (dict(page_size=48), "page_size"),
                       (dict(next_n=2), "next_n"), (dict(lens_mode="2d"), "next_n/lens_mode"),
                       (dict(scale_layout="none"), "scale_layout")):
        with pytest.raises(ValueError, match=field):
            Problem(**{**p.to_dict(), **bad})
    c = default_config(p)
    assert (c.block_m, c.block_t, c.tiles_per_program, c.num_warps, c.num_stages, c.orient) == (4, 64, 32, 4, 3, "k_rows")
    for page in (1, 32, 64, 128):
        for heads in (8, 16, 32, 64, 128):
            q = _problem("none", page, heads=heads, head_dim=128)
            check(q, default_config(q, "fp32"))
            assert default_config(q).block_m == max(1, min(4, 256 // heads))


def test_chunked_prefill_rows_follow_the_chunk_rule():
    req, lim = K.chunked_prefill_rows([5, 7, 10], [3, 0, 2])
    assert req.dtype == lim.dtype == torch.int32
    assert req.tolist() == [0, 0, 0, 2, 2]
    assert lim.tolist() == [6, 7, 8, 11, 12]  # row r of a chunk at p0 sees t <= p0 + r
    req, lim = K.chunked_prefill_rows(torch.tensor([0]), torch.tensor([4]))
    assert req.tolist() == [0] * 4 and lim.tolist() == [1, 2, 3, 4]
    for starts, lens, name in (([0, 1], [2], "chunk_lens"), ([-1], [2], "chunk_starts"), ([0], [-2], "chunk_lens")):
        with pytest.raises(ValueError, match=name):
            K.chunked_prefill_rows(starts, lens)


def test_inputs_are_realistic():
    x = make_prefill_paged_inputs(_problem("page_blocked", 32), 23, 300, num_requests=3, seed=4)
    req, lim = x.row_request.tolist(), x.row_limit.tolist()
    assert req == sorted(req) and set(req) == {0, 1, 2}
    starts = [lim[req.index(b)] - 1 for b in range(3)]
    assert all(p0 > 0 for p0 in starts) and max(lim) == 300  # chunks at p0 > 0, the last at the full width
    assert x.kv_cache.stride(0) > 32 * (32 + 4)  # page stride larger than a page
    assert x.kv_cache.shape[0] > x.block_table.numel()  # pages scattered through a larger pool
    assert any(req[i] != req[min(i + 3, 22)] for i in range(0, 23, 4))  # a block of 4 rows spans two requests


# ---------------------------------------------------------------------------------------------
# The reference.


def _naive(x: PrefillPagedInputs) -> torch.Tensor:
    """Per row: gather the row's own valid pages, score them (the per-row gather a kernel avoids)."""
    q, kv, w, req, lim, bt, width = x.args()
    layout = layout_of(kv, x.scale_layout)
    page = layout.page_size
    out = torch.full((q.shape[0], width), float("-inf"))
    for r in range(q.shape[0]):
        n = int(lim[r])
        if n <= 0:
            continue
        vals, scales = unpack_pages(kv, layout, bt[int(req[r]), : -(-n // page)])
        k = vals.reshape(-1, layout.head_dim)[:n].double()
        s = scales.reshape(-1)[:n].double()
        dots = torch.einsum("hd,td->ht", q[r].double(), k).clamp(min=0)
        out[r, :n] = ((dots * w[r].double()[:, None]).sum(0) * s).float()
    return out


@pytest.mark.parametrize("layout,page", [("page_blocked", 64), ("token_interleaved", 1), ("none", 32)])
def test_reference_matches_a_naive_per_row_oracle(layout, page):
    x = make_prefill_paged_inputs(_problem(layout, page), 37, 260, num_requests=4, seed=page)
    x = x.with_limits(torch.where(torch.arange(37) % 9 == 4, 0, x.row_limit))  # rows that see nothing
    ref = paged_mqa_logits_chunked_ref(*x.args(), scale_layout=x.scale_layout, row_chunk=8)
    naive = _naive(x)
    valid = x.valid_mask()
    assert torch.equal(torch.isneginf(ref), ~valid)
    assert relative_error(ref, naive, valid) < 1e-5


MEMORY_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    sys.path.insert(0, sys.argv[1])
    from indexer_logits import chunked_prefill_rows
    from indexer_logits._reference import paged_mqa_logits_chunked_ref

    def mib(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    rows, heads, dim, width, page = 4096, 64, 128, 22528, 64
    torch.manual_seed(0)
    # Two requests of one 22K table: a chunk of 4,032 rows at p0 = 0 and a chunk of 64 rows
    # that ends at the full width (so one request's pages span the whole table).
    pages = width // page
    kv = torch.randn(2 * pages + 8, page, 1, dim).to(torch.bfloat16)
    table = torch.randperm(kv.shape[0])[: 2 * pages].reshape(2, pages).to(torch.int32)
    q = torch.randn(rows, heads, dim).to(torch.bfloat16)
    w = torch.randn(rows, heads) / heads
    req, lim = chunked_prefill_rows([0, width - 64], [rows - 64, 64])
    base = mib("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
    out = paged_mqa_logits_chunked_ref(q, kv, w, req, lim, table, width, scale_layout="none")
    peak = mib("VmHWM")
    print(json.dumps({"extra_mib": peak - base, "out_mib": out.numel() * 4 / 2**20,
                      "finite": int(torch.isfinite(out).sum()), "valid": int(lim.long().sum())}))
""")


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc peak-RSS reset")
def test_reference_memory_is_bounded_by_the_output():
    """4,096 bf16 rows x H=64 x D=128 over a 22,528-token table: a per-row gather of the table
    would need 4096 x 352 pages x 16 KiB = 23.6 GB; the reference stays under 2x the output
    (369 MB) plus one request's pages."""
    res = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(REPO)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    m = json.loads(res.stdout.strip().splitlines()[-1])
    assert m["finite"] == m["valid"]
    request_pages_mib = 22528 * 128 * (2 + 4) / 2**20  # bf16 pages and their fp32 read-back
    assert m["extra_mib"] < 2 * m["out_mib"] + request_pages_mib, m
    gather_mib = 4096 * 22528 * 128 * 2 / 2**20
    assert m["extra_mib"] < gather_mib / 20, m


# ---------------------------------------------------------------------------------------------
# The kernel.


@dataclass(frozen=True)
class Case:
    layout: str
    page: int
    block_t: int
    tiles: int
    block_m: int
    orient: str
    clean: bool
    rows: int
    width: int
    chunk_lens: tuple
    heads: int = 8
    gap: int = 64  # bytes between pages beyond a page; not a 16-byte multiple: no TMA descriptor

    @property
    def id(self) -> str:
        return (f"{self.layout[:5]}-pg{self.page}-bt{self.block_t}-tp{self.tiles}-m{self.block_m}-{self.orient}"
                f"-{'clean' if self.clean else 'dirty'}-r{self.rows}-w{self.width}"
                + (f"-gap{self.gap}" if self.gap != 64 else ""))


CASES = [
    Case("page_blocked", 64, 32, 2, 2, "k_rows", True, 13, 200, (5, 4, 4)),  # tile < page
    Case("page_blocked", 32, 64, 1, 4, "q_rows", False, 11, 170, (3, 2, 6)),  # tile > page
    Case("page_blocked", 128, 128, 2, 4, "k_rows", True, 9, 300, (9,)),  # tile = page, one request
    Case("page_blocked", 64, 64, 2, 4, "k_rows", True, 10, 200, (8, 2), gap=4),  # tile = page, no TMA
    Case("token_interleaved", 1, 16, 4, 4, "q_rows", True, 10, 70, (1, 1, 2, 6)),  # a block spans 3 requests
    Case("token_interleaved", 64, 64, 2, 2, "k_rows", True, 7, 150, (3, 0, 4)),  # an empty chunk between
    Case("none", 64, 64, 2, 4, "k_rows", True, 12, 190, (6, 6)),
    Case("none", 1, 32, 2, 2, "q_rows", True, 9, 60, (4, 5)),
    Case("none", 32, 16, 4, 1, "q_rows", False, 6, 100, (2, 4), heads=16),
    Case("none", 128, 256, 1, 4, "k_rows", True, 8, 260, (3, 5)),  # one program per row block
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kernel_matches_reference(case: Case, kernel_dir, device, dot_dtype_for):
    problem = _problem(case.layout, case.page, heads=case.heads)
    config = Config(block_t=case.block_t, tiles_per_program=case.tiles, block_m=case.block_m, num_warps=4,
                    num_stages=2, dot_dtype=dot_dtype_for(problem.cache_dtype), orient=case.orient)
    module = checked_module(problem, config, kernel_dir)
    x = make_prefill_paged_inputs(problem, case.rows, case.width, chunk_lens=case.chunk_lens, seed=case.rows,
                                  device=device, page_gap_bytes=case.gap)
    buf, out = _launch_padded(module, x, case.clean)
    _check_output(buf, out, _ref(x).to(device), x.valid_mask(), case.clean)
    buf2, _ = _launch_padded(module, poison_block_table(x), case.clean)
    torch.testing.assert_close(buf2, buf, rtol=0, atol=0, equal_nan=True)


def test_rows_of_a_chunk_see_exactly_their_prefix(kernel_dir, device, dot_dtype_for):
    """A chunk of 20 rows starting at p0 = 37: row r has finite logits at t <= 37 + r, -inf after,
    and its last visible position matches the reference."""
    problem = _problem("page_blocked", 32)
    config = Config(block_t=16, tiles_per_program=2, block_m=4, num_warps=4, num_stages=2,
                    dot_dtype=dot_dtype_for("fp8"), orient="k_rows")
    module = checked_module(problem, config, kernel_dir)
    p0, n, width = 37, 20, 96
    x = make_prefill_paged_inputs(problem, n, width, chunk_lens=[n], chunk_starts=[p0], seed=2, device=device)
    assert x.row_limit.tolist() == [p0 + r + 1 for r in range(n)]
    buf, out = _launch_padded(module, x, True)
    ref = _ref(x)
    t = torch.arange(width)
    for r in range(n):
        seen = torch.isfinite(out[r].cpu())
        assert torch.equal(seen, t <= p0 + r), r
        assert torch.isneginf(out[r, p0 + r + 1:]).all()
        torch.testing.assert_close(out[r, p0 + r].cpu(), ref[r, p0 + r], rtol=1e-4, atol=1e-5)


def test_limits_of_zero_and_past_every_limit_read_nothing(kernel_dir, device, dot_dtype_for):
    """Rows that see nothing, a request none of whose rows sees anything (its whole table
    poisoned), and chunks of the output past every limit: -inf, and no block-table read."""
    problem = _problem("none", 32)
    config = Config(block_t=32, tiles_per_program=1, block_m=2, num_warps=4, num_stages=2,
                    dot_dtype=dot_dtype_for("bf16"), orient="q_rows")
    module = checked_module(problem, config, kernel_dir)
    x = make_prefill_paged_inputs(problem, 8, 192, chunk_lens=[3, 2, 3], chunk_starts=[0, 5, 20], seed=3,
                                  device=device)
    x = x.with_limits(torch.tensor([0, 0, 1, 0, 0, 30, 0, 2]))
    bufs = []
    for inputs in (x, poison_block_table(x)):
        buf, out = _launch_padded(module, inputs, True)
        _check_output(buf, out, _ref(x).to(device), x.valid_mask(), True)
        bufs.append(buf)
    assert (poison_block_table(x).block_table[1] < 0).any()  # request 1's whole row poisoned
    torch.testing.assert_close(bufs[1], bufs[0], rtol=0, atol=0, equal_nan=True)


def test_gates_pass_and_catch_a_wrong_kernel(kernel_dir, device, dot_dtype_for):
    problem = _problem("page_blocked", 64)
    config = Config(block_t=64, tiles_per_program=1, block_m=2, num_warps=4, num_stages=2,
                    dot_dtype=dot_dtype_for("fp8"), orient="k_rows")
    module = checked_module(problem, config, kernel_dir)
    x = make_prefill_paged_inputs(problem, 9, 200, num_requests=3, seed=5, device=device)
    assert run_all_gates(module, problem, x, True) < 1e-3  # reference, poison, graph replay

    class OffByOne:  # sees one position too many: the mask gate must notice
        @staticmethod
        def launch(q, kv, w, req, lim, bt, out, width, clean):
            return module.launch(q, kv, w, req, (lim + 1).clamp(max=width).to(torch.int32), bt, out, width, clean)

    with pytest.raises(GateFailure):
        run_all_gates(OffByOne, problem, x, True)


def test_roofline_counts_the_valid_pairs():
    problem = _problem("page_blocked", 64)
    x = make_prefill_paged_inputs(problem, 10, 200, chunk_lens=[4, 6], chunk_starts=[10, 100])
    pairs = sum(range(11, 15)) + sum(range(101, 107))
    assert prefill_flops(x) == 2 * 8 * 32 * pairs
    assert floor_ms(x, True, matmul_rate=1e12) == pytest.approx(2 * 8 * 32 * pairs / 1e12 * 1e3)


# ---------------------------------------------------------------------------------------------
# The public runtime functions (H=64, D=128, page 64: the shipped family defaults).


@pytest.mark.parametrize("dtype,clean", [("fp8", True), ("bf16", False), ("bf16", True)])
def test_runtime_function_matches_reference(dtype, clean, device):
    problem = _problem("page_blocked" if dtype == "fp8" else "none", 64, heads=64, head_dim=128)
    x = make_prefill_paged_inputs(problem, 7, 150, chunk_lens=[3, 4], seed=11, device=device)
    fn = K.fp8_paged_mqa_logits_chunked if dtype == "fp8" else K.bf16_paged_mqa_logits_chunked
    buf = torch.full((7, 150 + PAD), float("nan"), device=device)
    out = fn(*x.args(), clean, out=buf)
    assert out.data_ptr() == buf.data_ptr() and out.shape == (7, 150)
    assert bool(torch.isnan(buf[:, 150:]).all())
    ref = _ref(x)
    valid = x.valid_mask()
    assert relative_error(out.cpu(), ref, valid.cpu()) < 1e-3
    if clean:
        assert torch.equal(torch.isneginf(out), ~valid)
    sel = K.chunked_selection(*x.args(), scale_layout=x.scale_layout)
    assert sel.problem["family"] == "prefill_paged" and sel.bucket == (7, 150)
    if INTERPRET:
        assert sel.rung == "default", sel
    plain = fn(*x.args(), clean, check_values=False)  # a fresh output
    assert plain.shape == (7, 150) and relative_error(plain.cpu(), ref, valid.cpu()) < 1e-3


def test_runtime_reference_rung_for_unserved_layouts(device):
    problem = _problem("token_interleaved", 32, heads=8, head_dim=32)
    x = make_prefill_paged_inputs(problem, 5, 80, seed=1, device=device)
    K.clear_cache()  # the fallback warns once per problem
    with pytest.warns(K.DispatchWarning):
        out = K.fp8_paged_mqa_logits_chunked(*x.args(), scale_layout="token_interleaved")
    assert relative_error(out.cpu(), _ref(x), x.valid_mask().cpu()) < 1e-3
    assert K.chunked_selection(*x.args(), scale_layout="token_interleaved").rung == "reference"


def _bad_inputs():
    problem = _problem("page_blocked", 32)
    x = make_prefill_paged_inputs(problem, 6, 128, chunk_lens=[3, 3], seed=0)
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)
    return x, [
        ("rows not grouped", dict(row_request=i32([0, 1, 1, 0, 1, 1])), "row_request"),
        ("request out of range", dict(row_request=i32([0, 0, 0, 1, 1, 2])), "row_request"),
        ("negative request", dict(row_request=i32([-1, 0, 0, 1, 1, 1])), "row_request"),
        ("negative limit", dict(row_limit=i32([1, 2, -3, 4, 5, 6])), "row_limit"),
        ("limit past the table", dict(block_table=x.block_table[:, :2].contiguous()), "row_limit"),
        ("limit past the width", dict(max_context_len=100), "max_context_len"),
        ("id out of range in the valid pages", dict(block_table=x.block_table.clone().index_fill_(1, torch.tensor([0]), 10**6)), "block_table"),
        ("negative id in the valid pages", dict(block_table=x.block_table.clone().index_fill_(1, torch.tensor([0]), -1)), "block_table"),
        ("int64 limits", dict(row_limit=x.row_limit.long()), "row_limit"),
        ("one request per row missing", dict(row_request=x.row_request[:5]), "row_request"),
        ("weights shape", dict(weights=x.weights[:, :4]), "weights"),
        ("q dims", dict(q=x.q[None]), "q"),
        ("width not an int", dict(max_context_len=128.0), "max_context_len"),
        ("kv last dim", dict(kv_cache=x.kv_cache[..., :20]), "kv_cache"),
        ("table dtype", dict(block_table=x.block_table.long()), "block_table"),
    ]


BAD_X, BAD_CASES = _bad_inputs()


@pytest.mark.parametrize("what,change,name", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_arguments_raise_naming_the_argument(what, change, name):
    x = replace(BAD_X, **change)
    with pytest.raises(ValueError, match=rf"^{name}:"):
        K.fp8_paged_mqa_logits_chunked(*x.args())
    with pytest.raises(ValueError, match=rf"^{name}:"):
        paged_mqa_logits_chunked_ref(*x.args())


@pytest.mark.filterwarnings("ignore::indexer_logits.DispatchWarning")  # H=8, D=32: the reference serves
def test_wrong_dtype_function_and_poisoned_table_past_the_valid_pages():
    with pytest.raises(ValueError, match=r"^q: bf16_paged_mqa_logits_chunked expects"):
        K.bf16_paged_mqa_logits_chunked(*BAD_X.args())
    poisoned = poison_block_table(BAD_X)
    assert (poisoned.block_table < 0).any()  # entries past the valid pages are not checked
    out = K.fp8_paged_mqa_logits_chunked(*poisoned.args())
    assert relative_error(out, _ref(BAD_X), BAD_X.valid_mask()) < 1e-3
