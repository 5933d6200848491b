"""bench and report on CPU: the benchmark loop under the interpreter (wall-clock timer), its
rows' schema, and a report drawn from the stored rows only."""

import json

import pytest
import torch

from tuner.bench import BenchRow, append_rows, bench_bucket, read_rows, torch_fullwidth_fallback
from tuner.envinfo import current
from tuner.inputs import make_decode_inputs
from indexer_logits._identity import Bucket, Config, Problem
from tuner.reference import paged_mqa_logits_ref


def test_fullwidth_fallback_matches_reference():
    p = Problem(heads=16, head_dim=32, page_size=32, next_n=2)
    x = make_decode_inputs(p, 3, 160, "random", seed=4)
    out = torch.full((6, 160), float("nan"))
    torch_fullwidth_fallback(x, out)
    ref = paged_mqa_logits_ref(*x.args())
    valid = x.valid_mask()
    assert torch.allclose(out[valid], ref[valid], rtol=1e-4, atol=1e-5)
    assert bool(torch.isneginf(out[~valid]).all())


def test_autotune_pick_passes_over_a_candidate_that_does_not_fit():
    """As triton.autotune does: a config out of shared memory at launch (the static estimate can
    be low, e.g. bf16 bt256 at 4 stages on the H200) is skipped, not the end of the bench."""
    from types import SimpleNamespace

    from triton.runtime.errors import OutOfResources

    from tuner.bench import autotune_pick

    p = Problem(heads=16, head_dim=32, page_size=32)
    x = make_decode_inputs(p, 2, 64, "random", seed=1)
    unfit, fits = Config(block_t=256, tiles_per_program=3, num_stages=4), Config(block_t=32)

    def too_big(*args):
        raise OutOfResources(282624, 232448, "shared memory")

    modules = {unfit: SimpleNamespace(launch=too_big), fits: SimpleNamespace(launch=lambda *a: a[5])}
    assert autotune_pick(modules, [x]) == fits
    with pytest.raises(RuntimeError, match="(?s)no candidate fits.*bt256_tp3"):
        autotune_pick({unfit: modules[unfit]}, [x])


def test_bench_bucket_rows_and_report(tmp_path, device):
    if device != "cpu":
        pytest.skip("the CPU loop; the GPU path is exercised by `cli.py bench` on the device")
    p = Problem(heads=16, head_dim=32, page_size=32)
    cands = [Config(block_t=32, tiles_per_program=2, dot_dtype="fp16", orient="k_rows"),
             Config(block_t=64, tiles_per_program=1, dot_dtype="fp16")]
    rows = bench_bucket(p, Bucket(2, 128), "full", candidates=cands, timer="wall_clock", device="cpu",
                        copy_bw=1e11, matmul_rate=None, env=current(), run_id="t", created_at="2026-01-01T00:00:00+00:00",
                        replays=3, dot_dtype="fp16", methods=("default", "autotune", "torch_fullwidth", "reference"))
    methods = {r.method for r in rows}
    assert methods == {"default", "autotune", "torch_fullwidth", "reference"}
    for r in rows:
        assert r.timer in ("wall_clock", "eager_events")
        assert r.p20_ms <= r.p50_ms <= r.p80_ms and r.p50_ms > 0
        assert r.floor_ms > 0 and r.frac_of_floor == pytest.approx(r.floor_ms / r.p50_ms)
    path = tmp_path / "bench.jsonl"
    append_rows(path, rows)
    back = read_rows(path)
    assert len(back) == len(rows) and set(back[0]) == set(BenchRow.__dataclass_fields__)

    from tuner.report import write_report

    md = write_report([path], None, tmp_path / "REPORT.md", tmp_path / "plots")
    text = md.read_text()
    assert "B=2, 128" in text and "wall_clock" in text
    assert all(r.table_kind == "defaults" for r in rows)  # no GPU: the runtime serves the family defaults
    assert f"`t` ran under Triton {rows[0].triton_version}, serving the defaults table" in text
    assert (tmp_path / "plots" / "floor.png").stat().st_size > 1000


def test_bench_cli_rejects_unknown_method():
    from click.testing import CliRunner

    import cli

    r = CliRunner().invoke(cli.main, ["bench", "--interpret", "--methods", "shipped,magic"])
    assert r.exit_code != 0 and "--methods" in r.output and "magic" in r.output
    r = CliRunner().invoke(cli.main, ["bench", "--interpret", "--batch", "0"])
    assert r.exit_code != 0 and "--batch" in r.output


