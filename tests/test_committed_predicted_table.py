"""The committed predicted tables, one a device nobody tuned on here: the RTX PRO 6000 Blackwell (sm_120,
both editions' slugs) and the H100 SXM (sm_90, whose only tuned table is its top-k's). Each is what the
current templates render (re-run `python cli.py predict --gpu NAME` after a template change), served for
its slugs, every entry cross-compiled within its target's limits. No GPU."""

from __future__ import annotations

import pytest

from indexer_logits import _dispatch, _tables
from indexer_logits._identity import Config, Problem, slugify
from tuner.devices import device
from tuner.families import names as family_names
from tuner.render import emit as render_emit
from tuner.render import template_hash
from tuner.space import TARGETS
from tuner.xcompile import MAX_SPILL_BYTES

# (the tuner.devices name, its compute capability, the GPU names it serves)
PREDICTED = {
    "rtx_pro_6000": ("12.0", ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                              "NVIDIA RTX PRO 6000 Blackwell Server Edition")),
    "h100_sxm": ("9.0", ("NVIDIA H100 80GB HBM3",)),
}


def _dir(name):
    return _tables.TABLES_DIR / device(name).slugs[0] / _tables.PREDICTED_DIR


@pytest.fixture(scope="module", params=sorted(PREDICTED))
def predicted(request):
    name = request.param
    return name, _dispatch.load_table(_dir(name) / "dispatch.json", device(name).slugs[0], PREDICTED[name][0])


def test_committed_predicted_table_is_up_to_date(predicted, tmp_path):
    name, table = predicted
    prov, table_dir = table["provenance"], _dir(name)
    assert prov["template_hashes"] == {f: template_hash(f) for f in family_names()}, \
        f"templates changed since the predicted table was emitted: run `python cli.py predict --gpu {name}`"
    stale = []
    for variant, info in sorted(table["modules"].items()):
        fresh = render_emit(Problem.from_dict(info["problem"]), Config.from_dict(info["config"]), tmp_path)
        if fresh.read_bytes() != (table_dir / info["file"]).read_bytes() or _dispatch.file_sha256(fresh) != info["sha256"]:
            stale.append(info["file"])
    on_disk = {p.name for p in table_dir.glob("*.py")}
    assert not stale and on_disk == {m["file"] for m in table["modules"].values()}, \
        f"stale predicted modules (run `python cli.py predict --gpu {name}`): {stale or on_disk}"


def test_it_covers_the_default_grid_and_fits_its_target(predicted):
    name, table = predicted
    dev, prov = device(name), table["provenance"]
    target = dev.target
    assert prov["kind"] == "predicted" and prov["cross_compiled_for"] == target and prov["sm_count"] == dev.sm_count
    assert prov["device"]["copy_bandwidth"] == dev.copy_bandwidth and prov["model_version"]
    decode = [e for e in table["entries"] if e["problem"]["family"] == "decode_paged"]
    assert len(decode) == 12 * 45  # next_n 1, 2, 4 x lens 1d, 2d x fp8, bf16 (next_n 3 has no point) x 45 buckets
    assert {e["problem"]["family"] for e in table["entries"]} == {"decode_paged", "prefill_ragged", "prefill_paged"}
    for e in table["entries"]:
        assert e["spills"] <= MAX_SPILL_BYTES and e["shared_bytes"] <= TARGETS[target].max_shared_bytes, e["variant"]
        assert table["modules"][e["variant"]]["config"]["dot_dtype"] == "native"


@pytest.mark.parametrize("name,gpu", [(n, g) for n, (_, gpus) in sorted(PREDICTED.items()) for g in gpus])
def test_every_named_board_is_served(name, gpu):
    slug = slugify(gpu)
    assert _tables.predicted_table_dir(_tables.TABLES_DIR, slug) == _dir(name)
    _dispatch.load_table(_dir(name) / "dispatch.json", slug, PREDICTED[name][0])  # lists the slug
    assert not (_tables.TABLES_DIR / slug / "dispatch.json").exists()  # no tuned table (yet)
    kind, path = _tables.serving_table(gpu, PREDICTED[name][0], _tables.TABLES_DIR)
    assert (kind, path) == ("predicted", _dir(name) / "dispatch.json")
