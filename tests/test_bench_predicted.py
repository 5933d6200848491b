"""bench/predicted.py: pairing the shipped and the predicted table's configs per bucket, the report
and its geo-means, the committed blind H200 table, a CPU smoke run under the interpreter (gates,
alternating wall-clock timings, the report) and, on a GPU, a short timed run."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import predicted as tool
from indexer_logits._identity import Config, Problem

ROOT = Path(__file__).resolve().parent.parent
N1 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 1, "1d")
N2 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 2, "1d")
OTHER = Config(block_t=64, tiles_per_program=4, num_warps=4, num_stages=3, block_m=1, dot_dtype="native",
               orient="k_rows")


def _run(*args, timeout=900):
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.predicted", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _table(path: Path, rows) -> Path:
    """A dispatch.json holding only what the tool reads: entries and their modules' configs."""
    modules, entries = {}, []
    for i, (problem, bucket, config) in enumerate(rows):
        modules[f"v{i}"] = {"config": config.to_dict()}
        entries.append({"problem": problem.to_dict(), "bucket": {"batch": bucket[0], "context": bucket[1]},
                        "variant": f"v{i}"})
    path.write_text(json.dumps({"entries": entries, "modules": modules}))
    return path


def test_pairs_follow_the_buckets_both_tables_have():
    shipped = tool.table_configs(tool.SHIPPED_TABLE)
    ship_n1 = shipped[(N1, (64, 8192))]
    predicted = {(N1, (64, 8192)): OTHER, (N2, (1, 4096)): OTHER, (N1, (3, 4096)): OTHER}  # (3, 4096): not shipped
    got = tool.pairs(shipped, predicted, [1, 2])
    assert [(p.next_n, b) for p, b, _, _ in got] == [(2, (1, 4096)), (1, (64, 8192))]  # smallest first
    assert got[1][2] == ship_n1 and got[1][3] == OTHER
    assert tool.pairs(shipped, predicted, [2])[0][0] == N2


def test_shipped_defaults_are_the_family_defaults_at_the_candidates_buckets():
    """--shipped defaults: each candidate bucket paired with what a GPU with no table is served there."""
    table = json.loads(tool.DEFAULTS_TABLE.read_text())
    want = Config.from_dict(table["modules"][table["defaults"][N1.key]]["config"])
    odd = dataclasses.replace(N1, heads=8)  # no family default of its own: left out
    got = tool.default_configs([{(N1, (64, 8192)): OTHER, (odd, (1, 4096)): OTHER}, {(N1, (1, 4096)): OTHER}])
    assert got == {(N1, (64, 8192)): want, (N1, (1, 4096)): want}
    assert want != OTHER  # so the pairing below times two configs
    assert [(b, a) for _, b, a, _ in tool.pairs(got, {(N1, (64, 8192)): OTHER}, [1])] == [((64, 8192), want)]


def test_report_and_geo_means():
    ship = dataclasses.replace(OTHER, num_stages=2)
    rows = [(N1, (1, 4096), ship, [ship], None), (N1, (64, 8192), ship, [OTHER], {ship: 20.0, OTHER: 25.0}),
            (N2, (1, 4096), ship, [OTHER], {ship: 10.0, OTHER: 9.0}), (N2, (8, 4096), ship, [OTHER], None)]
    text = tool.report(rows)
    assert "1.000 same" in text and "1.250" in text and "0.900" in text and "skipped" in text
    assert f"next_n 1: geo-mean predicted / shipped {tool.geo_mean([1.0, 1.25]):.3f} over 2 buckets" in text
    assert "next_n 2: geo-mean predicted / shipped 0.900 over 1 buckets (1 within 2% or faster), worst 0.900" in text
    assert text.splitlines()[-1].startswith("all: geo-mean predicted / shipped") and "over 3 buckets" in text


