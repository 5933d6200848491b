"""bench/table_configs.py: a table's distinct configs, most used first, the seeds of a re-tune;
store 'run' offered only where it changes the kernel; as JSON lines or as `tune --try-config`
arguments that survive the shell."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

from bench import table_configs

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args):
    return subprocess.run([sys.executable, "-m", "bench.table_configs", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_table_configs_offers_store_run_only_where_it_applies():
    proc = _tool("nvidia_h200", "--stores", "tile,run")
    assert proc.returncode == 0, proc.stderr
    seeds = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {s["store"] for s in seeds} == {"tile", "run"}
    assert len({json.dumps(s, sort_keys=True) for s in seeds}) == len(seeds)
    runs = [s for s in seeds if s["store"] == "run"]
    assert runs and all(s["block_t"] <= 64 and s["orient"] == "k_rows" and not s.get("programs_per_sm")
                        for s in runs)
    bad = _tool("nvidia_h200", "--stores", "tile,later")
    assert bad.returncode == 2 and "--stores" in bad.stderr
    missing = _tool("no_such_gpu")
    assert missing.returncode == 2 and "slug: no table at" in missing.stderr


def _table(tmp_path):
    """Three decode entries of page 64 (one config twice), one of page 128, one bf16, one prefill."""
    kr = {"block_t": 64, "tiles_per_program": 8, "num_warps": 4, "num_stages": 3, "orient": "k_rows"}
    wide = {"block_t": 128, "tiles_per_program": 4, "num_warps": 4, "num_stages": 2, "orient": "k_rows"}
    q_rows = {"block_t": 64, "tiles_per_program": 4, "num_warps": 8, "num_stages": 2, "orient": "q_rows"}
    entries, modules = [], {}
    for i, (config, page, dtype, family) in enumerate([(wide, 64, "fp8", "decode_paged"), (kr, 64, "fp8", "decode_paged"),
                                                       (kr, 64, "fp8", "decode_paged"), (q_rows, 128, "fp8", "decode_paged"),
                                                       (q_rows, 64, "bf16", "decode_paged"),
                                                       ({**kr, "block_m": 4}, 64, "fp8", "prefill_paged")]):
        variant = f"v{i}"
        entries.append({"problem": {"family": family, "cache_dtype": dtype, "page_size": page}, "variant": variant})
        modules[variant] = {"config": {**config, "dot_dtype": "native"}}
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps({"entries": entries, "modules": modules}))
    return path, kr, wide, q_rows


def test_configs_most_used_first_and_per_family_and_dtype(tmp_path):
    path, kr, wide, q_rows = _table(tmp_path)
    table = json.loads(path.read_text())
    assert table_configs.table_configs(table, "decode_paged", "fp8") == [(kr, {64}), (wide, {64}), (q_rows, {128})]
    assert table_configs.table_configs(table, "decode_paged", "bf16") == [(q_rows, {64})]
    # store run: only the k_rows config with tiles inside one page (bt64 of page 64); the rest once, as tile
    seeds = table_configs.seeds(table_configs.table_configs(table, "decode_paged", "fp8"), ["run", "tile"])
    assert seeds == [{**kr, "store": "run"}, {**kr, "store": "tile"}, {**wide, "store": "tile"},
                     {**q_rows, "store": "tile"}]
    proc = _tool(str(path), "--format", "args", "--stores", "run,tile")
    assert proc.returncode == 0, proc.stderr
    words = shlex.split(proc.stdout)
    assert words[::2] == ["--try-config"] * 4 and [json.loads(w) for w in words[1::2]] == seeds
    empty = _tool(str(path), "--family", "prefill_ragged")
    assert empty.returncode == 1 and "no fp8 prefill_ragged entries" in empty.stderr


def test_a_chained_head_sum_stays_in_the_seeds():
    """Config.head_sum is a seed field: a table's 'chain' config seeds 'chain' (the tree is left out
    of a config's dict, so its seeds stay as they were)."""
    kr = {"block_t": 64, "tiles_per_program": 8, "num_warps": 4, "num_stages": 3, "orient": "k_rows"}
    table = {"entries": [{"problem": {"family": "decode_paged", "cache_dtype": "fp8", "page_size": 64}, "variant": v}
                         for v in ("tree", "chain")],
             "modules": {"tree": {"config": kr}, "chain": {"config": {**kr, "head_sum": "chain"}}}}
    assert table_configs.table_configs(table, "decode_paged", "fp8") == [(kr, {64}), ({**kr, "head_sum": "chain"}, {64})]


def test_a_tma_key_load_stays_in_the_seeds():
    """Config.k_load is a seed field too: a table's ragged 'tma' config seeds 'tma' ('threads' is left
    out of a config's dict)."""
    kr = {"block_t": 64, "tiles_per_program": 32, "num_warps": 4, "num_stages": 3, "orient": "k_rows", "block_m": 4}
    table = {"entries": [{"problem": {"family": "prefill_ragged", "cache_dtype": "fp8", "page_size": 0}, "variant": v}
                         for v in ("threads", "tma")],
             "modules": {"threads": {"config": kr}, "tma": {"config": {**kr, "k_load": "tma"}}}}
    assert table_configs.table_configs(table, "prefill_ragged", "fp8") == [(kr, {0}), ({**kr, "k_load": "tma"}, {0})]
