"""Rendering: deterministic bytes, write-if-different, headers, strictness, refusals, template
hashes, and a generated module that runs with nothing but torch and triton."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import jinja2
import pytest
import torch

import tuner.render as render_mod
from tuner.families import family_of
from tuner.families import names as family_names
from tuner.inputs import make_decode_inputs, make_prefill_inputs
from indexer_logits._identity import Config, Problem, variant_name
from tuner.reference import mqa_logits_ref, paged_mqa_logits_ref, relative_error
from tuner.render import emit, load_module, render, template_hash, write_if_different
from tuner.space import InfeasibleConfig, sample_points

DECODE = Problem(heads=16, head_dim=32, page_size=32, next_n=2)
DECODE_CFG = Config(block_t=16, tiles_per_program=2, dot_dtype="fp16")
PREFILL = Problem(family="prefill_ragged", page_size=0, heads=8, head_dim=32, q_dtype="bf16", cache_dtype="bf16",
                  scale_layout="none")
PREFILL_CFG = Config(block_t=32, tiles_per_program=2, block_m=2, dot_dtype="fp32")


@pytest.fixture
def template_copy(tmp_path, monkeypatch):
    """A private copy of templates/ that tuner.render reads from."""
    dst = tmp_path / "templates"
    shutil.copytree(render_mod.TEMPLATE_DIR, dst)
    monkeypatch.setattr(render_mod, "TEMPLATE_DIR", dst)
    return dst


def test_render_is_deterministic():
    for p, c in ((DECODE, DECODE_CFG), (PREFILL, PREFILL_CFG), (Problem(), Config())):
        a, b = render(p, c), render(p, c)
        assert a == b
        assert a.encode() == render(Problem.from_json(p.to_json()), Config.from_json(c.to_json())).encode()


def test_emit_is_byte_identical_across_directories(tmp_path):
    a = emit(DECODE, DECODE_CFG, tmp_path / "a")
    b = emit(DECODE, DECODE_CFG, tmp_path / "b")
    assert a.name == b.name == f"{variant_name(DECODE, DECODE_CFG)}.py"
    assert a.read_bytes() == b.read_bytes() == render(DECODE, DECODE_CFG).encode()


def test_emit_writes_only_when_different(tmp_path):
    path = emit(DECODE, DECODE_CFG, tmp_path)
    old = 1_000_000_000_000_000_000  # 2001, in ns: any rewrite would move it to now
    os.utime(path, ns=(old, old))
    inode = path.stat().st_ino
    again = emit(DECODE, DECODE_CFG, tmp_path)
    assert again == path
    assert path.stat().st_mtime_ns == old and path.stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file left behind
    # A changed file is rewritten back to the rendered text.
    path.write_text(path.read_text() + "# edited\n")
    emit(DECODE, DECODE_CFG, tmp_path)
    assert path.read_text() == render(DECODE, DECODE_CFG)
    assert path.stat().st_mtime_ns != old


def test_write_if_different_reports_what_it_did(tmp_path):
    path = tmp_path / "sub" / "x.py"
    assert write_if_different(path, "a = 1\n") is True
    assert write_if_different(path, "a = 1\n") is False
    assert write_if_different(path, "a = 2\n") is True
    assert path.read_text() == "a = 2\n"


def test_header_records_what_made_the_file(tmp_path):
    for p, c in ((DECODE, DECODE_CFG), (PREFILL, PREFILL_CFG)):
        text = render(p, c)
        head = text.splitlines()[:8]
        name = variant_name(p, c)
        assert f"# variant: {name}" in head
        assert f"# problem: {p.to_json()}" in head
        assert f"# config:  {c.to_json()}" in head
        assert any(template_hash(p.family) in line for line in head)
        assert any(family_of(p).template in line for line in head)
        module = load_module(emit(p, c, tmp_path))
        assert module.VARIANT == name
        assert module.PROBLEM == p.to_dict() and module.CONFIG == c.to_dict()
        assert module.NUM_WARPS == c.num_warps and module.NUM_STAGES == c.num_stages
        assert module.CHUNK == c.block_t * c.tiles_per_program
        assert module.HEADS.value == p.heads and module.HEAD_DIM.value == p.head_dim
        assert module.BLOCK_T.value == c.block_t
    # Hash is a sha256 hex digest that differs per family.
    assert len(template_hash("decode_paged")) == 64
    assert template_hash("decode_paged") != template_hash("prefill_ragged")


def test_rendered_sources_compile_for_sampled_feasible_points():
    problems = [DECODE, PREFILL, Problem(), Problem(scale_layout="token_interleaved", page_size=1, heads=32),
                Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none", next_n=4, lens_mode="2d", heads=16)]
    count = 0
    for p in problems:
        for c in sample_points(p, 6, seed=1, dot_dtypes=("native", "fp16", "fp32")):
            compile(render(p, c), variant_name(p, c), "exec")
            count += 1
    assert count >= 20


def test_environment_is_strict(template_copy):
    assert render_mod._env().undefined is jinja2.StrictUndefined
    path = template_copy / family_of("decode_paged").template
    path.write_text(path.read_text() + "\n# {{ no_such_variable }}\n")
    with pytest.raises(jinja2.UndefinedError, match="no_such_variable"):
        render(DECODE, DECODE_CFG)
    path.write_text(path.read_text().replace("{{ no_such_variable }}", "{{ config.no_such_knob }}"))
    with pytest.raises(jinja2.UndefinedError, match="no_such_knob"):
        render(DECODE, DECODE_CFG)
    render(PREFILL, PREFILL_CFG)  # the other family's template is untouched and renders


@pytest.mark.parametrize(
    "problem,config,reason",
    [
        (DECODE, Config(block_t=48), "outside_space"),
        (DECODE, Config(block_m=2), "outside_space"),  # decode keeps block_m=1
        (PREFILL, Config(block_t=16, block_m=2), "outside_space"),
        (PREFILL, Config(block_m=3), "outside_space"),
        (DECODE, Config(num_warps=16), "outside_space"),
        (Problem(heads=8, head_dim=32, next_n=1), Config(), "dot_too_small"),
        (Problem(heads=16, head_dim=32, next_n=3), Config(), "not_pow2"),
        (Problem(heads=128, next_n=4), Config(block_t=256, num_warps=2), "registers"),
        (DECODE, Config(programs_per_sm=2, tiles_per_program=4), "unused_knob"),
        (PREFILL, Config(block_m=2, programs_per_sm=1, tiles_per_program=1), "outside_space"),
    ],
    ids=["block_t", "decode_block_m", "prefill_block_t", "prefill_block_m", "num_warps", "few_rows", "next_n3",
         "registers", "persistent_tiles", "prefill_persistent"],
)
def test_out_of_space_configs_are_refused(tmp_path, problem, config, reason):
    with pytest.raises(InfeasibleConfig) as info:
        render(problem, config)
    assert info.value.reason == reason
    assert isinstance(info.value, ValueError)
    with pytest.raises(InfeasibleConfig):
        emit(problem, config, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_template_hash_follows_template_content(template_copy):
    original = {f: template_hash(f) for f in family_names()}
    decode = template_copy / family_of("decode_paged").template
    decode.write_text(decode.read_text() + "{# a comment changes the hash, not the output #}\n")
    assert template_hash("decode_paged") != original["decode_paged"]
    assert template_hash("prefill_ragged") == original["prefill_ragged"]
    assert template_hash("decode_paged") in render(DECODE, DECODE_CFG)
    after_decode = template_hash("decode_paged")
    # A partial feeds the hash of every family that includes it.
    dot = template_copy / "_dot.py.jinja"
    dot.write_text(dot.read_text() + "{# shared #}\n")
    assert template_hash("decode_paged") != after_decode
    assert template_hash("prefill_ragged") != original["prefill_ragged"]
    # ... and of no other: a new partial only one family includes leaves the others' trials valid.
    before = {f: template_hash(f) for f in family_names()}
    (template_copy / "_extra.py.jinja").write_text("{# new partial #}\n")
    assert {f: template_hash(f) for f in family_names()} == before
    ragged = template_copy / family_of("prefill_ragged").template
    ragged.write_text('{% include "_extra.py.jinja" %}\n' + ragged.read_text())
    assert render_mod.included_partials(family_of("prefill_ragged").template, template_copy) == [
        "_dot.py.jinja", "_extra.py.jinja", "_head_sum.py.jinja", "_header.py.jinja", "_k_load.py.jinja"]
    assert template_hash("prefill_ragged") != before["prefill_ragged"]
    assert template_hash("decode_paged") == before["decode_paged"]
    (template_copy / "_extra.py.jinja").write_text("{# changed #}\n")
    assert template_hash("decode_paged") == before["decode_paged"]


def test_same_templates_elsewhere_same_hash(template_copy, monkeypatch):
    # The hash covers content and names, not the directory the templates sit in.
    copied = template_hash("decode_paged")
    monkeypatch.undo()
    assert template_hash("decode_paged") == copied


# ---------------------------------------------------------------------------------------------
# A generated module needs only torch and triton.

_RUNNER = textwrap.dedent(
    """
    import importlib.abc, importlib.util, sys

    BLOCKED = {"jinja2", "optuna", "sqlite_utils", "tuner", "indexer_logits", "click"}

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"blocked for this test: {name}")
            return None

    sys.meta_path.insert(0, Blocker())
    for name in BLOCKED:
        try:
            __import__(name)
        except ImportError:
            pass
        else:
            raise SystemExit(f"the blocker failed to block {name}")

    import torch

    def load(path):
        spec = importlib.util.spec_from_file_location("generated_" + str(abs(hash(path))), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    case = torch.load("case.pt")
    dec = load(sys.argv[1])
    out = torch.full(case["decode_shape"], float("nan"))
    dec.launch(case["q"], case["kv_cache"], case["weights"], case["context_lens"], case["block_table"], out,
               case["max_context_len"], True)
    pre = load(sys.argv[2])
    out_p = torch.full(case["prefill_shape"], float("nan"))
    pre.launch(case["pq"], case["pk"], None, case["pw"], case["ks"], case["ke"], out_p, True)
    torch.save({"decode": out, "prefill": out_p}, "out.pt")
    print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """
)


def test_generated_module_runs_with_only_torch_and_triton(tmp_path):
    dec_path = emit(DECODE, DECODE_CFG, tmp_path)
    pre_path = emit(PREFILL, PREFILL_CFG, tmp_path)
    d = make_decode_inputs(DECODE, 3, 80, seed=7)
    p = make_prefill_inputs(PREFILL, 9, 70, "random", seed=7)
    torch.save(dict(q=d.q, kv_cache=d.kv_cache, weights=d.weights, context_lens=d.context_lens,
                    block_table=d.block_table, max_context_len=d.max_context_len,
                    decode_shape=(d.q.shape[0] * d.q.shape[1], d.max_context_len),
                    pq=p.q, pk=p.kv[0], pw=p.weights, ks=p.cu_seqlen_ks, ke=p.cu_seqlen_ke,
                    prefill_shape=(p.q.shape[0], p.kv[0].shape[0])), tmp_path / "case.pt")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(dec_path), str(pre_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "loaded: []" in proc.stdout
    got = torch.load(tmp_path / "out.pt")
    ref = paged_mqa_logits_ref(*d.args(), scale_layout=d.scale_layout)
    valid = d.valid_mask()
    assert relative_error(got["decode"], ref, valid) < 1e-3
    assert torch.equal(torch.isneginf(got["decode"]), ~valid)
    ref_p = mqa_logits_ref(*p.args())
    valid_p = p.valid_mask()
    assert relative_error(got["prefill"], ref_p, valid_p) < 1e-3
    assert torch.equal(torch.isneginf(got["prefill"]), ~valid_p)


def test_load_module_keeps_same_named_files_apart(tmp_path):
    """One config rendered from two templates gives two files of the same name in two folders:
    two modules, not the first one twice (an A/B of a template change would compare a kernel
    with itself)."""
    from tuner.render import load_module

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "k.py").write_text("WHICH = 'a'\n")
    (tmp_path / "b" / "k.py").write_text("WHICH = 'b'\n")
    assert load_module(tmp_path / "a" / "k.py").WHICH == "a"
    assert load_module(tmp_path / "b" / "k.py").WHICH == "b"
    assert load_module(tmp_path / "a" / "k.py") is load_module(tmp_path / "a" / "k.py")  # cached per file


def test_render_from_another_template_folder(tmp_path):
    """render(template_dir=...) renders a candidate template (experiments/) with the same inputs."""
    import shutil

    from tuner.render import TEMPLATE_DIR, render, template_hash

    alt = tmp_path / "templates"
    shutil.copytree(TEMPLATE_DIR, alt)
    path = alt / "decode_paged.py.jinja"
    path.write_text(path.read_text().replace("SUPPORTS_PDL = True", "SUPPORTS_PDL = True  # (candidate)"))
    p, c = Problem(), Config()
    assert "(candidate)" in render(p, c, alt) and "(candidate)" not in render(p, c)
    assert template_hash("decode_paged", alt) != template_hash("decode_paged")
