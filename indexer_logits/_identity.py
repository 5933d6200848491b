"""What a kernel computes (Problem), how it is built (Config), the shape class it is tuned for
(Bucket), and the one readable name of a variant: the identities the runtime and the tuner share.

The runtime owns this module (it imports only the standard library); the tuner imports it, so
a key, a slug or a variant name is computed by one piece of code everywhere. Each dataclass has
a canonical JSON form (sorted keys, no spaces) whose sha256 identifies it.

Kernel families register here with what identifies them (`FamilyKind`): the tuner's family
modules (tuner/families/) add how each is rendered, tuned and checked.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def slugify(name: str) -> str:
    """The directory name of a GPU's table: 'NVIDIA H200' -> 'nvidia_h200'."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "unknown"


# ---------------------------------------------------------------------------------------------
# Kernel families: what identifies each one. Adding a family adds a FamilyKind here (or through
# register_family) and a module under tuner/families/.


@dataclass(frozen=True)
class FamilyKind:
    """A kernel family as the runtime knows it.

    paged: K lives in the paged cache (page_size and the scale layout apply); otherwise K is
      ragged, page_size is 0 and scales sit in a tensor of their own.
    decode: query rows come per request in groups of next_n with a lens mode (1-D or 2-D
      context_lens); otherwise every query row carries its own limit (next_n 1, lens '1d').
    kernel: the @triton.jit function a generated module of this family defines.
    """

    name: str
    paged: bool
    decode: bool
    kernel: str


FAMILIES: dict[str, FamilyKind] = {}


def register_family(kind: FamilyKind) -> FamilyKind:
    """Add a family (tests register toy ones); re-registering the same kind is a no-op."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", kind.name) or "__" in kind.name:
        raise ValueError(f"family: expected a lower-case identifier without '__', got {kind.name!r}")
    old = FAMILIES.get(kind.name)
    if old is not None and old != kind:
        raise ValueError(f"family {kind.name!r}: already registered as {old}")
    FAMILIES[kind.name] = kind
    return kind


def unregister_family(name: str) -> None:
    FAMILIES.pop(name, None)


def family_kind(name: str) -> FamilyKind:
    kind = FAMILIES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"family: expected one of {sorted(FAMILIES)}, got {name!r}")
    return kind


DECODE_PAGED = register_family(FamilyKind("decode_paged", paged=True, decode=True, kernel="_decode_paged_kernel"))
PREFILL_RAGGED = register_family(FamilyKind("prefill_ragged", paged=False, decode=False,
                                            kernel="_prefill_ragged_kernel"))
# Many query rows (chunked prefill) over the paged cache.
PREFILL_PAGED = register_family(FamilyKind("prefill_paged", paged=True, decode=False, kernel="_prefill_paged_kernel"))


class ScaleLayout(str, enum.Enum):
    """Where a token's fp32 scale sits in the cache."""

    PAGE_BLOCKED = "page_blocked"  # all values of a page, then all scales of the page
    TOKEN_INTERLEAVED = "token_interleaved"  # D values then 4 scale bytes, per token
    NONE = "none"  # bf16 cache: no scale


class LensMode(str, enum.Enum):
    ONE_D = "1d"  # context_lens [B]: causal within the next_n draft tokens
    TWO_D = "2d"  # context_lens [B, N]: an explicit limit per query token


DTYPES = ("fp8", "bf16")
PAGE_SIZES = (1, 32, 64, 128)
HEADS = (8, 16, 32, 64, 128)
HEAD_DIMS = (32, 64, 128)
MAX_NEXT_N = 4
# tl.dot operand dtypes the CPU interpreter computes exactly, per cache dtype (it gets bf16 and
# fp8 dots wrong): the runtime picks only these variants for CPU tensors, and a tune under the
# interpreter searches only these.
INTERPRETER_DOT_DTYPES = {"fp8": ("fp16", "fp32"), "bf16": ("fp32",)}


