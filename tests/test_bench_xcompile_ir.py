"""bench/xcompile_ir.py beyond its loop reading and real compile (tests/test_experiments.py): the
PTX counts, the command line's refusals, and configs the space refuses reported without a compile."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.xcompile_ir import loop_conversions, ptx_counts

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.xcompile_ir", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_ptx_counts_and_a_loop_free_kernel():
    ptx = "\n".join(["st.global.v2.f32 [a], {b, c};", "barrier.sync 0;", "bar.sync 1;", "st.global.cs.b32 [d], e;",
                     "ld.global.b32 f, [g];", "@p st.global.b32 [h], i;"])
    assert ptx_counts(ptx) == {"bar.sync": 2, "st.global.b32": 1, "st.global.cs.b32": 1, "st.global.v2.f32": 1}
    assert loop_conversions("tt.func @k() {\n  %0 = ttg.convert_layout %a : x\n}") == 0


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: --configs"),
    (["--configs", "not json"], "--configs: not JSON"),
    (["--configs", '[{"tiles": 4}]'], "unknown fields"),
    (["--configs", "[]", "--target", "sm_1"], "invalid choice"),
])
def test_command_line_refusals(args, message):
    proc = _tool(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


def test_configs_the_space_refuses_are_named_not_compiled(tmp_path):
    proc = _tool("--out", str(tmp_path), "--configs", '[{"block_t":128,"orient":"k_rows","store":"run"}, '
                 '{"block_t":64,"tiles_per_program":1,"num_warps":4,"num_stages":2,"orient":"q_rows","store":"run"}]')
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(": unused_knob: store='run'") == 2 and f"TTGIR and PTX in {tmp_path}" in proc.stdout
    assert not list(tmp_path.iterdir())
