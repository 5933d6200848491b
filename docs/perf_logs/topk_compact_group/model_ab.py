"""The compaction's group by the model (COMPACT_GROUP None: _topk_bound.group_for, by the admitted keys a group
reads; where a table entry does not name a group) against a program a count program (1, as before): decode logits
+ top-k in CUDA graphs of 4 calls and the ragged prefill top-k eagerly, alternated in one process with the logits
alone, every variant's answer checked first (topk_trigger/trigger_ab.py's cases, alternation and checks).

    python3 docs/perf_logs/topk_compact_group/model_ab.py [--rounds 3] [--out FILE]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its cases, its alternation and checks)
from indexer_logits import _topk_bound as B  # noqa: E402

T.BINS_128 = False
T.VARIANTS[:] = [("served (the model's group)", {}), ("group 1", {(B, "COMPACT_GROUP"): 1})]
T.EXTRA_BOUND[:] = []

if __name__ == "__main__":
    sys.exit(T.main())
