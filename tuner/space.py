"""The search space of each kernel family, with the static constraints that make a point
infeasible before anything compiles (divisibility, tile sizes, a shared-memory and register
estimate against the target's limits)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

from indexer_logits._identity import Config, Problem

from .families import family_of


class InfeasibleConfig(ValueError):
    """A (problem, config) point that cannot be built; `reason` is a short machine-readable tag."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Target:
    """What a GPU generation allows a program to use."""

    name: str
    capability: int  # e.g. 90, 120
    max_shared_bytes: int
    warp_size: int = 32

    @property
    def arch(self) -> str:
        return f"sm_{self.capability}"


TARGETS = {
    "sm_80": Target("sm_80", 80, 166_912),
    "sm_89": Target("sm_89", 89, 101_376),
    "sm_90": Target("sm_90", 90, 232_448),
    "sm_100": Target("sm_100", 100, 232_448),
    "sm_120": Target("sm_120", 120, 101_376),
}


def target_for(name_or_cc) -> Target:
    key = name_or_cc if isinstance(name_or_cc, str) else f"sm_{name_or_cc}"
    if key.isdigit():
        key = f"sm_{key}"
    if key not in TARGETS:
        raise ValueError(f"target: expected one of {sorted(TARGETS)}, got {name_or_cc!r}")
    return TARGETS[key]


# The dtypes the tuner searches on a GPU; the others exist for the CPU interpreter.
TUNED_DOT_DTYPES = ("native",)
MAX_ACC_REGS_PER_THREAD = 128  # fp32 dot accumulator registers; more spills on every target
MAX_CHUNK = 16384  # tokens one program may own; keeps the grid's second dim far below 65535 for 1M


STORE_RUN_SCOPE = "the split grid's k_rows tiles inside one page (orient k_rows, programs_per_sm 0, block_t <= page)"
# head_sum 'chain' rewrites the k_rows epilogue only (q_rows sums across warps, where a thread holds
# one head per output and there is nothing to chain): elsewhere the template sums as 'tree'.
HEAD_SUM_SCOPE = "orient k_rows"
# k_load 'tma' loads ragged K's tiles by bulk tensor copies: the paged families choose their
# cache loads from the layout (tuner/families), so elsewhere the knob stays 'threads'.
K_LOAD_SCOPE = "prefill_ragged"


def store_run_applies(page_size: int, orient: str, programs_per_sm: int, block_t: int) -> bool:
    """Whether store='run' changes the kernel: only the split grid's k_rows tiles within one page
    keep a run of logits per program; elsewhere the template stores per tile whatever it says."""
    return orient == "k_rows" and programs_per_sm == 0 and block_t <= page_size


def default_config(problem: Problem, dot_dtype: str = "native") -> Config:
    """The family default: what runs where nothing was tuned (tuner/families/<family>.py). It
    fits every target's limits."""
    return family_of(problem).default_config(problem, dot_dtype)


def axes_of(problem: Problem) -> dict[str, tuple]:
    """The values each knob may take for the problem's family."""
    return family_of(problem).axes


def _dot_bytes(problem: Problem, config: Config) -> int:
    if config.dot_dtype == "native":
        return 1 if problem.cache_dtype == "fp8" else 2
    return {"fp16": 2, "bf16": 2, "fp32": 4}[config.dot_dtype]


def estimate_shared_bytes(problem: Problem, config: Config) -> int:
    """Shared memory a Triton pipeline of this config needs, roughly: the dot's two operands
    (the query tile once, the key tile once per pipeline stage) plus the reduction scratch."""
    rows = family_of(problem).dot_rows(problem, config)
    elem = _dot_bytes(problem, config)
    stages = max(config.num_stages - 1, 1)
    return rows * problem.head_dim * elem + stages * config.block_t * problem.head_dim * elem


def check(problem: Problem, config: Config, target: Target | None = None) -> None:
    """Raise InfeasibleConfig if the point is outside the space or cannot fit the target."""
    axes = axes_of(problem)
    for name, allowed in axes.items():
        value = getattr(config, name)
        if value not in allowed:
            raise InfeasibleConfig("outside_space", f"{name}={value!r} not in {list(allowed)} for {problem.family}")
    rows = family_of(problem).dot_rows(problem, config)
    if rows < 16:
        raise InfeasibleConfig("dot_too_small", f"{rows} query rows per dot; tl.dot needs >= 16")
    if rows & (rows - 1):
        raise InfeasibleConfig("not_pow2", f"{rows} query rows per dot must be a power of two (next_n={problem.next_n})")
    if problem.is_paged and config.block_t < problem.page_size and problem.page_size % config.block_t:
        raise InfeasibleConfig("page_split", f"block_t={config.block_t} does not divide page {problem.page_size}")
    if problem.is_paged and config.block_t > problem.page_size and config.block_t % problem.page_size:
        raise InfeasibleConfig("page_span", f"block_t={config.block_t} is not a multiple of page {problem.page_size}")
    if config.programs_per_sm and config.tiles_per_program != 1:
        raise InfeasibleConfig("unused_knob", "a persistent grid (programs_per_sm > 0) takes tiles_per_program=1")
    if config.store == "run" and not store_run_applies(problem.page_size, config.orient, config.programs_per_sm,
                                                       config.block_t):
        raise InfeasibleConfig("unused_knob", f"store='run' is for {STORE_RUN_SCOPE}")
    if config.head_sum == "chain" and config.orient != "k_rows":
        raise InfeasibleConfig("unused_knob", f"head_sum='chain' is for {HEAD_SUM_SCOPE}")
    if config.k_load != "threads" and "k_load" not in axes:
        raise InfeasibleConfig("unused_knob", f"k_load={config.k_load!r} is for {K_LOAD_SCOPE}")
    if config.block_t * config.tiles_per_program > MAX_CHUNK:
        raise InfeasibleConfig("chunk_too_large", f"{config.block_t * config.tiles_per_program} > {MAX_CHUNK} tokens per program")
    acc = rows * config.block_t // (32 * config.num_warps)
    if acc > MAX_ACC_REGS_PER_THREAD:
        raise InfeasibleConfig("registers", f"accumulator needs {acc} fp32 registers per thread (> {MAX_ACC_REGS_PER_THREAD})")
    if target is not None:
        smem = estimate_shared_bytes(problem, config)
        if smem > target.max_shared_bytes:
            raise InfeasibleConfig("shared_memory", f"~{smem} bytes > {target.max_shared_bytes} on {target.name}")


