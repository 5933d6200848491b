"""The bound path's served settings against the same at 256 bins (its maxima's round 256 bins, its keys' one
histogram 512), in each count form, end to end: decode logits + top-k in CUDA graphs of 4 calls and the ragged
prefill top-k eagerly, alternated in one process with the logits alone, every variant's answer checked first
(topk_trigger/trigger_ab.py's cases, alternation and checks). A variant rewrites the GPU's table entry where
bound serves (decode and prefill blocks alike: _topk_select._tuned_entry); where another path serves (128 x 8K,
row) it is the served call again, a control.

    python3 docs/perf_logs/topk_bins256/bins_ab.py [--rounds 4] [--skip-prefill] [--out FILE]

(It ran at commit 210d4a3, where the bound path allowed 256 bins; 256 was reverted after it.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_trigger"))

import trigger_ab as T  # noqa: E402 (its decode and prefill cases, its alternation and checks)
from indexer_logits import _topk_select as S  # noqa: E402

SERVED_ENTRY = S._tuned_entry


def entry_with(**over):
    """_tuned_entry, its bound entries' settings rewritten by `over` (other paths' entries as they are)."""
    def entry(rows, width, device, kind=None):
        e = SERVED_ENTRY(rows, width, device, kind)
        if e is None or e["path"] != "bound":
            return e
        return dict(e, settings=dict(e["settings"] or {}, **over))
    return entry


T.BINS_128 = False
T.VARIANTS[:] = [("served", {}),
                 ("bins 256", {(S, "_tuned_entry"): entry_with(BINS=256)}),
                 ("bins 256, rows of 32", {(S, "_tuned_entry"): entry_with(BINS=256, COUNT_LANES=True,
                                                                          COUNT_BALLOT=False)}),
                 ("bins 256, claimed", {(S, "_tuned_entry"): entry_with(BINS=256, COUNT_BALLOT=True,
                                                                       COUNT_LANES=False)})]

if __name__ == "__main__":
    sys.exit(T.main())
