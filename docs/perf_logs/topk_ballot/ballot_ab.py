"""The bound path's keys' count claiming its segment slots from a counter (COUNT_BALLOT: a warp's admitted
keys of a register take one atomic, no prefix sum, no barrier in the loop) against the count as served (a
block-wide prefix sum a step, or rows of 32 keys where the table or lanes_for says), end to end: decode
logits + top-k in CUDA graphs of 4 calls and the ragged prefill top-k eagerly, alternated in one process with
the logits alone, every variant's answer checked first (topk_trigger/trigger_ab.py's cases and checks).

    python3 docs/perf_logs/topk_ballot/ballot_ab.py [--rounds 4] [--skip-prefill] [--out FILE]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_bound as B  # noqa: E402

T.BINS_128 = False
T.VARIANTS[:] = [("served", {}), ("claimed", {(B, "COUNT_BALLOT"): True}),
                 ("claimed, 1024 a step", {(B, "COUNT_BALLOT"): True, (B, "COUNT_STEP"): 1024}),
                 ("claimed, ahead", {(B, "COUNT_BALLOT"): True, (B, "COUNT_PREFETCH"): True})]

if __name__ == "__main__":
    sys.argv = [a for a in sys.argv if a != "--against-off"]  # (trigger_ab's own variants: not these)
    sys.exit(T.main())
