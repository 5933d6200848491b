"""Cross-compilation for sm_90 and sm_120 without a GPU (tuner.xcompile, `cli.py check`).

The compiles run in spawned workers with TRITON_INTERPRET removed from their environment, so
they are real compiles even though conftest puts this process under the interpreter. One pool
compiles all the points of this module at once (about 10-20 s on 2 cores).
"""

import json
import re

import pytest
from click.testing import CliRunner

from cli import main
from indexer_logits._identity import Config, Problem
from tuner.families import names as family_names
from tuner.space import TARGETS, Target, default_config, estimate_shared_bytes
from tuner.xcompile import compile_many, mma_flavour, parse_ptxas_log

FP8 = Problem()
BF16 = Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none")
PREFILL = Problem(family="prefill_ragged", page_size=0)
SM90, SM120 = TARGETS["sm_90"], TARGETS["sm_120"]
# Statically too big for sm_120: the shared-memory estimate (~104 KB) is over its 99 KB.
SMEM_HOG = Config(block_t=256, tiles_per_program=4, num_warps=8, num_stages=4)
# Statically over the register estimate: 64 rows * 256 tokens / 64 threads = 256 fp32 per thread.
REG_HOG = Config(block_t=256, tiles_per_program=4, num_warps=2, num_stages=2)
# A target whose shared memory is exactly the default's static estimate: the static check passes
# it, and the real kernel (which needs a little reduction scratch on top) does not fit.
TIGHT = Target("sm_120", 120, estimate_shared_bytes(FP8, default_config(FP8)))
TMA_DECODE = Config(block_t=64, tiles_per_program=8, num_warps=4, num_stages=3, orient="k_rows")
TMA_PREFILL = Config(block_t=64, tiles_per_program=32, num_warps=4, num_stages=3, block_m=4, orient="k_rows")
STORE_RUN = Config(block_t=64, tiles_per_program=12, num_warps=4, num_stages=3, orient="k_rows", store="run")
PERSISTENT = Config(block_t=64, tiles_per_program=1, num_warps=4, num_stages=3, orient="k_rows", programs_per_sm=2)

POINTS = {
    "fp8_sm90": (FP8, default_config(FP8), SM90),
    "fp8_sm120": (FP8, default_config(FP8), SM120),
    "bf16_sm90": (BF16, default_config(BF16), SM90),
    "bf16_sm120": (BF16, default_config(BF16), SM120),
    "prefill_sm90": (PREFILL, default_config(PREFILL), SM90),
    "prefill_sm120": (PREFILL, default_config(PREFILL), SM120),
    "smem_hog_sm120": (FP8, SMEM_HOG, SM120),
    "reg_hog_sm90": (FP8, REG_HOG, SM90),
    "tight_smem": (FP8, default_config(FP8), TIGHT),
    # The persistent schedule: its loop-carried types are only checked by a real compile (the
    # interpreter does not type-check), so compile it for both targets, 1-D and 2-D lengths.
    "persistent_sm90": (FP8, PERSISTENT, SM90),
    "persistent_2d_sm120": (Problem(next_n=2, lens_mode="2d"), PERSISTENT, SM120),
    # Tiles inside one page of the fp8 page-blocked cache load through a TensorDescriptor: a bulk
    # tensor copy on sm_90, rewritten by Triton into pointer loads before sm_90.
    "tma_decode_sm90": (FP8, TMA_DECODE, SM90),
    "tma_decode_sm89": (FP8, TMA_DECODE, TARGETS["sm_89"]),
    "tma_prefill_paged_sm90": (Problem(family="prefill_paged"), TMA_PREFILL, SM90),
    # store="run": the run's logits held in registers until after its last tile.
    "store_run_sm90": (FP8, STORE_RUN, SM90),
    "store_run_sm120": (FP8, STORE_RUN, SM120),
}


@pytest.fixture(scope="module")
def results():
    names = list(POINTS)
    out = compile_many([POINTS[n] for n in names], jobs=2)
    return dict(zip(names, out))


