"""Candidate template changes kept under experiments/ (not yet the templates: shipping one needs a
re-tune of its family on the GPU) stay correct: scripts/gpu_template_ab.py --cpu-smoke gates the
current and the candidate template on the same configs under the interpreter."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_template_ab.py"
# tiles inside one page (the candidate's scalar-page path) and tiles spanning two pages (unchanged)
CONFIGS = ('[{"block_t":32,"tiles_per_program":4,"num_stages":3,"orient":"k_rows","dot_dtype":"DOT"},'
           '{"block_t":128,"tiles_per_program":2,"dot_dtype":"DOT"}]')


@pytest.mark.parametrize("extra", [[], ["--next-n", "2"], ["--dtype", "bf16"]], ids=["fp8_n1", "fp8_n2", "bf16"])
def test_decode_scalar_page_candidate_passes_the_gates(extra):
    proc = subprocess.run([sys.executable, "-W", "ignore", str(SCRIPT), "--alt", str(ROOT / "experiments" / "decode_scalar_page"),
                           "--cpu-smoke", "--buckets", "2x512:full",
                           "--configs", CONFIGS.replace("DOT", "fp32" if "bf16" in extra else "fp16"), *extra],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("2x512:full")]
    assert len(lines) == 3 and all(ln.count("gated ok") == 2 for ln in lines), proc.stdout[-2000:]


def test_template_ab_refuses_a_folder_without_templates(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--alt", str(tmp_path), "--cpu-smoke"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode != 0 and "--alt: expected a folder of .jinja templates" in proc.stderr + proc.stdout
