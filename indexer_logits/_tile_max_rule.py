"""Whether a decode or ragged prefill logits module's launch also writes the top-k's tile maxima
(launch(tile_max=...), the logits kernel's epilogue: docs/PERF.md, "Top-k: the tile maxima from the logits
epilogue") for a call's shape: Selection.tile_max_block, which indexer_logits._dispatch sets. Imports only the standard library."""

from __future__ import annotations

from types import ModuleType

# A module that stores its logits per tile writes the maxima only for at most this many rows of at least
# this many keys: there its logits kernel's runs are long and few, and the per-tile maxima cost it less
# than the maxima and range kernels the selection then skips (an H100, its family-default modules, the
# bound path end to end: 1-16 rows of 256K-1M keys saved 1.8-5.0 us; 16 x 128K lost 0.9 us, 64 x 32K 3.0,
# 64 x 128K 15.2, 32 x 128K next_n 2 25.2; docs/PERF.md, "Top-k: the per-tile epilogue for few long rows").
PER_TILE_EPILOGUE_MAX_ROWS = 16
PER_TILE_EPILOGUE_MIN_WIDTH = 1 << 18


def tile_max_block(module: ModuleType, rows: int = 0, width: int = 0) -> int:
    """The module's key tile where its launch writes the maxima for a call of `rows` x `width`, else 0."""
    # Where the logits are stored once a run (store "run"): there the maxima come from the run's tile in
    # registers, +1.8% of the logits kernel at 64 x 128K on the H200 against the 10 us a top-k saves;
    # stored per tile, the per-tile reshape and max cost +8% (128 x 128K) and +30% (next_n 2, 32 x 128K),
    # more than the selection saves (docs/PERF.md, "Top-k: the tile maxima from the logits epilogue"),
    # but for few long rows (above). rows and width: the call's (batch x next_n, max_context_len).
    if getattr(module, "SUPPORTS_TILE_MAX", False) is not True:
        return 0
    if getattr(module, "TILE_MAX_ANY_SHAPE", False) is True:  # a ragged prefill module: bound by its dot
        return int(module.BLOCK_T.value)
    store_run = getattr(getattr(module, "STORE_RUN", None), "value", False) is True
    few_long = 0 < rows <= PER_TILE_EPILOGUE_MAX_ROWS and width >= PER_TILE_EPILOGUE_MIN_WIDTH
    return int(module.BLOCK_T.value) if store_run or few_long else 0


def rows_width(problem: dict, bucket) -> tuple[int, int]:
    """(logits rows, keys a row) of a decode call: its bucket (batch, max_context_len) and next_n (1 for
    the other families, whose modules never write the maxima)."""
    return bucket[0] * int(problem.get("next_n") or 1), bucket[1]
