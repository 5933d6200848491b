"""The local search of a bucket's study: enqueue the untried one-step neighbours of the best
config so far (tuner.space.neighbours), the model's likeliest first (tuner.guide.Guide.order).

The H200's tuned table shows why: the winners of adjacent buckets, and the model's first choice,
differ from the best config mostly by one step of tiles per program, stages, warps or the store
(docs/PERF.md, "The tuner's search"), which TPE, sampling the whole space, rarely proposes within
a few trials. Climbing from the best measured seed reaches them in a handful.
"""

from __future__ import annotations

from typing import Sequence

from indexer_logits._identity import Bucket, Config, Problem

from .optuna_space import OptunaSpace
from .space import neighbours


def in_study(study, space: OptunaSpace) -> set:
    """Config keys the study holds in any state, enqueued (waiting) ones included."""
    keys = set()
    for t in study.get_trials(deepcopy=False):
        params = t.params if space.complete(t.params) else t.system_attrs.get("fixed_params")
        if params and space.complete(params):
            keys.add(space.config(params).key)
    return keys


def waiting(study) -> int:
    """How many enqueued trials wait to be asked."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def climb(study, space: OptunaSpace, problem: Problem, bucket: Bucket, best: Config, width: int, target=None,
          dot_dtypes: Sequence[str] = ("native",), guide=None) -> int:
    """Enqueue the untried ones among the `width` neighbours of `best` the model likes best (all
    of them in axis order without a guide: then `width` is how many a step takes); returns how
    many. 0 means the best config's neighbourhood is measured: a local optimum."""
    near = neighbours(problem, best, target, dot_dtypes)
    if guide is not None:
        near = guide.order(problem, bucket, near)[:width]
    tried = in_study(study, space)
    queued = 0
    for config in near:
        if queued == width:
            break
        params = space.params_of(config)
        if config.key in tried or params is None or space.config(params) != config:
            continue
        study.enqueue_trial(params, user_attrs={"source": f"local:{best.slug}"}, skip_if_exists=True)
        queued += 1
    return queued
