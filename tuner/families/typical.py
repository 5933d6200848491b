"""Typical launch sizes for cross-compilation (tuner.xcompile), used only to decide which integer
arguments Triton's launcher would specialise (value 1 -> constexpr, multiple of 16 ->
divisibility 16), as it does for contiguous tensors at these sizes; and the paged cache's
typical strides."""

from __future__ import annotations

from indexer_logits._identity import Config, Problem

TYPICAL_BATCH = 32  # decode requests in one captured graph
TYPICAL_CONTEXT = 65_536  # decode page-table width in tokens, and the output row stride
TYPICAL_ROWS = 4_096  # prefill query rows
TYPICAL_KEYS = 8_192  # prefill key tokens

TRITON_DTYPE = {"fp8": "fp8e4nv", "bf16": "bf16"}

# The decode and ragged prefill kernels' top-k tile-maxima parameters (launch(tile_max=...): the top-k's
# first pass in the logits epilogue, indexer_logits._topk); the tuner and the cross-compiles take the
# kernels without them (None).
TILE_MAX_ARGS = ("max_ptr", "max_stride", "ntiles_ptr", "state_ptr", "state_offset", "state_stride")


def kv_descriptor(problem: Problem, config: Config | None) -> str:
    """The paged templates' cache descriptor: one box of min(block_t, page) tokens of one page."""
    box = min(config.block_t, problem.page_size) if config is not None else problem.page_size
    return f"tensordesc<{TRITON_DTYPE[problem.cache_dtype]}[1, {box}, {problem.head_dim}]>"


def paged_strides(problem: Problem) -> tuple[int, str, int]:
    """(page stride in cache elements, scale pointer type, scale page stride) of a contiguous pool."""
    if problem.cache_dtype == "fp8":
        page_stride = problem.page_size * (problem.head_dim + 4)  # bytes of the uint8 buffer, viewed as fp8
        return page_stride, "*fp32", page_stride // 4
    # bf16: no scales; the launcher passes the cache in their place, unused
    return problem.page_size * problem.head_dim, f"*{TRITON_DTYPE[problem.cache_dtype]}", 0