def is_feasible(problem: Problem, config: Config, target: Target | None = None) -> bool:
    try:
        check(problem, config, target)
        return True
    except InfeasibleConfig:
        return False


def grid_points(problem: Problem, dot_dtypes: Sequence[str] = TUNED_DOT_DTYPES) -> Iterator[Config]:
    """Every point of the family's space (feasible or not), in a fixed order."""
    axes = dict(axes_of(problem))
    axes["dot_dtype"] = tuple(dot_dtypes)
    names = sorted(axes)
    for values in itertools.product(*(axes[n] for n in names)):
        yield Config(**dict(zip(names, values)))


def feasible_points(problem: Problem, target: Target | None = None,
                    dot_dtypes: Sequence[str] = TUNED_DOT_DTYPES) -> list[Config]:
    return [c for c in grid_points(problem, dot_dtypes) if is_feasible(problem, c, target)]


def sample_points(problem: Problem, count: int, target: Target | None = None, seed: int = 0,
                  dot_dtypes: Sequence[str] = TUNED_DOT_DTYPES) -> list[Config]:
    """A reproducible sample of feasible points, always including the family default."""
    points = feasible_points(problem, target, dot_dtypes)
    default = default_config(problem, dot_dtypes[0])
    rng = random.Random(seed)
    rest = [c for c in points if c != default]
    chosen = rng.sample(rest, min(max(count - 1, 0), len(rest)))
    return ([default] if default in points else []) + chosen


# Knobs a config leaves unused, and the value the template reads them as there: (axis, that
# value, where that is in words, the test of it on the config's fields). The Optuna space maps a
# proposal through them (tuner.optuna_space), the local search its neighbours (`tied`).
TIES = (
    ("tiles_per_program", 1, "when programs_per_sm is set",
     lambda problem, f: bool(f["programs_per_sm"])),
    ("store", "tile", "outside " + STORE_RUN_SCOPE,
     lambda problem, f: not store_run_applies(problem.page_size, f["orient"], f["programs_per_sm"], f["block_t"])),
    ("head_sum", "tree", "outside " + HEAD_SUM_SCOPE, lambda problem, f: f["orient"] != "k_rows"),
    ("k_load", "threads", "outside " + K_LOAD_SCOPE, lambda problem, f: "k_load" not in axes_of(problem)),
)


def tied(problem: Problem, config: Config) -> Config:
    """The config with its unused knobs at the value the template reads them as (TIES): a
    persistent grid walks one tile a step, and store='run' outside its scope stores per tile."""
    fields = dataclasses.asdict(config)
    for axis, value, _, unused in TIES:  # in order, as the Optuna space applies them
        if unused(problem, fields):
            fields[axis] = value
    return config if fields == dataclasses.asdict(config) else Config(**fields)


def neighbours(problem: Problem, config: Config, target: Target | None = None,
               dot_dtypes: Sequence[str] = TUNED_DOT_DTYPES) -> list[Config]:
    """The feasible configs one step from `config` along one axis: the next value either side on
    an ordered (integer) axis, every other value of an unordered one; unused knobs tied
    (`tied`). The tuner's local search measures a bucket's best config's neighbours: the H200's
    winners of adjacent buckets differ from each other, and from the model's first choice, mostly
    by one step of tiles per program, stages, warps or the store (docs/PERF.md)."""
    axes = dict(axes_of(problem))
    axes["dot_dtype"] = tuple(dot_dtypes)
    out: list[Config] = []
    for name in sorted(axes):
        values = tuple(axes[name])
        value = getattr(config, name)
        if len(values) < 2 or value not in values:
            continue
        i = values.index(value)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            steps = [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
        else:
            steps = [v for v in values if v != value]
        for step in steps:
            candidate = tied(problem, replace(config, **{name: step}))
            if candidate != config and candidate not in out and is_feasible(problem, candidate, target):
                out.append(candidate)
    return out
