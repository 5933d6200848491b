"""A captured decode top-k's workspace fill: one a call (KEEP_CAPTURED off: each captured call makes a fresh
torch.zeros workspace, a fill node before its logits), one a capture (served: the capture's first call makes it, the
others take it), and none (a probe's upper bound, not a serving form: a workspace zeroed eagerly before the capture,
the store keyed without the stream, so the graph's warm-up on its own stream leaves one for the capture to take; it
would be shared between the graph's replays and eager calls on other streams were it served). Decode logits + top-k
in CUDA graphs of 4 calls, alternated in one process with the logits alone, every variant's answer checked first
(topk_trigger/trigger_ab.py's cases and checks).

    python3 docs/perf_logs/topk_nofill/nofill_ab.py [--rounds 4] --skip-prefill [--out FILE]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_workspace as W  # noqa: E402


def _one_key(device):
    """Every stream's calls, captured ones included, share one kept workspace (probe only)."""
    return (device.index, "probe")


T.BINS_128 = False
T.VARIANTS[:] = [("a fill a call", {(W, "KEEP_CAPTURED"): False}), ("a fill a capture", {}),
                 ("no fill (probe)", {(W, "_stream_key"): _one_key})]
T.EXTRA_BOUND[:] = []

if __name__ == "__main__":
    sys.exit(T.main())
