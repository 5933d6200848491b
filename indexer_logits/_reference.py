"""Torch reference of the indexer logits (SPEC.md). Imports only torch.

It is the tuner's oracle and the runtime's last-resort fallback. Memory and time scale with
the real lengths, not with max_context_len: each request gathers only its valid pages, and
scores are formed a chunk of tokens at a time. Every function checks its arguments like the
runtime does; check_values=False skips the checks that read lengths, page ids and windows (the
runtime passes it after deciding on those itself). The reference reads the lengths on the host
whatever it is told: it synchronises, and cannot be captured in a CUDA graph.
"""

from __future__ import annotations

import torch

from ._checks import check_decode, check_prefill, check_prefill_paged, row_limits
from ._layout import unpack_pages

CHUNK_TOKENS = 2048


def _scores(qf: torch.Tensor, w: torch.Tensor, k: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """qf [R, H, D], w [R, H], k [T, D], s [T] -> [R, T] = s * sum_h w * relu(q . k)."""
    dots = torch.einsum("rhd,td->rht", qf, k)
    return (dots.clamp_min_(0) * w[:, :, None]).sum(dim=1) * s[None, :]


def paged_mqa_logits_ref(q, kv_cache, weights, context_lens, block_table, max_context_len: int,
                         clean_logits: bool = True, *, scale_layout: str = "page_blocked",
                         compute_dtype: torch.dtype = torch.float32,
                         out: torch.Tensor | None = None, check_values: bool = True) -> torch.Tensor:
    """logits [B*N, max_context_len] fp32; invalid positions are -inf (whatever clean_logits says)."""
    a = check_decode(q, kv_cache, weights, context_lens, block_table, max_context_len, scale_layout,
                     check_values=check_values)
    b, n, page = a.batch, a.next_n, a.layout.page_size
    if out is None:
        out = torch.empty((b * n, max_context_len), dtype=torch.float32, device=q.device)
    out.fill_(float("-inf"))
    limits = row_limits(context_lens, n).clamp(min=0).cpu()
    qf = q.to(compute_dtype)
    wf = weights.to(compute_dtype)
    for i in range(b):
        top = int(limits[i].max())
        if top == 0:
            continue
        pages = block_table[i, : (top + page - 1) // page]
        values, scales = unpack_pages(kv_cache, a.layout, pages)
        k = values.reshape(-1, a.head_dim)[:top].to(compute_dtype)
        s = scales.reshape(-1)[:top].to(compute_dtype)
        rows = slice(i * n, (i + 1) * n)
        for t0 in range(0, top, CHUNK_TOKENS):
            t1 = min(top, t0 + CHUNK_TOKENS)
            logits = _scores(qf[i], wf[rows], k[t0:t1], s[t0:t1])
            t = torch.arange(t0, t1, device=q.device)
            valid = t[None, :] < limits[i].to(q.device)[:, None]
            out[rows, t0:t1] = torch.where(valid, logits.float(), out[rows, t0:t1])
    return out


def mqa_logits_ref(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits: bool = True, *,
                   compute_dtype: torch.dtype = torch.float32, row_chunk: int = 64,
                   out: torch.Tensor | None = None, check_values: bool = True) -> torch.Tensor:
    """logits [M, Nk] fp32; row i is valid for ks[i] <= t < ke[i], -inf elsewhere."""
    a = check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values=check_values)
    if a.cache_dtype == "fp8":
        k, k_scale = kv
        kf, sf = k.to(compute_dtype), k_scale.reshape(-1).to(compute_dtype)
    else:
        k = kv[0] if isinstance(kv, (tuple, list)) else kv
        kf = k.to(compute_dtype)
        sf = torch.ones(k.shape[0], dtype=compute_dtype, device=k.device)
    if out is None:
        out = torch.empty((a.rows, a.keys), dtype=torch.float32, device=q.device)
    out.fill_(float("-inf"))
    ks, ke = cu_seqlen_ks.long(), cu_seqlen_ke.long()
    qf, wf = q.to(compute_dtype), weights.to(compute_dtype)
    for r0 in range(0, a.rows, row_chunk):
        r1 = min(a.rows, r0 + row_chunk)
        lo, hi = max(int(ks[r0:r1].min()), 0), min(int(ke[r0:r1].max()), a.keys)  # clamped: unchecked windows
        for t0 in range(lo, hi, CHUNK_TOKENS):
            t1 = min(hi, t0 + CHUNK_TOKENS)
            logits = _scores(qf[r0:r1], wf[r0:r1], kf[t0:t1], sf[t0:t1])
            t = torch.arange(t0, t1, device=q.device)
            valid = (t[None, :] >= ks[r0:r1, None]) & (t[None, :] < ke[r0:r1, None])
            out[r0:r1, t0:t1] = torch.where(valid, logits.float(), out[r0:r1, t0:t1])
    return out


def _scores_rows(qf: torch.Tensor, w: torch.Tensor, k: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """_scores as two matmuls (q.k over D, then the weighted head sum): the same function, with
    one [R, H, T] temporary instead of two."""
    r, h, d = qf.shape
    dots = torch.matmul(qf.reshape(r * h, d), k.t()).clamp_min_(0).view(r, h, -1)
    return torch.bmm(w[:, None, :], dots)[:, 0] * s[None, :]


def paged_mqa_logits_chunked_ref(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len: int,
                                 clean_logits: bool = True, *, scale_layout: str = "page_blocked",
                                 compute_dtype: torch.dtype = torch.float32, row_chunk: int = 64,
                                 out: torch.Tensor | None = None, check_values: bool = True) -> torch.Tensor:
    """Chunked prefill over the paged cache: logits [M, max_context_len] fp32, row r valid for
    t < row_limit[r] in request row_request[r]'s pages, -inf elsewhere (whatever clean_logits says).

    Memory beyond the output: one request's valid pages (gathered once, for all its rows) and
    the scores of `row_chunk` rows x CHUNK_TOKENS positions; never a per-row gather.
    """
    a = check_prefill_paged(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, scale_layout,
                            check_values=check_values)
    if out is None:
        out = torch.empty((a.rows, max_context_len), dtype=torch.float32, device=q.device)
    out.fill_(float("-inf"))
    if a.rows == 0:
        return out
    req = row_request.cpu().long()
    lim = row_limit.cpu().long().clamp(min=0)
    page = a.layout.page_size
    # Rows are grouped by request: one segment of consecutive rows per request.
    bounds = [0] + (torch.nonzero(req[1:] != req[:-1]).reshape(-1) + 1).tolist() + [a.rows]
    for s0, s1 in zip(bounds[:-1], bounds[1:]):
        top = int(lim[s0:s1].max())
        if top == 0:
            continue
        pages = block_table[int(req[s0]), : (top + page - 1) // page]
        values, scales = unpack_pages(kv_cache, a.layout, pages)
        k = values.reshape(-1, a.head_dim)[:top].to(compute_dtype)
        s = scales.reshape(-1)[:top].to(compute_dtype)
        del values, scales
        for r0 in range(s0, s1, row_chunk):
            r1 = min(s1, r0 + row_chunk)
            hi = int(lim[r0:r1].max())
            if hi == 0:
                continue
            qf = q[r0:r1].to(compute_dtype)
            wf = weights[r0:r1].to(compute_dtype)
            rl = lim[r0:r1].to(q.device)
            for t0 in range(0, hi, CHUNK_TOKENS):
                t1 = min(hi, t0 + CHUNK_TOKENS)
                logits = _scores_rows(qf, wf, k[t0:t1], s[t0:t1]).float()
                t = torch.arange(t0, t1, device=q.device)
                out[r0:r1, t0:t1] = logits.masked_fill_(t[None, :] >= rl[:, None], float("-inf"))
    return out
