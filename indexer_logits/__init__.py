"""Frozen Triton kernels for the DeepSeek-V3.2/V4 sparse-attention indexer logits, with a tuned
dispatch table per GPU. Imports only torch (and triton, when a kernel is first loaded).

Drop-in for DeepGEMM's calls (same argument order; see docs/INTEGRATION.md):

    from indexer_logits import fp8_paged_mqa_logits, get_paged_mqa_logits_metadata

Environment: INDEXER_LOGITS_BACKEND = auto | tuned | default | reference (force a path),
INDEXER_LOGITS_TABLE_DIR (where the tables live; default: this folder),
INDEXER_LOGITS_CHECK_VALUES = 1 | 0 (read lengths and page ids to check them; default 1),
INDEXER_LOGITS_PDL = 0 | 1 (decode as a programmatic dependent launch, sm_90+; default 0).
See docs/RUNTIME.md.
"""

from ._api import (
    bf16_mqa_logits,
    bf16_paged_mqa_logits,
    bf16_paged_mqa_logits_chunked,
    chunked_selection,
    fp8_mqa_logits,
    fp8_paged_mqa_logits,
    fp8_paged_mqa_logits_chunked,
    get_paged_mqa_logits_metadata,
    paged_selection,
    ragged_selection,
)
from ._checks import chunked_prefill_rows
from ._dispatch import (
    Backend,
    DispatchTableError,
    DispatchWarning,
    NoKernelError,
    Selection,
    clear_cache,
    load_table,
    problem_key,
)

__all__ = [
    "fp8_paged_mqa_logits", "bf16_paged_mqa_logits", "fp8_mqa_logits", "bf16_mqa_logits",
    "get_paged_mqa_logits_metadata", "paged_selection", "ragged_selection", "Backend", "Selection",
    "DispatchTableError", "DispatchWarning", "NoKernelError", "clear_cache", "load_table", "problem_key",
    "fp8_paged_mqa_logits_chunked", "bf16_paged_mqa_logits_chunked", "chunked_prefill_rows", "chunked_selection",
]
