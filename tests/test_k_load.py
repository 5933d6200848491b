"""Config.k_load, a tuned axis of ragged prefill ("threads" / "tma"; templates/_k_load.py.jinja,
docs/PERF.md "Prefill under Triton 3.8 and 3.9: why"): 'tma' loads each key tile by one bulk tensor
copy through a host TensorDescriptor, per-thread loads where K cannot be addressed so (a base or
row stride off 16 bytes, no keys). Here: the same logits as 'threads' bit for bit and the
reference under the interpreter (fp16 and fp32 dots), both head sums, which path a launch took;
'threads' renders every committed module as before; the axis in the search, the prior and the
retime twins."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from indexer_logits._identity import Bucket, Config, Problem
from tuner.gates import GateFailure, launch, new_output, reference_gate
from tuner.inputs import PrefillInputs, make_prefill_inputs
from tuner.render import emit, load_module, render, template_hash
from tuner.space import InfeasibleConfig, axes_of, check, neighbours, tied

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

ROOT = Path(__file__).resolve().parent.parent


def _ragged(dtype: str) -> Problem:
    return Problem(family="prefill_ragged", q_dtype=dtype, cache_dtype=dtype, page_size=0,
                   scale_layout="page_blocked" if dtype == "fp8" else "none", heads=16, head_dim=32)


# (dtype, config): k_rows at block_m 2 and 1, q_rows; an fp16 dot for fp8 inputs and fp32 for bf16
# (the dots the interpreter computes exactly).
CASES = [
    ("fp8", Config(block_t=32, tiles_per_program=4, block_m=2, num_stages=3, orient="k_rows", dot_dtype="fp16")),
    ("fp8", Config(block_t=64, tiles_per_program=2, block_m=1, orient="q_rows", dot_dtype="fp32")),
    ("bf16", Config(block_t=64, tiles_per_program=2, block_m=1, orient="k_rows", dot_dtype="fp32")),
]


def _counting(module, monkeypatch) -> list:
    """Count the TensorDescriptors a module's launch() builds (none: it took per-thread loads)."""
    made, real = [], module.TensorDescriptor

    def build(*args, **kwargs):
        made.append(args[0].data_ptr())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "TensorDescriptor", build)
    return made


def _unaligned(inputs: PrefillInputs, how: str) -> PrefillInputs:
    """The same K values in a view TMA cannot address: its base 1 element past a 16-byte boundary,
    or rows 4 elements apart beyond the head dim (a row stride off 16 bytes)."""
    k = inputs.kv[0]
    keys, d = k.shape
    if how == "base":
        buf = torch.zeros(keys * d + 1, dtype=k.dtype, device=k.device)
        view = buf[1:].view(keys, d)
    else:
        buf = torch.zeros(keys, d + 4, dtype=k.dtype, device=k.device)
        view = buf[:, :d]
    view.copy_(k)
    assert view.data_ptr() % 16 or (view.stride(0) * view.element_size()) % 16
    return replace(inputs, kv=(view,) + tuple(inputs.kv[1:]))


@pytest.mark.parametrize("head_sum", ["tree", "chain"])
@pytest.mark.parametrize("dtype, threads", CASES, ids=[f"{c[0]}-{c[1].slug}" for c in CASES])
def test_tma_computes_what_threads_do(dtype, threads, head_sum, tmp_path, monkeypatch, device):
    """(`device`: the interpreter here; on a GPU without it, the real bulk copies.)"""
    problem = _ragged(dtype)
    threads = tied(problem, replace(threads, head_sum=head_sum))
    if head_sum == "chain" and threads.head_sum != "chain":
        pytest.skip("q_rows ties head_sum to tree")
    tma = replace(threads, k_load="tma")
    mod_threads, mod_tma = load_module(emit(problem, threads, tmp_path)), load_module(emit(problem, tma, tmp_path))
    made = _counting(mod_tma, monkeypatch)
    for inputs in (make_prefill_inputs(problem, 12, 300, "random", seed=3, device=device),
                   make_prefill_inputs(problem, 9, 200, "causal", seed=4, num_seqs=2, device=device),
                   _unaligned(make_prefill_inputs(problem, 12, 300, "random", seed=5, device=device), "base"),
                   _unaligned(make_prefill_inputs(problem, 9, 200, "causal", seed=6, device=device), "stride")):
        aligned = inputs.kv[0].data_ptr() % 16 == 0 and inputs.kv[0].stride(0) * inputs.kv[0].element_size() % 16 == 0
        for clean in (True, False):
            before = len(made)
            a = launch(mod_threads, inputs, new_output(inputs), clean)
            b = launch(mod_tma, inputs, new_output(inputs), clean)
            assert len(made) - before == (1 if aligned else 0)  # the descriptor only where TMA applies
            assert torch.equal(torch.nan_to_num(a, nan=7.0), torch.nan_to_num(b, nan=7.0))  # bit for bit
        assert reference_gate(mod_tma, inputs, True) < 1e-3
        assert reference_gate(mod_tma, inputs, False) < 1e-3
    assert len(made) == 2 * 4  # the two aligned inputs: clean and not, and the two reference gates


