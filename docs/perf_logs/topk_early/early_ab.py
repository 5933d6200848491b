"""The bound path's count and compaction with their independent loads first (COUNT_EARLY: the mapping's loads and
scans and the first step's keys before the window's test; COMPACT_EARLY: the segment's count, first positions and
their scores before the row's state and threshold) against as served, end to end: decode logits + top-k in CUDA
graphs of 4 calls and the ragged prefill top-k eagerly, alternated in one process with the logits alone, every
variant's answer checked first (topk_trigger/trigger_ab.py's cases, alternation and checks). A variant sets the
module values, which no table entry names, so it reaches every bound call (decode and prefill blocks alike); where
another path serves (128 x 8K and 64 x 8K, row) it is the served call again, a control. The row path's row held in
registers (HOLD) likewise: a variant where row serves, a control elsewhere.

    python3 docs/perf_logs/topk_early/early_ab.py [--after] [--rounds 4] [--skip-prefill] [--out FILE]

Call 1 ran it as the settings were first built (all three off by default: the variants turn each on); with
--after (call 2, the defaults since: the early loads for decode calls, HOLD on) each variant turns one off, or
the early loads on for prefill blocks too.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_bound as B, _topk_row as R  # noqa: E402

T.BINS_128 = False
T.DECODE = T.DECODE + ((64, 8192),)
BEFORE = [("served", {}),
                 ("count early", {(B, "COUNT_EARLY"): True}),
                 ("compaction early", {(B, "COMPACT_EARLY"): True}),
                 ("both early", {(B, "COUNT_EARLY"): True, (B, "COMPACT_EARLY"): True}),
                 ("row held", {(R, "HOLD"): True})]
# call 2, after the defaults became COUNT_EARLY / COMPACT_EARLY None (decode only) and HOLD on: each against off
AFTER = [("served", {}),
         ("early off", {(B, "COUNT_EARLY"): False, (B, "COMPACT_EARLY"): False}),
         ("held off", {(R, "HOLD"): False}),
         ("early on for prefill too", {(B, "COUNT_EARLY"): True, (B, "COMPACT_EARLY"): True})]
T.VARIANTS[:] = AFTER if "--after" in sys.argv else BEFORE
if "--after" in sys.argv:
    sys.argv.remove("--after")

if __name__ == "__main__":
    sys.exit(T.main())
