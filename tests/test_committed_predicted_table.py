"""The committed predicted table of the RTX PRO 6000 Blackwell (sm_120): what the current templates
render (re-run `python cli.py predict --gpu rtx_pro_6000` after a template change), served for both
editions' slugs, every entry cross-compiled within sm_120's limits. No GPU."""

from __future__ import annotations

import json

import pytest

from indexer_logits import _dispatch, _tables
from indexer_logits._identity import Config, Problem, slugify
from tuner.devices import device
from tuner.families import names as family_names
from tuner.render import emit as render_emit
from tuner.render import template_hash
from tuner.space import TARGETS
from tuner.xcompile import MAX_SPILL_BYTES

RTX = device("rtx_pro_6000")
EDITIONS = ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
TABLE_DIR = _tables.TABLES_DIR / RTX.slugs[0] / _tables.PREDICTED_DIR


@pytest.fixture(scope="module")
def table():
    return _dispatch.load_table(TABLE_DIR / "dispatch.json", RTX.slugs[0], "12.0")


def test_committed_predicted_table_is_up_to_date(table, tmp_path):
    prov = table["provenance"]
    assert prov["template_hashes"] == {f: template_hash(f) for f in family_names()}, \
        "templates changed since the predicted table was emitted: run `python cli.py predict --gpu rtx_pro_6000`"
    stale = []
    for variant, info in sorted(table["modules"].items()):
        fresh = render_emit(Problem.from_dict(info["problem"]), Config.from_dict(info["config"]), tmp_path)
        if fresh.read_bytes() != (TABLE_DIR / info["file"]).read_bytes() or _dispatch.file_sha256(fresh) != info["sha256"]:
            stale.append(info["file"])
    on_disk = {p.name for p in TABLE_DIR.glob("*.py")}
    assert not stale and on_disk == {m["file"] for m in table["modules"].values()}, \
        f"stale predicted modules (run `python cli.py predict --gpu rtx_pro_6000`): {stale or on_disk}"


def test_it_covers_the_default_grid_and_fits_sm120(table):
    prov = table["provenance"]
    assert prov["kind"] == "predicted" and prov["cross_compiled_for"] == "sm_120" and prov["sm_count"] == 188
    assert prov["device"]["copy_bandwidth"] == RTX.copy_bandwidth and prov["model_version"]
    decode = [e for e in table["entries"] if e["problem"]["family"] == "decode_paged"]
    assert len(decode) == 12 * 45  # next_n 1, 2, 4 x lens 1d, 2d x fp8, bf16 (next_n 3 has no point) x 45 buckets
    assert {e["problem"]["family"] for e in table["entries"]} == {"decode_paged", "prefill_ragged", "prefill_paged"}
    for e in table["entries"]:
        assert e["spills"] <= MAX_SPILL_BYTES and e["shared_bytes"] <= TARGETS["sm_120"].max_shared_bytes, e["variant"]
        assert table["modules"][e["variant"]]["config"]["dot_dtype"] == "native"


@pytest.mark.parametrize("name", EDITIONS)
def test_both_editions_are_served(name):
    slug = slugify(name)
    assert _tables.predicted_table_dir(_tables.TABLES_DIR, slug) == TABLE_DIR
    _dispatch.load_table(TABLE_DIR / "dispatch.json", slug, "12.0")  # lists both slugs
    assert not (_tables.TABLES_DIR / slug / "dispatch.json").exists()  # no tuned table (yet)
