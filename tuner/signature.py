"""A kernel's signature as Triton's launcher would specialise it for typical shapes: what
cross-compilation (tuner.xcompile) hands `triton.compile` in place of a real launch."""

from __future__ import annotations

from typing import Any

from indexer_logits._identity import Config, Problem

from .families import family_of
from .families.typical import TYPICAL_BATCH


def typical_args(problem: Problem, config: Config | None = None) -> dict[str, Any]:
    """Launch arguments by kernel parameter name (the family's): a pointer is its Triton element
    type (a str starting with '*'), a host tensor descriptor its type ('tensordesc<...>', needs
    `config` for the block shape), an integer its value for a contiguous tensor at a typical size."""
    return family_of(problem).typical_args(problem, config)


def typical_constexprs(problem: Problem) -> dict[str, Any]:
    """Launch-time constexpr arguments by name (CLEAN=True: the -inf tail is compiled in;
    USE_TMA=True: the cache tiles by bulk tensor copies, as for any 16-byte-aligned cache;
    PDL=False: decode as the tuner times it, without the programmatic-dependent-launch wait)."""
    return {"CLEAN": True, "BATCH_POW2": 1 << (TYPICAL_BATCH - 1).bit_length(), "USE_TMA": True, "PDL": False}


def _specialize_int(value: int) -> tuple[str, str | None]:
    """(type, attribute) the launcher gives an int: ('constexpr', None) for 1, else i32/i64 with
    'D' when divisible by 16. Uses Triton's own routine when it is there."""
    try:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.nvidia.compiler import CUDABackend

        kind, spec = native_specialize_impl(CUDABackend, value, False, True, True)
        return kind, spec if isinstance(spec, str) else None
    except ImportError:  # pragma: no cover - older/newer Triton without the native routine
        if value == 1:
            return "constexpr", None
        kind = "i32" if -2**31 <= value < 2**31 else "i64"
        return kind, "D" if value % 16 == 0 else ""


def build_signature(fn, problem: Problem, constexprs: dict[str, Any] | None = None, config: Config | None = None,
                    extra_args: dict[str, Any] | None = None):
    """(signature, constexprs, attrs) for ASTSource, read off the jit function's parameters in
    their declared order; mirrors `JITFunction._pack_args` for the common launch. `constexprs`
    overrides `typical_constexprs`; a constexpr parameter with a default may be left out.
    `extra_args`: typical values of parameters a patched kernel adds (as `typical_args` gives them)."""
    from triton.backends.nvidia.compiler import CUDABackend

    args = {**typical_args(problem, config), **(extra_args or {})}
    constexprs = {**typical_constexprs(problem), **(constexprs or {})}
    signature: dict[str, str] = {}
    consts: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for i, param in enumerate(fn.params):
        name = param.name
        if param.is_constexpr:
            if name not in constexprs and param.has_default:
                constexprs[name] = param.default
            if name not in constexprs:
                raise KeyError(f"{fn.__name__}: constexpr parameter {name!r} has no value (known: "
                               f"{sorted(constexprs)}); update tuner.xcompile.typical_constexprs")
            signature[name] = "constexpr"
            consts[name] = constexprs[name]
            continue
        if name not in args:
            raise KeyError(f"{fn.__name__}: no typical value for parameter {name!r}; update tuner.xcompile.typical_args")
        value = args[name]
        if value is None:  # a pointer or int the launch leaves out (None): a constexpr, as Triton binds it
            signature[name] = "constexpr"
            consts[name] = None
            continue
        if isinstance(value, str) and value.startswith("tensordesc"):  # no attributes
            kind, spec = value, None
        elif isinstance(value, str):  # a pointer: torch allocations are 16-byte aligned
            kind, spec = value, "D"
        else:
            kind, spec = _specialize_int(value)
        if kind == "constexpr":
            consts[name] = value
        elif spec:
            attrs[(i,)] = CUDABackend.parse_attr(spec)
        signature[name] = kind
    return signature, consts, attrs
