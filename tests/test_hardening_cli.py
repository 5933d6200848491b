"""Hardening of the command line: options out of range or contradicting each other.

Every command (info, tune, emit, verify, bench, report, ship, check) is driven in-process with
click's CliRunner. A bad invocation must exit non-zero with a message naming the option, and be
refused before any work starts: the `no_work` fixture replaces each command's expensive step
(compiling, tuning, benchmarking, verifying, emitting, writing the report, copying) with a
function that fails the test, and every output path points into tmp_path. Cases already in
tests/test_tune.py, test_xcompile.py and test_bench_report.py are not repeated.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import cli


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a refused invocation gets as far as doing its work."""

    def boom(*args, **kwargs):
        raise AssertionError("an invalid invocation started work")

    import tuner.bench
    import tuner.report
    import tuner.search
    import tuner.ship
    import tuner.tables
    import tuner.verify
    import tuner.xcompile

    for module, name in ((tuner.xcompile, "compile_many"), (tuner.bench, "bench_bucket"),
                         (tuner.bench, "append_rows"), (tuner.search.Search, "run"),
                         (tuner.verify._Checker, "check"), (tuner.verify._Checker, "check_at_bucket"),
                         (tuner.verify._Checker, "check_pool"), (tuner.tables, "emit_gpu"),
                         (tuner.tables, "emit_defaults"), (tuner.report, "write_report"),
                         (tuner.ship.shutil, "copyfile")):
        monkeypatch.setattr(module, name, boom)


def invoke(args):
    res = CliRunner().invoke(cli.main, [str(a) for a in args])
    # a refusal is a usage error (2) or a ClickException (1), never a Python traceback
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        f"{args} crashed: {type(res.exception).__name__}: {res.exception}")
    return res


def refused(args, option: str, *more: str, code=None):
    res = invoke(args)
    assert res.exit_code != 0, f"{args} was accepted:\n{res.output}"
    if code is not None:
        assert res.exit_code == code, res.output
    assert option in res.output, f"{args}: {option!r} not named in:\n{res.output}"
    for text in more:
        assert text in res.output, f"{args}: {text!r} not in:\n{res.output}"
    return res


@pytest.fixture
def paths(tmp_path):
    afile = tmp_path / "a_file"
    afile.write_text("x\n")
    adir = tmp_path / "a_dir"
    adir.mkdir()
    return {"tmp": tmp_path, "file": afile, "dir": adir, "missing": tmp_path / "missing",
            "db": tmp_path / "trials.sqlite", "out": tmp_path / "out"}


# ---------------------------------------------------------------------------------------------
# info


def test_info_rejects_unknown_options_and_arguments():
    refused(["info", "--verbose"], "--verbose", code=2)
    refused(["info", "extra"], "extra", code=2)
    refused(["no-such-command"], "no-such-command", code=2)


# ---------------------------------------------------------------------------------------------
# tune (the option cases of tests/test_tune.py are not repeated)

TUNE_BAD = [
    (["--trials", "0"], "--trials"),
    (["--trials", "-3"], "--trials"),
    (["--time-budget", "0"], "--time-budget"),
    (["--time-budget", "-5"], "--time-budget"),
    (["--timeout", "0"], "--timeout"),
    (["--ask-batch", "0"], "--ask-batch"),
    (["--replays", "0"], "--replays"),
    (["--jobs", "0"], "--jobs"),
    (["--sampler", "bayes"], "--sampler"),
    (["--family", "chunked"], "--family"),
    (["--dtype", "fp16"], "--dtype"),
    (["--lens-mode", "3d"], "--lens-mode"),
    (["--head-dim", "100"], "--head-dim"),
    (["--next-n", "0"], "--next-n"),
    (["--next-n", "1,two"], "--next-n"),
    (["--context", "0"], "--context"),
    (["--batch", "-4"], "--batch"),
    (["--dtype", "fp8", "--scale-layout", "none"], "--scale-layout"),
    (["--family", "prefill_ragged", "--next-n", "2"], "--next-n"),
    (["--family", "prefill_ragged", "--lens-mode", "2d"], "--lens-mode"),
    (["--family", "prefill_ragged", "--scale-layout", "token_interleaved"], "--scale-layout"),
    (["--try-config", "not json"], "--try-config"),
    (["--try-config", '{"block_t": 64, "warp_count": 4}'], "--try-config"),
    (["--try-config", '{"block_t": 64, "dot_dtype": "fp64"}'], "--try-config"),
    (["--try-config", "[64, 4]"], "--try-config"),
]


@pytest.mark.parametrize("args,option", TUNE_BAD, ids=[" ".join(a) for a, _ in TUNE_BAD])
def test_tune_bad_options(args, option, paths, no_work):
    refused(["tune", "--interpret", "--db", paths["db"], "--quiet", *args], option)
    assert not paths["db"].exists(), "created the trial store before refusing"


