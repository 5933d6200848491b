"""The decode template (templates/decode_paged.py.jinja): what it renders and what its kernels do.

1. The block-table guess (docs/PERF.md, "The block table read beside the lengths"): each
   split-grid program of next_n = 1 with more than one tile reads the entries of the run a full
   request would give it before the lengths arrive, and uses them only where its real run starts
   at the same tile. A wrong guess must cost time, never a wrong logit; the guess's reads must
   stay inside the table; and the rendering rule (next_n = 1, several tiles, tiles inside a page)
   holds.
2. The L2 hint on its metadata (docs/PERF.md, "The metadata kept in L2"): the split grid's
   lengths and block-table loads carry eviction_policy="evict_last" in programs of more than one
   tile, and nothing else does. The cache, q, the weights and the scales stream as before: a hint
   on those would keep the harness's cycled inputs in L2, a gain an engine would not see.

(Formerly tests/test_bt_guess.py and tests/test_meta_hint.py, named after their campaigns.)
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import check_output, checked_module, relative_error

from tuner.inputs import make_decode_inputs, poison_block_table
from indexer_logits._identity import Config, Problem
from tuner.reference import paged_mqa_logits_ref
from tuner.render import render

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# 1. The block-table guess.

PROBLEM = Problem(q_dtype="fp8", cache_dtype="fp8", scale_layout="page_blocked", page_size=64, heads=16, head_dim=32)


def _guess_config(dot: str, store: str, tiles: int = 2, block_t: int = 64) -> Config:
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
    module = checked_module(PROBLEM, _guess_config(dot_dtype_for("fp8"), store), kernel_dir)
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
    module = checked_module(PROBLEM, _guess_config(dot_dtype_for("fp8"), store), kernel_dir)
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
    reads its entries after the lengths, as before (next_n = 2 timed 3-5% slower with it). The
    guess is the kernel's `if GUESS:` branch; the module's GUESS constant switches it on."""
    def has_guess(problem: Problem, config: Config) -> bool:
        text = render(problem, config)
        on = "\nGUESS: tl.constexpr = tl.constexpr(True)\n" in text
        assert on or "\nGUESS: tl.constexpr = tl.constexpr(False)\n" in text, "no GUESS constant"
        assert not on or "page_guess = tl.load(" in text
        return on

    assert has_guess(PROBLEM, _guess_config("native", "run"))
    assert has_guess(PROBLEM, _guess_config("native", "tile", tiles=16))
    assert not has_guess(PROBLEM, _guess_config("native", "run", tiles=1))
    assert not has_guess(PROBLEM, _guess_config("native", "tile", block_t=128))
    n2 = Problem(q_dtype="fp8", cache_dtype="fp8", scale_layout="page_blocked", page_size=64, heads=16, head_dim=32,
                 next_n=2)
    assert not has_guess(n2, _guess_config("native", "run"))
    persistent = Config(block_t=64, tiles_per_program=1, num_warps=4, num_stages=2, orient="k_rows", programs_per_sm=2)
    assert not has_guess(PROBLEM, persistent)


# ---------------------------------------------------------------------------------------------
# 2. The L2 hint on the metadata loads.

FP8 = Problem()  # fp8, page-blocked scales, page 64, H=64, D=128, next_n = 1
METADATA = ("lens_ptr", "bt_ptr")


def _hint_config(tiles: int, store: str = "run", programs_per_sm: int = 0, block_t: int = 64) -> Config:
    return Config(block_t=block_t, tiles_per_program=tiles, num_warps=4, num_stages=3, orient="k_rows",
                  store=store, programs_per_sm=programs_per_sm)


def _loads(source: str) -> list[tuple[str, str | None]]:
    """(the pointer a load reads from, its eviction policy or None) for every tl.load in the module,
    and for every block-table read through the shared helper _pages (its own tl.load takes the
    POLICY its callers pass, default none). A policy is a string or a module constant
    (`NAME: tl.constexpr = tl.constexpr("...")`); the empty policy is none."""
    tree = ast.parse(source)
    constants = {node.target.id: node.value.args[0].value for node in tree.body
                 if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                 and isinstance(node.value, ast.Call) and node.value.args and isinstance(node.value.args[0], ast.Constant)}
    pages = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "_pages")
    in_pages = {id(node) for node in ast.walk(pages)}

    def policy(node: ast.expr) -> str | None:
        return (node.value if isinstance(node, ast.Constant) else constants[node.id]) or None

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in in_pages:
            continue
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "load" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "tl"):
            keyword = "eviction_policy"
        elif isinstance(node.func, ast.Name) and node.func.id == "_pages":
            keyword = "POLICY"
        else:
            continue
        base = next((n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name) and n.id.endswith("_ptr")), "?")
        found.append((base, next((policy(kw.value) for kw in node.keywords if kw.arg == keyword), None)))
    return found


@pytest.mark.parametrize("problem, config", [
    (FP8, _hint_config(16, "run")),
    (FP8, _hint_config(8, "tile")),
    (Problem(next_n=2, lens_mode="2d"), _hint_config(16, "tile")),
    (Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none"), _hint_config(8, "tile")),
])
def test_multi_tile_split_grid_hints_every_metadata_load_and_nothing_else(problem, config):
    loads = _loads(render(problem, config))
    meta = [policy for base, policy in loads if base in METADATA]
    rest = [(base, policy) for base, policy in loads if base not in METADATA]
    assert len(meta) >= 3 and all(policy == "evict_last" for policy in meta), loads
    assert rest and all(policy is None for _, policy in rest), rest


@pytest.mark.parametrize("config", [_hint_config(1, "tile"), _hint_config(1, "tile", programs_per_sm=2)],
                         ids=["one_tile", "persistent"])
def test_one_tile_and_persistent_kernels_render_without_hints(config):
    loads = _loads(render(FP8, config))
    assert loads and all(policy is None for _, policy in loads), loads


XCOMPILE = textwrap.dedent("""
    from indexer_logits._identity import Config, Problem
    from tuner.space import TARGETS
    from tuner.xcompile import compile_kernel
    for tiles in (16, 1):
        cfg = Config(block_t=64, tiles_per_program=tiles, num_warps=4, num_stages=3, orient="k_rows",
                     store="run" if tiles > 1 else "tile")
        ptx = compile_kernel(Problem(), cfg, TARGETS["sm_90"]).asm["ptx"]
        hinted = sum(1 for line in ptx.splitlines() if "ld.global" in line and "L2::cache_hint" in line)
        print(f"tiles={tiles} policy={'createpolicy.fractional.L2::evict_last' in ptx} hinted_loads={hinted}")
""")


def test_the_hint_reaches_the_sm90_ptx_only_for_multi_tile_programs():
    """A real compile (no GPU): the hint becomes an L2 cache policy on the loads, not just a no-op."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", XCOMPILE], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith("tiles="))
    assert lines["tiles=16"].startswith("policy=True") and not lines["tiles=16"].endswith("hinted_loads=0"), lines
    assert lines["tiles=1"] == "policy=False hinted_loads=0", lines
