"""What the tuner knows about a kernel family: the interface each family module implements.

A family is one module under tuner/families/ with one subclass of `Family`, registered in
tuner/families/__init__.py. Everything else (render, space, gates, timing, xcompile, prebuild,
verify, emit, the CLI) asks the registry for the family of a problem and reads it here, instead
of testing the family's name.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from indexer_logits._identity import Bucket, Config, FamilyKind, Problem, default_scale_layout

# One gate: (stage name, fn(module, problem, inputs, clean_logits, seed) -> relative error or None).
GateStep = tuple[str, Callable[..., Any]]


class Family:
    """A kernel family. Subclasses set the class attributes and implement the methods."""

    kind: FamilyKind  # the runtime's identity of the family (indexer_logits._identity)
    template: str  # its template under templates/
    # Values each Config knob may take; anything outside is refused before rendering.
    axes: dict[str, tuple]
    # (batches, contexts) tuned when the user names none.
    default_batches: tuple[int, ...]
    default_contexts: tuple[int, ...]
    # How the lengths of a timed bucket are filled (tuner.inputs lens modes), first = the one ranked.
    timing_lens: tuple[str, ...] = ("full",)
    # The fills `bench` times by default, and those it accepts.
    bench_fills: tuple[str, ...] = ("full",)
    # Gate inputs on a GPU: (requests, width) for decode, (rows, keys) for prefill, (rows, width)
    # for chunked prefill. The paged ones are wider than one program's chunk (up to 8K tokens
    # for decode, 16K for chunked prefill) so the gates cross chunk boundaries.
    gate_shape_gpu: tuple[int, int]
    # `verify`'s shape for an entry with no bucket (a default), on a GPU and under the interpreter.
    verify_shape_gpu: tuple[int, int]
    verify_shape_cpu: tuple[int, int]
    # CLI options that mean nothing for this family (refused when given), by Problem field.
    unused_options: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.kind.name

    # -- problems and buckets -------------------------------------------------------------------

    def problems(self, dtype: str, next_ns: Sequence[int], page_size: int, scale_layout: str | None, heads: int,
                 head_dim: int, lens_mode: str) -> list[Problem]:
        """The problems one tuning run of this family covers (ValueError led by the field)."""
        raise NotImplementedError

    def check_buckets(self, batches: Sequence[int], contexts: Sequence[int]) -> None:
        """Refuse (ValueError led by 'context') sizes the family cannot take."""

    def buckets(self, batches: Sequence[int], contexts: Sequence[int]) -> list[Bucket]:
        """Every (batch, context) pair, in tuning order: by context, then batch (so each bucket's
        nearest finished neighbour is usually one batch size away)."""
        self.check_buckets(batches, contexts)
        return [Bucket(b, c) for c in sorted(set(contexts)) for b in sorted(set(batches))]

    def default_problems(self, dtype: str, page_size: int, heads: int, head_dim: int) -> list[Problem]:
        """The problems a family default is emitted for at these shapes (tuner.tables)."""
        layout = default_scale_layout(dtype)
        return [Problem(self.name, dtype, dtype, page_size if self.kind.paged else 0, layout, heads, head_dim, 1,
                        "1d")]

    def gate_shape_cpu(self, batches: Sequence[int], contexts: Sequence[int]) -> tuple[int, int]:
        """Gate inputs under the interpreter: the smallest tuned shape keeps the gates quick."""
        return min(batches), min(contexts)

    def verify_shape(self, bucket: tuple[int, int], caps: dict, on_gpu: bool) -> tuple[int, int]:
        """`verify`'s shape for an entry tuned at `bucket`, capped by caps {batch, context}."""
        return min(bucket[0], caps["batch"]), min(bucket[1], caps["context"])

    # -- configs --------------------------------------------------------------------------------

    def default_config(self, problem: Problem, dot_dtype: str = "native") -> Config:
        """What runs where nothing was tuned; it must fit every target's limits."""
        raise NotImplementedError

    def dot_rows(self, problem: Problem, config: Config) -> int:
        """Query-head rows on the M side of one program's dot."""
        return config.block_m * problem.heads

    # -- inputs ---------------------------------------------------------------------------------

    def gate_inputs(self, problem: Problem, batch: int, context: int, seed: int, device: str):
        """Random inputs the gates use for every config of one problem."""
        raise NotImplementedError

    def verify_inputs(self, problem: Problem, shape: tuple[int, int], seed: int, device: str):
        raise NotImplementedError

    def timing_inputs(self, problem: Problem, bucket: Bucket, lens: str, *, device: str, seed: int, sets: int,
                      min_pool_bytes: int, max_pool_bytes: int, page_gap_bytes: int) -> list:
        """Input sets for timing one bucket (a captured graph cycles through them)."""
        raise NotImplementedError

    def partial_timing_inputs(self, problem: Problem, bucket: Bucket, sets: list, seed: int) -> list | None:
        """The same sets with partly filled lengths (timed beside the full ones), or None."""
        return None

    def mock_inputs(self, problem: Problem, batch: int, context: int):
        """Meta tensors with the shapes and strides of timing_inputs (compile without launching)."""
        raise NotImplementedError

    # -- gates and compilation ------------------------------------------------------------------

    def gate_steps(self, problem: Problem) -> list[GateStep]:
        """The gates after the reference gate (SPEC.md: poisoned table, graph replay, ...)."""
        return []

    def typical_args(self, problem: Problem, config: Config | None) -> dict[str, Any]:
        """The kernel's launch arguments by parameter name at a typical size (cross-compilation):
        a pointer is its Triton type ('*fp8e4nv'), a descriptor 'tensordesc<...>', an int its value."""
        raise NotImplementedError
