"""Frozen Triton kernels for the DeepSeek-V3.2/V4 sparse-attention indexer logits, with a tuned
dispatch table per GPU. Imports only torch (and triton, when a kernel is first loaded).

Drop-in for DeepGEMM's calls (same argument order and keyword names, both of its indexer
generations; see docs/INTEGRATION.md for what is served and what is refused):

    from indexer_logits import fp8_paged_mqa_logits, get_paged_mqa_logits_metadata, get_num_sms

and the top-k engines take right after them, selected on the device (fp8_paged_mqa_topk,
fp8_mqa_topk, fp8_paged_mqa_topk_chunked and bf16 twins; docs/INTEGRATION.md, "Top-k").

Environment: INDEXER_LOGITS_BACKEND = auto | tuned | default | reference (force a path),
INDEXER_LOGITS_TABLE_DIR (where the tables live; default: this folder),
INDEXER_LOGITS_CHECK_VALUES = 1 | 0 (read lengths, page ids and windows to check them; unset:
on for CPU tensors, off for CUDA tensors, so that a default GPU call never synchronises),
INDEXER_LOGITS_PDL = 0 | 1 (decode as a programmatic dependent launch, sm_90+; default 0).
See docs/RUNTIME.md.
"""

from ._api import get_num_sms, set_num_sms, value_checks_enabled
from ._chunked import bf16_paged_mqa_logits_chunked, chunked_selection, fp8_paged_mqa_logits_chunked
from ._decode import (bf16_paged_mqa_logits, fp8_fp4_paged_mqa_logits, fp8_paged_mqa_logits,
                      get_paged_mqa_logits_metadata, paged_selection)
from ._prefill import bf16_mqa_logits, fp8_fp4_mqa_logits, fp8_mqa_logits, ragged_selection
from ._checks import chunked_prefill_rows
from ._topk import (bf16_mqa_topk, bf16_paged_mqa_topk, bf16_paged_mqa_topk_chunked, fp8_mqa_topk,
                    fp8_paged_mqa_topk, fp8_paged_mqa_topk_chunked)
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
    "fp8_fp4_paged_mqa_logits", "fp8_fp4_mqa_logits", "get_num_sms", "set_num_sms", "value_checks_enabled",
    "fp8_paged_mqa_topk", "bf16_paged_mqa_topk", "fp8_mqa_topk", "bf16_mqa_topk", "fp8_paged_mqa_topk_chunked",
    "bf16_paged_mqa_topk_chunked",
]