def test_several_candidates_share_the_rounds_and_absent_buckets_are_counted():
    ship, slow = dataclasses.replace(OTHER, num_stages=2), dataclasses.replace(OTHER, num_warps=8)
    shipped = {(N1, (64, 8192)): ship, (N1, (1, 4096)): ship}
    tuned, predicted = {(N1, (64, 8192)): OTHER}, {(N1, (64, 8192)): slow, (N1, (1, 4096)): ship}
    todo = tool.bucket_rows(shipped, [tuned, predicted], [1])
    assert [(b, cs) for _, b, _, cs in todo] == [((1, 4096), [None, ship]), ((64, 8192), [OTHER, slow])]
    rows = [(*todo[0], None), (*todo[1], {ship: 10.0, OTHER: 10.2, slow: 11.0})]
    text = tool.report(rows, ["tuned", "predicted"])
    assert "absent" in text and "1.020" in text and "1.100" in text
    assert "all: geo-mean tuned / shipped 1.020 over 1 buckets, worst 1.020, 1 buckets absent from it" in text
    assert f"all: geo-mean predicted / shipped {tool.geo_mean([1.0, 1.1]):.3f} over 2 buckets, worst 1.100" in text


def test_the_committed_blind_table_covers_the_fp8_decode_buckets():
    table = json.loads(tool.BLIND_TABLE.read_text())
    prov = table["provenance"]
    assert prov["kind"] == "predicted" and prov["gpu_slug"] == "nvidia_h200" and prov["device"]["sm_count"] == 132
    todo = tool.pairs(tool.table_configs(tool.SHIPPED_TABLE), tool.table_configs(tool.BLIND_TABLE), [1, 2])
    assert len(todo) == 90  # 9 batches x 5 contexts x next_n 1, 2


def test_adopt_writes_the_faster_candidates_as_a_seed_table(tmp_path):
    """--adopt: per bucket the fastest candidate under the threshold (its own table's entry), none where
    no candidate beats the shipped config by enough; the file is a seed table the tuner reads."""
    from tuner import transfer

    ship, slow = dataclasses.replace(OTHER, num_stages=2), dataclasses.replace(OTHER, num_warps=8)
    fast2 = dataclasses.replace(OTHER, tiles_per_program=8)
    tuned = _table(tmp_path / "tuned.json", [(N1, (1, 4096), OTHER), (N1, (64, 8192), OTHER), (N2, (8, 4096), slow)])
    blind = _table(tmp_path / "blind.json", [(N1, (1, 4096), fast2), (N1, (64, 8192), slow), (N2, (8, 4096), ship)])
    rows = [(N1, (1, 4096), ship, [OTHER, fast2], {ship: 10.0, OTHER: 9.5, fast2: 9.0}),   # blind's faster: taken
            (N1, (64, 8192), ship, [OTHER, slow], {ship: 20.0, OTHER: 19.9, slow: 25.0}),  # 0.995: not below 0.985
            (N2, (8, 4096), ship, [slow, ship], {ship: 10.0, slow: 9.0}),                  # tuned's: taken
            (N2, (1, 4096), ship, [OTHER, None], None)]                                     # not timed
    out = tmp_path / "adopt" / "seed.json"
    commands = tool.adopt(rows, [("tuned", tuned), ("blind", blind)], 0.985, out)
    table = json.loads(out.read_text())
    got = {(e["problem"]["next_n"], e["bucket"]["batch"], e["bucket"]["context"]):
           Config.from_dict(table["modules"][e["variant"]]["config"]) for e in table["entries"]}
    assert got == {(1, 1, 4096): fast2, (2, 8, 4096): slow}
    assert commands == [f"python3 cli.py tune --dtype fp8 --next-n 1 --batch 1 --context 4096 --seeds-only "
                        f"--seed-table {out} --trials 1",
                        f"python3 cli.py tune --dtype fp8 --next-n 2 --batch 8 --context 4096 --seeds-only "
                        f"--seed-table {out} --trials 1"]
    plan = [(N1, [tool_bucket(1, 4096), tool_bucket(64, 8192)]), (N2, [tool_bucket(8, 4096)])]
    seeds = dict(transfer.table_seeds(str(out), plan, ("native",)))
    assert seeds == {(N1.key, 1, 4096): fast2, (N2.key, 8, 4096): slow}
    assert tool.adopt(rows, [("tuned", tuned), ("blind", blind)], 0.8, out) == []
    assert json.loads(out.read_text())["entries"] == []


def tool_bucket(batch, context):
    from indexer_logits._identity import Bucket

    return Bucket(batch, context)


def test_cpu_smoke(tmp_path):
    blind = _table(tmp_path / "blind.json", [(N1, (64, 8192), OTHER), (N2, (64, 8192), OTHER)])
    proc = _run("--cpu-smoke", "--predicted", str(blind), "--rounds", "1", "--lens", "score")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all: geo-mean predicted / shipped" in proc.stdout and "over 2 buckets" in proc.stdout, proc.stdout[-2000:]