def test_tune_workers_out_of_range(paths, no_work):
    # --workers is a documented option (README, "Several GPUs, several hosts"): a tree without it
    # fails here rather than skipping.
    opts = {o for p in cli.main.commands["tune"].params for o in p.opts}
    assert "--workers" in opts, "tune has lost its --workers option"
    for bad in ("0", "-1", "two"):
        res = refused(["tune", "--interpret", "--db", paths["db"], "--workers", bad], "--workers")
        assert "No such option" not in res.output, res.output  # refused for its value, not as unknown
    assert not paths["db"].exists(), "created the trial store before refusing"


# ---------------------------------------------------------------------------------------------
# emit


def test_emit_bad_options(paths, no_work):
    from tuner.store import Store

    out = paths["out"]
    refused(["emit", "--defaults-only", "--gpu", "nvidia_h200", "--out", out], "--gpu", "--defaults-only", code=2)
    refused(["emit", "--db", paths["missing"], "--gpu", "cpu", "--out", out], "--db", code=2)
    refused(["emit", "--db", paths["dir"], "--out", out], "--db", code=2)
    refused(["emit", "--defaults-only", "--out", paths["file"]], "--out", code=2)
    Store(paths["db"])  # a valid, empty store
    refused(["emit", "--db", paths["db"], "--gpu", "nvidia_h200", "--out", out], "--gpu", "no ok trials", code=2)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# verify


def test_verify_bad_options(paths, no_work):
    refused(["verify", "--gpu", "no_such_gpu"], "--gpu", "no table for", code=2)
    refused(["verify", "--root", paths["missing"]], "--root", code=2)
    refused(["verify", "--root", paths["file"]], "--root", code=2)
    refused(["verify", "--seed", "zero"], "--seed", code=2)
    refused(["verify", "--cap", "64"], "--cap", "BATCHxCONTEXT", code=2)
    refused(["verify", "--cap", "0x32768"], "--cap", code=2)
    refused(["verify", "--max-entries", "0"], "--max-entries", code=2)
    refused(["verify", "--sample-rows", "-1"], "--sample-rows", code=2)
    refused(["verify", "--record", "--no-bucket"], "--record", "--no-bucket", code=2)
    res = invoke(["verify", "--root", paths["dir"]])  # a folder without default/: reported, exit 1
    assert res.exit_code == 1 and "FAIL" in res.output and "default/dispatch.json" in res.output
    res = invoke(["verify", "--root", paths["dir"], "--no-defaults"])  # nothing verified is a failure
    assert res.exit_code == 1 and "nothing to verify" in res.output


# ---------------------------------------------------------------------------------------------
# bench

BENCH_BAD = [
    (["--candidates", "0"], "--candidates"),
    (["--replays", "0"], "--replays"),
    (["--replays", "-1"], "--replays"),
    (["--methods", ""], "--methods"),
    (["--methods", ",, ,"], "--methods"),
    (["--methods", "shipped,fastest"], "--methods"),
    (["--heads", "12"], "--heads"),
    (["--head-dim", "100"], "--head-dim"),
    (["--page-size", "48"], "--page-size"),
    (["--next-n", "9"], "--next-n"),
    (["--next-n", "0"], "--next-n"),
    (["--context", "abc"], "--context"),
    (["--context", "8192,-1"], "--context"),
    (["--lens", "half"], "--lens"),
    (["--family", "prefill_paged", "--next-n", "2"], "--next-n"),
    (["--family", "prefill_paged", "--lens", "full"], "--lens"),
    (["--family", "prefill_ragged", "--lens", "full"], "--lens"),
    (["--family", "prefill_ragged", "--next-n", "2"], "--next-n"),
    (["--family", "prefill_ragged", "--page-size", "32"], "--page-size"),
    (["--run-id", "two words"], "--run-id"),
    (["--run-id", "../escape"], "--run-id"),
]


@pytest.mark.parametrize("args,option", BENCH_BAD, ids=[" ".join(a) or "empty" for a, _ in BENCH_BAD])
def test_bench_bad_options(args, option, paths, no_work):
    out = paths["tmp"] / "bench.jsonl"
    refused(["bench", "--interpret", "--out", out, *args], option, code=2)
    assert not out.exists()


def test_bench_out_must_be_a_file(paths, no_work):
    refused(["bench", "--interpret", "--out", paths["dir"]], "--out", code=2)


# ---------------------------------------------------------------------------------------------
# report


