"""Problem / Config: canonical JSON, stable keys, round trips, variant names, field checks."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import keyword
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexer_logits._identity import Bucket, Config, LensMode, Problem, ScaleLayout, canonical_json, variant_name

REPO = Path(__file__).resolve().parent.parent

DEFAULT_PROBLEM_JSON = (
    '{"cache_dtype":"fp8","family":"decode_paged","head_dim":128,"heads":64,"lens_mode":"1d",'
    '"next_n":1,"page_size":64,"q_dtype":"fp8","scale_layout":"page_blocked"}'
)
DEFAULT_CONFIG_JSON = (
    '{"block_m":1,"block_t":64,"dot_dtype":"native","num_stages":2,"num_warps":4,"orient":"q_rows",'
    '"programs_per_sm":0,"tiles_per_program":4}'
)
# Pinned: changing either means every database key and dispatch entry changes. Update on purpose.
DEFAULT_PROBLEM_KEY = "d4dd6c902addeffbb39473982e4d128dad7d3e88536f48113b5e153600844da5"
DEFAULT_CONFIG_KEY = "77accc9c1cb61a810fee8627315afd635716736246f59f0d3f00eb08b71d4490"
DEFAULT_VARIANT = "decode_paged__fp8_pg64_h64_d128_n1__bt64_tp4_w4_s2__5f4f59da"

PROBLEM_AXES = {
    "family": ("decode_paged", "prefill_ragged", "prefill_paged"),
    "q_dtype": ("fp8", "bf16"),
    "cache_dtype": ("fp8", "bf16"),
    "page_size": (0, 1, 32, 64, 128),
    "scale_layout": ("page_blocked", "token_interleaved", "none"),
    "heads": (8, 16, 32, 64, 128),
    "head_dim": (32, 64, 128),
    "next_n": (1, 2, 3, 4),
    "lens_mode": ("1d", "2d"),
}


def all_valid_problems() -> list[Problem]:
    names = sorted(PROBLEM_AXES)
    out = []
    for values in itertools.product(*(PROBLEM_AXES[n] for n in names)):
        try:
            out.append(Problem(**dict(zip(names, values))))
        except ValueError:
            pass
    return out


def some_configs() -> list[Config]:
    return [Config(block_t=bt, tiles_per_program=tp, num_warps=w, num_stages=s, block_m=m, dot_dtype=dd, orient=o)
            for bt, tp, w, s, m, dd, o in itertools.product((16, 64), (1, 4), (4, 8), (2, 3), (1, 2),
                                                          ("native", "fp16", "fp32"), ("q_rows", "k_rows"))]


def test_canonical_json_is_sorted_and_compact():
    p, c = Problem(), Config()
    assert p.to_json() == DEFAULT_PROBLEM_JSON
    assert c.to_json() == DEFAULT_CONFIG_JSON
    for obj in (p, c, Problem(family="prefill_ragged", page_size=0), Config(block_t=128, dot_dtype="fp16")):
        text = obj.to_json()
        assert " " not in text and "\n" not in text
        keys = list(json.loads(text))
        assert keys == sorted(keys)
        # every field, but Config.store at its default "tile", Config.head_sum at "tree" and
        # Config.k_load at "threads" (left out: the keys of configs from before the fields stay as they were)
        assert set(keys) == {f.name for f in dataclasses.fields(obj)} - {"store", "head_sum", "k_load"}
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_keys_are_pinned_sha256_of_the_json():
    assert Problem().key == DEFAULT_PROBLEM_KEY
    assert Config().key == DEFAULT_CONFIG_KEY
    assert hashlib.sha256(DEFAULT_PROBLEM_JSON.encode()).hexdigest() == DEFAULT_PROBLEM_KEY
    assert hashlib.sha256(DEFAULT_CONFIG_JSON.encode()).hexdigest() == DEFAULT_CONFIG_KEY
    assert variant_name(Problem(), Config()) == DEFAULT_VARIANT


def test_keys_are_stable_across_processes():
    code = ("from indexer_logits._identity import Problem, Config, variant_name; "
            "p = Problem(family='prefill_ragged', page_size=0, heads=16, q_dtype='bf16', cache_dtype='bf16', "
            "scale_layout='none'); c = Config(block_m=2, dot_dtype='fp32'); "
            "print(Problem().key, Config().key, p.key, variant_name(p, c))")
    outputs = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.add(proc.stdout.strip())
    assert len(outputs) == 1
    p = Problem(family="prefill_ragged", page_size=0, heads=16, q_dtype="bf16", cache_dtype="bf16", scale_layout="none")
    c = Config(block_m=2, dot_dtype="fp32")
    assert outputs.pop() == f"{DEFAULT_PROBLEM_KEY} {DEFAULT_CONFIG_KEY} {p.key} {variant_name(p, c)}"


def test_enum_members_and_strings_are_the_same_problem():
    p = Problem(family="decode_paged", scale_layout=ScaleLayout.PAGE_BLOCKED, lens_mode=LensMode.ONE_D)
    assert p == Problem() and p.to_json() == DEFAULT_PROBLEM_JSON and p.key == DEFAULT_PROBLEM_KEY
    assert type(p.family) is str and type(p.scale_layout) is str and type(p.lens_mode) is str


def test_round_trip_through_json():
    problems = all_valid_problems()
    assert len(problems) > 500
    for p in problems:
        back = Problem.from_json(p.to_json())
        assert back == p and back.key == p.key
        assert Problem.from_dict(p.to_dict()) == p
    for c in some_configs():
        assert Config.from_json(c.to_json()) == c
    b = Bucket(batch=64, context=8192)
    assert Bucket.from_json(b.to_json()) == b and b.slug == "b64_c8192"


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown fields.*'page'"):
        Problem.from_dict({"page": 64})
    with pytest.raises(ValueError, match="unknown fields.*'blockt'"):
        Config.from_json('{"blockt":64}')


def test_missing_fields_take_defaults():
    assert Problem.from_json('{"heads":16}') == Problem(heads=16)
    assert Config.from_json("{}") == Config()


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Problem().heads = 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().block_t = 8


def test_variant_names_are_identifiers_and_unique():
    problems = all_valid_problems()
    configs = some_configs()
    names = set()
    keys = set()
    for p in problems:
        name = variant_name(p, Config())
        assert name.isidentifier() and not keyword.iskeyword(name), name
        assert name.startswith(p.family + "__")
        names.add(name)
        keys.add(p.key)
    assert len(names) == len(problems) and len(keys) == len(problems)
    cnames = {variant_name(Problem(), c) for c in configs}
    assert len(cnames) == len(configs)
    for c in configs:
        assert variant_name(Problem(), c).isidentifier()


def _one_field_changes(obj, axes):
    """Every valid object that differs from obj in exactly one field."""
    for name, values in axes.items():
        for v in values:
            if v == getattr(obj, name):
                continue
            try:
                yield name, dataclasses.replace(obj, **{name: v})
            except ValueError:
                continue


@pytest.mark.parametrize("base", [
    Problem(),
    Problem(family="prefill_ragged", page_size=0, heads=16, head_dim=64),
    Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none", page_size=32, next_n=2, lens_mode="2d"),
], ids=["default", "prefill", "bf16-2d"])
def test_variant_name_differs_when_any_problem_field_differs(base):
    name = variant_name(base, Config())
    changed = set()
    for field, other in _one_field_changes(base, PROBLEM_AXES):
        assert variant_name(other, Config()) != name, field
        assert other.key != base.key
        changed.add(field)
    # Most fields can change alone; dtypes and families only change together with others.
    assert {"heads", "head_dim"} <= changed


def _config_alternatives() -> dict[str, tuple]:
    """Other values for every Config field, found generically so that a new knob is covered
    without editing this test: ints get nearby values, strings the module's tuple of choices
    that holds their default."""
    import indexer_logits._identity as problem_mod

    out = {}
    for f in dataclasses.fields(Config):
        default = f.default
        if isinstance(default, int):
            out[f.name] = (default + 1, default * 2 + 2, default + 3)
        else:
            choices = [t for t in vars(problem_mod).values() if isinstance(t, tuple) and default in t]
            assert choices, f"no tuple of choices for Config.{f.name} in indexer_logits._identity"
            out[f.name] = tuple(v for v in choices[0] if v != default)
    return out


def test_variant_name_differs_when_any_config_field_differs():
    base = Config()
    axes = _config_alternatives()
    seen = set()
    for field, other in _one_field_changes(base, axes):
        assert variant_name(Problem(), other) != variant_name(Problem(), base), field
        assert other.slug != base.slug, field  # the readable part shows the change too
        assert other.key != base.key, field
        seen.add(field)
    assert seen == {f.name for f in dataclasses.fields(Config)}


def test_variant_name_with_each_dtype_change():
    bf16 = Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none")
    ti = Problem(scale_layout="token_interleaved")
    names = {variant_name(p, Config()) for p in (Problem(), bf16, ti, Problem(lens_mode="2d"))}
    assert len(names) == 4


INVALID_PROBLEMS = [
    ("family", dict(family="decode")),
    ("q_dtype", dict(q_dtype="fp16")),
    ("cache_dtype", dict(cache_dtype="fp4")),
    ("page_size", dict(page_size=16)),
    ("page_size", dict(page_size=0)),
    ("scale_layout", dict(scale_layout="blocked")),
    ("heads", dict(heads=48)),
    ("head_dim", dict(head_dim=256)),
    ("next_n", dict(next_n=0)),
    ("next_n", dict(next_n=5)),
    ("lens_mode", dict(lens_mode="3d")),
    ("q_dtype", dict(q_dtype="bf16")),  # bf16 q on an fp8 cache
    ("scale_layout", dict(q_dtype="bf16", cache_dtype="bf16")),  # bf16 cache with scales
    ("scale_layout", dict(scale_layout="none")),  # fp8 cache without scales
    ("page_size", dict(family="prefill_ragged")),  # prefill is not paged
    ("next_n", dict(family="prefill_ragged", page_size=0, next_n=2)),
    ("lens_mode", dict(family="prefill_ragged", page_size=0, lens_mode="2d")),
    ("scale_layout", dict(family="prefill_ragged", page_size=0, scale_layout="token_interleaved")),
]


@pytest.mark.parametrize("field,kwargs", INVALID_PROBLEMS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID_PROBLEMS)])
def test_invalid_problem_fields_raise_naming_the_field(field, kwargs):
    with pytest.raises(ValueError, match=field):
        Problem(**kwargs)


INVALID_CONFIGS = [
    ("block_t", dict(block_t=0)),
    ("block_t", dict(block_t=-64)),
    ("block_t", dict(block_t=64.0)),
    ("block_t", dict(block_t=True)),
    ("tiles_per_program", dict(tiles_per_program=0)),
    ("num_warps", dict(num_warps="4")),
    ("num_stages", dict(num_stages=-1)),
    ("block_m", dict(block_m=0)),
    ("dot_dtype", dict(dot_dtype="fp64")),
    ("orient", dict(orient="k_cols")),
    ("programs_per_sm", dict(programs_per_sm=-1)),
    ("programs_per_sm", dict(programs_per_sm=1.0)),
    ("store", dict(store="never")),
]


@pytest.mark.parametrize("field,kwargs", INVALID_CONFIGS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID_CONFIGS)])
def test_invalid_config_fields_raise_naming_the_field(field, kwargs):
    with pytest.raises(ValueError, match=f"^{field}:"):
        Config(**kwargs)


@pytest.mark.parametrize("kwargs", [dict(batch=0, context=1), dict(batch=1, context=-5), dict(batch=1.5, context=2)])
def test_invalid_bucket_raises(kwargs):
    field = "batch" if kwargs["batch"] != 1 else "context"
    with pytest.raises(ValueError, match=field):
        Bucket(**kwargs)


def test_slugs_are_readable():
    assert Problem().slug == "fp8_pg64_h64_d128_n1"
    assert Problem(scale_layout="token_interleaved", page_size=1, next_n=2, lens_mode="2d").slug == "fp8_pg1_ti_h64_d128_n2_l2d"
    assert Problem(family="prefill_ragged", page_size=0, q_dtype="bf16", cache_dtype="bf16",
                   scale_layout="none").slug == "bf16_h64_d128"
    assert Config(block_m=2, dot_dtype="fp16").slug == "bt64_tp4_w4_s2_m2_fp16"


def test_store_tile_keeps_the_json_and_keys_of_configs_from_before_the_field():
    """store='tile' (every kernel before the field existed) is left out of the canonical JSON, so
    trial keys, variant names and committed module files stay valid; 'run' is in it."""
    tile = Config(block_t=64, tiles_per_program=12, num_warps=4, num_stages=3, orient="k_rows")
    assert "store" not in tile.to_json() and tile.key == Config(**json.loads(tile.to_json())).key
    assert variant_name(Problem(), tile) == "decode_paged__fp8_pg64_h64_d128_n1__bt64_tp12_w4_s3_kr__8556176a"
    run = Config(block_t=64, tiles_per_program=12, num_warps=4, num_stages=3, orient="k_rows", store="run")
    assert '"store":"run"' in run.to_json() and Config.from_json(run.to_json()) == run
    assert run.slug == "bt64_tp12_w4_s3_kr_sr" and run.key != tile.key