@pytest.mark.parametrize("name", ["persistent_sm90", "persistent_2d_sm120"])
def test_persistent_schedule_compiles(results, name):
    r = results[name]
    assert r.status == "ok", r.detail  # 8 bytes of spill seen for the 2-D variant on sm_120: allowed
    assert r.registers > 0


@pytest.mark.parametrize("name", ["tma_decode_sm90", "tma_decode_sm89", "tma_prefill_paged_sm90"])
def test_tma_variants_compile(results, name):
    """The descriptor argument's signature (tuner.signature.typical_args) compiles, pipelined on
    sm_90 (shared memory holds num_stages tiles of 64 x 128 fp8 = 8 KB each)."""
    r = results[name]
    assert r.status == "ok" and r.spills == 0, r.detail
    if name.endswith("sm90"):
        assert r.mma == "wgmma" and r.shared_bytes >= 3 * 64 * 128


@pytest.mark.parametrize("name", ["store_run_sm90", "store_run_sm120"])
def test_store_run_compiles_without_spills(results, name):
    """The deferred-store buffer (16 x 64 fp32 at tp12) fits in registers on both targets; on
    sm_90 it took 80 registers, against 63 with store='tile' (python -m bench.template_ab --xcompile)."""
    r = results[name]
    assert r.status == "ok" and r.spills == 0, r.detail
    assert r.registers > 0


@pytest.mark.parametrize("name", ["fp8_sm90", "fp8_sm120", "bf16_sm90", "bf16_sm120", "prefill_sm90", "prefill_sm120"])
def test_defaults_compile(results, name):
    r = results[name]
    assert r.status == "ok", r.detail
    assert r.registers > 0 and r.shared_bytes > 0
    assert r.spills == 0
    assert r.shared_bytes <= POINTS[name][2].max_shared_bytes
    assert r.mma in ("wgmma", "mma.sync")


def test_fp8_decode_mma_flavour(results):
    # block_t=64 with 4 warps: Hopper's warpgroup MMA on sm_90; consumer Blackwell (sm_120) has
    # no wgmma/tcgen05, so Triton lowers to mma.sync with fp8 (e4m3) operands.
    assert POINTS["fp8_sm90"][1].block_t >= 64
    assert results["fp8_sm90"].mma == "wgmma"
    assert ".e4m3" in results["fp8_sm90"].mma_detail
    assert results["fp8_sm120"].mma == "mma.sync"
    assert ".e4m3" in results["fp8_sm120"].mma_detail


def test_infeasible_not_error(results):
    assert results["smem_hog_sm120"].status == "infeasible"
    assert results["smem_hog_sm120"].reason == "shared_memory"
    assert results["reg_hog_sm90"].status == "infeasible"
    assert results["reg_hog_sm90"].reason == "registers"
    # Passed the static estimate, compiled, and was then judged on its real shared memory.
    tight, real = results["tight_smem"], results["fp8_sm120"].shared_bytes
    assert tight.shared_bytes == real
    if real > TIGHT.max_shared_bytes:  # the usual case (see TIGHT)
        assert tight.status == "infeasible" and tight.reason == "shared_memory", tight
    else:
        assert tight.status == "ok", tight


def test_parse_ptxas_log_and_mma():
    log = ("ptxas info    : Function properties for k\n"
           "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
           "ptxas info    : Used 168 registers, used 1 barriers\n")
    assert parse_ptxas_log(log) == {"registers": 168, "spill_stores": 12, "spill_loads": 16, "stack_bytes": 8}
    assert mma_flavour("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {")[0] == "wgmma"
    assert mma_flavour("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {")[0] == "mma.sync"
    assert mma_flavour("ld.global.b32") == ("none", "")


