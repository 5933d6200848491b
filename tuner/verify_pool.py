"""A cache pool of more than 4 GiB whose block tables reference pages past the 4 GiB byte offset.

A kernel that forms `page_id * page_stride` in 32-bit arithmetic reads the wrong page there (or
faults) once the offset passes 2**31 (signed) or 2**32 (unsigned) bytes; the templates widen to
int64, and this case proves it on the shipped modules, for decode and for chunked prefill over
the paged cache.

Built cheaply: small inputs of the usual kind (tuner.inputs) are made first, then their pages are
copied into a pool of `pool_bytes` (filled with 0xFF, so a wrong read gives garbage) at new page
ids: request 0 all past the offset with the pool's very last page first, request 1 alternating
between past the offset and below 2 GiB, request 2 past the offset, request 3 below 2 GiB
(the control), and so on. Only the referenced pages are written: a 5 GiB pool costs a memset.
The output is checked against the oracle on every row (the shapes are small) and the -inf mask.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from indexer_logits._checks import request_tops, row_limits
from indexer_logits._identity import Problem

from .gates import launch, new_output
from .inputs import DecodeInputs, PrefillPagedInputs, make_decode_inputs, make_prefill_paged_inputs
from .verify_bucket import GIB, BucketCheck, bytes_text, free_bytes
from .verify_sample import check_sampled, num_rows

GPU_POOL = {"pool_bytes": 5 * GIB, "offset": 4 * GIB, "decode": (4, 32768), "chunked": (256, 32768)}
CPU_POOL = {"pool_bytes": 4 << 20, "offset": 2 << 20, "decode": (4, 256), "chunked": (8, 256)}
LOW_LIMIT = 1 << 31  # the control request's pages sit below the int32 byte offset


def _page_ids(batch: int, pages: int, num_pool: int, first_high: int, low_count: int, seed: int) -> torch.Tensor:
    """[batch, pages] distinct page ids in the pool, by the pattern in the module docstring."""
    g = torch.Generator().manual_seed(seed)
    n = batch * pages
    if num_pool - first_high < n or low_count < n:
        raise ValueError(f"pool: {num_pool - first_high} pages past the offset and {low_count} below 2 GiB; "
                         f"{n} needed")
    high = torch.randperm(num_pool - first_high, generator=g)[:n] + first_high
    top = num_pool - 1
    at = (high == top).nonzero()
    if at.numel():
        high[int(at[0])] = high[0]
    high[0] = top  # the pool's last page is request 0's first
    low = torch.randperm(low_count, generator=g)[:n]
    b = torch.arange(batch)[:, None].expand(batch, pages)
    p = torch.arange(pages)[None, :].expand(batch, pages)
    use_high = ((b % 4 == 0) | (b % 4 == 2) | ((b % 4 == 1) & (p % 2 == 0))).reshape(-1)
    return torch.where(use_high, high, low).reshape(batch, pages)


def relocate(inputs, pool_bytes: int, offset: int, seed: int = 0):
    """The same inputs with their pages moved into a pool of at least pool_bytes (see above)."""
    kv = inputs.kv_cache
    elem = kv.element_size()
    stride_bytes = kv.stride(0) * elem
    num_small = kv.shape[0]
    num_pool = -(-max(pool_bytes, offset + stride_bytes) // stride_bytes) + 1
    first_high = -(-offset // stride_bytes)
    low_count = min(first_high, LOW_LIMIT // stride_bytes)
    bt = inputs.block_table
    ids = _page_ids(bt.shape[0], bt.shape[1], num_pool, first_high, low_count, seed).to(bt.device)
    pool = torch.full((num_pool * stride_bytes,), 0xFF, dtype=torch.uint8, device=kv.device)
    small = kv.as_strided((num_small * kv.stride(0),), (1,)).view(torch.uint8).view(num_small, stride_bytes)
    pool.view(num_pool, stride_bytes)[ids.reshape(-1).long()] = small[bt.reshape(-1).long()]
    cache = pool.view(kv.dtype).as_strided((num_pool,) + tuple(kv.shape[1:]), kv.stride())
    return replace(inputs, kv_cache=cache, block_table=ids.to(torch.int32))


def read_extent(inputs) -> tuple[int, int]:
    """(pool bytes, the highest byte offset of a page the valid lengths make a kernel read)."""
    kv = inputs.kv_cache
    stride_bytes = kv.stride(0) * kv.element_size()
    page = kv.shape[1]
    if isinstance(inputs, PrefillPagedInputs):
        tops = request_tops(inputs.row_request.cpu(), inputs.row_limit.cpu(), inputs.block_table.shape[0])
    else:
        tops = row_limits(inputs.context_lens.cpu(), inputs.q.shape[1]).clamp(min=0).max(dim=1).values
    bt = inputs.block_table.cpu().long()
    used = torch.arange(bt.shape[1])[None, :] < ((tops + page - 1) // page)[:, None]
    return kv.shape[0] * stride_bytes, int(bt[used].max()) * stride_bytes if bool(used.any()) else 0


def pool_inputs(problem: Problem, seed: int, device: str, sizes: dict):
    """Small decode or chunked-prefill inputs relocated into a large pool."""
    if problem.is_decode:
        batch, width = sizes["decode"]
        lens = [width, width - 37, width // 2 + 5, 100][:batch] + [width] * max(0, batch - 4)
        small = make_decode_inputs(problem, batch, width, lens, seed=seed, device=device, pool_factor=1.0)
    else:
        rows, width = sizes["chunked"]
        first = rows // 2
        small = make_prefill_paged_inputs(problem, rows, width, chunk_lens=[first, rows - first],
                                          chunk_starts=[width // 3, width - (rows - first)], seed=seed,
                                          device=device, pool_factor=1.0)
    return relocate(small, sizes["pool_bytes"], sizes["offset"], seed)


def check_pool(module, problem: Problem, seed: int, device: str, sizes: dict) -> BucketCheck:
    """One paged module on a pool of sizes['pool_bytes'] with pages past sizes['offset']."""
    need = sizes["pool_bytes"] + (256 << 20)
    label = f"pool > {bytes_text(sizes['offset'])}"
    result = BucketCheck(sizes["decode" if problem.is_decode else "chunked"], label, need)
    free = free_bytes(device)
    if free is not None and need > free:
        result.skipped = f"needs about {need / GIB:.1f} GiB, {free / GIB:.1f} GiB free"
        return result
    start = time.perf_counter()
    inputs = None
    try:
        inputs = pool_inputs(problem, seed, device, sizes)
        pool, highest = read_extent(inputs)
        result.text = (f"pool {bytes_text(pool)}, pages read up to byte {highest:,} "
                       f"({'past' if highest >= sizes['offset'] else 'NOT past'} {sizes['offset']:,}), "
                       f"{'B' if problem.is_decode else 'M'}={result.shape[0]} ctx={result.shape[1]}")
        if highest < sizes["offset"]:
            result.error = "the case does not reach past the offset"
        out = launch(module, inputs, new_output(inputs), True)
        if device == "cuda":
            torch.cuda.synchronize()
        result.sample = check_sampled(out, inputs, random_rows=num_rows(inputs), seed=seed)
    except Exception as exc:  # a module that faults on a large pool is the failure this case looks for
        result.error = f"error: {type(exc).__name__}: {exc}"[:300]
    finally:
        del inputs
        if device == "cuda":
            torch.cuda.empty_cache()
    result.seconds = time.perf_counter() - start
    return result


def is_pool_family(problem: Problem) -> bool:
    return problem.is_paged

