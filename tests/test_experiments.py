"""Candidate template changes kept under experiments/ (not yet the templates: shipping one needs a
re-tune of its family on the GPU) stay correct: `python -m bench.template_ab --cpu-smoke` gates the
current and the candidate template on the same configs under the interpreter (reference values,
the CUDA-graph replay rule, the poisoned block table).

No candidate waits under experiments/ at times (experiments/README.md), so the same gating also
runs on candidates built here from the current templates: one with the relu rewritten into an
equivalent form (every config must be gated ok, current and alt) and one with the relu dropped
(every config of the candidate must be rejected as a wrong answer, the current ones still pass)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> list[str]:
    """The command line of a bench tool (bench/<name>.py), run from the repository root."""
    return [sys.executable, "-W", "ignore", "-m", f"bench.{name}"]


TEMPLATE_AB = _tool("template_ab")
# Decode: tiles inside one page (the scalar-page / TMA path), tiles spanning two pages, a
# persistent grid. Chunked prefill: inside one page at two tile sizes.
DECODE = ('[{"block_t":32,"tiles_per_program":4,"num_stages":3,"orient":"k_rows","dot_dtype":"DOT"},'
          '{"block_t":128,"tiles_per_program":2,"dot_dtype":"DOT"},'
          '{"block_t":64,"tiles_per_program":1,"programs_per_sm":2,"dot_dtype":"DOT"}]')
PREFILL = ('[{"block_t":32,"tiles_per_program":4,"num_stages":3,"block_m":2,"orient":"k_rows","dot_dtype":"DOT"},'
           '{"block_t":64,"tiles_per_program":2,"block_m":4,"orient":"k_rows","dot_dtype":"DOT"}]')
# Ragged prefill: the same two k_rows tiles, and q_rows.
RAGGED = PREFILL[:-1] + ',{"block_t":32,"tiles_per_program":2,"block_m":2,"orient":"q_rows","dot_dtype":"DOT"}]'
# Every candidate folder under experiments/, gated on the families whose templates it replaces.
FAMILY_CASES = {
    "decode_paged": [(["--buckets", "2x512:full"], DECODE), (["--buckets", "2x512:full", "--next-n", "2"], DECODE),
                     (["--buckets", "2x512:full", "--dtype", "bf16"], DECODE)],
    "prefill_paged": [(["--family", "prefill_paged", "--buckets", "40x700:full"], PREFILL)],
    "prefill_ragged": [(["--family", "prefill_ragged", "--buckets", "40x700:full"], RAGGED),
                       (["--family", "prefill_ragged", "--buckets", "40x700:full", "--dtype", "bf16"], RAGGED)],
}
# Candidates whose templates read a Config knob that the current ones ignore (a k_rows knob):
# gated with every config as given, and with the first k_rows config again with the knob set, e.g.
# {"<name>": '"head_sum":"chain"'} (prefill_ragged_tma's, before it became Config.k_load).
KNOBS: dict[str, str] = {}


def _each(configs: str) -> list[str]:
    """The configs of a config list (JSON objects without nesting), as text."""
    return re.findall(r"\{[^{}]*\}", configs)


def _with_knob(configs: str, knob: str) -> str:
    """The config list with its first k_rows config repeated at its end with `knob` (a JSON member)."""
    first = next(c for c in _each(configs) if '"k_rows"' in c)
    return configs[:-1] + "," + first[:-1] + "," + knob + "}]"
# Folders under experiments/ that hold no template candidate (each says so in its README).
NOT_CANDIDATES = {"gluon_decode"}
# The relu of the score tiles, as every template writes it (both orientations).
RELU = "scores = tl.maximum(scores, 0.0) * w"
RELU_AS_WHERE = "scores = tl.where(scores > 0.0, scores, 0.0) * w"  # the same function
NO_RELU = "scores = scores * w"  # a wrong candidate
BUILT = "built:"  # a candidate built in tmp_path from templates/<family>.py.jinja


def _first(configs: str) -> str:
    """The config list cut to its first config."""
    return "[" + _each(configs)[0] + "]"


def _folders() -> list[Path]:
    return sorted(p for p in (ROOT / "experiments").iterdir() if p.is_dir())


CASES = [(d.name, args, _with_knob(configs, KNOBS[d.name]) if d.name in KNOBS else configs)
         for d in _folders()
         for f in sorted(d.glob("*.py.jinja"))
         for args, configs in FAMILY_CASES.get(f.name.removesuffix(".py.jinja"), [])]
# The built candidates test the gating, not the templates over configs (test_kernels_interp runs those: tiles
# across pages, persistent grids, both orientations): each gets its list's first config only, which keeps CI's
# interpreter time down (the prefill_paged case took 3 minutes with both of its configs).
CASES += [(BUILT + family, args, _first(configs)) for family, cases in FAMILY_CASES.items() for args, configs in cases]


def _built_candidate(tmp_path: Path, family: str, new: str) -> Path:
    """A candidate folder: templates/<family>.py.jinja with its relu lines replaced by `new`."""
    src = (ROOT / "templates" / f"{family}.py.jinja").read_text()
    assert src.count(RELU) == 2, f"{family}: the relu lines moved; update RELU"
    folder = tmp_path / f"{family}_candidate"
    folder.mkdir()
    (folder / f"{family}.py.jinja").write_text(src.replace(RELU, new))
    return folder


def _ab(folder: Path, args: list[str], configs: str) -> subprocess.CompletedProcess:
    dot = "fp32" if "bf16" in args else "fp16"  # the interpreter's bf16 tl.dot is wrong; fp8 -> fp16 is exact
    return subprocess.run([*TEMPLATE_AB, "--alt", str(folder), "--cpu-smoke", *args, "--configs", configs.replace("DOT", dot)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def _summary(proc: subprocess.CompletedProcess, args: list[str]) -> list[str]:
    """The summary table's rows (one per config: the bucket's default, then --configs)."""
    return [ln for ln in proc.stdout.splitlines() if ln.startswith(args[args.index("--buckets") + 1])]


def test_experiments_holds_only_gated_candidates():
    """Every folder under experiments/ is either a candidate whose templates replace ones of
    templates/ of a family gated here, or a known non-candidate: a candidate with a misnamed
    template (or of a family without cases) would otherwise be skipped without a word."""
    for d in _folders():
        templates = sorted(d.glob("*.jinja"))
        if d.name in NOT_CANDIDATES:
            assert not templates and (d / "README.md").is_file(), d
            continue
        assert templates, f"{d}: neither a template candidate nor listed in NOT_CANDIDATES"
        for f in templates:
            if not (ROOT / "templates" / f.name).is_file():  # a new partial, included by the folder's templates
                assert f.name.startswith("_") and any(f'"{f.name}"' in t.read_text() for t in templates if t != f), \
                    f"{f}: replaces no template and no template of its folder includes it"
                continue
            assert f.name.removesuffix(".py.jinja") in FAMILY_CASES, f"{f}: its family has no gating cases here"


@pytest.mark.parametrize("name, args, configs", CASES, ids=[f"{c[0]}-{'-'.join(c[1][2:]) or 'fp8'}" for c in CASES])
def test_candidate_template_passes_the_gates(name, args, configs, tmp_path):
    if name.startswith(BUILT):
        folder = _built_candidate(tmp_path, name.removeprefix(BUILT), RELU_AS_WHERE)
    else:
        folder = ROOT / "experiments" / name
    proc = _ab(folder, args, configs)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = _summary(proc, args)
    assert len(lines) == configs.count("{") + 1 and all(ln.count("gated ok") == 2 for ln in lines), proc.stdout[-2000:]


@pytest.mark.parametrize("family, configs", [("decode_paged", DECODE), ("prefill_paged", "[]")])
def test_template_ab_rejects_a_candidate_without_the_relu(family, configs, tmp_path):
    """The gating above can fail: the same candidate with the relu dropped is rejected in every
    config (decode: both score orientations; chunked prefill: its default config only, the
    interpreter takes a minute a config there), while the current template passes beside it."""
    args = FAMILY_CASES[family][0][0]
    proc = _ab(_built_candidate(tmp_path, family, NO_RELU), args, configs)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = _summary(proc, args)
    assert len(lines) == configs.count("{") + 1, proc.stdout[-2000:]
    for ln in lines:
        assert re.search(r"gated ok\s+REJECTED\s+-$", ln.rstrip()), ln  # current ok, alt rejected
    rejects = re.findall(r"^REJECT (\w+) \S+: (\w+)", proc.stdout, re.M)
    assert rejects and all(r == ("alt", "wrong_answer") for r in rejects), proc.stdout[-2000:]
    assert len(rejects) == len(lines)


def test_template_ab_rejects_a_head_sum_chain_that_drops_a_head(tmp_path):
    """The chained head sum (templates/_head_sum.py.jinja) is gated for real: a candidate whose
    chains leave out their first term is rejected where the knob is set, and passes where it is not
    (its tree sum is the current template's)."""
    folder = tmp_path / "chain_drops_a_head"
    folder.mkdir()
    macro = folder / "_head_sum.py.jinja"
    text = (ROOT / "templates" / "_head_sum.py.jinja").read_text()
    bad = text.replace('(ns.names | join(" + "))', '(ns.names[1:] | join(" + "))')
    assert bad != text, "the chain's join moved; update this test"
    macro.write_text(bad)
    args = ["--family", "prefill_ragged", "--buckets", "40x700:full"]
    proc = _ab(folder, args, '[{"block_t":64,"tiles_per_program":2,"block_m":4,"orient":"k_rows","dot_dtype":"DOT",'
                             '"head_sum":"chain"}]')
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    default, chain = _summary(proc, args)
    assert default.count("gated ok") == 2, default
    assert re.search(r"_hc\s+gated ok\s+REJECTED\s+-$", chain.rstrip()), chain
    assert re.findall(r"^REJECT (\w+) \S+: (\w+)", proc.stdout, re.M) == [("alt", "wrong_answer")], proc.stdout[-2000:]


@pytest.mark.parametrize("override, fields", [
    ("head_sum=chain", "{'head_sum': 'chain'}"),
    ("k_load=tma,head_sum=chain", "{'k_load': 'tma', 'head_sum': 'chain'}"),  # docs/PERF.md's k_load A/B
])
def test_template_ab_times_a_knob_with_override(override, fields):
    """--override without --alt: the current templates on both sides, the candidate with the knobs
    (the head_sum and k_load A/Bs of docs/PERF.md); its summary names the base config, both sides gated."""
    args = ["--family", "prefill_ragged", "--buckets", "40x300:full"]
    proc = subprocess.run([*TEMPLATE_AB, "--cpu-smoke", "--override", override, *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"config fields {fields}" in proc.stdout
    (line,) = _summary(proc, args)
    assert line.count("gated ok") == 2 and "_hc" not in line.split()[1] and "_tma" not in line.split()[1], line


@pytest.mark.parametrize("extra, message", [
    ([], "nothing to compare: give --alt"),
    (["--override", "head_sum=sum"], "head_sum: expected one of"),
    (["--override", "nosuch=1"], "expected a JSON object of Config fields"),
])
def test_template_ab_refuses_bad_comparisons(extra, message):
    proc = subprocess.run([*TEMPLATE_AB, "--cpu-smoke", *extra], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


def test_template_ab_refuses_a_folder_without_templates(tmp_path):
    proc = subprocess.run([*TEMPLATE_AB, "--alt", str(tmp_path), "--cpu-smoke"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode != 0 and "--alt: expected a folder of .jinja templates" in proc.stderr + proc.stdout


def test_template_ab_catches_a_wrong_candidate(tmp_path):
    """The A/B gates the candidate for real: a candidate reading the wrong page is rejected."""
    src = (ROOT / "templates" / "decode_paged.py.jinja").read_text()
    # (full lengths: every program takes the run it guessed before the lengths arrived)
    bad = src.replace("page_guess = tl.load(bt_ptr + b * bt_stride + guess_first * BLOCK_T // PAGE,",
                      "page_guess = 1 + tl.load(bt_ptr + b * bt_stride + guess_first * BLOCK_T // PAGE,")
    assert bad != src
    (tmp_path / "decode_paged.py.jinja").write_text(bad)
    proc = subprocess.run([*TEMPLATE_AB, "--alt", str(tmp_path), "--cpu-smoke",
                           "--buckets", "2x512:full", "--configs", DECODE.replace("DOT", "fp16")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 1 and "REJECT alt bt32_tp4_w4_s3_fp16_kr: wrong_answer" in proc.stdout, proc.stdout[-2000:]


def test_xcompile_template_ab_reports_resources_of_both_templates():
    """bench.template_ab --xcompile: a real sm_90 compile of the current and a candidate
    template (here: the current one copied, so both lines must agree)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "decode_paged.py.jinja").write_text((ROOT / "templates" / "decode_paged.py.jinja").read_text())
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # real compiles
        proc = subprocess.run([*TEMPLATE_AB, "--alt", d, "--xcompile", "--configs", '[{"block_t":64,"tiles_per_program":4,"num_warps":4,"num_stages":3,'
                               '"orient":"k_rows"}]'], capture_output=True, text=True, timeout=600, cwd=ROOT,
                              env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("bt64_tp4_w4_s3_kr")]
    assert [r[1] for r in rows] == ["current", "alt"] and rows[0][2:] == rows[1][2:], proc.stdout
    regs, spills, shared, programs = map(int, rows[0][2:])
    assert regs > 0 and spills == 0 and shared >= 3 * 64 * 128 and 1 <= programs <= 32


def test_xcompile_ir_counts_the_loop_conversions(tmp_path):
    """bench.xcompile_ir: its TTGIR reading on a hand-written loop (a reduce region and a
    location with braces inside it, a conversion after the loop), then a real sm_90 compile."""
    from bench.xcompile_ir import loop_conversions, ptx_counts

    ttgir = "\n".join([
        "tt.func @k() {",
        '  %0 = ttg.convert_layout %a : x loc("f.py":1:0)',
        "  %1:2 = scf.for %i = %c0 to %n step %c1 iter_args(%b = %x) -> (t) {",
        "    %2 = \"tt.reduce\"(%b) <{axis = 2 : i32}> ({",
        "    ^bb0(%l: f32, %r: f32):",
        "      tt.reduce.return %l : f32",
        "    }) : (t) -> t",
        '    %3 = ttg.convert_layout %2 : t -> u loc("{odd}.py":2:0)',
        "    scf.for %j = %c0 to %m step %c1 {",
        "      %4 = ttg.convert_layout %3 : u -> t",
        "    }",
        "    scf.yield %3 : t",
        "  }",
        "  %5 = ttg.convert_layout %1 : t -> u",
        "}",
    ])
    assert loop_conversions(ttgir) == 2
    assert ptx_counts("st.global.v4.b32 [a], {b};\n@p st.global.b32 [a], b;\nbar.sync 0;\nst.global.b32 [c], d;") == {
        "bar.sync": 1, "st.global.b32": 2, "st.global.v4.b32": 1}
    proc = subprocess.run([*_tool("xcompile_ir"), "--out", str(tmp_path),
                           "--configs", '[{"block_t":64,"tiles_per_program":4,"num_warps":4,"num_stages":3,'
                           '"orient":"k_rows","store":"run"}, {"block_t":128,"orient":"k_rows","store":"run"}]'],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("bt64_tp4_w4_s3_kr_sr:"))
    assert re.search(r"layout conversions in the loop [1-9]\d*, PTX \{'bar.sync': \d+, 'st\.global", line), line
    assert re.search(r"^bt128_\S+_sr: unused_knob: store='run'", proc.stdout, re.M)  # refused by the space, not compiled
    assert (tmp_path / "bt64_tp4_w4_s3_kr_sr.ttgir").read_text().startswith("#")


def test_timeline_probes_fit_the_template_and_compile():
    """bench.timeline inserts timer probes at anchors of the decode module: they must be
    found in every split-grid render (tiles inside a page or over it, store per tile or per run,
    next_n 1 and 2), leave valid Python, and compile for sm_90 (a subprocess: the interpreter and
    real compilation cannot share a process)."""
    import ast

    from bench.timeline import probed_source

    from indexer_logits._identity import Config, Problem
    from tuner.render import render

    configs = [Config(block_t=64, tiles_per_program=16, num_warps=4, num_stages=3, orient="k_rows", store="run"),
               Config(block_t=32, tiles_per_program=6, num_warps=4, num_stages=3, orient="k_rows"),
               Config(block_t=128, tiles_per_program=2, num_warps=4, num_stages=2, orient="k_rows")]
    for problem in (Problem(), Problem(next_n=2)):
        for config in configs:
            text = probed_source(render(problem, config), config.block_t)
            ast.parse(text)
            assert text.count("_timer_after(") >= 7 and "tl.store(_probe + SCALARS" in text, config.slug
    with pytest.raises(SystemExit, match="probe anchor found 0 times"):
        probed_source(render(Problem(), Config(block_t=64, tiles_per_program=1, programs_per_sm=2)), 64)
    proc = subprocess.run([*_tool("timeline"), "--xcompile", "--configs",
                           '[{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows",'
                           '"store":"run"}]'], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"^bt64_tp16_w4_s3_kr_sr: \{'timer_reads': [7-9], 'smid_reads': 1, 'bulk_copies': [1-9]",
                     proc.stdout, re.M), proc.stdout
