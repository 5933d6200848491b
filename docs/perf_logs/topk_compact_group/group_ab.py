"""The bound compaction's programs each reading a group of the count's programs' segments (COMPACT_GROUP 2, 4, 8)
against one each (as served): decode logits + top-k in CUDA graphs of 4 calls, alternated in one process with the
logits alone, every variant's answer checked first against a stable sort (topk_trigger/trigger_ab.py's cases,
alternation and checks; the module value, which no table entry names).

    python3 docs/perf_logs/topk_compact_group/group_ab.py [--rounds 4] --skip-prefill [--out FILE]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode cases, its alternation and checks)
from indexer_logits import _topk_bound as B  # noqa: E402

T.BINS_128 = False
T.VARIANTS[:] = [("served", {})] + [(f"group {g}", {(B, "COMPACT_GROUP"): g}) for g in (2, 4, 8)]
T.EXTRA_BOUND[:] = []

if __name__ == "__main__":
    sys.exit(T.main())