def test_report_bad_options(paths, no_work):
    md = paths["out"] / "REPORT.md"
    refused(["report", "--bench", paths["missing"], "--out", md], "--bench", code=2)
    refused(["report", "--bench", paths["dir"], "--out", md], "--bench", code=2)
    refused(["report", "--bench", paths["file"], "--out", md], "--bench", "not a bench JSON-lines file", code=2)
    binary = paths["tmp"] / "bench.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    refused(["report", "--bench", binary, "--out", md], "--bench", code=2)
    good = paths["tmp"] / "bench.jsonl"
    good.write_text(json.dumps({"method": "shipped"}) + "\n")
    refused(["report", "--bench", good, "--out", paths["dir"]], "--out", code=2)
    assert not paths["out"].exists()


# ---------------------------------------------------------------------------------------------
# ship


def test_ship_bad_options(paths, no_work):
    out = paths["out"]
    refused(["ship"], "--out", code=2)
    refused(["ship", "--out", out, "--package", "not-an-identifier"], "package", "Python identifier")
    refused(["ship", "--out", out, "--package", "class"], "package", "Python identifier")  # a keyword
    refused(["ship", "--out", out, "--gpu", "no_such_gpu"], "--gpu", "no table for")
    refused(["ship", "--out", out, "--root", paths["missing"]], "--root", code=2)
    refused(["ship", "--out", paths["file"]], "--out", code=2)
    assert not out.exists()
    (paths["dir"] / "indexer_logits").mkdir()  # a folder ship did not make is never deleted
    (paths["dir"] / "indexer_logits" / "mine.txt").write_text("keep me\n")
    refused(["ship", "--out", paths["dir"]], "--out", "not made by `ship`")
    assert (paths["dir"] / "indexer_logits" / "mine.txt").read_text() == "keep me\n"


# ---------------------------------------------------------------------------------------------
# check (the --target sm_70 / --heads 12 cases of tests/test_xcompile.py are not repeated)

CHECK_BAD = [
    (["--all", "--sample", "5"], "--sample"),
    (["--sample", "0"], "--sample"),
    (["--jobs", "0"], "--jobs"),
    (["--max-spill-bytes", "-1"], "--max-spill-bytes"),
    (["--page-size", "48"], "--page-size"),
    (["--next-n", "9"], "--next-n"),
    (["--head-dim", "100"], "--head-dim"),
    (["--family", "chunked"], "--family"),
    (["--dtype", "bf16", "--scale-layout", "token_interleaved"], "--scale-layout"),
    (["--dtype", "fp8", "--scale-layout", "none"], "--scale-layout"),
    (["--family", "prefill_ragged", "--page-size", "64"], "--page-size"),
    (["--family", "prefill_ragged", "--next-n", "2"], "--next-n"),
    (["--family", "prefill_ragged", "--scale-layout", "token_interleaved"], "--scale-layout"),
    (["--family", "prefill_paged", "--next-n", "2"], "--next-n"),
]


@pytest.mark.parametrize("args,option", CHECK_BAD, ids=[" ".join(a) for a, _ in CHECK_BAD])
def test_check_bad_options(args, option, paths, no_work):
    out = paths["tmp"] / "check.jsonl"
    refused(["check", "--target", "sm_120", "--out", out, *args], option, code=2)
    assert not out.exists()


def test_check_local_target_without_a_gpu(paths, no_work):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --target local is valid")
    refused(["check", "--target", "local", "--out", paths["tmp"] / "c.jsonl"], "--target", "needs a CUDA GPU",
            code=2)


# ---------------------------------------------------------------------------------------------
# merge-db


def test_merge_db_bad_inputs(paths):
    # merge-db is a documented command (README, "Several GPUs, several hosts"): a tree without it
    # fails here rather than skipping.
    assert "merge-db" in cli.main.commands, "cli has lost its merge-db command"
    into = paths["tmp"] / "into.sqlite"
    refused(["merge-db", "--into", into], "SOURCES", code=2)
    refused(["merge-db", "--into", into, paths["missing"]], "SOURCES", code=2)
    garbage = paths["tmp"] / "garbage.sqlite"
    garbage.write_bytes(b"\x00not sqlite" * 40)
    res = refused(["merge-db", "--into", garbage, paths["file"]], "not an SQLite trial store")
    assert res.exit_code == 1


def test_the_no_work_guard_trips_on_valid_invocations(paths, no_work):
    """The guard is live: a valid invocation reaches the guarded step (so a refusal above really
    happened before any work)."""
    for args in (["check", "--target", "sm_120", "--sample", "1", "--out", paths["tmp"] / "c.jsonl"],
                 ["bench", "--interpret", "--batch", "1", "--context", "64", "--methods", "reference",
                  "--out", paths["tmp"] / "b.jsonl"],
                 ["emit", "--defaults-only", "--out", paths["out"]]):
        res = CliRunner().invoke(cli.main, [str(a) for a in args])
        assert isinstance(res.exception, AssertionError) and "started work" in str(res.exception), res.output
