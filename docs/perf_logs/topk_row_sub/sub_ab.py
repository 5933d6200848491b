"""The row path's candidates ranked by a second histogram (indexer_logits._topk_row.SUB, on from this experiment)
against the one descending tl.sort of CAP it replaces (SUB 0), end to end: decode logits + top-k in CUDA graphs of
4 calls, alternated in one process with the logits alone, every variant's answer checked first against a stable
sort (topk_trigger/trigger_ab.py's decode case, alternation and checks). Where another path serves, both variants
are the same call, a control.

    python3 docs/perf_logs/topk_row_sub/sub_ab.py [--rounds 5] [--out FILE]

(It ran at commit 4074031, where _topk_row had SUB; the second histogram was reverted after it.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode cases' alternation and checks)
from indexer_logits import _topk_row as R  # noqa: E402

T.BINS_128 = False
T.DECODE = ((128, 8192), (64, 8192), (64, 32768))
T.VARIANTS[:] = [("sub-bins", {}), ("sorted", {(R, "SUB"): 0}), ("sub-bins 32", {(R, "SUB"): 32})]

if __name__ == "__main__":
    sys.argv.append("--skip-prefill")  # (no prefill block is the row path's)
    sys.exit(T.main())
