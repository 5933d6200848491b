"""A top-k call's own buffers (the workspace, the logits or their scratch, the tile maxima, the
selection's plans' buffers) reserved one by one and allocated together (indexer_logits._topk_arena),
the selection's plans made before the call's first logits launch so that the one allocation holds
theirs too (_topk_select.SelectionPlan, plan_selection(alloc=)).

Why: on an H100 host a torch.empty of a CUDA tensor cost 5-8 us of host time and the workspace's
torch.zeros 15-21, together 25-40 us of a one-block eager top-k call's 85-147
(docs/perf_logs/topk_eager_host, call 1). Measured with it: docs/PERF.md, "Top-k: one allocation a call".
"""

from __future__ import annotations

import torch

from . import _topk_select
from ._topk_arena import Arena, bind

# Whether a call's buffers come from one allocation where the kernels serve (off: a torch.empty each, the
# workspace zeroed by its own fill as before; the selection's plans then made at their first block).
ONE_ALLOCATION = True


def call_buffers(device, on_device: bool):
    """(new, arena): new(shape, dtype) reserves a buffer of the call in its one Arena (ONE_ALLOCATION, kernels
    serving the call: `on_device`), else returns a torch.empty of its own; arena is that Arena, or None."""
    if ONE_ALLOCATION and on_device:
        arena = Arena(device)
        return arena, arena
    return (lambda shape, dtype: torch.empty(shape, dtype=dtype, device=device)), None


def plans_before(arena: Arena, counts, width: int, k: int, window: int, device, kind: str, given: bool,
                 next_n: int = 1) -> dict:
    """select_rows' plans (its `plans`, by its memo) for blocks of each row count in `counts`, their buffers
    reserved in `arena`. A block whose logits kernel did not write the tile maxima where `given` (its module
    cannot) finds no plan here and select_rows makes it one of its own."""
    return {(n, width, True if given else None, device): _topk_select.plan_selection(
        n, width, k, window, device, next_n=next_n, kind=kind, maxima_given=given, range_given=given, alloc=arena)
        for n in dict.fromkeys(counts) if n > 0}


def carve(arena, ws, *held) -> tuple:
    """(ws, *held) with each buffer `arena` reserved as its view (held: buffers, tuples of them, plans dicts,
    as given where arena is None), after the one allocation; the workspace `ws` zeroed (by one fill, before
    any launch of the call: the selection's kernels then follow the logits kernel back to back)."""
    views = arena.carve() if arena is not None else None
    if views is not None:
        ws = bind(ws, views)
        for h in held:
            for plan in (h.values() if isinstance(h, dict) else ()):
                plan.bind(views)
        held = tuple(h if isinstance(h, dict) else bind(h, views) for h in held)
    if ws is not None:
        ws.zero_()
    return (ws, *held)
