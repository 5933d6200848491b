"""Candidate template changes kept under experiments/ (not yet the templates: shipping one needs a
re-tune of its family on the GPU) stay correct: scripts/gpu_template_ab.py --cpu-smoke gates the
current and the candidate template on the same configs under the interpreter (reference values,
the CUDA-graph replay rule, the poisoned block table)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_template_ab.py"
# Decode: tiles inside one page (the scalar-page / TMA path), tiles spanning two pages, a
# persistent grid. Chunked prefill: inside one page at two tile sizes.
DECODE = ('[{"block_t":32,"tiles_per_program":4,"num_stages":3,"orient":"k_rows","dot_dtype":"DOT"},'
          '{"block_t":128,"tiles_per_program":2,"dot_dtype":"DOT"},'
          '{"block_t":64,"tiles_per_program":1,"programs_per_sm":2,"dot_dtype":"DOT"}]')
PREFILL = ('[{"block_t":32,"tiles_per_program":4,"num_stages":3,"block_m":2,"orient":"k_rows","dot_dtype":"DOT"},'
           '{"block_t":64,"tiles_per_program":2,"block_m":4,"orient":"k_rows","dot_dtype":"DOT"}]')
# Every candidate folder under experiments/, gated on the families whose templates it replaces.
FAMILY_CASES = {
    "decode_paged": [(["--buckets", "2x512:full"], DECODE), (["--buckets", "2x512:full", "--next-n", "2"], DECODE),
                     (["--buckets", "2x512:full", "--dtype", "bf16"], DECODE)],
    "prefill_paged": [(["--family", "prefill_paged", "--buckets", "40x700:full"], PREFILL)],
}
CASES = [(d.name, args, configs)
         for d in sorted(p for p in (ROOT / "experiments").iterdir() if p.is_dir())
         for f in sorted(d.glob("*.py.jinja"))
         for args, configs in FAMILY_CASES.get(f.name.removesuffix(".py.jinja"), [])]


@pytest.mark.parametrize("name, args, configs", CASES, ids=[f"{c[0]}-{'-'.join(c[1][2:]) or 'fp8'}" for c in CASES])
def test_candidate_template_passes_the_gates(name, args, configs):
    dot = "fp32" if "bf16" in args else "fp16"  # the interpreter's bf16 tl.dot is wrong; fp8 -> fp16 is exact
    proc = subprocess.run([sys.executable, "-W", "ignore", str(SCRIPT), "--alt", str(ROOT / "experiments" / name),
                           "--cpu-smoke", *args, "--configs", configs.replace("DOT", dot)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(args[args.index("--buckets") + 1])]
    assert len(lines) == configs.count("{") + 1 and all(ln.count("gated ok") == 2 for ln in lines), proc.stdout[-2000:]


def test_template_ab_refuses_a_folder_without_templates(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--alt", str(tmp_path), "--cpu-smoke"],
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
    proc = subprocess.run([sys.executable, "-W", "ignore", str(SCRIPT), "--alt", str(tmp_path), "--cpu-smoke",
                           "--buckets", "2x512:full", "--configs", DECODE.replace("DOT", "fp16")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 1 and "REJECT alt bt32_tp4_w4_s3_fp16_kr: wrong_answer" in proc.stdout, proc.stdout[-2000:]


def test_xcompile_template_ab_reports_resources_of_both_templates():
    """scripts/xcompile_template_ab.py: a real sm_90 compile of the current and a candidate
    template (here: the current one copied, so both lines must agree)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "decode_paged.py.jinja").write_text((ROOT / "templates" / "decode_paged.py.jinja").read_text())
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "xcompile_template_ab.py"), "--alt", d,
                               "--configs", '[{"block_t":64,"tiles_per_program":4,"num_warps":4,"num_stages":3,'
                               '"orient":"k_rows"}]'], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("bt64_tp4_w4_s3_kr")]
    assert [r[1] for r in rows] == ["current", "alt"] and rows[0][2:] == rows[1][2:], proc.stdout
    regs, spills, shared, programs = map(int, rows[0][2:])
    assert regs > 0 and spills == 0 and shared >= 3 * 64 * 128 and 1 <= programs <= 32


def test_xcompile_ir_counts_the_loop_conversions(tmp_path):
    """scripts/xcompile_ir.py: its TTGIR reading on a hand-written loop (a reduce region and a
    location with braces inside it, a conversion after the loop), then a real sm_90 compile."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from xcompile_ir import loop_conversions, ptx_counts

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
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "xcompile_ir.py"), "--out", str(tmp_path),
                           "--configs", '[{"block_t":64,"tiles_per_program":4,"num_warps":4,"num_stages":3,'
                           '"orient":"k_rows","store":"run"}, {"block_t":128,"orient":"k_rows","store":"run"}]'],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("bt64_tp4_w4_s3_kr_sr:"))
    assert re.search(r"layout conversions in the loop [1-9]\d*, PTX \{'bar.sync': \d+, 'st\.global", line), line
    assert re.search(r"^bt128_\S+_sr: unused_knob: store='run'", proc.stdout, re.M)  # refused by the space, not compiled
    assert (tmp_path / "bt64_tp4_w4_s3_kr_sr.ttgir").read_text().startswith("#")


def test_timeline_probes_fit_the_template_and_compile():
    """scripts/gpu_timeline.py inserts timer probes at anchors of the decode module: they must be
    found in every split-grid render (tiles inside a page or over it, store per tile or per run,
    next_n 1 and 2), leave valid Python, and compile for sm_90 (a subprocess: the interpreter and
    real compilation cannot share a process)."""
    import ast

    sys.path.insert(0, str(ROOT / "scripts"))
    from gpu_timeline import probed_source

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
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_timeline.py"), "--xcompile", "--configs",
                           '[{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows",'
                           '"store":"run"}]'], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"^bt64_tp16_w4_s3_kr_sr: \{'timer_reads': [7-9], 'smid_reads': 1, 'bulk_copies': [1-9]",
                     proc.stdout, re.M), proc.stdout
