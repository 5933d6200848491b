"""The bound path's count reading only the tiles whose maximum is above its bound (COUNT_SKIP) against reading
every key, end to end: decode logits + top-k in CUDA graphs of 4 calls and the ragged prefill top-k eagerly,
alternated in one process with the logits alone, every variant's answer checked first (topk_trigger/trigger_ab.py's
cases and checks): the skip off, served (COUNT_SKIP None: _topk_bound.skips_for's model), on everywhere.

    python3 docs/perf_logs/topk_gaps/skip_ab.py [--rounds 4] [--skip-prefill] [--out FILE]

(Call 1 ran it at commit 7a11e45; COUNT_SKIP was reverted after, so it runs only with that commit checked out.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_bound as B  # noqa: E402

if not hasattr(B, "COUNT_SKIP"):
    raise SystemExit("skip_ab: _topk_bound.COUNT_SKIP was reverted after call 1 (commit 7a11e45 ran this); "
                     "check that commit out to run it")
T.BINS_128 = False
T.VARIANTS[:] = [("skip off", {(B, "COUNT_SKIP"): False}), ("served", {}), ("skip on", {(B, "COUNT_SKIP"): True})]
T.EXTRA_BOUND[:] = []

if __name__ == "__main__":
    sys.exit(T.main())