def test_tma_with_no_keys_takes_the_per_thread_path(tmp_path, monkeypatch, device):
    problem = _ragged("fp8")
    tma = replace(CASES[0][1], k_load="tma")
    module = load_module(emit(problem, tma, tmp_path))
    made = _counting(module, monkeypatch)
    inputs = make_prefill_inputs(problem, 5, 0, "random", seed=1, device=device)
    out = launch(module, inputs, new_output(inputs), True)
    assert out.shape == (5, 0) and made == []


def test_tma_wrong_tile_is_caught(tmp_path):
    """The exactness test above can fail: a template whose TMA box starts one tile late differs."""
    problem = _ragged("fp8")
    tma = replace(CASES[0][1], k_load="tma")
    text = render(problem, tma).replace("k_desc.load([chunk_start + i * BLOCK_T, 0])",
                                        "k_desc.load([chunk_start + (i + 1) * BLOCK_T, 0])")
    path = tmp_path / "prefill_ragged__wrong_tma.py"
    path.write_text(text)
    inputs = make_prefill_inputs(problem, 12, 300, "random", seed=3)
    with pytest.raises(GateFailure, match="reference"):
        reference_gate(load_module(path), inputs, True)


def test_tma_renders_its_own_loads_and_threads_as_before():
    problem = _ragged("fp8")
    threads = Config(block_t=64, tiles_per_program=32, num_stages=3, block_m=4, orient="k_rows")
    tma = replace(threads, k_load="tma")
    assert threads.slug == "bt64_tp32_w4_s3_m4_kr" and tma.slug == "bt64_tp32_w4_s3_m4_kr_tma"
    assert "k_load" not in threads.to_json() and threads.key != tma.key
    plain, bulk = render(problem, threads), render(problem, tma)
    for text, has in ((plain, False), (bulk, True)):
        assert ("TensorDescriptor(k, " in text) == has and ("k_desc.load(" in text) == has
        assert ("USE_TMA" in text) == has
    # q's place is head_sum's rule, not k_load's: inside the `if` with the tree, above with the chain
    for config, q_first in ((tma, False), (replace(tma, head_sum="chain"), True)):
        text = render(problem, config)
        assert (text.index("q = tl.load(") < text.index("if last > first:")) == q_first


def test_threads_renders_every_committed_ragged_module_as_before():
    """'threads' (the default the keys leave out) renders each committed ragged module byte for byte,
    its header's template hash aside, and that hash is one tuner.tables.PTX_EQUIVALENT_TEMPLATES
    carries over to the current template (docs/perf_logs/xcompile_k_load/)."""
    from tuner.tables import timing_hashes

    checked = 0
    for table_file in sorted((ROOT / "indexer_logits" / "tables").rglob("dispatch.json")):
        table = json.loads(table_file.read_text())
        for info in table["modules"].values():
            if info["problem"]["family"] != "prefill_ragged":
                continue
            problem, config = Problem.from_dict(info["problem"]), Config.from_dict(info["config"])
            assert config.k_load == "threads"
            old = (table_file.parent / info["file"]).read_text()
            stamped = re.search(r"template sha256 ([0-9a-f]{64})", old).group(1)
            assert stamped in timing_hashes(template_hash(problem.family)), info["file"]
            assert re.sub(stamped, "", old) == re.sub(template_hash(problem.family), "", render(problem, config))
            checked += 1
    assert checked >= 56


def test_the_axis_is_searched_in_ragged_prefill_only():
    ragged = _ragged("fp8")
    assert axes_of(ragged)["k_load"] == ("threads", "tma")
    config = Config(block_t=64, tiles_per_program=4, block_m=4, orient="k_rows")
    assert replace(config, k_load="tma") in neighbours(ragged, config)
    assert config in neighbours(ragged, replace(config, k_load="tma"))
    for problem in (Problem(heads=16, head_dim=32, page_size=64),
                    Problem(family="prefill_paged", heads=16, head_dim=32, page_size=64)):
        assert "k_load" not in axes_of(problem)
        kr = Config(block_t=64, tiles_per_program=4, block_m=1 if problem.is_decode else 4, orient="k_rows")
        assert tied(problem, replace(kr, k_load="tma")) == kr
        with pytest.raises(InfeasibleConfig, match="k_load='tma' is for prefill_ragged"):
            check(problem, replace(kr, k_load="tma"))
        assert all(c.k_load == "threads" for c in neighbours(problem, kr))


