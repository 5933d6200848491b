"""Config.head_sum, the tuned axis ("tree" / "chain"; docs/PERF.md, "Prefill under Triton 3.8 and
3.9: why"): the chain computes what the tree does in every family (CPU interpreter, fp16 and fp32
dots: it gets bf16 and fp8 dots wrong), 'tree' renders what the templates rendered before the axis
(the shipped modules stay the code that was timed), and the search can choose it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from indexer_logits._identity import Config, Problem
from tuner.gates import launch, new_output, reference_gate
from tuner.inputs import make_decode_inputs, make_prefill_inputs, make_prefill_paged_inputs
from tuner.render import emit, load_module, render
from tuner.space import InfeasibleConfig, axes_of, check, neighbours, tied

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

ROOT = Path(__file__).resolve().parent.parent
KW = dict(heads=16, head_dim=32)


def _problem(family: str, dtype: str, next_n: int = 1) -> Problem:
    layout = "page_blocked" if dtype == "fp8" else "none"
    page = 0 if family == "prefill_ragged" else 64
    return Problem(family=family, q_dtype=dtype, cache_dtype=dtype, page_size=page, scale_layout=layout,
                   next_n=next_n, **KW)


def _inputs(problem: Problem):
    if problem.family == "decode_paged":
        return make_decode_inputs(problem, 3, 320, "random", seed=3)
    if problem.family == "prefill_paged":
        return make_prefill_paged_inputs(problem, 12, 320, num_requests=2, seed=3)
    return make_prefill_inputs(problem, 12, 300, seed=3)


# (family, dtype, next_n, config): tiles inside a page and across two, block_m 1 and 2 (decode
# takes its rows from next_n), an fp16 dot for fp8 inputs and fp32 for bf16.
CASES = [
    ("decode_paged", "fp8", 1, Config(block_t=64, tiles_per_program=2, num_stages=2, orient="k_rows", dot_dtype="fp16")),
    ("decode_paged", "fp8", 2, Config(block_t=32, tiles_per_program=4, num_stages=3, orient="k_rows", dot_dtype="fp16",
                                      store="run")),
    ("decode_paged", "bf16", 2, Config(block_t=128, tiles_per_program=1, orient="k_rows", dot_dtype="fp32")),
    ("prefill_paged", "fp8", 1, Config(block_t=32, tiles_per_program=4, block_m=2, orient="k_rows", dot_dtype="fp16")),
    ("prefill_ragged", "fp8", 1, Config(block_t=32, tiles_per_program=4, block_m=2, num_stages=3, orient="k_rows",
                                        dot_dtype="fp16")),
    ("prefill_ragged", "bf16", 1, Config(block_t=64, tiles_per_program=2, block_m=1, orient="k_rows", dot_dtype="fp32")),
]


@pytest.mark.parametrize("family, dtype, next_n, tree", CASES,
                         ids=[f"{c[0]}-{c[1]}-n{c[2]}-{c[3].slug}" for c in CASES])
def test_chain_computes_the_tree_sum(family, dtype, next_n, tree, tmp_path):
    problem = _problem(family, dtype, next_n)
    chain = replace(tree, head_sum="chain")
    inputs = _inputs(problem)
    mod_tree = load_module(emit(problem, tree, tmp_path))
    mod_chain = load_module(emit(problem, chain, tmp_path))
    assert "tl.split" in render(problem, chain) and "tl.split" not in render(problem, tree)
    for clean in (True, False):
        a = launch(mod_tree, inputs, new_output(inputs), clean)
        b = launch(mod_chain, inputs, new_output(inputs), clean)
        valid = inputs.valid_mask()
        assert torch.isfinite(a[valid]).all() and torch.isfinite(b[valid]).all()
        # the same terms added in another order: equal within fp32 rounding, never more
        scale = a[valid].abs().max().clamp_min(1e-30)
        assert float((a[valid] - b[valid]).abs().max() / scale) < 1e-5
        if clean:
            assert torch.equal(torch.isneginf(a), torch.isneginf(b))
    assert reference_gate(mod_chain, inputs, True) < 1e-3


def test_ragged_chain_loads_q_above_the_if_and_tree_keeps_it_inside():
    """Triton 3.9 keeps q's shared copy in the tile loop when q is loaded inside `if last > first:`
    (docs/PERF.md); the chain moves it above; the tree keeps the form the H200 table was timed with."""
    problem = _problem("prefill_ragged", "fp8")
    tree = Config(block_t=64, tiles_per_program=32, num_stages=3, block_m=4, orient="k_rows")
    for config, q_first in ((tree, False), (replace(tree, head_sum="chain"), True)):
        text = render(problem, config)
        q_load, branch = text.index("q = tl.load("), text.index("if last > first:")
        assert (q_load < branch) == q_first, config.slug


def test_tree_renders_every_committed_module_as_before():
    """'tree' (the default the keys leave out) renders each committed module byte for byte, its
    header's template hash aside: why tuner.tables.PTX_EQUIVALENT_TEMPLATES carries the H200 trials
    over the axis's template change."""
    import re

    from tuner.tables import timing_hashes
    from tuner.render import template_hash

    tables = ROOT / "indexer_logits" / "tables"
    checked = 0
    for table_file in sorted(tables.rglob("dispatch.json")):
        table = json.loads(table_file.read_text())
        for info in table["modules"].values():
            problem, config = Problem.from_dict(info["problem"]), Config.from_dict(info["config"])
            old = (table_file.parent / info["file"]).read_text()
            stamped = re.search(r"template sha256 ([0-9a-f]{64})", old).group(1)
            assert stamped in timing_hashes(template_hash(problem.family)), info["file"]
            assert re.sub(stamped, "", old) == re.sub(template_hash(problem.family), "", render(problem, config))
            checked += 1
    assert checked >= 700


