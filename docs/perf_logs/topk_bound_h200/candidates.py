"""The bound path's threshold-bin candidates, emulated on CPU (torch) over the bench's decode logits
(tuner.topk_tune.bucket_inputs: the fp8 decode logits of random inputs, here by the reference path):
per row, the keys the bound admits, the keys' threshold bin and how many keys it holds (what the
row's last program ranks, RANK_TILE at a time). Two mappings: "max" (bins 1 .. BINS-1 up to the
row's largest score: call 1's) and "tight" (2 * BINS bins up to the top of the maxima's bin holding
the ceil(k / TILE)-th largest maximum: indexer_logits._topk_bound._bound_mapping since call 3).
The margin and edges follow the kernels; float rounding aside, the counts are theirs.

    python docs/perf_logs/topk_bound_h200/candidates.py   # ~1 min on 2 cores
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch  # noqa: E402

from indexer_logits import _topk_bound as B  # noqa: E402
from tuner.topk_tune import bucket_inputs  # noqa: E402

K, BINS = 2048, 64


def _threshold(counts: torch.Tensor, need: int) -> int:
    suffix = counts.flip(0).cumsum(0).flip(0)
    return int((suffix >= need).nonzero().max())


def candidates(x: torch.Tensor, k: int, tile: int, tight: bool) -> tuple:
    nt = -(-x.numel() // tile)
    pad = torch.full((nt * tile,), float("-inf"))
    pad[:x.numel()] = x
    maxima = pad.view(nt, tile).max(1).values
    m1, top_max = maxima[torch.isfinite(maxima)].min().item(), maxima.max().item()
    w = (top_max - m1) / BINS
    counts = torch.bincount(((maxima - m1) / w).clamp(0, BINS * (1 - 2 ** -24)).floor().long(), minlength=BINS)
    t1 = _threshold(counts, k)
    a = m1 + (t1 - B.MARGIN) * w
    if tight:
        kb, top = 2 * BINS, m1 + (max(_threshold(counts, -(-k // tile)), t1) + 1) * w
        scale = (kb - 2) / (top - a)
    else:
        kb, top = BINS, m1 + BINS * w
        scale = (kb - 1) / (top - a)
    d = ((x - (a - 1 / scale)) * scale).clamp(0, kb * (1 - 2 ** -24)).floor().long()
    hist = torch.bincount(d, minlength=kb)
    hist[0] = k
    t = _threshold(hist, k)
    return int((d > 0).sum()), t, int(hist[t])


def main() -> None:
    for rows, width in ((64, 32768), (64, 131072), (1, 1 << 20)):
        logits = bucket_inputs(rows, width, "cpu")[1]
        tile = B.tile_for(width, K)
        for tight in (False, True):
            res = [candidates(logits[r].float(), K, tile, tight) for r in range(min(rows, 8))]
            print(f"{rows}x{width} tile {tile} {'tight' if tight else 'max'}: admitted "
                  f"{[r[0] for r in res]}, candidates {[r[2] for r in res]}", flush=True)


if __name__ == "__main__":
    main()
