"""The decode template's L2 hint on its metadata (docs/PERF.md, "The metadata kept in L2"): the
split grid's lengths and block-table loads carry eviction_policy="evict_last" in programs of more
than one tile, and nothing else does. The cache, q, the weights and the scales stream as before: a
hint on those would keep the harness's cycled inputs in L2, a gain an engine would not see.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from indexer_logits._identity import Config, Problem
from tuner.render import render

ROOT = Path(__file__).resolve().parent.parent
FP8 = Problem()  # fp8, page-blocked scales, page 64, H=64, D=128, next_n = 1
METADATA = ("lens_ptr", "bt_ptr")


def _config(tiles: int, store: str = "run", programs_per_sm: int = 0, block_t: int = 64) -> Config:
    return Config(block_t=block_t, tiles_per_program=tiles, num_warps=4, num_stages=3, orient="k_rows",
                  store=store, programs_per_sm=programs_per_sm)


def _loads(source: str) -> list[tuple[str, str | None]]:
    """(the pointer a tl.load reads from, its eviction_policy) for every tl.load in the module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl"):
            base = next((n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name) and n.id.endswith("_ptr")),
                        "?")
            policy = next((kw.value.value for kw in node.keywords if kw.arg == "eviction_policy"), None)
            found.append((base, policy))
    return found


@pytest.mark.parametrize("problem, config", [
    (FP8, _config(16, "run")),
    (FP8, _config(8, "tile")),
    (Problem(next_n=2, lens_mode="2d"), _config(16, "tile")),
    (Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none"), _config(8, "tile")),
])
def test_multi_tile_split_grid_hints_every_metadata_load_and_nothing_else(problem, config):
    loads = _loads(render(problem, config))
    meta = [policy for base, policy in loads if base in METADATA]
    rest = [(base, policy) for base, policy in loads if base not in METADATA]
    assert len(meta) >= 3 and all(policy == "evict_last" for policy in meta), loads
    assert rest and all(policy is None for _, policy in rest), rest


@pytest.mark.parametrize("config", [_config(1, "tile"), _config(1, "tile", programs_per_sm=2)],
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