def test_the_optuna_space_has_the_axis_and_keeps_the_study_names(monkeypatch):
    pytest.importorskip("optuna")
    from tuner.families import family_of
    from tuner.optuna_space import ADDED_AXES, OptunaSpace, study_name

    problem, bucket = _ragged("fp8"), Bucket(4096, 16384)
    space = OptunaSpace(problem, ("native",))
    tma = Config(block_t=64, tiles_per_program=32, num_stages=3, block_m=4, orient="k_rows", k_load="tma")
    params = space.params_of(tma)
    assert params["k_load"] == "tma" and space.config(params) == tma
    old = {k: v for k, v in params.items() if k != "k_load"}  # a trial from before the axis
    assert space.complete(old) and space.config(old) == replace(tma, k_load="threads")
    assert ADDED_AXES["k_load"] == "threads" and ADDED_AXES["head_sum"] == "tree"
    name = lambda s: study_name(problem, bucket, "gpu", "cuda_graph", "t" * 64, s, "tpe")
    with_axis = name(space)
    before = {k: v for k, v in family_of(problem).axes.items() if k != "k_load"}
    monkeypatch.setattr(family_of(problem), "axes", before)
    assert name(OptunaSpace(problem, ("native",))) == with_axis


def test_model_prior():
    """The H200 A/B's ordering (docs/PERF.md, "The `k_load` axis"): with the chain 'tma' loses under
    every Triton; with the tree it wins under 3.7+ on wgmma (the fence it saves) and loses under 3.6
    and on mma.sync; so under 3.8 chain/threads < chain/tma < tree/tma < tree/threads, the measured
    order; other families are tied to 'threads' (1.0)."""
    from tuner.model import Resources, head_sum_cost, k_load_cost

    wgmma, mma_sync = Resources(200, 60000, "wgmma"), Resources(200, 60000, "mma.sync")
    threads = Config(block_t=64, tiles_per_program=32, num_stages=3, block_m=4, orient="k_rows")
    tma, chain = replace(threads, k_load="tma"), replace(threads, head_sum="chain")
    ragged = _ragged("fp8")
    cost = k_load_cost
    assert cost(ragged, tma, wgmma, (3, 8)) < cost(ragged, threads, wgmma, (3, 8)) == 1.0
    assert cost(ragged, threads, wgmma, (3, 6)) < cost(ragged, tma, wgmma, (3, 6))
    assert cost(ragged, threads, mma_sync, (3, 9)) < cost(ragged, tma, mma_sync, (3, 9))
    for minor in ((3, 6), (3, 8), (3, 9)):
        assert cost(ragged, chain, wgmma, minor) < cost(ragged, replace(chain, k_load="tma"), wgmma, minor)
    both = lambda c: head_sum_cost(ragged, c, wgmma, (3, 8)) * cost(ragged, c, wgmma, (3, 8))
    order = [chain, replace(chain, k_load="tma"), tma, threads]
    assert [both(c) for c in order] == sorted(both(c) for c in order)
    assert cost(Problem(heads=16, head_dim=32), threads, wgmma, (3, 8)) == 1.0


def test_predict_compiles_one_of_each_group_of_twins():
    from tuner.predict import _one_twin

    a = Config(block_t=64, tiles_per_program=8, orient="k_rows")
    b = replace(a, tiles_per_program=16)
    tma = lambda c: replace(c, k_load="tma")
    hc = lambda c: replace(c, head_sum="chain")
    assert _one_twin([tma(a), a, hc(tma(a)), hc(b), tma(b)]) == [tma(a).key, hc(b).key]


def test_retime_times_the_k_load_twins():
    from tuner import retime as rt

    ragged = _ragged("fp8")
    threads = Config(block_t=64, tiles_per_program=32, num_stages=3, block_m=4, orient="k_rows")
    table = {"provenance": {"kind": "tuned", "gpu_slug": "x", "triton_version": "3.6.0"},
             "modules": {"v": {"config": threads.to_dict()}},
             "entries": [{"problem": ragged.to_dict(), "bucket": {"batch": 64, "context": 4096}, "variant": "v"}]}
    (item,) = rt.candidates(table, None, top=1)
    hc, tma = replace(threads, head_sum="chain"), replace(threads, k_load="tma")
    assert item.configs == (threads, hc, tma, replace(hc, k_load="tma"))
    (bare,) = rt.candidates(table, None, top=1, twins=False)
    assert bare.configs == (threads,)
    decode = Problem(heads=16, head_dim=32)
    assert rt.twin(decode, Config(orient="k_rows"), "k_load") is None


def test_retime_plan_counts_the_new_twins():
    import cli

    plan = lambda *extra: CliRunner().invoke(cli.main, ["retime", "--table", "nvidia_h200", "--plan",
                                                        "--family", "prefill_ragged", *extra])
    result = plan()
    assert result.exit_code == 0, result.output
    # 2 buckets x 3 configs (--top 3) x 4 (head_sum and k_load twins), 12 distinct variants
    assert "prefill_ragged fp8: 2 buckets, 24 timings of 12 variants" in result.output
    bare = plan("--no-twins")
    assert "prefill_ragged fp8: 2 buckets, 6 timings of 3 variants" in bare.output
