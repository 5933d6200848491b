"""No GPU: the decode model's time against what calls 1, 4 and 5 timed on the H100 (bench.predicted's
logs, both columns: the family default and the predicted config of each bucket), grouped by the
config's shape: measured / predicted (full lengths, tuner.model.decode_breakdown with each variant's
cross-compiled resources from db/xcompile_cache.jsonl).

    python docs/perf_logs/h100_predicted/model_error.py > docs/perf_logs/h100_predicted/model_error.log
"""

import math
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from indexer_logits._identity import Config, Problem  # noqa: E402
from tuner import model  # noqa: E402
from tuner.devices import device  # noqa: E402
from tuner.predict import CompileCache  # noqa: E402

LOGS = (("call1_predicted_vs_defaults.log", "fp8", 1), ("call4_predicted_vs_defaults_n2.log", "fp8", 2),
        ("call5_predicted_vs_defaults_bf16_n1.log", "bf16", 1), ("call5_predicted_vs_defaults_bf16_n2.log", "bf16", 2))
ROW = re.compile(r"\s*\d\s+(\d+)x(\d+)\s+(\S+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s*$")


def config(slug: str) -> Config:
    m = re.match(r"bt(\d+)_tp(\d+)_w(\d+)_s(\d+)_kr(_sr)?$", slug)
    return Config(block_t=int(m[1]), tiles_per_program=int(m[2]), num_warps=int(m[3]), num_stages=int(m[4]),
                  block_m=1, dot_dtype="native", orient="k_rows", store="run" if m[5] else "tile")


def main() -> None:
    dev, cache = device("h100_sxm"), CompileCache(HERE.parents[2] / "db" / "xcompile_cache.jsonl")
    groups = defaultdict(list)
    for name, dtype, next_n in LOGS:
        problem = Problem("decode_paged", dtype, dtype, 64, "page_blocked" if dtype == "fp8" else "none", 64, 128,
                          next_n, "1d")
        seen = set()
        for line in (HERE / name).read_text().splitlines():
            m = ROW.match(line)
            if not m or (m[1], m[2]) in seen:  # (each bucket's row is printed twice: as timed, then in the report)
                continue
            seen.add((m[1], m[2]))
            batch, context, default_us = int(m[1]), int(m[2]), float(m[4])
            for slug, us in ((m[3], default_us), (m[5], default_us * float(m[6]))):
                c = config(slug)
                r = cache.get(CompileCache.key(problem, c, dev))
                res = model.Resources(r.registers, r.shared_bytes, r.mma) if r and r.ok else \
                    model.estimate_resources(problem, c, dev)
                shape = "bt128 (2 pages a tile)" if c.block_t == 128 else ("1 tile a program" if
                                                                           c.tiles_per_program == 1 else "bt64, 2+ tiles")
                groups[(dtype, next_n, shape)].append(us / model.decode_breakdown(dev, problem, c, res, batch,
                                                                                  context).total_us)
    print(f"{'dtype':5s} {'n':>2s} {'shape':24s} {'points':>6s} {'measured / predicted':>21s} {'range':>12s}")
    for (dtype, next_n, shape), v in sorted(groups.items()):
        geo = math.exp(sum(map(math.log, v)) / len(v))
        print(f"{dtype:5s} {next_n:2d} {shape:24s} {len(v):6d} {geo:21.3f} {min(v):6.2f}-{max(v):.2f}")


if __name__ == "__main__":
    main()
