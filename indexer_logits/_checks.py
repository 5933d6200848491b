"""Argument checks for the public entry points and the reference. Imports only torch.

Every failure is a ValueError naming the argument and what was expected. Shape, dtype and
stride checks cost no device work; `check_values=True` also reads the lengths and the block
table (a host synchronisation), which callers skip while a CUDA graph is being captured, and on
CUDA tensors unless asked for (indexer_logits._api.value_checks_enabled says when).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._layout import CacheLayout, check_cache, layout_of


def positive_int(value) -> bool:
    """Whether `value` is an int of at least 1 (a bool is not): the arguments that count something."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1

Q_DTYPES = {torch.float8_e4m3fn: "fp8", torch.bfloat16: "bf16"}


def _tensor(name: str, x, dtypes, dims: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        raise ValueError(f"{name}: expected dtype {' or '.join(str(d) for d in dtypes)}, got {x.dtype}")
    if x.dim() != dims:
        raise ValueError(f"{name}: expected {dims} dims, got shape {list(x.shape)}")


def _same_device(ref_name: str, ref: torch.Tensor, **others: torch.Tensor) -> None:
    for name, x in others.items():
        if x.device != ref.device:
            raise ValueError(f"{name}: expected device {ref.device} (same as {ref_name}), got {x.device}")


@dataclass(frozen=True)
class DecodeArgs:
    batch: int
    next_n: int
    heads: int
    head_dim: int
    layout: CacheLayout
    lens_2d: bool
    page_stride: int  # in elements of the cache tensor's dtype
    max_pages: int
    max_context_len: int


def row_limits(context_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """Exclusive valid limit per output row, [B, N] int64 (may be <= 0 for an empty row)."""
    if context_lens.dim() == 2:
        return context_lens.long()
    j = torch.arange(next_n, device=context_lens.device)
    return context_lens.long()[:, None] - next_n + 1 + j[None, :]


def _check_weights(weights, rows: int, heads: int, rows_name: str) -> None:
    """weights [rows, H] float32 with contiguous rows (one per output row)."""
    _tensor("weights", weights, (torch.float32,), 2)
    if tuple(weights.shape) != (rows, heads):
        raise ValueError(f"weights: expected shape [{rows_name}, H] = [{rows}, {heads}], got {list(weights.shape)}")
    if weights.stride(1) != 1:
        raise ValueError(f"weights: expected contiguous rows (stride(1) == 1), got strides {list(weights.stride())}")


def _check_q_and_cache(q: torch.Tensor, kv_cache, scale_layout: str):
    """q's [H, D] contiguity and dtype against the paged cache's layout; (layout, page stride)."""
    d = q.shape[-1]
    if q.stride(-1) != 1 or q.stride(-2) != d:
        raise ValueError(f"q: expected the last two dims [H, D] contiguous, got strides {list(q.stride())}")
    layout = layout_of(kv_cache, scale_layout)
    if Q_DTYPES[q.dtype] != layout.cache_dtype:
        raise ValueError(f"q: expected dtype matching the {layout.cache_dtype} cache, got {q.dtype}")
    if layout.head_dim != d:
        raise ValueError(f"kv_cache: expected last dim {d + 4 if layout.cache_dtype == 'fp8' else d} for head dim D={d}, got {kv_cache.shape[3]}")
    return layout, check_cache(kv_cache, layout)


def check_decode(q, kv_cache, weights, context_lens, block_table, max_context_len,
                 scale_layout: str = "page_blocked", check_values: bool = True) -> DecodeArgs:
    _tensor("q", q, tuple(Q_DTYPES), 4)
    b, n, h, d = q.shape
    layout, page_stride = _check_q_and_cache(q, kv_cache, scale_layout)
    _check_weights(weights, b * n, h, "B*next_n")
    _tensor("context_lens", context_lens, (torch.int32,), context_lens.dim() if isinstance(context_lens, torch.Tensor) else 1)
    if context_lens.dim() == 1:
        if context_lens.shape[0] != b:
            raise ValueError(f"context_lens: expected shape [B] = [{b}] or [B, next_n] = [{b}, {n}], got {list(context_lens.shape)}")
    elif context_lens.dim() == 2:
        if tuple(context_lens.shape) != (b, n):
            raise ValueError(f"context_lens: expected shape [B, next_n] = [{b}, {n}], got {list(context_lens.shape)}")
    else:
        raise ValueError(f"context_lens: expected 1 or 2 dims, got shape {list(context_lens.shape)}")
    _tensor("block_table", block_table, (torch.int32,), 2)
    if block_table.shape[0] != b:
        raise ValueError(f"block_table: expected {b} rows (one per request), got shape {list(block_table.shape)}")
    if block_table.stride(1) != 1:
        raise ValueError(f"block_table: expected contiguous rows (stride(1) == 1), got strides {list(block_table.stride())}")
    if not positive_int(max_context_len):
        raise ValueError(f"max_context_len: expected a positive int, got {max_context_len!r}")
    _same_device("q", q, kv_cache=kv_cache, weights=weights, context_lens=context_lens, block_table=block_table)
    args = DecodeArgs(b, n, h, d, layout, context_lens.dim() == 2, page_stride, block_table.shape[1], max_context_len)
    if check_values:
        check_decode_values(args, kv_cache, context_lens, block_table)
    return args


def check_decode_values(args: DecodeArgs, kv_cache, context_lens, block_table) -> None:
    """Lengths and block-table ids inside the valid pages (reads device memory)."""
    lens = context_lens.cpu()
    if bool((lens < 0).any()):
        raise ValueError(f"context_lens: expected lengths >= 0, got min {int(lens.min())}")
    limits = row_limits(lens, args.next_n).clamp(min=0)
    capacity = args.max_pages * args.layout.page_size
    top = int(limits.max()) if limits.numel() else 0
    if top > capacity:
        raise ValueError(
            f"context_lens: a valid length of {top} exceeds the block table's capacity "
            f"({args.max_pages} pages x {args.layout.page_size} = {capacity} tokens)"
        )
    if top > args.max_context_len:
        raise ValueError(f"max_context_len: expected >= the longest valid length {top}, got {args.max_context_len}")
    pages_needed = (limits.max(dim=1).values + args.layout.page_size - 1) // args.layout.page_size
    cols = torch.arange(args.max_pages)
    used = cols[None, :] < pages_needed[:, None]
    ids = block_table.cpu()[used]
    num_pages = kv_cache.shape[0]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_pages):
        bad = ids[(ids < 0) | (ids >= num_pages)][0]
        raise ValueError(
            f"block_table: expected page ids in [0, {num_pages}) inside the valid pages, got {int(bad)}"
        )


@dataclass(frozen=True)
class PrefillArgs:
    rows: int
    heads: int
    head_dim: int
    keys: int
    cache_dtype: str


LEGACY_WINDOW_NAMES = ("cu_seqlen_ks", "cu_seqlen_ke")
DEEPGEMM_WINDOW_NAMES = ("cu_seq_len_k_start", "cu_seq_len_k_end")


def check_prefill(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, check_values: bool = True,
                  names: tuple[str, str] = LEGACY_WINDOW_NAMES) -> PrefillArgs:
    """names: what the window arguments are called in messages (the caller's spelling: this
    runtime's cu_seqlen_ks / cu_seqlen_ke, or DeepGEMM's cu_seq_len_k_start / cu_seq_len_k_end)."""
    ks_name, ke_name = names
    _tensor("q", q, tuple(Q_DTYPES), 3)
    m, h, d = q.shape
    if q.stride(-1) != 1 or q.stride(-2) != d:
        raise ValueError(f"q: expected the last two dims [H, D] contiguous, got strides {list(q.stride())}")
    if Q_DTYPES[q.dtype] == "fp8":
        if not (isinstance(kv, (tuple, list)) and len(kv) == 2):
            raise ValueError("kv: expected a pair (k [Nk, D] float8_e4m3fn, k_scale [Nk] float32) for fp8 q")
        k, k_scale = kv
        _tensor("kv[0] (k)", k, (torch.float8_e4m3fn,), 2)
        _tensor("kv[1] (k_scale)", k_scale, (torch.float32,), k_scale.dim() if isinstance(k_scale, torch.Tensor) else 1)
        if k_scale.dim() == 2 and k_scale.shape[1] == 1:
            k_scale = k_scale[:, 0]
        if k_scale.dim() != 1 or k_scale.shape[0] != k.shape[0]:
            raise ValueError(f"kv[1] (k_scale): expected shape [Nk] = [{k.shape[0]}], got {list(k_scale.shape)}")
    else:
        k = kv[0] if isinstance(kv, (tuple, list)) else kv
        _tensor("kv (k)", k, (torch.bfloat16,), 2)
    if k.shape[1] != d:
        raise ValueError(f"kv: expected K of shape [Nk, {d}], got {list(k.shape)}")
    if k.stride(1) != 1:
        raise ValueError(f"kv: expected K rows contiguous (stride(1) == 1), got strides {list(k.stride())}")
    _check_weights(weights, m, h, "M")
    for name, x in ((ks_name, cu_seqlen_ks), (ke_name, cu_seqlen_ke)):
        _tensor(name, x, (torch.int32,), 1)
        if x.shape[0] != m:
            raise ValueError(f"{name}: expected shape [M] = [{m}], got {list(x.shape)}")
    _same_device("q", q, k=k, weights=weights, **{ks_name: cu_seqlen_ks, ke_name: cu_seqlen_ke})
    args = PrefillArgs(m, h, d, k.shape[0], Q_DTYPES[q.dtype])
    if check_values and m:
        ks, ke = cu_seqlen_ks.cpu(), cu_seqlen_ke.cpu()
        if bool((ks < 0).any()):
            raise ValueError(f"{ks_name}: expected values >= 0, got min {int(ks.min())}")
        if bool((ke > k.shape[0]).any()):
            raise ValueError(f"{ke_name}: expected values <= Nk = {k.shape[0]}, got max {int(ke.max())}")
        if bool((ke < ks).any()):
            i = int(torch.nonzero(ke < ks)[0])
            raise ValueError(f"{ke_name}: expected ke >= ks per row, row {i} has ks={int(ks[i])} ke={int(ke[i])}")
    return args


def check_compressed_width(max_seqlen_k) -> int:
    """DeepGEMM's max_seqlen_k: 0 (the wide [M, Nk] output) or the width of the compressed one."""
    if isinstance(max_seqlen_k, bool) or not isinstance(max_seqlen_k, int) or max_seqlen_k < 0:
        raise ValueError(f"max_seqlen_k: expected an int >= 0 (0: the [M, Nk] output; > 0: the compressed "
                         f"[M, max_seqlen_k] one), got {max_seqlen_k!r}")
    return max_seqlen_k


def check_compressed_values(cu_seqlen_ks, cu_seqlen_ke, width: int) -> None:
    """Every row's window fits the compressed width (reads device memory)."""
    if cu_seqlen_ks.numel() == 0:
        return
    longest = int((cu_seqlen_ke.cpu().long() - cu_seqlen_ks.cpu().long()).max())
    if longest > width:
        raise ValueError(f"max_seqlen_k: expected >= the longest window ke - ks = {longest}, got {width}")


# ---------------------------------------------------------------------------------------------
# DeepGEMM's varlen decode (`indices=`, its 54e2261 generation): one query token per row, and
# indices[t] the request of row t. DeepGEMM schedules each run of equal consecutive ids as one
# request, reads the run's pages through the block-table row of its first row and bounds its work
# by the length of its last row.


def check_indices(indices, rows: int, next_n: int, device: torch.device, ref_name: str = "q") -> None:
    """indices [rows] int32, contiguous, on `device` (ref_name's); DeepGEMM's varlen layout has next_n == 1."""
    _tensor("indices", indices, (torch.int32,), 1)
    if indices.shape[0] != rows:
        raise ValueError(f"indices: expected shape [B] = [{rows}] (the request of each query row), "
                         f"got {list(indices.shape)}")
    if rows > 1 and indices.stride(0) != 1:
        raise ValueError(f"indices: expected a contiguous tensor, got stride {indices.stride(0)}")
    if next_n != 1:
        raise ValueError(f"indices: expected next_n == 1 with indices (DeepGEMM's varlen layout: one query token "
                         f"per row), got next_n={next_n}")
    if indices.device != device:
        raise ValueError(f"indices: expected device {device} (same as {ref_name}), got {indices.device}")


def run_bounds(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, last) row of the run of equal consecutive ids each row belongs to, int64 [rows]."""
    n = ids.numel()
    pos = torch.arange(n, device=ids.device)
    if n == 0:
        return pos, pos
    starts = torch.ones(n, dtype=torch.bool, device=ids.device)
    starts[1:] = ids[1:] != ids[:-1]
    first = torch.where(starts, pos, torch.zeros_like(pos)).cummax(0).values
    ends = torch.ones(n, dtype=torch.bool, device=ids.device)
    ends[:-1] = starts[1:]
    last = torch.where(ends, pos, torch.full_like(pos, n)).flip(0).cummin(0).values.flip(0)
    return first, last


def check_indices_values(args: "DecodeArgs", indices, context_lens, block_table) -> None:
    """The rows of each run are one request, as DeepGEMM computes them: the same page ids inside
    each row's valid pages as the run's first row, and no row longer than the run's last (reads
    device memory)."""
    first, last = run_bounds(indices.cpu().long())
    if first.numel() == 0:
        return
    lens = context_lens.cpu().long().reshape(args.batch, -1)[:, -1].clamp(min=0)
    long_rows = lens > lens[last]
    if bool(long_rows.any()):
        r = int(torch.nonzero(long_rows)[0])
        raise ValueError(f"context_lens: expected no row of a run of equal indices to be longer than the run's last "
                         f"row (DeepGEMM bounds a run's work by it), row {r} has length {int(lens[r])} > "
                         f"{int(lens[last[r]])} of row {int(last[r])}")
    bt = block_table.cpu()
    pages = (lens + args.layout.page_size - 1) // args.layout.page_size
    used = torch.arange(args.max_pages)[None, :] < pages[:, None]
    differs = used & (bt != bt[first])
    if bool(differs.any()):
        r, c = (int(v) for v in torch.nonzero(differs)[0])
        raise ValueError(f"block_table: expected the rows of a run of equal indices (one request) to hold the same "
                         f"page ids inside their valid pages (DeepGEMM reads the run's first row for all of them), "
                         f"row {r} column {c} holds {int(bt[r, c])}, its run's first row {int(first[r])} holds "
                         f"{int(bt[first[r], c])}")


# ---------------------------------------------------------------------------------------------
# Chunked prefill over the paged cache: many query rows, each with its request and its limit.


def chunked_prefill_rows(chunk_starts, chunk_lens, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(row_request, row_limit), int32 [M] each, for request b's chunk of chunk_lens[b] new
    tokens starting at position chunk_starts[b]: row r of that chunk sees t <= p0 + r, that is
    row_limit = p0 + r + 1. Rows are grouped by request, in request order; requests with an
    empty chunk have no rows. Built on the host (reads the chunk sizes), then moved to `device`
    (default: chunk_starts' device when it is a tensor, else the CPU)."""
    if device is None:
        device = chunk_starts.device if isinstance(chunk_starts, torch.Tensor) else torch.device("cpu")
    starts = torch.as_tensor(chunk_starts).cpu().long().reshape(-1)
    lens = torch.as_tensor(chunk_lens).cpu().long().reshape(-1)
    if starts.shape != lens.shape:
        raise ValueError(f"chunk_lens: expected one length per chunk start ({starts.numel()}), got {lens.numel()}")
    if bool((starts < 0).any()):
        raise ValueError(f"chunk_starts: expected positions >= 0, got min {int(starts.min())}")
    if bool((lens < 0).any()):
        raise ValueError(f"chunk_lens: expected lengths >= 0, got min {int(lens.min())}")
    row_request = torch.repeat_interleave(torch.arange(starts.numel()), lens)
    first_row = torch.cumsum(lens, 0) - lens  # each request's first row
    r = torch.arange(row_request.numel()) - first_row[row_request]
    row_limit = starts[row_request] + r + 1
    if row_limit.numel() and int(row_limit.max()) > 2**31 - 1:
        raise ValueError("chunk_starts: positions overflow int32")
    return row_request.to(device, torch.int32), row_limit.to(device, torch.int32)


