"""The kernel families: one module each, and the one registry every part of the tuner reads.

A family module defines a subclass of `tuner.families.base.Family` (its template, axes, default
config, default sizes, gate and verify shapes, inputs, gates, cross-compile arguments) and an
instance `FAMILY`; the runtime's identity of the family (`FamilyKind`: paged or ragged, decode or
not, the kernel's name) is registered in indexer_logits/_identity.py. Adding a family:
  1. register its FamilyKind in indexer_logits/_identity.py (and give the runtime an API for it);
  2. write templates/<name>.py.jinja and tuner/families/<name>.py (copy the closest family);
  3. import it below and register it (one line).
tests/test_families.py registers a toy family and runs it through render, space and the CLI.
"""

from __future__ import annotations

from typing import Callable, Union

from indexer_logits._identity import Problem, register_family, unregister_family

from ..gates import reference_gate
from . import decode_paged, prefill_paged, prefill_ragged
from .base import Family

REGISTRY: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add a family to the registry (and its kind to the runtime's identities)."""
    register_family(family.kind)
    old = REGISTRY.get(family.name)
    if old is not None and old is not family:
        raise ValueError(f"family {family.name!r}: already registered")
    REGISTRY[family.name] = family
    return family


def unregister(name: str) -> None:
    """Remove a family (tests that registered a toy one)."""
    REGISTRY.pop(name, None)
    unregister_family(name)


def family_of(what: Union[str, Problem]) -> Family:
    """The family of a problem, or of a family name; ValueError naming the known ones."""
    name = what.family if isinstance(what, Problem) else what
    family = REGISTRY.get(name) if isinstance(name, str) else None
    if family is None:
        raise ValueError(f"family: expected one of {names()}, got {name!r}")
    return family


def run_all_gates(module, problem: Problem, inputs, clean_logits: bool = True, seed: int = 0,
                  on_stage: Callable[[str], None] = lambda stage: None) -> float:
    """Every gate of the problem's family (SPEC.md): the reference, then the family's own (the
    paged ones: a poisoned block table and graph replay with other lengths). Returns the
    reference gate's relative error; a failing gate raises tuner.gates.GateFailure. on_stage
    hears each gate's name before it runs (the worker classifies a crash by it)."""
    on_stage("reference")
    err = reference_gate(module, inputs, clean_logits)
    for stage, step in family_of(problem).gate_steps(problem):
        on_stage(stage)
        step(module, problem, inputs, clean_logits, seed)
    return err


def names() -> list[str]:
    """The registered family names, in registration order (the CLI's choices)."""
    return list(REGISTRY)


register(decode_paged.FAMILY)
register(prefill_ragged.FAMILY)
register(prefill_paged.FAMILY)
