"""The bound path's keys' count filling a sub-segment a warp by votes (COUNT_VOTE: no atomic that answers, no
barrier, no shared memory in its loop) against the count as served (the table's form: a prefix sum a step with
inline atomics and stores, rows of 32 keys, or claimed slots), end to end: decode logits + top-k in CUDA graphs of
4 calls and the ragged prefill top-k eagerly, alternated in one process with the logits alone, every variant's
answer checked first (topk_trigger/trigger_ab.py's cases and checks).

    python3 docs/perf_logs/topk_vote/vote_ab.py [--call2] [--rounds 4] [--skip-prefill] [--out FILE]

(--call2: the votes off, the served default (COUNT_VOTE None: _topk_bound.votes_for's model) and the votes on
everywhere; without it, call 1's: the served count against the votes on, with the votes at 1,024 keys a step.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_bound as B  # noqa: E402

T.BINS_128 = False
T.VARIANTS[:] = [("served", {}), ("voted", {(B, "COUNT_VOTE"): True})]
# where bound serves a decode case: the votes at 1,024 keys a step (8 a thread) too
T.EXTRA_BOUND[:] = [("voted, 1024 a step", {"COUNT_VOTE": True, "COUNT_STEP": 1024})]

CALL2 = [("votes off", {(B, "COUNT_VOTE"): False}), ("served", {}), ("votes on", {(B, "COUNT_VOTE"): True})]

if __name__ == "__main__":
    if "--call2" in sys.argv:
        sys.argv.remove("--call2")
        T.VARIANTS[:] = CALL2
        T.EXTRA_BOUND[:] = []
    sys.exit(T.main())