def test_cli_check_sm120(tmp_path):
    out = tmp_path / "check.jsonl"
    res = CliRunner().invoke(main, ["check", "--target", "sm_120", "--sample", "3", "--jobs", "2", "--out", str(out)])
    assert "variant" in res.output and "smem KB" in res.output and "mma" in res.output
    assert re.search(r"sm_120 summary: \d+ ok / \d+ infeasible / \d+ error", res.output), res.output
    assert re.search(r"family default decode_paged__fp8_pg64_h64_d128_n1__\S+: ok \(\d+ registers", res.output)
    assert re.search(r"family default prefill_ragged__fp8_h64_d128__\S+: ok \(\d+ registers", res.output)
    # --family all is every registered family (it used to skip prefill_paged)
    assert re.search(r"family default prefill_paged__fp8_pg64_h64_d128__\S+: ok \(\d+ registers", res.output)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 * len(family_names()) and all(r["target"] == "sm_120" for r in rows)
    assert {r["problem"]["family"] for r in rows} == set(family_names())
    # Exit status: 0 when the defaults build and nothing errored; a compile error (e.g. a
    # template bug in a sampled variant) is reported with a reproducer and fails the command.
    errors = [r for r in rows if r["status"] == "error"]
    assert res.exit_code == (1 if errors else 0), res.output
    if errors:
        assert "reproduce: env -u TRITON_INTERPRET" in res.output


def test_cli_check_bad_options():
    res = CliRunner().invoke(main, ["check", "--target", "sm_70"])
    assert res.exit_code == 2 and "--target" in res.output and "sm_120" in res.output
    res = CliRunner().invoke(main, ["check", "--heads", "12"])
    assert res.exit_code == 2 and "--heads" in res.output and "64" in res.output


def _default_table(root, entries):
    """root/default/dispatch.json holding just these (problem, config, fits_targets) as native defaults."""
    modules, defaults = {}, {}
    for problem, config, fits in entries:
        variant = f"{problem.family}__{problem.slug}__{config.slug}__00000000"
        modules[variant] = {"file": f"{variant}.py", "sha256": "0" * 64, "problem": problem.to_dict(),
                            "problem_key": problem.key, "config": config.to_dict(), "fits_targets": fits}
        defaults[problem.key] = variant
    (root / "default").mkdir(parents=True)
    (root / "default" / "dispatch.json").write_text(json.dumps({"modules": modules, "defaults": defaults}))
    return root


def test_cli_check_defaults_compiles_the_shipped_defaults(tmp_path):
    d32 = Problem(family="prefill_ragged", page_size=0, heads=32, head_dim=32)
    root = _default_table(tmp_path / "t", [(d32, default_config(d32), sorted(TARGETS))])
    res = CliRunner().invoke(main, ["check", "--defaults", "--root", str(root), "--target", "sm_120",
                                    "--out", str(tmp_path / "c.jsonl")])
    assert res.exit_code == 0, res.output
    assert re.search(r"family default prefill_ragged__fp8_h32_d32__\S+: ok \(\d+ registers", res.output), res.output
    assert "sm_120 summary: 1 ok / 0 infeasible / 0 error" in res.output


@pytest.mark.parametrize("claims", [True, False], ids=["claimed", "not-claimed"])
def test_cli_check_defaults_fails_a_default_on_a_target_its_entry_claims(tmp_path, claims):
    """SMEM_HOG does not fit sm_120 (statically: nothing compiles): a failure only where the
    table says the module fits sm_120."""
    fits = ["sm_90", "sm_120"] if claims else ["sm_90"]
    root = _default_table(tmp_path / "t", [(FP8, SMEM_HOG, fits)])
    res = CliRunner().invoke(main, ["check", "--defaults", "--root", str(root), "--target", "sm_120",
                                    "--out", str(tmp_path / "c.jsonl")])
    assert res.exit_code == (1 if claims else 0), res.output
    assert re.search(r"family default decode_paged__fp8_pg64_h64_d128_n1__\S+: infeasible \(shared_memory", res.output)
    assert ("does not claim sm_120" in res.output) is not claims


def test_cli_check_defaults_takes_no_problem_options(tmp_path):
    for args in (["--heads", "32"], ["--sample", "2"], ["--all"], ["--page-size", "32"]):
        res = CliRunner().invoke(main, ["check", "--defaults", *args, "--root", str(tmp_path)])
        assert res.exit_code == 2 and f"takes no {args[0]}" in res.output, res.output
    res = CliRunner().invoke(main, ["check", "--defaults", "--root", str(tmp_path / "none")])
    assert res.exit_code == 2 and "--root" in res.output and "no readable family-default table" in res.output