def test_the_axis_is_searched_where_it_applies():
    for family in ("decode_paged", "prefill_paged", "prefill_ragged"):
        problem = _problem(family, "fp8")
        assert axes_of(problem)["head_sum"] == ("tree", "chain")
    problem = _problem("prefill_ragged", "fp8")
    k_rows = Config(block_t=64, tiles_per_program=4, block_m=4, orient="k_rows")
    assert replace(k_rows, head_sum="chain") in neighbours(problem, k_rows)
    assert k_rows in neighbours(problem, replace(k_rows, head_sum="chain"))
    # q_rows sums across warps: nothing to chain, so the knob is tied to 'tree' and refused alone
    q_rows_chain = replace(k_rows, orient="q_rows", head_sum="chain")
    assert tied(problem, q_rows_chain) == replace(k_rows, orient="q_rows")
    with pytest.raises(InfeasibleConfig, match="head_sum='chain' is for orient k_rows"):
        check(problem, q_rows_chain)
    assert all(c.head_sum == "tree" for c in neighbours(problem, k_rows) if c.orient == "q_rows")


def test_adding_the_axis_keeps_the_study_names(monkeypatch):
    """An axis that only adds values to a knob every earlier trial had at one value (ADDED_AXES)
    leaves the space's signature, so the studies keep their names and their histories; a trial from
    before the axis (no head_sum parameter) reads as 'tree'."""
    pytest.importorskip("optuna")
    from indexer_logits._identity import Bucket
    from tuner.families import family_of
    from tuner.optuna_space import OptunaSpace, study_name

    problem, bucket = _problem("decode_paged", "fp8", 2), Bucket(64, 8192)
    name = lambda space, th="t" * 64: study_name(problem, bucket, "gpu", "cuda_graph", th, space, "tpe")
    space = OptunaSpace(problem, ("native",))
    config = Config(block_t=64, tiles_per_program=32, num_stages=3, orient="k_rows")
    params = space.params_of(config)
    old_params = {k: v for k, v in params.items() if k != "head_sum"}
    assert "head_sum" in params and space.complete(old_params) and space.config(old_params) == config
    with_axis = name(space)
    before = {k: v for k, v in family_of(problem).axes.items() if k != "head_sum"}
    monkeypatch.setattr(family_of(problem), "axes", before)
    assert name(OptunaSpace(problem, ("native",))) == with_axis
    # ... while a real change of the space still renames them
    monkeypatch.setattr(family_of(problem), "axes", {**before, "num_warps": (4, 8)})
    assert name(OptunaSpace(problem, ("native",))) != with_axis


