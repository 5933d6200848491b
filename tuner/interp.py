"""Interpreter or compiler: Triton reads TRITON_INTERPRET when it decorates a @triton.jit function,
and some of its own modules decorate theirs when first imported, so a process must choose before
it imports them, and a parent chooses for the children it spawns (they inherit its environment).
Imports nothing of the project (the cross-compiler and the worker both use it)."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def environ_set(name: str, value: str | None):
    """os.environ[name] = value (None: unset) for the duration, then as it was: a child process
    spawned meanwhile inherits it and has it before its first import."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def interpreter_env(interpret: bool):
    """TRITON_INTERPRET as `interpret` says, in this process's environment, while child processes
    are spawned: a child inherits it before its first import. That matters because some of
    Triton's own modules (triton.language.extra.cuda) decorate @triton.jit helpers when first
    imported, and a worker imports them (through the tuner) before set_interpreter runs; the
    generated kernels then cannot call them ("Cannot call @triton.jit'd outside of the scope of a
    kernel")."""
    return environ_set("TRITON_INTERPRET", "1" if interpret else None)


def set_interpreter(interpret: bool) -> None:
    """Choose Triton's CPU interpreter or the compiler for this process. Must run before any
    generated kernel module is imported (triton.jit reads the variable at decoration)."""
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
