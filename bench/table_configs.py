"""The distinct configs a committed dispatch table uses, most used first: the seeds of a re-tune
after a template change, so every bucket tries every config that won some bucket before TPE
proposes anything. One JSON per line, or (--format args) as `--try-config JSON` arguments for
`cli.py tune`, shell-quoted:

    python3 -m bench.host "tune-decode-fp8-n1 $(python3 -m bench.table_configs nvidia_h200 --format args)"

(`tune --seed-table SLUG` seeds each bucket with its own shipped config only.)

Usage: python3 -m bench.table_configs SLUG [--family decode_paged] [--dtype fp8] [--stores tile,run]
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
from pathlib import Path

SEED_FIELDS = ("block_t", "tiles_per_program", "num_warps", "num_stages", "orient", "block_m", "programs_per_sm",
               "store", "head_sum", "k_load")


def table_configs(table: dict, family: str, dtype: str) -> list[tuple[dict, set]]:
    """(config, the page sizes of the problems it serves), most used first."""
    counts: collections.Counter = collections.Counter()
    pages: dict = collections.defaultdict(set)
    for entry in table["entries"]:
        problem = entry["problem"]
        if problem["family"] != family or problem["cache_dtype"] != dtype:
            continue
        config = table["modules"][entry["variant"]]["config"]
        key = json.dumps({k: config[k] for k in SEED_FIELDS if k in config})
        counts[key] += 1
        pages[key].add(problem["page_size"])
    return [(json.loads(c), pages[c]) for c, _ in counts.most_common()]


def seeds(configs: list[tuple[dict, set]], stores: list[str]) -> list[dict]:
    """Each config once per store value in `stores` (default: as the table has it), in order, where
    that store applies to one of the page sizes the config serves."""
    from tuner.space import store_run_applies

    out, seen = [], set()
    for c, page_sizes in configs:
        for store in stores or [c.get("store", "tile")]:
            # the tuner's space times store='run' as 'tile' where it changes nothing, and refuses
            # such a seed: offer it only where it applies
            if store == "run" and not any(store_run_applies(p, c["orient"], c.get("programs_per_sm", 0), c["block_t"])
                                          for p in page_sizes):
                continue
            seed = {**c, "store": store}
            text = json.dumps(seed)
            if text not in seen:
                seen.add(text)
                out.append(seed)
    return out


def main(argv=None) -> int:
    from indexer_logits._dispatch import TABLES_DIR

    ap = argparse.ArgumentParser(prog="python -m bench.table_configs", description=__doc__.split("\n\n")[0])
    ap.add_argument("slug", help="the table's folder under indexer_logits/tables/ (e.g. nvidia_h200), or a "
                                 "dispatch.json")
    ap.add_argument("--family", default="decode_paged", choices=["decode_paged", "prefill_ragged", "prefill_paged"])
    ap.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    ap.add_argument("--stores", default="",
                    help="comma list of Config.store values (tile,run): each config once per value, in that order "
                         "(default: as the table has it)")
    ap.add_argument("--format", default="json", choices=["json", "args"],
                    help="json: one config a line; args: --try-config JSON ..., shell-quoted, on one line")
    args = ap.parse_args(argv)
    stores = [v.strip() for v in args.stores.split(",") if v.strip()]
    if any(v not in ("tile", "run") for v in stores):
        ap.error(f"--stores: expected values among tile, run; got {args.stores!r}")
    path = Path(args.slug) if args.slug.endswith(".json") else TABLES_DIR / args.slug / "dispatch.json"
    if not path.is_file():
        ap.error(f"slug: no table at {path}")
    configs = table_configs(json.loads(path.read_text()), args.family, args.dtype)
    if not configs:
        print(f"{path}: no {args.dtype} {args.family} entries", file=sys.stderr)
        return 1
    out = seeds(configs, stores)
    if args.format == "args":
        print(" ".join(f"--try-config {shlex.quote(json.dumps(c, separators=(',', ':')))}" for c in out))
    else:
        for c in out:
            print(json.dumps(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