def test_bench_shipped_pdl_is_skipped_with_a_note_off_sm90(tmp_path, device):
    """shipped_pdl (programmatic dependent launch) needs sm_90+: on the CPU loop it is skipped, and
    the bench says so instead of writing nothing silently."""
    if device != "cpu":
        pytest.skip("the CPU loop")
    from click.testing import CliRunner

    import cli

    out = tmp_path / "bench.jsonl"
    r = CliRunner().invoke(cli.main, ["bench", "--interpret", "--heads", "16", "--head-dim", "32", "--page-size", "32",
                                      "--batch", "2", "--context", "128", "--lens", "full", "--replays", "3",
                                      "--methods", "shipped,shipped_pdl", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "note: shipped_pdl skipped: programmatic dependent launch is for decode on a CUDA device of compute " \
           "capability 9.0 or newer" in r.output
    assert {row["method"] for row in read_rows(out)} == {"shipped"}


def test_fallback_ratio_pairs_rows_of_one_run():
    """The fallback / shipped column divides rows timed together, never the newest shipped row of
    one run by the fallback of another."""
    from tuner.report import bench_tables

    def row(method, p50, run, at):
        return dict(gpu_slug="g", gpu_name="G", problem_json=json.dumps(dict(family="decode_paged", heads=16, head_dim=32,
                                                                             page_size=32)),
                    bucket_batch=64, bucket_context=8192, lens="full", method=method, p50_ms=p50, frac_of_floor=0.5,
                    run_id=run, created_at=at)

    rows = [row("shipped", 0.030, "old", "2026-01-01T00:00:00"), row("torch_fullwidth", 0.900, "old", "2026-01-01T00:00:00"),
            row("shipped", 0.020, "new", "2026-01-02T00:00:00")]  # newer shipped row, no fallback in its run
    line = [ln for ln in bench_tables(rows).splitlines() if "B=64, 8192" in ln][0]
    assert line.endswith("| 30.0x | - |"), line  # 0.900 / 0.030 of run "old", not 0.900 / 0.020
    rows.append(row("shipped", 0.025, "old", "2026-01-01T00:05:00"))  # a second shipped row of run "old"
    line = [ln for ln in bench_tables(rows).splitlines() if "B=64, 8192" in ln][0]
    assert line.endswith("| 30.0x | - |"), line  # the one timed in the same invocation as the fallback
    rows = [row("shipped", 0.020, "new", "2026-01-02T00:00:00"), row("torch_fullwidth", 0.900, "old", "2026-01-01T00:00:00")]
    line = [ln for ln in bench_tables(rows).splitlines() if "B=64, 8192" in ln][0]
    assert line.endswith("| - | - |"), line  # no fallback ratio (and no DeepGEMM column figure)


def test_bench_warms_every_method_up_alike_and_reports_each_ones_times(monkeypatch, device):
    """shipped, default and autotune are timed after the same warm-up: with 100 ms for shipped and
    20 ms for the others, one prefill kernel read 6% slower as `shipped` than as `default` on the
    H200 (docs/PERF.md, "Where the goals stand").

    The stand-in graph timer hands each method its own unsorted replay samples (shipped 1x,
    default 2x, autotune 0.5x of 1..11 us) through the timing module's own quantiles, so the rows
    must carry each method's p20 / p50 / p80 (3, 6, 9 times its scale), frac_of_floor = floor / p50
    and ratio_to_shipped = p50 / shipped's p50: a swapped percentile, an unsorted pick, a ratio
    upside down or taken against the wrong row would show (constant times hid all of these)."""
    if device != "cpu":
        pytest.skip("the CPU loop with a stand-in graph timer")
    import tuner.bench as bench
    import tuner.measure as measure
    import tuner.timing as timing

    warmups = []
    base_us = (5, 1, 9, 3, 7, 2, 10, 4, 8, 6, 11)  # sorted: 1..11, p20 = 3, median = 6, p80 = 9
    scales = iter((1.0, 2.0, 0.5))  # the order bench_bucket times them in: shipped, default, autotune

    def graph_timer(fns, replays=50, warmup_ms=None, **kw):
        for fn in fns:
            fn()
        warmups.append(warmup_ms)
        f = next(scales)
        return timing._quantiles([f * us * 1e-3 for us in base_us], "cuda_graph")

    monkeypatch.setattr(bench, "time_cuda_graph", graph_timer)
    monkeypatch.setattr(measure, "time_cuda_graph", graph_timer)
    p = Problem(heads=16, head_dim=32, page_size=32)
    cands = [Config(block_t=32, tiles_per_program=2, dot_dtype="fp16", orient="k_rows")]
    rows = bench_bucket(p, Bucket(2, 64), "full", candidates=cands, timer="cuda_graph", device="cpu",
                        copy_bw=1e11, matmul_rate=None, env=current(), run_id="t", created_at="2026-01-01T00:00:00+00:00",
                        replays=3, dot_dtype="fp16", methods=("shipped", "default", "autotune"))
    by = {r.method: r for r in rows}
    assert set(by) == {"shipped", "default", "autotune"} and len(rows) == 3
    assert warmups == [bench.BENCH_WARMUP_MS] * 3
    floor = by["shipped"].floor_ms
    assert floor > 0 and all(r.floor_ms == floor for r in rows)
    for method, f in (("shipped", 1.0), ("default", 2.0), ("autotune", 0.5)):
        r = by[method]
        assert r.timer == "cuda_graph"
        assert (r.p20_ms, r.p50_ms, r.p80_ms) == pytest.approx((3e-3 * f, 6e-3 * f, 9e-3 * f)), method
        assert r.frac_of_floor == pytest.approx(floor / (6e-3 * f)), method
        assert r.ratio_to_shipped == pytest.approx(f), method  # > 1: slower than shipped


def test_report_and_bench_name_the_triton_the_served_table_was_tuned_under(tmp_path):
    """Issue 30: a row timed under Triton 3.8 from a table tuned under 3.6 says so, in the report
    and in the row (`bench` prints the same line at its start); rows from before the fields say
    that it was not recorded."""
    import json

    from indexer_logits import _tables
    from tuner.bench import served_table
    from tuner.report import tables_line

    root = tmp_path / "tables"
    for sub, version in (("nvidia_h200", "3.6.0"), ("nvidia_h200/triton-3.8", "3.8.0")):
        (root / sub).mkdir(parents=True)
        (root / sub / "dispatch.json").write_text(json.dumps({"provenance": {"triton_version": version}}))
    import indexer_logits._versions as versions

    for running, want in (("3.6.0", "nvidia_h200/dispatch.json"), ("3.8.1", "nvidia_h200/triton-3.8/dispatch.json"),
                          ("3.9.0", "nvidia_h200/triton-3.8/dispatch.json")):
        versions_running = versions.running_triton
        try:
            versions.running_triton = lambda v=running: v
            kind, path = _tables.serving_table("NVIDIA H200", "9.0", root)
            served_table.cache_clear()
            got = served_table("NVIDIA H200", "9.0", str(root))
        finally:
            versions.running_triton = versions_running
        assert kind == "tuned" and path == root / want
        assert got == ("tuned", "3.8.0" if "triton-3.8" in want else "3.6.0")
    assert _tables.serving_table("no GPU", "", root)[0] == "defaults"
    served_table.cache_clear()
    rows = [{"run_id": "a", "triton_version": "3.8.0", "table_kind": "tuned", "table_triton_version": "3.6.0"},
            {"run_id": "b", "triton_version": "3.6.0", "table_kind": "tuned", "table_triton_version": "3.6.0"},
            {"run_id": "c", "triton_version": "3.6.0"}]
    line = tables_line(rows)
    assert "`a` ran under Triton 3.8.0, serving the tuned table tuned under Triton 3.6.0 (another minor)" in line
    assert "`b` ran under Triton 3.6.0, serving the tuned table tuned under Triton 3.6.0;" in line
    assert "`c` ran under Triton 3.6.0 (the served table's Triton was not recorded then)" in line


def test_rows_name_the_table_their_problem_was_served_from(monkeypatch, tmp_path):
    """With tables of several Tritons side by side a problem can come from another than the one
    the GPU serves first (under 3.9 the H200's decode from triton-3.8/): a row records its own."""
    import json

    from indexer_logits import _dispatch
    from indexer_logits._identity import Bucket, Problem
    from tuner import bench

    table = tmp_path / "nvidia_h200" / "triton-3.8" / "dispatch.json"
    table.parent.mkdir(parents=True)
    table.write_text(json.dumps({"provenance": {"triton_version": "3.8.0"}}))
    asked = []

    def select(device, problem, bucket):
        asked.append((str(device), problem["family"], bucket))
        return _dispatch.Selection("exact", problem, bucket, "v", str(table))

    monkeypatch.setattr(_dispatch, "select", select)
    problem = Problem(family="decode_paged", page_size=64, scale_layout="page_blocked", q_dtype="fp8", cache_dtype="fp8")
    assert bench.served_by(problem, Bucket(64, 8192), "cpu") == ("tuned", "3.8.0")
    assert asked == [("cpu", "decode_paged", (64, 8192))]
    monkeypatch.setattr(_dispatch, "select", lambda d, p, b: _dispatch.Selection("reference", p, b))
    assert bench.served_by(problem, Bucket(64, 8192), "cpu") == ("reference", None)
