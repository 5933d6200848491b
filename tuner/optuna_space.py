"""The search space as Optuna sees it: a family's config axes as Optuna distributions and
back (`OptunaSpace`), the samplers, and the name of a (problem, bucket) study.

A study's name comes from what makes a measurement comparable (problem, bucket, GPU, timer,
template, search space, sampler), never from a variant, so a resumed run reloads it. Two changes
keep the name: a template proven to compile to the same code as an older one
(tuner.tables.PTX_EQUIVALENT_TEMPLATES: the name takes the oldest such hash), and an axis that
only adds values to a knob every earlier trial had at one value (ADDED_AXES). Optuna itself is
imported where a space or a sampler is made (it takes a third of a second).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from indexer_logits._identity import Bucket, Config, Problem, canonical_json, sha256_hex

from .space import TIES, axes_of
from .tables import timing_hashes

SAMPLERS = ("tpe", "grid", "random")
# Axes a family gained after studies of it existed, with the value every earlier trial had (the
# one Config leaves out of keys): left out of the space's signature with their ties, so a study
# keeps its name and its history when the axis arrives; an earlier trial, which has no parameter
# for it, reads as that value (OptunaSpace.config). An axis that drops or renames a value is a
# new space: leave it out of here.
ADDED_AXES = {"head_sum": "tree", "k_load": "threads"}


def _is_pow2_run(values: Sequence) -> bool:
    if not all(isinstance(v, int) and v > 0 and v & (v - 1) == 0 for v in values):
        return False
    exps = [int(math.log2(v)) for v in values]
    return exps == list(range(exps[0], exps[0] + len(exps)))


def _is_increasing_ints(values: Sequence) -> bool:
    return (all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            and all(a < b for a, b in zip(values, values[1:])))


def _encode(enc: str, values: Sequence, value):
    """An axis value as its Optuna parameter: log2, position in the axis, or itself."""
    if enc == "log2":
        return int(math.log2(value))
    if enc == "index":
        return values.index(value)
    return value


def _decode(enc: str, values: Sequence, param):
    if enc == "log2":
        return 2 ** int(param)
    if enc == "index":
        return values[int(param)]
    return param


class OptunaSpace:
    """Config axes as Optuna distributions. Ordered axes stay ordered for TPE: powers of two
    become `log2_<axis>` integers, runs of integers become integers, other increasing integers
    (1, 2, 3, 4, 6, 8, ...) their position `idx_<axis>`; strings are categorical.
    Axes with a single value (e.g. decode's block_m, a restricted dot dtype) are fixed.

    The space is conditional where a knob is unused (TIES): a persistent grid (programs_per_sm
    > 0) has no tiles_per_program, so any proposed value maps to 1; store='run' outside the split
    grid's k_rows tiles within a page changes nothing, so it maps to 'tile'. Every such proposal
    is then a feasible config whose time TPE learns from, instead of a statically infeasible one
    told as PRUNED (which taught TPE to shun persistent grids altogether, and would teach it to
    shun block_t > page, q_rows and persistent grids for the store's sake)."""

    TIES = TIES  # tuner.space's, which tuner.space.tied applies to a whole config

    def __init__(self, problem: Problem, dot_dtypes: Sequence[str]):
        import optuna

        self.problem = problem
        axes = dict(axes_of(problem))
        axes["dot_dtype"] = tuple(dot_dtypes)
        self.axes = axes
        self.fixed = {name: values[0] for name, values in axes.items() if len(values) == 1}
        self._params: dict[str, tuple[str, str, tuple]] = {}  # param -> (axis, encoding, values)
        self.distributions: dict = {}
        for name in sorted(axes):
            values = tuple(axes[name])
            if len(values) == 1:
                continue
            if _is_pow2_run(values):
                param, enc = f"log2_{name}", "log2"
                dist = optuna.distributions.IntDistribution(int(math.log2(values[0])), int(math.log2(values[-1])))
            elif all(isinstance(v, int) for v in values) and list(values) == list(range(values[0], values[-1] + 1)):
                param, enc = name, "int"
                dist = optuna.distributions.IntDistribution(values[0], values[-1])
            elif _is_increasing_ints(values):
                # e.g. tiles per program 1, 2, 3, 4, 6, 8, 12, ...: half-octave steps, kept in order
                param, enc = f"idx_{name}", "index"
                dist = optuna.distributions.IntDistribution(0, len(values) - 1)
            else:
                param, enc = name, "cat"
                dist = optuna.distributions.CategoricalDistribution(values)
            self._params[param] = (name, enc, values)
            self.distributions[param] = dist

    @property
    def signature(self) -> str:
        return canonical_json({"axes": {k: list(v) for k, v in self.axes.items() if k not in ADDED_AXES},
                               "ties": [[axis, value, where] for axis, value, where, _ in self._ties
                                        if axis not in ADDED_AXES]})

    @property
    def _ties(self):
        """The ties of the axes this space searches (a fixed axis has nothing to tie)."""
        return [t for t in self.TIES if len(self.axes.get(t[0], ())) > 1]

    @property
    def ties_text(self) -> str:
        """The space's ties, in words (for a refused --try-config)."""
        return "; ".join(f"{axis} to {value} {where}" for axis, value, where, _ in self._ties)

    def config(self, params: dict) -> Config:
        fields = dict(self.fixed)
        for param, (name, enc, values) in self._params.items():
            if param not in params and name in ADDED_AXES:  # a trial from before the axis
                fields[name] = ADDED_AXES[name]
                continue
            fields[name] = _decode(enc, values, params[param])
        for axis, value, _, unused in self._ties:
            if unused(self.problem, fields):
                fields[axis] = value
        return Config(**fields)

    def complete(self, params: dict) -> bool:
        """Whether a trial's params name a config of this space: every parameter, or every one but
        those of ADDED_AXES (a trial from before the axis, which `config` reads at its old value)."""
        missing = set(self.distributions) - set(params)
        return not set(params) - set(self.distributions) and all(self._params[m][0] in ADDED_AXES for m in missing)

    def params_of(self, config: Config) -> Optional[dict]:
        """Optuna params for a config, or None when the config lies outside this space."""
        if any(getattr(config, name) != value for name, value in self.fixed.items()):
            return None
        params = {}
        for param, (name, enc, values) in self._params.items():
            value = getattr(config, name)
            if value not in values:
                return None
            params[param] = _encode(enc, values, value)
        return params

    def grid(self) -> dict[str, list]:
        out = {}
        for param, (_, enc, values) in self._params.items():
            out[param] = [_encode(enc, values, v) for v in values]
        return out


# --------------------------------------------------------------------------------------------
# Studies and samplers.

def study_name(problem: Problem, bucket: Bucket, gpu_slug: str, timer: str, template_hash: str,
               space: OptunaSpace, sampler: str) -> str:
    template = timing_hashes(template_hash)[-1]  # the oldest template compiling to the same code
    digest = sha256_hex(canonical_json({"problem": problem.key, "bucket": bucket.key, "gpu": gpu_slug, "timer": timer,
                                        "template": template, "space": space.signature, "sampler": sampler}))[:10]
    return f"{problem.family}__{problem.slug}__{bucket.slug}__{gpu_slug}__{timer}__{sampler}__{digest}"


def make_sampler(name: str, space: OptunaSpace, seed: int, trials: int):
    import optuna

    if name == "tpe":
        # Few startup trials: budgets here are tens of trials per bucket, and the seeds (the
        # default, the neighbour's winner) already give TPE good points to start from.
        return optuna.samplers.TPESampler(multivariate=True, seed=seed, n_startup_trials=max(3, min(10, trials // 3)))
    if name == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"sampler: expected one of {list(SAMPLERS)}, got {name!r}")