@dataclass(frozen=True)
class PrefillPagedArgs:
    rows: int
    heads: int
    head_dim: int
    layout: CacheLayout
    page_stride: int  # in elements of the cache tensor's dtype
    batch: int  # requests (block-table rows)
    max_pages: int
    max_context_len: int


def check_prefill_paged(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                        scale_layout: str = "page_blocked", check_values: bool = True) -> PrefillPagedArgs:
    """Arguments of the chunked-prefill entry points: q [M, H, D], the decode cache, weights
    [M, H], row_request / row_limit [M] int32, block_table [B, max_pages] int32."""
    _tensor("q", q, tuple(Q_DTYPES), 3)
    m, h, d = q.shape
    layout, page_stride = _check_q_and_cache(q, kv_cache, scale_layout)
    _check_weights(weights, m, h, "M")
    for name, x in (("row_request", row_request), ("row_limit", row_limit)):
        _tensor(name, x, (torch.int32,), 1)
        if x.shape[0] != m:
            raise ValueError(f"{name}: expected shape [M] = [{m}] (one per query row), got {list(x.shape)}")
        if m > 1 and x.stride(0) != 1:
            raise ValueError(f"{name}: expected a contiguous tensor, got stride {x.stride(0)}")
    _tensor("block_table", block_table, (torch.int32,), 2)
    if block_table.stride(1) != 1:
        raise ValueError(f"block_table: expected contiguous rows (stride(1) == 1), got strides {list(block_table.stride())}")
    if not positive_int(max_context_len):
        raise ValueError(f"max_context_len: expected a positive int, got {max_context_len!r}")
    _same_device("q", q, kv_cache=kv_cache, weights=weights, row_request=row_request, row_limit=row_limit,
                 block_table=block_table)
    args = PrefillPagedArgs(m, h, d, layout, page_stride, block_table.shape[0], block_table.shape[1], max_context_len)
    if check_values:
        check_prefill_paged_values(args, kv_cache, row_request, row_limit, block_table)
    return args