def _choice(name: str, value: Any, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {value!r}")


def _enum_value(name: str, value: Any, enum_cls) -> str:
    try:
        return enum_cls(value).value
    except ValueError:
        raise ValueError(f"{name}: expected one of {[e.value for e in enum_cls]}, got {value!r}") from None


class _Canonical:
    """Canonical JSON, hash and dict round trip shared by Problem, Config and Bucket."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        text = self.__dict__.get("_json")  # kept on the frozen instance: the model ranks 100k+ points by key
        if text is None:
            text = canonical_json(self.to_dict())
            object.__setattr__(self, "_json", text)
        return text

    @property
    def key(self) -> str:
        """sha256 of the canonical JSON: the stable identity."""
        key = self.__dict__.get("_key")
        if key is None:
            key = sha256_hex(self.to_json())
            object.__setattr__(self, "_key", key)
        return key

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        if not isinstance(data, Mapping):  # e.g. a JSON list from `tune --try-config`: a refusal, not a TypeError
            raise ValueError(f"{cls.__name__}: expected a JSON object of fields, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}; expected {sorted(names)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str):
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class Problem(_Canonical):
    """The function a kernel computes, independent of how it is scheduled.

    `page_size` and `scale_layout` describe the paged cache (paged families); a ragged family
    reads ragged K and carries page_size=0. `next_n` and `lens_mode` are decode-only (the other
    families take 1 / "1d").
    """

    family: str = DECODE_PAGED.name
    q_dtype: str = "fp8"
    cache_dtype: str = "fp8"
    page_size: int = 64
    scale_layout: str = ScaleLayout.PAGE_BLOCKED.value
    heads: int = 64
    head_dim: int = 128
    next_n: int = 1
    lens_mode: str = LensMode.ONE_D.value

    def __post_init__(self) -> None:
        for name in ("page_size", "heads", "head_dim", "next_n"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name}: expected an int, got {value!r}")
        family = self.family.value if isinstance(self.family, enum.Enum) else self.family
        kind = family_kind(family)
        object.__setattr__(self, "family", kind.name)
        object.__setattr__(self, "scale_layout", _enum_value("scale_layout", self.scale_layout, ScaleLayout))
        object.__setattr__(self, "lens_mode", _enum_value("lens_mode", self.lens_mode, LensMode))
        _choice("q_dtype", self.q_dtype, DTYPES)
        _choice("cache_dtype", self.cache_dtype, DTYPES)
        _choice("heads", self.heads, HEADS)
        _choice("head_dim", self.head_dim, HEAD_DIMS)
        if self.q_dtype != self.cache_dtype:
            raise ValueError(f"q_dtype: expected the cache dtype {self.cache_dtype!r} (mixed q/cache dtypes are "
                             f"not served), got {self.q_dtype!r}")
        if (self.cache_dtype == "bf16") != (self.scale_layout == ScaleLayout.NONE.value):
            raise ValueError("scale_layout: expected 'none' for a bf16 cache and 'page_blocked' or 'token_interleaved' "
                             f"for fp8, got {self.scale_layout!r} with cache_dtype={self.cache_dtype!r}")
        if kind.paged:
            _choice("page_size", self.page_size, PAGE_SIZES)
        else:
            if self.page_size != 0:
                raise ValueError(f"page_size: expected 0 for {kind.name} (K is not paged), got {self.page_size!r}")
            if self.scale_layout == ScaleLayout.TOKEN_INTERLEAVED.value:
                raise ValueError(f"scale_layout: {kind.name} keeps scales in a separate tensor "
                                 "('page_blocked' stands for that)")
        if kind.decode:
            if not 1 <= self.next_n <= MAX_NEXT_N:
                raise ValueError(f"next_n: expected 1..{MAX_NEXT_N}, got {self.next_n!r}")
        elif self.next_n != 1 or self.lens_mode != LensMode.ONE_D.value:
            raise ValueError(f"next_n/lens_mode: {kind.name} takes next_n=1 and lens_mode='1d' "
                             "(each query row has its own limit)")

    @property
    def kind(self) -> FamilyKind:
        return FAMILIES[self.family]

    @property
    def is_decode(self) -> bool:
        return self.kind.decode

    @property
    def is_paged(self) -> bool:
        """K lives in the paged cache."""
        return self.kind.paged

    @property
    def token_bytes(self) -> int:
        """Cache bytes per key token (values plus scale)."""
        return self.head_dim * (2 if self.cache_dtype == "bf16" else 1) + (4 if self.cache_dtype == "fp8" else 0)

    @property
    def slug(self) -> str:
        """Short readable form, e.g. `fp8_pg64_h64_d128_n1`."""
        parts = [self.cache_dtype]
        if self.is_paged:
            parts.append(f"pg{self.page_size}")
            if self.scale_layout == ScaleLayout.TOKEN_INTERLEAVED.value:
                parts.append("ti")
        parts += [f"h{self.heads}", f"d{self.head_dim}"]
        if self.is_decode:
            parts.append(f"n{self.next_n}")
            if self.lens_mode == LensMode.TWO_D.value:
                parts.append("l2d")
        return "_".join(parts)


# The problem fields (the key hashes all of them).
PROBLEM_FIELDS = tuple(f.name for f in dataclasses.fields(Problem))


def problem_key(problem: Mapping[str, Any]) -> str:
    """sha256 of a problem dict's canonical JSON (its Problem fields only): Problem(**problem).key
    without building and validating the Problem (the runtime's per-table check)."""
    missing = [f for f in PROBLEM_FIELDS if f not in problem]
    if missing:
        raise ValueError(f"problem: missing fields {missing}")
    return sha256_hex(canonical_json({f: problem[f] for f in PROBLEM_FIELDS}))


def default_scale_layout(cache_dtype: str) -> str:
    """A dtype's own scale layout: page_blocked for fp8, none (no scales) for bf16."""
    return ScaleLayout.NONE.value if cache_dtype == "bf16" else ScaleLayout.PAGE_BLOCKED.value


def problem_dict(family: str, cache_dtype: str, heads: int, head_dim: int, page_size: int = 0,
                 scale_layout: str | None = None, next_n: int = 1, lens_2d: bool = False) -> dict:
    """The runtime's problem for a call (the fields of Problem, unvalidated: the API checked the
    arguments). A ragged family ignores page_size; scale_layout defaults to the dtype's own."""
    kind = family_kind(family)
    if scale_layout is None or not kind.paged:
        scale_layout = default_scale_layout(cache_dtype)
    return {"family": kind.name, "q_dtype": cache_dtype, "cache_dtype": cache_dtype,
            "page_size": page_size if kind.paged else 0, "scale_layout": scale_layout, "heads": heads,
            "head_dim": head_dim, "next_n": next_n if kind.decode else 1,
            "lens_mode": LensMode.TWO_D.value if kind.decode and lens_2d else LensMode.ONE_D.value}


DOT_DTYPES = ("native", "fp16", "bf16", "fp32")
ORIENTS = ("q_rows", "k_rows")
STORES = ("tile", "run")
HEAD_SUMS = ("tree", "chain")
K_LOADS = ("threads", "tma")
# Knobs added after keys existed, left out of canonical JSON and slugs at what kernels did before.
LEFT_OUT_AT = {"store": "tile", "head_sum": "tree", "k_load": "threads"}


@dataclass(frozen=True)
class Config(_Canonical):
    """How a kernel is built: every knob the templates take.

    block_t: key tokens per tile (may span several pages or part of one).
    tiles_per_program: tiles one program walks (decode: its token chunk is block_t * tiles).
    block_m: query rows per program (prefill only; decode keeps all next_n rows together).
    dot_dtype: operand dtype of tl.dot. 'native' uses the input dtype (fp8 or bf16); 'fp16' is
      exact for fp8 inputs; 'fp32' is exact for both (used by the CPU interpreter tests).
    programs_per_sm: 0 = a split grid (B, cdiv(width, block_t * tiles_per_program)) whose
      programs past a request's length exit at once; k > 0 = a persistent grid of k programs per
      SM that share out the valid tiles of all requests evenly, reading the schedule from the
      lengths in device memory (graph-safe: the grid depends on the SM count only).
    orient: which operand is the dot's M side. 'q_rows': scores [query rows * heads, tokens],
      the head sum crosses warps; 'k_rows': scores [tokens, query rows * heads], the head sum
      stays inside a thread quad (no shared-memory round trip).
    store: when decode writes its logits. 'tile': after each tile, between the cache reads;
      'run': kept in registers and written once after the program's last tile (split grid,
      k_rows, tiles inside one page), with the run's fp8 scales read once before its first tile
      and applied there. Costs registers: TILES rounded up to a power of two x block_t x next_n
      fp32 values per program, and as many again for an fp8 cache's scales (docs/PERF.md).
    head_sum: how a k_rows tile's weighted scores are summed over the heads. 'tree': tl.sum, which
      since Triton 3.7 adds a thread's values as a binary tree, so half the weight multiplies stay
      unfused; 'chain': the thread's values split off and added left to right, every multiply fused
      (FFMA) as tl.sum gave under 3.6. 'chain' assumes the wgmma accumulator layout (sm_90); on
      mma.sync layouts (sm_80-sm_120) it costs layout conversions: a tuned axis, k_rows only. In
      prefill_ragged 'chain' also loads q above the tile loop's `if` (Triton 3.9 spills otherwise;
      docs/PERF.md, "Prefill under Triton 3.8 and 3.9: why"); in prefill_paged it also stores each
      tile's logits through a warp-aligned view, which under Triton 3.8+ drops a CTA barrier a tile
    k_load: how prefill_ragged loads a key tile. 'threads': per-thread cp.async loads; 'tma': one
      bulk tensor copy through a host TensorDescriptor (no per-tile proxy fence under Triton 3.7+),
      per-thread loads where K's base or row stride is not 16-byte aligned or there are no keys.
    """

    block_t: int = 64
    tiles_per_program: int = 4
    num_warps: int = 4
    num_stages: int = 2
    block_m: int = 1
    dot_dtype: str = "native"
    orient: str = "q_rows"
    programs_per_sm: int = 0
    store: str = "tile"
    head_sum: str = "tree"
    k_load: str = "threads"

    def to_dict(self) -> dict[str, Any]:  # keys and names at LEFT_OUT_AT's values stay as before the knob
        return {k: v for k, v in dataclasses.asdict(self).items() if LEFT_OUT_AT.get(k, ()) != v}

    def __post_init__(self) -> None:
        if not isinstance(self.programs_per_sm, int) or isinstance(self.programs_per_sm, bool) or self.programs_per_sm < 0:
            raise ValueError(f"programs_per_sm: expected an int >= 0, got {self.programs_per_sm!r}")
        _choice("dot_dtype", self.dot_dtype, DOT_DTYPES)
        _choice("orient", self.orient, ORIENTS)
        _choice("store", self.store, STORES)
        _choice("head_sum", self.head_sum, HEAD_SUMS)
        _choice("k_load", self.k_load, K_LOADS)
        for name in ("block_t", "tiles_per_program", "num_warps", "num_stages", "block_m"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")

    @property
    def slug(self) -> str:
        s = f"bt{self.block_t}_tp{self.tiles_per_program}_w{self.num_warps}_s{self.num_stages}"
        if self.block_m != 1:
            s += f"_m{self.block_m}"
        if self.dot_dtype != "native":
            s += f"_{self.dot_dtype}"
        if self.orient != "q_rows":
            s += "_kr"
        if self.programs_per_sm:
            s += f"_p{self.programs_per_sm}"
        if self.store == "run":
            s += "_sr"
        if self.head_sum == "chain":
            s += "_hc"
        if self.k_load == "tma":
            s += "_tma"
        return s


def variant_name(problem: Problem, config: Config) -> str:
    """`<family>__<problem slug>__<config slug>__<8 hex>`: a valid Python module name."""
    digest = sha256_hex(problem.to_json() + "|" + config.to_json())[:8]
    return f"{problem.family}__{problem.slug}__{config.slug}__{digest}"


@dataclass(frozen=True)
class Bucket(_Canonical):
    """A shape class a dispatch entry is tuned for.

    decode: batch = requests captured in one CUDA graph, context = page-table width in tokens.
    prefill: batch = query rows, context = key tokens.
    prefill_paged: batch = query rows, context = page-table width (max_context_len) in tokens.
    """

    batch: int
    context: int

    def __post_init__(self) -> None:
        for name in ("batch", "context"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"bucket {name}: expected a positive int, got {value!r}")

    @property
    def slug(self) -> str:
        return f"b{self.batch}_c{self.context}"
