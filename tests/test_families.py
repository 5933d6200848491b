"""The family registry (tuner.families): every part of the tuner reads it, so a new family is one
module, one template and one registration. Proved with a toy family registered here: a plain
one-row-per-program scorer over ragged K, run through the identity, the search space, render,
the gates under the interpreter, emit's defaults and the CLI's choices."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from click.testing import CliRunner

import cli
import tuner.render as render_mod
from indexer_logits._identity import FAMILIES, Config, FamilyKind, Problem, variant_name
from tuner import families, space, tables
from tuner.families import family_of, run_all_gates
from tuner.families.prefill_ragged import PrefillRagged
from tuner.gates import GateFailure
from tuner.inputs import make_prefill_inputs

TOY_TEMPLATE = '''{% include "_header.py.jinja" %}

HEADS: tl.constexpr = tl.constexpr({{ problem.heads }})
HEAD_DIM: tl.constexpr = tl.constexpr({{ problem.head_dim }})
BLOCK_T: tl.constexpr = tl.constexpr({{ config.block_t }})
CHUNK = {{ config.block_t }}


@triton.jit
def _toy_ragged_kernel(q_ptr, k_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, q_stride, k_stride, w_stride, out_stride,
                       num_keys, CLEAN: tl.constexpr):
    row = tl.program_id(0)
    t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    h = tl.arange(0, HEADS)
    d = tl.arange(0, HEAD_DIM)
    in_k = t < num_keys
    q = tl.load(q_ptr + row * q_stride + h[:, None] * HEAD_DIM + d[None, :]).to(tl.float32)
    k = tl.load(k_ptr + t[:, None] * k_stride + d[None, :], mask=in_k[:, None], other=0.0).to(tl.float32)
    w = tl.load(w_ptr + row * w_stride + h)
    score = tl.sum(tl.maximum(tl.dot(q, tl.trans(k)), 0.0) * w[:, None], axis=0)
    valid = (t >= tl.load(ks_ptr + row)) & (t < tl.load(ke_ptr + row))
    if CLEAN:
        score = tl.where(valid, score, float("-inf"))
    tl.store(out_ptr + row * out_stride + t, score, mask=in_k)


def launch(q, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, clean_logits):
    grid = (q.shape[0], triton.cdiv(k.shape[0], BLOCK_T))
    _toy_ragged_kernel[grid](q, k, weights, cu_seqlen_ks, cu_seqlen_ke, out, q.stride(0), k.stride(0),
                             weights.stride(0), out.stride(0), k.shape[0], CLEAN=bool(clean_logits),
                             num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out
'''


class ToyRagged(PrefillRagged):
    """bf16 only (its kernel has no scales), one query row per program, one tile per program."""

    kind = FamilyKind("toy_ragged", paged=False, decode=False, kernel="_toy_ragged_kernel")
    template = "toy_ragged.py.jinja"
    axes = {"block_t": (16, 32), "tiles_per_program": (1,), "num_warps": (4,), "num_stages": (1,),
            "block_m": (1,), "dot_dtype": ("native", "fp32"), "orient": ("q_rows",), "programs_per_sm": (0,),
            "store": ("tile",)}

    def default_config(self, problem, dot_dtype="native"):
        return Config(block_t=32, tiles_per_program=1, num_warps=4, num_stages=1, dot_dtype=dot_dtype)

    def default_problems(self, dtype, page_size, heads, head_dim):
        return [] if dtype == "fp8" else [Problem(self.name, dtype, dtype, 0, "none", heads, head_dim, 1, "1d")]


def toy_problem() -> Problem:
    """Built after the fixture registers the family (a Problem validates its family)."""
    return Problem(family="toy_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=0, scale_layout="none",
                   heads=16, head_dim=32)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    templates = tmp_path / "templates"
    shutil.copytree(render_mod.TEMPLATE_DIR, templates)
    (templates / ToyRagged.template).write_text(TOY_TEMPLATE)
    monkeypatch.setattr(render_mod, "TEMPLATE_DIR", templates)
    family = families.register(ToyRagged())
    yield family
    families.unregister(family.name)


def test_the_registry_serves_every_family():
    assert families.names() == ["decode_paged", "prefill_ragged", "prefill_paged"]
    assert set(families.names()) == set(FAMILIES)  # the runtime knows every kind the tuner tunes
    for name in families.names():
        family = family_of(name)
        assert family.name == name and (render_mod.TEMPLATE_DIR / family.template).is_file()
        assert set(family.axes) <= {f for f in Config.__dataclass_fields__}
    with pytest.raises(ValueError, match="family: expected one of .*prefill_paged"):
        family_of("chunked")


def test_a_toy_family_runs_through_every_part(toy, tmp_path):
    TOY = toy_problem()
    # identity: a Problem of the new family validates by its kind (ragged: no pages, no next_n)
    assert TOY.slug == "bf16_h16_d32" and not TOY.is_paged and not TOY.is_decode
    with pytest.raises(ValueError, match="page_size: expected 0 for toy_ragged"):
        Problem(family="toy_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=64, scale_layout="none")
    # the search space and its constraints
    default = space.default_config(TOY)
    points = space.feasible_points(TOY, dot_dtypes=("fp32",))
    assert default.block_t == 32 and [c.block_t for c in points] == [16, 32]
    with pytest.raises(space.InfeasibleConfig, match="outside_space"):
        space.check(TOY, Config(block_t=64, tiles_per_program=1, num_stages=1))
    # render: the toy's template, hashed with the partial it includes
    assert render_mod.included_partials(toy.template) == ["_header.py.jinja"]
    module = render_mod.load_module(render_mod.emit(TOY, points[0], tmp_path / "src"))
    assert module.VARIANT == variant_name(TOY, points[0]) and module.VARIANT.startswith("toy_ragged__")
    # the gates (reference values and the -inf mask) under the interpreter
    x = make_prefill_inputs(TOY, 8, 40, "random", seed=3)
    assert run_all_gates(module, TOY, x, clean_logits=True) < 1e-3
    # ... which a wrong kernel fails
    broken = TOY_TEMPLATE.replace("tl.maximum(tl.dot(q, tl.trans(k)), 0.0)", "tl.dot(q, tl.trans(k))")
    (render_mod.TEMPLATE_DIR / toy.template).write_text(broken)
    module = render_mod.load_module(render_mod.emit(TOY, points[0], tmp_path / "broken"))
    with pytest.raises(GateFailure):
        run_all_gates(module, TOY, x, clean_logits=True)
    (render_mod.TEMPLATE_DIR / toy.template).write_text(TOY_TEMPLATE)
    # emit: the family defaults include the toy's, and a table built from them serves it
    served = Problem(family="toy_ragged", q_dtype="bf16", cache_dtype="bf16", page_size=0, scale_layout="none",
                     heads=tables.DEFAULT_HEADS, head_dim=tables.DEFAULT_HEAD_DIM)
    assert served in tables.default_problems()
    out = tmp_path / "tables"
    tables.emit_defaults(out)
    table = json.loads((out / "default" / "dispatch.json").read_text())
    name = variant_name(served, space.default_config(served))
    assert table["defaults"][served.key] == name and (out / "default" / f"{name}.py").is_file()


@pytest.mark.parametrize("command", ["tune", "verify", "bench", "check"])
def test_the_cli_offers_a_registered_family(toy, command):
    res = CliRunner().invoke(cli.main, [command, "--family", "no_such_family"])
    assert res.exit_code == 2 and "toy_ragged" in res.output and "prefill_paged" in res.output


def test_a_family_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="already registered"):
        families.register(ToyRagged())
    with pytest.raises(ValueError, match="lower-case identifier"):
        families.register(type("Bad", (ToyRagged,), {"kind": FamilyKind("Bad__x", False, False, "_k")})())


def test_torch_is_what_the_toy_is_checked_with(toy):
    TOY = toy_problem()
    # the oracle the gates use for a ragged family is the torch reference of SPEC.md's formula:
    # a hand computation on one row agrees with it (so the gates above are not self-referential)
    x = make_prefill_inputs(TOY, 2, 20, "random", seed=1)
    from tuner.gates import reference

    ref = reference(x)
    q, k, w = x.q.float(), x.kv[0].float(), x.weights
    by_hand = (torch.relu(q[1] @ k.T) * w[1][:, None]).sum(0)
    ks, ke = int(x.cu_seqlen_ks[1]), int(x.cu_seqlen_ke[1])
    assert torch.allclose(ref[1, ks:ke], by_hand[ks:ke], rtol=1e-4, atol=1e-4)
