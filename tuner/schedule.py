"""The order a run tunes its buckets in, and how a time budget is shared between them and
turned into an ETA."""

from __future__ import annotations

from typing import Sequence

from indexer_logits._identity import Bucket, Problem


# Tokens of key a bucket streams per launch at which one of its trials costs about twice a small
# bucket's (H200, fp8 decode: ~0.2 s a trial for small buckets, ~1.5 s at 256 x 1M).
WEIGHT_TOKENS = 48 << 20


def bucket_weight(problem: Problem, bucket: Bucket) -> float:
    """Relative cost of one trial in this bucket, for sharing a time budget: a fixed part
    (build, gates, graph capture) plus one that grows with the keys scored per launch. Equal
    shares starved the largest buckets, which come last (the 256 x 1M bucket got no trial)."""
    rows = problem.next_n if problem.is_decode else 1
    return 1.0 + bucket.batch * bucket.context * rows / WEIGHT_TOKENS


def tuning_order(plan: Sequence[tuple[Problem, Sequence[Bucket]]]) -> list[tuple[Problem, Bucket]]:
    """Smallest buckets first, the problems interleaved: time the cheap buckets leave over rolls
    on to the expensive ones (1M tokens x 256 requests), and a budget cut hits every problem's
    largest buckets alike rather than the whole of the last problem."""
    order = sorted(((b.context * b.batch, b.context, b.batch, i, p, b) for i, (p, buckets) in enumerate(plan)
                    for b in buckets), key=lambda item: item[:4])
    return [(p, b) for *_, p, b in order]


def eta_s(elapsed_s: float, weights: Sequence[float], done: int, budget_left_s: float | None) -> float | None:
    """Seconds the run has left: the buckets still to do at the time per unit of bucket_weight the
    done ones took (the large buckets come last and cost more), at most the budget left; None
    before the first bucket is done (unless the budget says)."""
    if done == 0 or elapsed_s <= 0:
        return budget_left_s
    left = elapsed_s / sum(weights[:done]) * sum(weights[done:])
    return left if budget_left_s is None else min(left, max(0.0, budget_left_s))
