"""Realistic random inputs for every kernel family.

Decode: block tables whose pages are scattered through a larger pool, a page stride larger than
one page, lengths that are not page multiples, lengths of 1, full-width lengths, 1-D and 2-D
context lens. Prefill: ragged causal windows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import torch

from indexer_logits._checks import chunked_prefill_rows, request_tops, row_limits
from .layouts import layout_for, pack_pages, quantize_tokens
from indexer_logits._identity import Problem

POISON_IDS = (2**31 - 1, -(2**31), -1, 2**30)


@dataclass(frozen=True)
class DecodeInputs:
    q: torch.Tensor
    kv_cache: torch.Tensor
    weights: torch.Tensor
    context_lens: torch.Tensor
    block_table: torch.Tensor
    max_context_len: int
    scale_layout: str

    def args(self):
        """Positional arguments in DeepGEMM's order, less schedule_meta."""
        return self.q, self.kv_cache, self.weights, self.context_lens, self.block_table, self.max_context_len

    def limits(self) -> torch.Tensor:
        """Exclusive valid limit per output row, [B*N] int64 (clamped at 0)."""
        return row_limits(self.context_lens, self.q.shape[1]).clamp(min=0).reshape(-1)

    def valid_mask(self) -> torch.Tensor:
        t = torch.arange(self.max_context_len, device=self.q.device)
        return t[None, :] < self.limits().to(self.q.device)[:, None]

    def with_lens(self, lens: torch.Tensor) -> "DecodeInputs":
        return replace(self, context_lens=lens.to(self.context_lens.device, torch.int32))


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def make_lens(problem: Problem, batch: int, max_context_len: int, mode="random", seed: int = 0) -> torch.Tensor:
    """Context lens (int32, CPU) of the problem's lens_mode.

    mode: "full" (every row at the full width), "random" (uniform in [1, width], with a length
    of 1, a non-multiple of the page and the full width always present when batch allows),
    "quarter" (around a quarter of the width, the partly filled tables engines really see),
    an int (every request at that length) or a sequence of per-request lengths.
    1-D lens count the next_n draft tokens in; 2-D lens give each draft token its own limit.
    """
    g = _generator(seed)
    n, page = problem.next_n, max(problem.page_size, 1)
    if isinstance(mode, str):
        if mode == "full":
            total = torch.full((batch,), max_context_len, dtype=torch.int64)
        elif mode == "random":
            total = torch.randint(1, max_context_len + 1, (batch,), generator=g)
            specials = [1, max_context_len, max(1, min(max_context_len, page + page // 2 + 1))]
            for i, v in enumerate(specials[:batch]):
                total[(i * 7919) % batch] = v
        elif mode == "quarter":
            q = max(1, max_context_len // 4)
            total = torch.randint(max(1, q - q // 8), q + q // 8 + 1, (batch,), generator=g).clamp(1, max_context_len)
        else:
            raise ValueError(f"mode: expected 'full', 'random', 'quarter', an int or a sequence, got {mode!r}")
    elif isinstance(mode, int):
        total = torch.full((batch,), mode, dtype=torch.int64)
    else:
        total = torch.as_tensor(list(mode), dtype=torch.int64)
        if total.shape != (batch,):
            raise ValueError(f"mode: expected {batch} lengths, got {total.numel()}")
    if bool((total < 0).any()) or bool((total > max_context_len).any()):
        raise ValueError(f"mode: expected lengths in [0, {max_context_len}], got {total.tolist()[:8]}...")
    if problem.lens_mode == "1d":
        return total.to(torch.int32)
    # 2-D: draft token j of a request with total length L sees t < L - n + 1 + j, clamped to >= 0;
    # jitter one draft per request downwards so rows are not just the 1-D rule in disguise.
    j = torch.arange(n)
    lens2 = (total[:, None] - n + 1 + j[None, :]).clamp(min=0)
    if n > 1:
        drop = torch.randint(0, 3, (batch,), generator=g)
        lens2[:, 0] = (lens2[:, 0] - drop).clamp(min=0)
    return lens2.to(torch.int32)


def make_decode_inputs(problem: Problem, batch: int, max_context_len: int, lens="random", *,
                       seed: int = 0, device="cpu", pool_factor: float = 1.5,
                       page_gap_bytes: int = 64, ue8m0: bool = False,
                       max_pool_bytes: int | None = None) -> DecodeInputs:
    """Random decode inputs, generated on `device`.

    The pool holds pool_factor times the pages the table can address, scattered randomly; with
    `max_pool_bytes` (for GPU benchmarks at huge widths) the pool is capped and the table draws
    page ids with replacement. Entries past a request's valid pages hold valid but unrelated
    ids (engines leave stale ids there); see `poison_block_table`.
    """
    if not problem.is_decode:
        raise ValueError(f"problem: expected a decode_paged problem, got {problem.family!r}")
    if batch < 1 or max_context_len < 1:
        raise ValueError(f"batch/max_context_len: expected positive ints, got {batch}/{max_context_len}")
    dev = torch.device(device)
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    n, h, d = problem.next_n, problem.heads, problem.head_dim
    kv_cache, block_table = _random_pool_and_table(problem, batch, max_context_len, g, dev, pool_factor,
                                                   page_gap_bytes, ue8m0, max_pool_bytes)
    if problem.q_dtype == "fp8":
        q = (torch.randn(batch, n, h, d, generator=g, device=dev) * 4).clamp(-448, 448).to(torch.float8_e4m3fn)
    else:
        q = torch.randn(batch, n, h, d, generator=g, device=dev).to(torch.bfloat16)
    weights = torch.randn(batch * n, h, generator=g, device=dev) / h
    lens = make_lens(problem, batch, max_context_len, lens, seed + 1)
    return DecodeInputs(q, kv_cache, weights, lens.to(dev), block_table, max_context_len, problem.scale_layout)


def _random_pool_and_table(problem: Problem, batch: int, max_context_len: int, g: torch.Generator, dev,
                           pool_factor: float, page_gap_bytes: int, ue8m0: bool, max_pool_bytes: int | None):
    """A random page pool (pool_factor times the pages the table can address, capped by
    max_pool_bytes) and a block table [batch, max_pages] scattering each request through it."""
    layout = layout_for(problem)
    max_pages = -(-max_context_len // problem.page_size)
    stride = layout.page_bytes + page_gap_bytes
    num_pages = max(int(batch * max_pages * pool_factor), batch * max_pages)
    if max_pool_bytes is not None:
        num_pages = max(1, min(num_pages, max_pool_bytes // stride))
    kv_cache = _random_cache(layout, num_pages, stride, g, dev, ue8m0)
    if num_pages >= batch * max_pages:
        ids = torch.randperm(num_pages, generator=g, device=dev)[: batch * max_pages]
    else:
        ids = torch.randint(0, num_pages, (batch * max_pages,), generator=g, device=dev)
    return kv_cache, ids.reshape(batch, max_pages).to(torch.int32)


def _random_cache(layout, num_pages: int, stride: int, g: torch.Generator, dev, ue8m0: bool) -> torch.Tensor:
    """A packed cache of random K, built a slab of pages at a time (bounded temporaries)."""
    slab = max(1, (256 << 20) // (layout.page_size * layout.head_dim * 4))
    first = None
    for p0 in range(0, num_pages, slab):
        k = torch.randn(min(slab, num_pages - p0), layout.page_size, layout.head_dim, generator=g, device=dev)
        part = pack_pages(k, layout, stride, ue8m0=ue8m0)
        if p0 == 0:
            if slab >= num_pages:
                return part
            # one buffer filled slab by slab in place: no second copy of the pool (a torch.cat of
            # the slabs needed twice the pool, 107 GB at 256 requests x 1M tokens)
            elem = part.element_size()
            buf = torch.empty(num_pages * stride // elem, dtype=part.dtype, device=dev)
            first = part
        flat = part.as_strided((part.shape[0] * stride // elem,), (1,))
        buf[p0 * stride // elem: p0 * stride // elem + flat.numel()].copy_(flat)
    shape = (num_pages,) + tuple(first.shape[1:])
    return buf.as_strided(shape, (stride // elem,) + tuple(first.stride()[1:]))


def poison_block_table(inputs: DecodeInputs) -> DecodeInputs:
    """Replace every block-table entry at or past a request's valid pages with ids far out of
    range (huge and negative): a kernel that reads one faults or returns garbage. A request's
    valid pages are those below its largest limit (decode: over its next_n rows; chunked
    prefill: over its query rows)."""
    page = inputs.kv_cache.shape[1]
    if isinstance(inputs, PrefillPagedInputs):
        top = request_tops(inputs.row_request.cpu(), inputs.row_limit.cpu(), inputs.block_table.shape[0])
    else:
        top = row_limits(inputs.context_lens.cpu(), inputs.q.shape[1]).clamp(min=0).max(dim=1).values
    needed = (top + page - 1) // page
    bt = inputs.block_table.cpu().clone()
    cols = torch.arange(bt.shape[1])
    past = cols[None, :] >= needed[:, None]
    poison = torch.tensor(POISON_IDS, dtype=torch.int32)
    bt[past] = poison[torch.arange(int(past.sum())) % len(POISON_IDS)]
    return replace(inputs, block_table=bt.to(inputs.block_table.device))


@dataclass(frozen=True)
class PrefillInputs:
    q: torch.Tensor
    kv: tuple
    weights: torch.Tensor
    cu_seqlen_ks: torch.Tensor
    cu_seqlen_ke: torch.Tensor

    def args(self):
        return self.q, self.kv, self.weights, self.cu_seqlen_ks, self.cu_seqlen_ke

    def valid_mask(self) -> torch.Tensor:
        t = torch.arange(self.kv[0].shape[0], device=self.q.device)
        return (t[None, :] >= self.cu_seqlen_ks[:, None]) & (t[None, :] < self.cu_seqlen_ke[:, None])


def make_prefill_inputs(problem: Problem, rows: int, keys: int, windows="causal", *, seed: int = 0,
                        device="cpu", num_seqs: int = 1) -> PrefillInputs:
    """Ragged prefill inputs. windows="causal": the keys are split into num_seqs sequences and
    the query rows are the last tokens of each (row sees its sequence's keys up to itself);
    "random": arbitrary [ks, ke) windows including empty ones."""
    if problem.is_decode:
        raise ValueError(f"problem: expected a prefill_ragged problem, got {problem.family!r}")
    g = _generator(seed)
    h, d = problem.heads, problem.head_dim
    k = torch.randn(keys, d, generator=g)
    if problem.cache_dtype == "fp8":
        k_fp8, k_scale = quantize_tokens(k)
        kv = (k_fp8, k_scale)
        q = (torch.randn(rows, h, d, generator=g) * 4).clamp(-448, 448).to(torch.float8_e4m3fn)
    else:
        kv = (k.to(torch.bfloat16),)
        q = torch.randn(rows, h, d, generator=g).to(torch.bfloat16)
    weights = torch.randn(rows, h, generator=g) / h
    if windows == "causal":
        ks, ke = _causal_windows(rows, keys, num_seqs)
    elif windows == "random":
        a = torch.randint(0, keys + 1, (rows,), generator=g)
        b = torch.randint(0, keys + 1, (rows,), generator=g)
        ks, ke = torch.minimum(a, b), torch.maximum(a, b)
    else:
        raise ValueError(f"windows: expected 'causal' or 'random', got {windows!r}")
    dev = torch.device(device)
    return PrefillInputs(q.to(dev), tuple(x.to(dev) for x in kv), weights.to(dev),
                         ks.to(dev, torch.int32), ke.to(dev, torch.int32))


def _causal_windows(rows: int, keys: int, num_seqs: int):
    if num_seqs < 1 or rows < num_seqs or keys < rows:
        raise ValueError(f"num_seqs: need 1 <= num_seqs <= rows <= keys, got {num_seqs}, {rows}, {keys}")
    row_split = [rows // num_seqs + (i < rows % num_seqs) for i in range(num_seqs)]
    key_split = [keys // num_seqs + (i < keys % num_seqs) for i in range(num_seqs)]
    ks, ke, k0 = [], [], 0
    for r, kk in zip(row_split, key_split):
        r = min(r, kk)
        for i in range(r):
            ks.append(k0)
            ke.append(k0 + kk - r + i + 1)
        k0 += kk
    ks_t, ke_t = torch.tensor(ks), torch.tensor(ke)
    if ks_t.numel() < rows:  # rows beyond what the keys allow: give them empty windows
        pad = rows - ks_t.numel()
        ks_t = torch.cat([ks_t, torch.zeros(pad, dtype=torch.int64)])
        ke_t = torch.cat([ke_t, torch.zeros(pad, dtype=torch.int64)])
    return ks_t, ke_t


@dataclass(frozen=True)
class PrefillPagedInputs:
    """Chunked prefill over the paged cache: query rows grouped by request, row r seeing
    positions t < row_limit[r] of request row_request[r]'s pages."""

    q: torch.Tensor
    kv_cache: torch.Tensor
    weights: torch.Tensor
    row_request: torch.Tensor
    row_limit: torch.Tensor
    block_table: torch.Tensor
    max_context_len: int
    scale_layout: str

    def args(self):
        """Positional arguments of the chunked entry points, in order."""
        return (self.q, self.kv_cache, self.weights, self.row_request, self.row_limit, self.block_table,
                self.max_context_len)

    def limits(self) -> torch.Tensor:
        """Exclusive valid limit per output row, [M] int64 (clamped at 0)."""
        return self.row_limit.long().clamp(min=0)

    def valid_mask(self) -> torch.Tensor:
        t = torch.arange(self.max_context_len, device=self.q.device)
        return t[None, :] < self.limits().to(self.q.device)[:, None]

    def with_limits(self, limits: torch.Tensor) -> "PrefillPagedInputs":
        return replace(self, row_limit=limits.to(self.row_limit.device, torch.int32))


def make_prefill_paged_inputs(problem: Problem, rows: int, max_context_len: int, *, num_requests: int = 3,
                              chunk_starts: Sequence[int] | None = None, chunk_lens: Sequence[int] | None = None,
                              seed: int = 0, device="cpu", pool_factor: float = 1.5, page_gap_bytes: int = 64,
                              ue8m0: bool = False, max_pool_bytes: int | None = None) -> PrefillPagedInputs:
    """Random chunked-prefill inputs over the paged cache, generated on `device`.

    `rows` query rows are split over `num_requests` requests (or as `chunk_lens` says); request
    b prefills a chunk of chunk_lens[b] tokens starting at chunk_starts[b] (default: a random
    p0 > 0 that keeps the chunk inside the table, the last request's chunk ending at the full
    width), so its row r sees t <= p0 + r. Splits are not multiples of the usual block_m, so
    blocks of rows span requests. The cache is built as for decode: pages scattered through a
    larger pool, a page stride larger than a page, valid but unrelated ids past each request's
    valid pages (see `poison_block_table`).
    """
    if problem.family != "prefill_paged":
        raise ValueError(f"problem: expected a prefill_paged problem, got {problem.family!r}")
    if rows < 0 or max_context_len < 1:
        raise ValueError(f"rows/max_context_len: expected rows >= 0 and a positive width, got {rows}/{max_context_len}")
    g = _generator(seed)
    if chunk_lens is None:
        if num_requests < 1:
            raise ValueError(f"num_requests: expected >= 1, got {num_requests}")
        lens = [rows // num_requests + (i < rows % num_requests) for i in range(num_requests)]
        if num_requests > 1 and lens[0] > 1 and lens[0] % 2 == 0:
            lens[0] -= 1  # an odd first boundary: some block of 2 or 4 rows spans two requests
            lens[1] += 1
    else:
        lens = [int(v) for v in chunk_lens]
        if sum(lens) != rows:
            raise ValueError(f"chunk_lens: expected lengths summing to rows={rows}, got {lens}")
    if any(v > max_context_len for v in lens):
        raise ValueError(f"chunk_lens: expected chunks within max_context_len={max_context_len}, got {lens}")
    if chunk_starts is None:
        starts = []
        for i, v in enumerate(lens):
            room = max_context_len - v
            if i == len(lens) - 1 or room < 1:
                starts.append(room)
            else:
                starts.append(int(torch.randint(1, room + 1, (1,), generator=g)))
    else:
        starts = [int(v) for v in chunk_starts]
        if len(starts) != len(lens):
            raise ValueError(f"chunk_starts: expected {len(lens)} starts, got {len(starts)}")
        if any(p + v > max_context_len for p, v in zip(starts, lens)):
            raise ValueError(f"chunk_starts: chunks must end within max_context_len={max_context_len}")
    dev = torch.device(device)
    gd = torch.Generator(device=dev)
    gd.manual_seed(seed)
    h, d = problem.heads, problem.head_dim
    batch = len(lens)
    kv_cache, block_table = _random_pool_and_table(problem, batch, max_context_len, gd, dev, pool_factor,
                                                   page_gap_bytes, ue8m0, max_pool_bytes)
    if problem.q_dtype == "fp8":
        q = (torch.randn(rows, h, d, generator=gd, device=dev) * 4).clamp(-448, 448).to(torch.float8_e4m3fn)
    else:
        q = torch.randn(rows, h, d, generator=gd, device=dev).to(torch.bfloat16)
    weights = torch.randn(rows, h, generator=gd, device=dev) / h
    row_request, row_limit = chunked_prefill_rows(starts, lens, device=dev)
    return PrefillPagedInputs(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                              problem.scale_layout)
