"""A captured decode top-k's workspace zeroed by a kernel of its own launched as a programmatic dependent
(_topk_workspace.ZERO_BY_PDL) against torch.zeros' fill, end to end: decode logits + top-k in CUDA graphs of 4 calls,
alternated in one process with the logits alone, every variant's answer checked first (topk_trigger/trigger_ab.py's
cases and checks).

    python3 docs/perf_logs/topk_gaps/zero_ab.py [--rounds 4] --skip-prefill [--out FILE]

(Call 3 ran it at commit 58cc7bd; ZERO_BY_PDL was reverted after, so it runs only with that commit checked out.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_workspace as W  # noqa: E402

if not hasattr(W, "ZERO_BY_PDL"):
    raise SystemExit("zero_ab: _topk_workspace.ZERO_BY_PDL was reverted after call 3 (commit 58cc7bd ran this); "
                     "check that commit out to run it")
T.BINS_128 = False
T.VARIANTS[:] = [("torch.zeros", {(W, "ZERO_BY_PDL"): False}), ("zero kernel", {(W, "ZERO_BY_PDL"): True})]
T.EXTRA_BOUND[:] = []

if __name__ == "__main__":
    sys.exit(T.main())
