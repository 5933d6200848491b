"""`verify --plan-only` on the committed H200 table, without a GPU: every entry is planned at its
bucket's own shape (256 x 1M at the top), every distinct paged module once on the large pool, and
the estimate stays within the few minutes a GPU session allows."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

import cli
from indexer_logits import _dispatch

TABLE = _dispatch.TABLES_DIR / "nvidia_h200" / _dispatch.TABLE_FILE


@pytest.fixture(scope="module")
def table():
    if not TABLE.is_file():
        pytest.skip("no committed H200 table")
    return json.loads(TABLE.read_text())


def plan(*args):
    res = CliRunner().invoke(cli.main, ["verify", "--plan-only", "--gpu", "nvidia_h200", *args])
    assert res.exit_code == 0, res.output
    minutes, seconds = re.search(r"estimated (?:(\d+)m)?(\d+)s", res.output.splitlines()[-1]).groups()
    return res.output, int(minutes or 0) * 60 + int(seconds)


def test_every_entry_at_its_own_bucket_and_the_pool_cases(table):
    out, estimate = plan("--no-defaults")
    entries = [l for l in out.splitlines() if l.startswith("nvidia_h200  entry")]
    pools = [l for l in out.splitlines() if l.startswith("nvidia_h200  pool")]
    assert len(entries) == len(table["entries"])
    paged = {e["variant"] for e in table["entries"] if e["problem"]["family"] != "prefill_ragged"}
    assert len(pools) == len(paged)
    for e in table["entries"]:
        b, c = e["bucket"]["batch"], e["bucket"]["context"]
        n = e["problem"]["next_n"]
        shape = f"B={b} N={n} ctx={c}" if e["problem"]["family"] == "decode_paged" else (
            f"M={b} ctx={c}" if e["problem"]["family"] == "prefill_paged" else f"M={b} Nk={c}")
        assert any(f"b{b}_c{c}" in l and shape in l for l in entries), shape
    assert any("B=256 N=1 ctx=1048576" in l for l in entries) == any(
        (e["bucket"]["batch"], e["bucket"]["context"]) == (256, 1 << 20) for e in table["entries"])
    assert 60 < estimate < 360  # the lead's GPU session runs it in one command of a few minutes


def test_flags_bound_the_plan(table):
    _, full = plan()
    _, decode_only = plan("--family", "decode_paged", "--no-pool")
    out, capped = plan("--cap", "64x32768", "--no-defaults")
    assert decode_only < full and capped < full and "ctx=1048576" not in out
    out, _ = plan("--max-entries", "3")
    assert "plan of a GPU run: 3 checks" in out
