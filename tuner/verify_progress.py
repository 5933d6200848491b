"""Progress of a `verify` run: a cost per planned check, so that the ETA weighs a check at
256 x 1M (tens of GB of inputs to build) above one at 1 x 4K, the time elapsed, and the ETA.

The costs are seconds on one H200, from its runs: the capped gates of an entry (reference, graph
replay, poisoned table, PDL) took 81 s for 108 entries (docs/perf_logs/h200_meta_l2); a bucket
check is dominated by building its inputs (random K quantised into the pool, tens of bytes of
memory traffic per pool byte) and its few sampled reference rows. After the first checks the
ETA scales the remaining cost by the time the done ones really took.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from indexer_logits._identity import Problem

from .verify_bucket import GENERATION_BYTES, needed_bytes

GATE_SECONDS = 0.8  # one entry's capped gates, compile included
POOL_SECONDS = 2.0  # one module on the large pool: a memset, small inputs, the full reference, maybe a compile
BYTES_PER_SECOND = 20e9  # of a bucket check's estimated memory (the pool dominates; ~40 bytes of traffic per pool byte at ~1 TB/s, conservatively)
CPU_SLOWDOWN = 2.0  # under the interpreter, at its small shapes; only the ratio between checks matters much


def plan_cost(problem: Problem, what: str, shape: Optional[tuple[int, int]], on_gpu: bool = True) -> float:
    """Estimated seconds of one planned check (shape: the bucket check's, None when there is none)."""
    if what == "pool":
        cost = POOL_SECONDS
    else:
        cost = GATE_SECONDS
        if shape is not None:
            cost += max(0, needed_bytes(problem, shape) - GENERATION_BYTES) / BYTES_PER_SECOND
    return cost if on_gpu else cost * CPU_SLOWDOWN


def seconds_text(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.costs: list[float] = []
        self.done_cost = 0.0
        self.started = 0.0

    def start(self, costs: Sequence[float]) -> None:
        self.costs = list(costs)
        self.done_cost = 0.0
        self.started = self.clock()

    @property
    def estimate(self) -> float:
        """The whole plan's estimated seconds, before anything ran."""
        return sum(self.costs)

    def done(self, index: int) -> None:
        self.done_cost += self.costs[index]

    def elapsed(self) -> float:
        return self.clock() - self.started

    def eta(self) -> float:
        remaining = self.estimate - self.done_cost
        if self.done_cost <= 0:
            return remaining
        return self.elapsed() / self.done_cost * remaining

    def text(self) -> str:
        return f"{seconds_text(self.elapsed())} elapsed, ETA {seconds_text(self.eta())}"