def request_tops(row_request: torch.Tensor, row_limit: torch.Tensor, batch: int) -> torch.Tensor:
    """The largest limit of each request's rows, [batch] int64 (0 for a request with no rows)."""
    top = torch.zeros(batch, dtype=torch.int64, device=row_request.device)
    if row_request.numel():
        top.scatter_reduce_(0, row_request.long(), row_limit.long().clamp(min=0), reduce="amax")
    return top


def check_prefill_paged_values(args: PrefillPagedArgs, kv_cache, row_request, row_limit, block_table) -> None:
    """Row requests and limits, and the block-table ids inside each request's valid pages (reads
    device memory)."""
    if args.rows == 0:
        return
    req, lim = row_request.cpu().long(), row_limit.cpu().long()
    if int(req.min()) < 0 or int(req.max()) >= args.batch:
        bad = int(req[(req < 0) | (req >= args.batch)][0])
        raise ValueError(f"row_request: expected request ids in [0, {args.batch}) (block_table rows), got {bad}")
    if args.rows > 1 and bool((req[1:] < req[:-1]).any()):
        i = int(torch.nonzero(req[1:] < req[:-1])[0]) + 1
        raise ValueError(f"row_request: expected rows grouped by request in request order (non-decreasing), "
                         f"row {i} has request {int(req[i])} after {int(req[i - 1])}")
    if int(lim.min()) < 0:
        raise ValueError(f"row_limit: expected limits >= 0, got min {int(lim.min())}")
    capacity = args.max_pages * args.layout.page_size
    top = int(lim.max())
    if top > capacity:
        raise ValueError(f"row_limit: a limit of {top} exceeds the block table's capacity "
                         f"({args.max_pages} pages x {args.layout.page_size} = {capacity} tokens)")
    if top > args.max_context_len:
        raise ValueError(f"max_context_len: expected >= the largest row limit {top}, got {args.max_context_len}")
    pages_needed = (request_tops(req, lim, args.batch) + args.layout.page_size - 1) // args.layout.page_size
    used = torch.arange(args.max_pages)[None, :] < pages_needed[:, None]
    ids = block_table.cpu()[used]
    num_pages = kv_cache.shape[0]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_pages):
        bad = ids[(ids < 0) | (ids >= num_pages)][0]
        raise ValueError(f"block_table: expected page ids in [0, {num_pages}) inside the valid pages, got {int(bad)}")


def check_tile_maxima(given, rows: int, tiles: int, device) -> None:
    """The top-k's tile_maxima (indexer_logits._topk_select.select_rows): (maxima float32 [rows, >=
    tiles] of unit column stride, ntiles int32 [rows][, True]) on the logits' device."""
    ok = (isinstance(given, tuple) and len(given) in (2, 3) and given[2:] in ((), (True,))
          and all(isinstance(t, torch.Tensor) for t in given[:2]))
    maxima, ntiles = given[:2] if ok else (None, None)
    if not (ok and maxima.dtype == torch.float32 and maxima.dim() == 2 and maxima.shape[0] == rows
            and maxima.shape[1] >= tiles and (tiles <= 1 or maxima.stride(1) == 1) and ntiles.dtype == torch.int32
            and tuple(ntiles.shape) == (rows,) and ntiles.is_contiguous()
            and maxima.device == ntiles.device == torch.device(device)):
        raise ValueError(f"tile_maxima: expected (float32 [{rows}, >= {tiles}] with unit column stride, int32 "
                         f"[{rows}]) on {device}, got " + (", ".join(f"{t.dtype} {list(t.shape)} on {t.device}"
                                                                   for t in given[:2]) if ok else repr(given)[:200]))