def test_study_names_follow_ptx_equivalent_templates(monkeypatch):
    pytest.importorskip("optuna")
    from indexer_logits._identity import Bucket
    from tuner import tables
    from tuner.optuna_space import OptunaSpace, study_name

    problem = _problem("prefill_ragged", "fp8")
    space = OptunaSpace(problem, ("native",))
    old, new, other = "a" * 64, "b" * 64, "c" * 64
    monkeypatch.setitem(tables.PTX_EQUIVALENT_TEMPLATES, new, (old,))
    name = lambda th: study_name(problem, Bucket(4096, 16384), "gpu", "cuda_graph", th, space, "tpe")
    assert name(new) == name(old) != name(other)


def test_model_prior():
    """The model's prior: under Triton 3.7+ on wgmma the compute-bound tree pays for its unfused
    multiplies; under 3.6, or where the sum is hidden by memory (next_n = 1), the chain gains
    nothing and the tree wins ties; on mma.sync the chain pays for its layout conversions."""
    from tuner.model import Resources, head_sum_cost

    wgmma, mma_sync = Resources(200, 60000, "wgmma"), Resources(200, 60000, "mma.sync")
    tree = Config(block_t=64, tiles_per_program=32, num_stages=3, block_m=4, orient="k_rows")
    chain = replace(tree, head_sum="chain")
    prefill, n1 = _problem("prefill_ragged", "fp8"), _problem("decode_paged", "fp8", 1)
    cost = lambda p, c, r, v: head_sum_cost(p, c, r, v)
    assert cost(prefill, chain, wgmma, (3, 8)) < cost(prefill, tree, wgmma, (3, 8))
    assert cost(prefill, tree, wgmma, (3, 6)) < cost(prefill, chain, wgmma, (3, 6))
    assert cost(n1, tree, wgmma, (3, 9)) < cost(n1, chain, wgmma, (3, 9))
    assert cost(prefill, tree, mma_sync, (3, 9)) < cost(prefill, chain, mma_sync, (3, 9))
    q_rows = replace(tree, orient="q_rows")
    assert cost(prefill, q_rows, wgmma, (3, 8)) == 1.0


def test_predict_compiles_one_twin_of_each_pair():
    """The model's pre-rank keeps the better of a config and its head_sum twin (the prior decides
    between them): compiling both halved the points a round compiled for the RTX PRO 6000."""
    from tuner.predict import _one_twin

    a = Config(block_t=64, tiles_per_program=8, orient="k_rows")
    b = replace(a, tiles_per_program=16)
    hc = lambda c: replace(c, head_sum="chain")
    assert _one_twin([a, hc(a), hc(b), b]) == [a.key, hc(b).key]


def test_a_study_from_before_the_axis_resumes():
    """Trials told before head_sum existed (no parameter for it) count as their tree configs, and
    the sampler goes on asking the whole space, head_sum included."""
    optuna = pytest.importorskip("optuna")
    from tuner.optuna_space import OptunaSpace, make_sampler

    problem = _problem("decode_paged", "fp8", 2)
    space = OptunaSpace(problem, ("native",))
    study = optuna.create_study(sampler=make_sampler("tpe", space, 0, 20))
    olds = [Config(block_t=64, tiles_per_program=t, num_stages=3, orient="k_rows") for t in (4, 8, 16, 32)]
    for i, config in enumerate(olds):
        params = {k: v for k, v in space.params_of(config).items() if k != "head_sum"}
        dists = {k: space.distributions[k] for k in params}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1.0 + i))
    assert [space.config(t.params) for t in study.get_trials()] == olds
    asked = [study.ask(fixed_distributions=space.distributions) for _ in range(12)]
    assert all(space.complete(t.params) and "head_sum" in t.params for t in asked)
