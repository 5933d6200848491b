"""The committed H200 table is what `emit` makes from the committed trial store, byte for byte
(with the `verified` records of `verify --record`, which emit carries over while true).

If the templates changed since the H200 tuning run, emit would (rightly) drop the stale winners
and the comparison means nothing: the test then skips and says that the H200 needs re-tuning.
"""

import filecmp
import json
from pathlib import Path

import pytest

from indexer_logits._topk_table import FILE as TOPK_FILE
from tuner.render import template_hash

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "indexer_logits" / "tables" / "nvidia_h200"
DB = ROOT / "db" / "trials.sqlite"


def test_h200_table_reemits_byte_for_byte(tmp_path):
    if not (TABLE / "dispatch.json").exists() or not DB.exists():
        pytest.skip("no committed H200 table or trial store")
    provenance = json.loads((TABLE / "dispatch.json").read_text())["provenance"]
    stale = {f for f, h in provenance["template_hashes"].items() if template_hash(f) != h}
    if stale:
        pytest.skip(f"templates changed since the H200 was tuned ({sorted(stale)}): re-tune to refresh its table")
    from click.testing import CliRunner

    import cli

    # the committed table first, as a re-emit in place finds it: emit keeps its `verify --record`
    # fields where the entry and its module are unchanged, and rewrites everything else
    (tmp_path / "nvidia_h200").mkdir()
    (tmp_path / "nvidia_h200" / "dispatch.json").write_bytes((TABLE / "dispatch.json").read_bytes())
    # the top-k selection's table (cli.py tune-topk) is not emitted from the trial store: emit keeps it
    topk = TABLE / TOPK_FILE
    if topk.exists():
        (tmp_path / "nvidia_h200" / TOPK_FILE).write_bytes(topk.read_bytes())
    result = CliRunner().invoke(cli.main, ["emit", "--db", str(DB), "--gpu", "nvidia_h200", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    fresh = tmp_path / "nvidia_h200"
    names = sorted(p.name for p in TABLE.iterdir() if p.is_file())
    assert names == sorted(p.name for p in fresh.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(TABLE, fresh, names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    entries = json.loads((TABLE / "dispatch.json").read_text())["entries"]
    assert len(entries) >= 90 and all(e["timer"] == "cuda_graph" for e in entries)


@pytest.mark.parametrize("folder", sorted(p.name for p in TABLE.glob("triton-*")) or ["triton-none"])
def test_h200_table_of_another_triton_reemits(folder, tmp_path):
    """Each tables/nvidia_h200/triton-X.Y/ (written by `retime` under that Triton) is what `emit
    --by-triton` makes from db/triton-X.Y/trials.sqlite, byte for byte, and says which Triton."""
    table, db = TABLE / folder, ROOT / "db" / folder / "trials.sqlite"
    if not (table / "dispatch.json").exists():
        pytest.skip("no table tuned under another Triton is committed")
    assert db.exists(), f"{table} is committed without its trial store {db}"
    provenance = json.loads((table / "dispatch.json").read_text())["provenance"]
    assert provenance["triton_version"].rsplit(".", 1)[0] == folder.removeprefix("triton-")
    stale = {f for f, h in provenance["template_hashes"].items() if template_hash(f) != h}
    if stale:
        pytest.skip(f"templates changed since {folder}'s re-time ({sorted(stale)}): re-time to refresh it")
    from click.testing import CliRunner

    import cli

    (tmp_path / "nvidia_h200" / folder).mkdir(parents=True)
    (tmp_path / "nvidia_h200" / folder / "dispatch.json").write_bytes((table / "dispatch.json").read_bytes())
    result = CliRunner().invoke(cli.main, ["emit", "--db", str(db), "--gpu", "nvidia_h200", "--by-triton",
                                           "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    fresh = tmp_path / "nvidia_h200" / folder
    names = sorted(p.name for p in table.iterdir())
    assert names == sorted(p.name for p in fresh.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(table, fresh, names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