RAGGED = Problem("prefill_ragged", "fp8", "fp8", 0, "page_blocked", 64, 128, 1, "1d")
RAGGED_OTHER = Config(block_t=64, tiles_per_program=8, num_warps=4, num_stages=3, block_m=4, dot_dtype="native",
                      orient="k_rows")


def test_a_prefill_family_pairs_its_own_buckets():
    """--family: a prefill family's buckets whatever --next-n, and no decode bucket beside them."""
    shipped = {(RAGGED, (4096, 65536)): OTHER, (N1, (64, 8192)): OTHER}
    candidate = {(RAGGED, (4096, 65536)): RAGGED_OTHER, (N1, (64, 8192)): RAGGED_OTHER}
    rows = tool.bucket_rows(shipped, [candidate], [2], "fp8", None, "prefill_ragged")
    assert [(p.family, b) for p, b, _, _ in rows] == [("prefill_ragged", (4096, 65536))]
    assert [p.family for p, *_ in tool.bucket_rows(shipped, [candidate], [1], "fp8")] == ["decode_paged"]
    assert tool.bucket_rows(shipped, [candidate], [1], "bf16", None, "prefill_ragged") == []


def test_cpu_smoke_of_a_prefill_family_against_the_defaults(tmp_path):
    """The H100's prefill case (docs/PERF.md, "The H100's predicted table"): a predicted ragged entry timed
    against the family default it replaces, gated first, under the interpreter."""
    table = _table(tmp_path / "ragged.json", [(RAGGED, (4096, 65536), RAGGED_OTHER)])
    proc = _run("--cpu-smoke", "--family", "prefill_ragged", "--shipped", "defaults", "--predicted", str(table),
                "--rounds", "1", "--lens", "score")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "bt64_tp8_w4_s3_m4_fp16_kr" in proc.stdout and "all: geo-mean predicted / shipped" in proc.stdout, \
        proc.stdout[-2000:]
    assert "over 1 buckets" in proc.stdout and "(1 timed, 0 the shipped config)" in proc.stdout, proc.stdout[-2000:]


def test_refusals(tmp_path):
    empty = _table(tmp_path / "none.json", [(N1, (3, 4096), OTHER)])
    proc = _run("--predicted", str(empty), timeout=300)
    assert proc.returncode == 2 and "no fp8 decode bucket is in both tables" in proc.stderr
    proc = _run("--predicted", str(tmp_path / "missing.json"), timeout=300)
    assert proc.returncode == 2 and "--predicted/--shipped" in proc.stderr
    proc = _run("--predicted", str(empty), "--family", "prefill_paged", timeout=300)
    assert proc.returncode == 2 and "no fp8 prefill_paged bucket is in both tables" in proc.stderr


@pytest.mark.gpu
def test_a_short_timed_run():
    proc = _run("--next-n", "1", "--rounds", "1", "--replays", "3", "--total-s", "20")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "next_n 1: geo-mean predicted / shipped" in proc.stdout


def test_a_cut_run_says_what_it_timed_and_contexts_pick_the_rest():
    """A run cut by --total-s counts same-config buckets as 1.000 beside the timed ones (issue 25's
    call 9 read "0.986 over 60 buckets" where 34 were timed); the all-line says how many of each and
    how many were skipped, and --contexts times only the buckets a cut run left."""
    ship = dataclasses.replace(OTHER, num_stages=2)
    rows = [(N1, (1, 4096), ship, [ship], None), (N1, (64, 8192), ship, [OTHER], {ship: 20.0, OTHER: 25.0}),
            (N2, (8, 32768), ship, [OTHER], None)]
    last = tool.report(rows).splitlines()[-1]
    assert last.endswith("over 2 buckets, worst 1.250 (1 timed, 1 the shipped config; 1 skipped)")
    shipped = {(N1, (1, 4096)): ship, (N1, (64, 32768)): ship, (N2, (8, 131072)): ship}
    tuned = {k: OTHER for k in shipped}
    assert [b for _, b, *_ in tool.bucket_rows(shipped, [tuned], [1, 2], contexts={32768, 131072})] == \
        [(64, 32768), (8, 131072)]
    assert len(tool.bucket_rows(shipped, [tuned], [1, 2])) == 3
    with pytest.raises(SystemExit):
        tool.main(["--contexts", "12345", "--stored"])
