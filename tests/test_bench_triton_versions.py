"""bench/triton_versions.py: its readings of TTGIR, PTX and SASS on hand-written text (loops found
by structure, what runs inside them counted), the command line's refusals, and one real sm_90
compile of the ragged-prefill family default with this interpreter's Triton beside its chained
head sum (Config.head_sum 'chain'): the same wgmma pattern, and the chain's defining count."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.triton_versions import (format_rows, ptx_loop, ptx_summary, sass_loop, sass_opcode, sass_summary,
                                   ttgir_loops, ttgir_summary)

ROOT = Path(__file__).resolve().parent.parent

TTGIR = "\n".join([
    "#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 256, 32]}>",
    "tt.func @k() {",
    '  %q = ttg.local_alloc %a : (tensor<256x128xf8E4M3FN, #blocked>) -> !ttg.memdesc<256x128xf8E4M3FN> loc("{x}.py":1:0)',
    "  %ring = ttg.local_alloc : () -> !ttg.memdesc<3x64x128xf8E4M3FN, #shared, #smem, mutable>",
    "  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%b = %x) -> (t) {",
    "    %s = ttg.local_alloc %q2 : (tensor<256x128xf8E4M3FN, #blocked>) -> !ttg.memdesc<256x128xf8E4M3FN>",
    "    ttng.fence_async_shared {bCluster = false}",
    "    %d = ttng.warp_group_dot %k, %s, %c {isAsync = true} : a * b -> c",
    "    %w:3 = ttng.warp_group_dot_wait %d, %k, %s {pendings = 0 : i32} : c",
    '    %2 = "tt.reduce"(%b) <{axis = 2 : i32}> ({',
    "    ^bb0(%l: f32, %r: f32):",
    "      tt.reduce.return %l : f32",
    "    }) : (t) -> t",
    "    %3 = ttg.convert_layout %2 : t -> u",
    "    scf.yield %3 : t",
    "  }",
    "  %5 = ttg.convert_layout %r : t -> u",
    "  scf.for %j = %c0 to %m step %c1 {",
    "    tt.store %p, %v : t",
    "  }",
    "}",
])

PTX = "\n".join([
    ".version 8.7",
    "\twgmma.fence.sync.aligned;",
    "$L__BB0_2:                              // =>This Inner Loop Header: Depth=1",
    "\tcp.async.wait_group 1;",
    "\tbar.sync 0;",
    "\tfence.proxy.async.shared::cta;",
    "\twgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%r1}, %rd1, %rd2, p, 1, 1;",
    "\twgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%r1}, %rd3, %rd4, p, 1, 1;",
    "\twgmma.wait_group.sync.aligned 0;",
    "\tst.shared.v4.b32 [%r2], {%r3, %r4, %r5, %r6};",
    "\t@%p1 bra $L__BB0_2;",
    "$L__BB0_3:",
    "\tbar.sync 0;",
    "\tst.shared.b32 [%r7], %r8;",
    "\tbra.uni $L__BB0_3;",
])

SASS = "\n".join([
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
    ".L_x_1:",
    "        /*0010*/                   DEPBAR.LE SB0, 0x1 ;",
    "        /*0020*/                   MEMBAR.ALL.CTA ;",
    "        /*0030*/                   QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR28], RZ, !UPT ;",
    "        /*0040*/                   FMNMX R2, R24, RZ, !PT ;",
    "        /*0050*/                   FFMA R3, R2, R5, R3 ;",
    "        /*0060*/               @!P0 FMUL R4, R2, R6 ;",
    "        /*0070*/                   LDL R7, [R1+0x10] ;",
    "        /*0080*/               @P2 BRA `(.L_x_1) ;",
    ".L_x_2:",
    "        /*0090*/                   FADD R3, R3, R4 ;",
    "        /*00a0*/               @P3 BRA `(.L_x_2) ;",
    "        /*00b0*/                   EXIT ;",
])


def _tool(*args, timeout=900):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.triton_versions", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_ttgir_reading():
    loops = ttgir_loops(TTGIR)
    assert len(loops) == 2 and loops[1] == ["    tt.store %p, %v : t"]
    s = ttgir_summary(TTGIR)
    assert s["dot_loops"] == 1 and s["loop_dots"] == 1 and s["loop_dot_waits"] == [0]
    # q's copy into shared memory inside the loop; the one before it does not count
    assert s["loop_local_alloc_from_registers"] == 1 and s["loop_fence_async_shared"] == 1
    assert s["loop_convert_layout"] == 1  # the one after the loop does not count
    assert s["rings"] == ["3x64x128xf8E4M3FN"] and s["mma"] == "v3 16,256,32" and s["warp_specialize"] == 0


def test_ptx_reading():
    assert ptx_loop(PTX)[0].startswith("$L__BB0_2:") and ptx_loop(PTX)[-1].endswith("bra $L__BB0_2;")
    s = ptx_summary(PTX)
    assert s["ptx_version"] == "8.7" and s["wait_group"] == [0]
    assert s["mma"] == {"wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3": 2}
    # the second loop holds no tensor-core op: its barrier and store are not the tile loop's
    assert (s["loop_fence_proxy_async"], s["loop_bar_sync"], s["loop_st_shared"]) == (1, 1, 1)


def test_sass_reading():
    assert sass_opcode("@!P0 FMUL R4, R2, R6") == "FMUL" and sass_opcode("QGMMA.64x256x32.F32 R24") == "QGMMA"
    assert len(sass_loop(SASS)) == 8  # .L_x_1 up to its branch; the FADD loop has no MMA
    s = sass_summary(SASS)
    assert s["sass_total"] == 12 and s["sass_loop"] == 8
    ops = s["sass_loop_ops"]
    assert (ops["QGMMA"], ops["FMNMX"], ops["FFMA"], ops["FMUL"], ops["FADD"], ops["LDL"], ops["MEMBAR"]) == \
        (1, 1, 1, 1, 0, 1, 1)
    assert ops["other"] == 2  # DEPBAR, BRA


def test_format_rows_names_errors():
    text = format_rows([{"config": "bt64", "template": "current", "triton": "3.9.0", "error": "boom\nValueError: x"}])
    assert "bt64" in text and "ERROR ValueError: x" in text


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: --configs"),
    (["--configs", "not json"], "--configs / --options: --configs: not JSON"),
    (["--configs", "[]"], "--configs: no config given"),
    (["--configs", '[{"block_t": 64}]', "--options", "{"], "--configs / --options"),
    (["--configs", '[{"block_t": 64}]', "--family", "decode"], "invalid choice"),
])
def test_command_line_refusals(args, message):
    proc = _tool(*args, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


def test_real_compile_of_the_default_and_the_candidate(tmp_path):
    shipped = {"block_t": 64, "tiles_per_program": 32, "num_warps": 4, "num_stages": 3, "block_m": 4,
               "orient": "k_rows"}
    configs = json.dumps([shipped, {**shipped, "head_sum": "chain"}])
    rows_file = tmp_path / "rows.jsonl"
    proc = _tool("--python", sys.executable, "--configs", configs, "--alt", str(ROOT / "templates"),
                 "--out", str(tmp_path / "ir"), "--json", str(rows_file))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(ln) for ln in rows_file.read_text().splitlines()]
    assert [(r["config"], r["template"]) for r in rows] == [
        ("bt64_tp32_w4_s3_m4_kr", "alt"), ("bt64_tp32_w4_s3_m4_kr", "current"),
        ("bt64_tp32_w4_s3_m4_kr_hc", "alt"), ("bt64_tp32_w4_s3_m4_kr_hc", "current")]
    for r in rows:
        # 64 keys x 256 query-head rows x 128 dims: four m64n256k32 fp8 wgmmas, waited on at once
        assert r["ptx"]["mma"] == {"wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3": 4}, r["ptx"]
        assert r["ptx"]["wait_group"] == [0] and r["ttgir"]["rings"] == ["3x64x128xf8E4M3FN"]
        assert r["registers"] > 0 and r["shared"] >= 3 * 64 * 128 + 256 * 128
    chain = rows[2]
    assert chain["spills"] == 0 and chain["ttgir"]["loop_local_alloc_from_registers"] == 0
    if chain["sass"] is not None:  # this Triton ships nvdisasm
        # per thread and tile: 8 outputs (2 key rows x 4 query rows), each one FMUL for its first
        # head and FFMAs for the other 15 of its thread, plus 8 FMULs by the keys' scales
        assert (chain["sass"]["sass_loop_ops"]["FMUL"], chain["sass"]["sass_loop_ops"]["FFMA"]) == (16, 120)
    names = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert any(n.endswith("__alt.ptx") for n in names) and any(n.endswith(".ttgir") for n in names)
    table = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("bt64_")]
    assert [ln[:2] for ln in table] == [[r["config"], r["template"]] for r in rows]


def test_an_interpreter_that_fails_is_an_error_row():
    proc = _tool("--python", "/bin/false", "--configs", '[{"block_t": 64}]', timeout=120)
    assert proc.returncode == 1 and "ERROR" in proc.stdout, proc.stdout[-2000:]
