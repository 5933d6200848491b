"""bench.host's plan: steps parsed from the command line, into lanes (one GPU each) and phases."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from bench._host_presets import DEFAULT_LIMIT_S, PRESETS, PY

@dataclass
class Step:
    name: str  # the preset, bench.TOOL, cli-COMMAND or sh
    argv: list[str]  # with {placeholders} for what is known at run time
    limit_s: int
    kind: str = "run"
    log: str = ""  # lane dir / index_name, set by plan()


@dataclass
class Lane:
    index: int
    gpus: list[str]
    steps: list[Step] = field(default_factory=list)


def parse_step(text: str, limits: dict[str, int]) -> Step:
    """One STEP argument as a Step (ValueError naming what is wrong)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"step {text!r}: {exc}") from None
    if not words:
        raise ValueError("an empty step")
    head, rest = words[0], words[1:]
    if head in PRESETS:
        p = PRESETS[head]
        step = Step(head, [*p.argv, *rest], p.limit_s, p.kind)
    elif head.startswith("bench.") and head[6:].isidentifier():
        step = Step(head, [PY, "-m", head, *rest], DEFAULT_LIMIT_S)
    elif head == "cli" and rest:
        step = Step(f"cli-{rest[0]}", [PY, "cli.py", *rest], DEFAULT_LIMIT_S)
    elif head == "sh" and rest:
        step = Step("sh", ["bash", "-c", " ".join(rest)], DEFAULT_LIMIT_S)
    else:
        raise ValueError(f"step {text!r}: {head!r} is not a preset ({', '.join(PRESETS)}), bench.TOOL, "
                         "cli COMMAND or sh COMMAND")
    step.limit_s = limits.get(step.name, step.limit_s)
    return step


def split_phases(words: list[str]) -> list[list[list[str]]]:
    """STEP ... // STEP ... then ... as phases of lanes of step texts (ValueError if one is empty)."""
    phases: list[list[list[str]]] = [[[]]]
    for w in words:
        if w == "then":
            phases.append([[]])
        elif w == "//":
            phases[-1].append([])
        else:
            phases[-1][-1].append(w)
    for i, phase in enumerate(phases, 1):
        if any(not lane for lane in phase):
            raise ValueError(f"phase {i}: an empty lane (a `//` or `then` with no step beside it)")
    return phases


def plan(words: list[str], gpus: list[str], limits: dict[str, int], store: str) -> list[list[Lane]]:
    """The phases of lanes of Steps, lane k of a phase on gpus[k] (all of them if it is alone)."""
    phases = []
    for i, phase in enumerate(split_phases(words), 1):
        if len(phase) > max(1, len(gpus)):
            raise ValueError(f"phase {i}: {len(phase)} lanes for {len(gpus)} GPU(s) (--gpus)")
        lanes = []
        for k, texts in enumerate(phase):
            lane = Lane(k, list(gpus) if len(phase) == 1 else [gpus[k]])
            lane.steps = [parse_step(t, limits) for t in texts]
            lanes.append(lane)
        tuning = [ln.index for ln in lanes if any(s.kind == "tune" for s in ln.steps)]
        if store == "repo" and len(tuning) > 1:
            raise ValueError(f"phase {i}: --store repo with tune steps in {len(tuning)} lanes (one store, one "
                             "tuner at a time); use --store copy or fresh")
        phases.append(lanes)
    n = 0
    for lanes in phases:
        for lane in lanes:
            for step in lane.steps:
                n += 1
                step.log = f"lane{lane.index}/{n:02d}_{step.name}"
    if store == "repo" and any(s.name == "merge" for lanes in phases for ln in lanes for s in ln.steps):
        raise ValueError("merge: --store repo tunes into db/trials.sqlite itself; there are no lane stores to merge")
    return phases
