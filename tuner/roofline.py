"""The floor a kernel is measured against (SPEC.md, "Roofline").

Decode is memory-bound: floor = bytes moved / measured device-to-device copy bandwidth, where
bytes = the valid tokens' cache bytes (each request's pages read once for all its next_n rows)
+ q + weights + block-table entries + the logits written. Prefill is compute-bound: floor =
2 * H * D * valid (row, key) pairs / measured matmul rate; so is chunked prefill over the
paged cache (its valid pairs: the sum of the row limits).
"""

from __future__ import annotations

import torch

from indexer_logits._checks import row_limits


def decode_bytes(inputs, clean_logits: bool) -> int:
    q = inputs.q
    b, n, h, d = q.shape
    page = inputs.kv_cache.shape[1]
    token_bytes = d * 2 if inputs.kv_cache.dtype == torch.bfloat16 else d + 4
    limits = row_limits(inputs.context_lens.cpu(), n).clamp(min=0)
    top = limits.max(dim=1).values
    cache = int(top.sum()) * token_bytes
    table = int(((top + page - 1) // page).sum()) * 4
    q_bytes = q.numel() * q.element_size() + b * n * h * 4
    written = b * n * inputs.max_context_len * 4 if clean_logits else int(limits.sum()) * 4
    return cache + table + q_bytes + written


def prefill_flops(inputs) -> int:
    h, d = inputs.q.shape[1], inputs.q.shape[2]
    if hasattr(inputs, "row_limit"):  # chunked prefill over the paged cache: row r has row_limit[r] keys
        return 2 * h * d * int(inputs.row_limit.long().clamp(min=0).sum())
    pairs = int((inputs.cu_seqlen_ke.long() - inputs.cu_seqlen_ks.long()).clamp(min=0).sum())
    return 2 * h * d * pairs


def floor_ms(inputs, clean_logits: bool, copy_bw: float | None = None, matmul_rate: float | None = None) -> float:
    """Floor in ms for decode (needs copy_bw, bytes/s) or prefill (needs matmul_rate, flop/s)."""
    if hasattr(inputs, "kv_cache") and not hasattr(inputs, "row_limit"):
        if not copy_bw:
            raise ValueError("copy_bw: expected the measured copy bandwidth in bytes/s for a decode floor")
        return decode_bytes(inputs, clean_logits) / copy_bw * 1e3
    if not matmul_rate:
        raise ValueError("matmul_rate: expected the measured matmul rate in flop/s for a prefill floor")
    return prefill_flops(inputs) / matmul_rate * 1e3
