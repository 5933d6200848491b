"""The bound path's keys' count in other forms against the count as served (a block-wide prefix sum a step, or
rows of 32 keys where the table or lanes_for says): claiming its segment slots from a counter (call 1,
COUNT_BALLOT: a warp's admitted keys of a register take one atomic, no prefix sum, no barrier in the loop);
its prefix sum's atomics and stores by inline PTX (call 2, COUNT_INLINE: off by default then, as served now,
against off); the compaction's too (call 3, COMPACT_INLINE), end to end: decode
logits + top-k in CUDA graphs of 4 calls and the ragged prefill top-k eagerly, alternated in one process with
the logits alone, every variant's answer checked first (topk_trigger/trigger_ab.py's cases and checks).

    python3 docs/perf_logs/topk_ballot/ballot_ab.py [--call1 | --call2 | --call3] [--rounds 4] [--skip-prefill]
        [--out FILE]

(--call1: call 1's variants, the claimed slots; --call2 (the default): the count's inline atomics; --call3: the
compaction's.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_bound as B  # noqa: E402

T.BINS_128 = False
CALL1 = [("served", {}), ("claimed", {(B, "COUNT_BALLOT"): True}),
         ("claimed, 1024 a step", {(B, "COUNT_BALLOT"): True, (B, "COUNT_STEP"): 1024}),
         ("claimed, ahead", {(B, "COUNT_BALLOT"): True, (B, "COUNT_PREFETCH"): True})]
# call 2: the prefix sum's atomics and stores inline, beside 16 programs an SM; the call also timed columns
# (COUNT_COLUMNS, at the served programs an SM and at 16), refuted and reverted: it ran at commit 7a99330,
# where this list held ("columns", {(B, "COUNT_COLUMNS"): True}) and CALL2_BOUND ("columns, 16 an SM",
# {"PROGRAMS_PER_SM": 16, "COUNT_COLUMNS": True})
CALL2 = [("served", {}), ("not inline", {(B, "COUNT_INLINE"): False})]
CALL2_BOUND = [("16 an SM", {"PROGRAMS_PER_SM": 16})]
# call 3: the compaction's atomics and stores inline (COMPACT_INLINE, on by default from call 3) against off
CALL3 = [("served", {}), ("compaction not inline", {(B, "COMPACT_INLINE"): False})]

if __name__ == "__main__":
    call = next((a for a in sys.argv if a in ("--call1", "--call2", "--call3")), "--call2")
    # (trigger_ab's own arguments read the rest)
    sys.argv = [a for a in sys.argv if a not in ("--against-off", "--call1", "--call2", "--call3")]
    T.VARIANTS[:] = {"--call1": CALL1, "--call2": CALL2, "--call3": CALL3}[call]
    T.EXTRA_BOUND[:] = CALL2_BOUND if call == "--call2" else []
    sys.exit(T.main())
