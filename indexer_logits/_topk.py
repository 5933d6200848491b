"""The top-k of the indexer logits, as engines use them: fp8_paged_mqa_topk, fp8_mqa_topk,
fp8_paged_mqa_topk_chunked and their bf16 twins.

Each call scores with the logits kernels (the same dispatch and tables) and selects each row's k
best keys on the device (indexer_logits._topk_select.PATH "auto": the GPU's tuned table, else the
built-in choice, _topk_select.pick_path: one program a row where the rows fill the GPU's SMs once, a
selection bounded by tile maxima for many keys, four kernels otherwise): int32
[rows, k] indices, -1 past a row's valid keys, in no particular order; ties at the k-th score go
to the smallest indices. Decode indices are key positions (the logits columns, as SGLang's
fast_topk_v2 and vLLM's top_k_per_row_decode return them); prefill indices are relative to the
row's window start ks (vLLM's top_k_per_row_prefill; add ks for absolute positions). No host
synchronisation, grids fixed by shapes: CUDA-graph safe.

Memory: decode scores all rows at once (the [rows, max_context_len] logits are small); the
prefill paths score a block of rows at a time into one scratch buffer of at most
`max_scratch_bytes` (default: 1/20 of the full logits, at least SCRATCH_FLOOR), so no
[rows, Nk] fp32 tensor exists.
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from . import _fastpath
from ._chunked import bf16_paged_mqa_logits_chunked, fp8_paged_mqa_logits_chunked
from ._decode import topk_logits
from ._prefill import topk_ragged_logits
from ._checks import positive_int
from ._tables import interpreting
from ._topk_workspace import give_back
from ._topk_select import (WINDOW_CAUSAL, WINDOW_LIMIT, WINDOW_RAGGED, call_workspace, scratch_bytes_per_row,
                           select_rows, tiles_first_pass)

SCRATCH_FRACTION = 20          # default scratch: this fraction of the full [rows, Nk] logits
# ... but at least this many bytes. A block costs the host ~50-110 us (its logits call and selection, replayed), so
# a block's logits should cost the GPU about as much: 48 MiB of fp32 logits are 12.6M scores, ~100 us of the logits
# kernel on an H100 at 64 heads of 128, and about the H100's L2 (the count of a bound block reads them there). Measured
# there against 16 MiB (docs/perf_logs/topk_prefill_blocks/call9_*, one process, alternated, exact on sampled rows):
# 8192 x 8K 1906 -> 1315 us (16 blocks -> 6; 3.02 -> 2.08 of the logits), 2048 x 32K 3516 -> 1846 us (24 -> 8;
# 3.09 -> 1.62), both host-bound before. A sweep (call11_*): 32 / 48 / 64 / 96 MiB at 8192 x 8K 2.18 / 1.99 / 1.90 /
# 1.85 of the logits, 2048 x 32K 1.72 / 1.55 / 1.56 / 1.55, 4096 x 16K 1.81 / 1.81 / 1.72 / 1.75: device-bound from 48
# on. Not 64: calls of 1 GiB of logits or more take 1/20 as before (4096 x 64K: 51 MiB, 164-row blocks; 197-row
# ones ran slower there, and 64 MiB would reach the 1/16 of its logits the top-k may add).
SCRATCH_FLOOR = 48 << 20
ENV_BACKEND = "INDEXER_LOGITS_BACKEND"
MAX_K = 16384                  # the selection's finishing step keeps a [next_pow2(k)] vector in registers
NEG_INF = float("-inf")
# Decode: where the tiles path serves, the logits kernel's epilogue writes its first pass (the tile
# maxima and their range) from the tile in registers, and the selection skips two kernels: 10 us
# of 356 at 64 x 128K on the H200 (docs/PERF.md, "Top-k: the tile maxima from the logits epilogue").
EPILOGUE = True
# Ragged prefill: where the bound path serves a block, the ragged logits kernel reads its stored chunk back
# after its tile loop and writes the bound path's tile maxima and their range (templates/prefill_ragged.py.jinja,
# _chunk_maxima), sparing a block's maxima and range kernels. Measured on an H100 (4096 x 64K, blocks of 164 rows,
# one process, alternated; docs/perf_logs/topk_prefill_blocks/call4_*): the ragged kernel +3% (4679 -> 4821 us),
# the maxima and range kernels' 519 us gone, end to end 6507 -> 6364 us (1.496 -> 1.463 of the logits), exact.
# (Call 4 also read the call's host enqueue time 4279 -> 6532 us; call 6 timed it alone, 4036 -> 3333 us, every
# block's launches replayed either way: the host's times drift 2x between calls, the epilogue saves two launches.)
# The first form, from the dot's layout in the loop, cost that kernel 43%. EPILOGUE off turns it off too.
RAGGED_EPILOGUE = True
# Prefill: a call's blocks of rows share their selection's plan (_topk_select.SelectionPlan: the path, its
# settings, the launches' key, the buffers beside the workspace), made by its first block of each row count,
# where each block made its own. Measured on an H100 (docs/perf_logs/topk_prefill_blocks/call8_*): the selections'
# host time over the 25 blocks of a 4096 x 64K call 4623 -> 2445 us (not what bounds that call: end to end level);
# 8192 x 8K, 16 blocks of 512 rows, host-bound: end to end 2323 -> 1909 us (3.60 -> 2.96 of the logits).
SHARE_PLANS = True
_NO_EPILOGUE: set = set()  # call shapes whose serving logits module cannot write the maxima (asked once)
_fastpath.ALSO_CLEARED.append(_NO_EPILOGUE)  # clear_cache(): another table may serve them by one that can


def _on_device(device: torch.device) -> bool:
    """Whether the selection runs the kernels (a GPU, or the interpreter) or torch."""
    if os.environ.get(ENV_BACKEND, "").strip().lower() == "reference":
        return False
    return device.type != "cpu" or interpreting()


def check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValueError(f"k: expected an int in [1, {MAX_K}], got {k!r}")
    return k


def top_k_output(out, rows: int, k: int, device, what: str = "out") -> torch.Tensor:
    """The caller's int32 [rows, k] index buffer (checked) or a new one."""
    if out is None:
        return torch.empty((rows, k), dtype=torch.int32, device=device)
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{what}: expected a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != torch.int32 or out.dim() != 2 or tuple(out.shape) != (rows, k):
        raise ValueError(f"{what}: expected int32 [{rows}, {k}], got {out.dtype} {list(out.shape)}")
    if k > 1 and out.stride(1) != 1 or rows > 1 and out.stride(0) < k:
        raise ValueError(f"{what}: expected contiguous, non-overlapping rows, got strides {list(out.stride())}")
    if out.device != torch.device(device):
        raise ValueError(f"{what}: expected device {device}, got {out.device}")
    return out


def _values_output(values_out, rows: int, k: int, device):
    if values_out is None:
        return torch.empty((rows, k), dtype=torch.float32, device=device)
    if (not isinstance(values_out, torch.Tensor) or values_out.dtype != torch.float32
            or tuple(values_out.shape) != (rows, k) or (k > 1 and values_out.stride(1) != 1)):
        raise ValueError(f"values_out: expected float32 [{rows}, {k}] with contiguous rows, got "
                         + (f"{values_out.dtype} {list(values_out.shape)}" if isinstance(values_out, torch.Tensor)
                            else type(values_out).__name__))
    return values_out


def _select(logits, k, window, idx, val, ws, *, lo=None, hi=None, lens=None, next_n=1, tile_maxima=None,
            kind="prefill", plans=None) -> None:
    """Kernels where they run, else torch over the same windows (reads them on the host). `plans`: the
    call's blocks' (select_rows)."""
    if _on_device(logits.device):
        select_rows(logits, k, window, idx, val, ws, lo=lo, hi=hi, lens=lens, next_n=next_n, tile_maxima=tile_maxima,
                    kind=kind, plans=plans)
        return
    rows = logits.shape[0]
    r = torch.arange(rows, device=logits.device)
    if window == WINDOW_RAGGED:
        a, b = lo, hi
    elif window == WINDOW_CAUSAL:
        b = lens.long()[r // next_n] - next_n + r % next_n + 1
        a = torch.zeros_like(b)
    else:
        b = lens.long()
        a = torch.zeros_like(b)
    ri, rv = topk_reference(logits, k, a, b)
    idx.copy_(ri)
    if val is not None:
        val.copy_(rv)


def topk_reference(logits: torch.Tensor, k: int, lo: torch.Tensor, hi: torch.Tensor):
    """(indices, values) per row by torch: the window's k largest, ties to the smallest index,
    indices relative to the window start, -1 / -inf past the window's keys; sorted by score.
    Reads the windows on the host."""
    rows = logits.shape[0]
    idx = torch.full((rows, k), -1, dtype=torch.int32, device=logits.device)
    val = torch.full((rows, k), float("-inf"), dtype=torch.float32, device=logits.device)
    for r, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        a, b = max(a, 0), min(b, logits.shape[1])
        if b <= a:
            continue
        v, i = torch.sort(logits[r, a:b].float(), descending=True, stable=True)
        n = min(k, b - a)
        idx[r, :n] = i[:n].to(torch.int32)
        val[r, :n] = v[:n]
    return idx, val


def _answer(idx, val, return_values):
    return (idx, val) if return_values else idx


# ---------------------------------------------------------------------------------------------
# Decode over the paged cache.

def _epilogue(q, kv_cache, context_lens, max_context_len, scale_layout, k, rows, ws):
    """(tile_max for the logits launch, the call's shape) where the tiles path serves this decode
    call and its logits module may write the first pass (EPILOGUE), else (None, None). The maxima
    and counts are new buffers; the range goes to the first selection's state in `ws`."""
    if ws is None or not EPILOGUE or rows < 1 or not all(isinstance(t, torch.Tensor) for t in (kv_cache, context_lens)):
        return None, None
    if not positive_int(max_context_len):
        return None, None  # the logits call's checks name it
    tile, words = tiles_first_pass(rows, max_context_len, k, q.device)
    shape = (q.device, tuple(q.shape), q.dtype, tuple(kv_cache.shape), tuple(context_lens.shape), max_context_len,
             scale_layout, k)
    if not tile or shape in _NO_EPILOGUE:
        return None, None
    maxima = torch.empty((rows, -(-max_context_len // tile)), dtype=torch.float32, device=q.device)
    ntiles = torch.empty((rows,), dtype=torch.int32, device=q.device)
    return (maxima, ntiles, tile, ws, rows * words, words), shape


def _paged_topk(cache, q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, k,
                return_values, out, values_out, scale_layout, check_values, enable_pdl):
    k = check_k(k)
    device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
    rows = q.shape[0] * q.shape[1] if isinstance(q, torch.Tensor) and q.dim() == 4 else 0
    # zeroed before the logits kernel, so that the selection's kernels follow it back to back
    ws, kept = None, None
    if _on_device(device) and positive_int(max_context_len):  # (else the logits call refuses it: no selection)
        ws, kept = call_workspace((rows,), max_context_len, device, "decode")
    tile_max, shape = _epilogue(q, kv_cache, context_lens, max_context_len, scale_layout, k, rows, ws)
    logits, written = topk_logits(cache, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                                  max_context_len, scale_layout, check_values, enable_pdl, tile_max)
    if tile_max and not written:
        _NO_EPILOGUE.add(shape)
    rows, next_n = logits.shape[0], q.shape[1]
    idx = top_k_output(out, rows, k, q.device)
    val = _values_output(values_out, rows, k, q.device) if return_values else None
    window = WINDOW_LIMIT if context_lens.dim() == 2 else WINDOW_CAUSAL
    lens = context_lens.reshape(-1) if context_lens.dim() == 2 else context_lens
    _select(logits, k, window, idx, val, ws, lens=lens, next_n=next_n,
            tile_maxima=(tile_max[0], tile_max[1], True) if written else None, kind="decode")
    give_back(kept, ws)
    return _answer(idx, val, return_values)


def fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, k=2048,
                       *, return_values=False, out=None, values_out=None, scale_layout="page_blocked",
                       check_values: Optional[bool] = None, enable_pdl: Optional[bool] = None):
    """The k best keys of each decode row: fp8_paged_mqa_logits's arguments (its clean_logits is
    not needed), then k (2048 by default). Returns int32 [B * next_n, k] key positions (-1 past
    the row's valid keys), or (indices, float32 scores) with return_values. `out` / `values_out`:
    buffers to write them into. Allocates the logits [B * next_n, max_context_len] per call (and a small
    workspace, kept from one eager call to the next on a stream: _topk_workspace), and where the tiles
    path serves the tile maxima (1/8-1/32 of the logits),
    which the logits kernel writes beside them (EPILOGUE)."""
    return _paged_topk("fp8", q, kv_cache, weights, context_lens, block_table, schedule_meta,
                       max_context_len, k, return_values, out, values_out, scale_layout, check_values, enable_pdl)


def bf16_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, k=2048,
                        *, return_values=False, out=None, values_out=None, scale_layout="none",
                        check_values: Optional[bool] = None, enable_pdl: Optional[bool] = None):
    """fp8_paged_mqa_topk for a bf16 cache (bf16_paged_mqa_logits's arguments)."""
    return _paged_topk("bf16", q, kv_cache, weights, context_lens, block_table, schedule_meta,
                       max_context_len, k, return_values, out, values_out, scale_layout, check_values, enable_pdl)


# ---------------------------------------------------------------------------------------------
# Prefill: blocks of rows scored into one scratch buffer, each block selected before the next.

def scratch_rows(rows: int, width: int, max_scratch_bytes: Optional[int] = None, k: int = 0, device=None) -> int:
    """Query rows per block of a prefill top-k (shapes only). With k and the device, a block's
    budget also holds what its selection allocates beside the logits (the tiles path's buffers:
    _topk_select.scratch_bytes_per_row)."""
    if max_scratch_bytes is None:
        budget = max(rows * width * 4 // SCRATCH_FRACTION, SCRATCH_FLOOR)
    elif not positive_int(max_scratch_bytes):
        raise ValueError(f"max_scratch_bytes: expected a positive int or None, got {max_scratch_bytes!r}")
    else:
        budget = max_scratch_bytes
    per_row = max(width * 4, 1)
    step = max(1, min(rows, budget // per_row))
    if k and device is not None and _on_device(torch.device(device)):
        per_row += scratch_bytes_per_row(step, width, k, torch.device(device))
        step = max(1, min(rows, budget // per_row))
    return step


def _blocks(rows: int, width: int, max_scratch_bytes, k: int, device):
    step = scratch_rows(rows, width, max_scratch_bytes, k, device)
    return step, [(i, min(rows, i + step)) for i in range(0, rows, step)]


def _ragged_topk(cache, q, kv, weights, ks, ke, k, return_values, out, values_out, max_scratch_bytes, check_values):
    k = check_k(k)
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        raise ValueError(f"q: expected a [M, H, D] tensor, got "
                         + (f"shape {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__))
    keys = (kv[0] if isinstance(kv, (tuple, list)) else kv).shape[0]
    rows = q.shape[0]
    idx = top_k_output(out, rows, k, q.device)
    val = _values_output(values_out, rows, k, q.device) if return_values else None
    step, blocks = _blocks(rows, keys, max_scratch_bytes, k, q.device)
    scratch = torch.empty((step, keys), dtype=torch.float32, device=q.device)
    ws, kept = (call_workspace([i1 - i0 for i0, i1 in blocks], keys, q.device, "prefill") if _on_device(q.device)
                else (None, None))
    maxima, tile, words = _ragged_epilogue(q, step, keys, k, ws)
    plans = {} if SHARE_PLANS else None
    for i0, i1 in blocks:
        n = i1 - i0
        tile_max = (maxima[0][:n], maxima[1][:n], tile, ws, n * words, words) if maxima else None
        logits, written = topk_ragged_logits(cache, q[i0:i1], kv, weights[i0:i1], ks[i0:i1], ke[i0:i1],
                                             scratch[:n], check_values, tile_max)
        _select(logits, k, WINDOW_RAGGED, idx[i0:i1], None if val is None else val[i0:i1], ws,
                lo=ks[i0:i1], hi=ke[i0:i1], tile_maxima=(tile_max[0], tile_max[1], True) if written else None,
                plans=plans)
    give_back(kept, ws)
    return _answer(idx, val, return_values)


def _ragged_epilogue(q, rows: int, keys: int, k: int, ws) -> tuple:
    """((maxima, ntiles), tile, state words a row) for the blocks of a ragged prefill top-k where the
    bound path serves a block of `rows` x `keys` (its tile maxima over absolute keys: the logits
    kernel's epilogue writes them, launch(tile_max=...)), else (None, 0, 0). The buffers serve every
    block; the range goes to the first selection's state in `ws`."""
    if ws is None or not (EPILOGUE and RAGGED_EPILOGUE) or rows < 1 or keys < 1:
        return None, 0, 0
    tile, words = tiles_first_pass(rows, keys, k, q.device, "prefill")
    if not tile:
        return None, 0, 0
    return ((torch.empty((rows, -(-keys // tile)), dtype=torch.float32, device=q.device),
             torch.empty((rows,), dtype=torch.int32, device=q.device)), tile, words)


def fp8_mqa_topk(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, k=2048, *, return_values=False, out=None,
                 values_out=None, max_scratch_bytes: Optional[int] = None, check_values: Optional[bool] = None):
    """The k best keys of each prefill row over ragged K: fp8_mqa_logits's arguments, then k.
    Returns int32 [M, k] indices relative to the row's window start (-1 past its keys), or
    (indices, scores) with return_values. Peak scratch: max_scratch_bytes (module docstring)."""
    return _ragged_topk("fp8", q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, k, return_values,
                        out, values_out, max_scratch_bytes, check_values)


def bf16_mqa_topk(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, k=2048, *, return_values=False, out=None,
                  values_out=None, max_scratch_bytes: Optional[int] = None, check_values: Optional[bool] = None):
    """fp8_mqa_topk for bf16 q and K (bf16_mqa_logits's arguments)."""
    return _ragged_topk("bf16", q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, k, return_values,
                        out, values_out, max_scratch_bytes, check_values)


def _chunked_topk(logits_fn, q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, k,
                  return_values, out, values_out, scale_layout, max_scratch_bytes, check_values):
    k = check_k(k)
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        raise ValueError(f"q: expected a [M, H, D] tensor, got "
                         + (f"shape {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__))
    rows = q.shape[0]
    idx = top_k_output(out, rows, k, q.device)
    val = _values_output(values_out, rows, k, q.device) if return_values else None
    step, blocks = _blocks(rows, max_context_len, max_scratch_bytes, k, q.device)
    scratch = torch.empty((step, max_context_len), dtype=torch.float32, device=q.device)
    ws, kept = (call_workspace([i1 - i0 for i0, i1 in blocks], max_context_len, q.device, "prefill")
                if _on_device(q.device) else (None, None))
    plans = {} if SHARE_PLANS else None
    for i0, i1 in blocks:
        logits = logits_fn(q[i0:i1], kv_cache, weights[i0:i1], row_request[i0:i1], row_limit[i0:i1], block_table,
                           max_context_len, False, out=scratch[:i1 - i0], scale_layout=scale_layout,
                           check_values=check_values)
        _select(logits, k, WINDOW_LIMIT, idx[i0:i1], None if val is None else val[i0:i1], ws,
                lens=row_limit[i0:i1], plans=plans)
    give_back(kept, ws)
    return _answer(idx, val, return_values)


def fp8_paged_mqa_topk_chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len, k=2048,
                               *, return_values=False, out=None, values_out=None, scale_layout="page_blocked",
                               max_scratch_bytes: Optional[int] = None, check_values: Optional[bool] = None):
    """The k best keys of each chunked-prefill row over the paged cache: fp8_paged_mqa_logits_chunked's
    arguments, then k. Returns int32 [M, k] key positions (-1 past the row's limit)."""
    return _chunked_topk(fp8_paged_mqa_logits_chunked, q, kv_cache, weights, row_request, row_limit, block_table,
                         max_context_len, k, return_values, out, values_out, scale_layout, max_scratch_bytes,
                         check_values)


def bf16_paged_mqa_topk_chunked(q, kv_cache, weights, row_request, row_limit, block_table, max_context_len,
                                k=2048, *, return_values=False, out=None, values_out=None, scale_layout="none",
                                max_scratch_bytes: Optional[int] = None, check_values: Optional[bool] = None):
    """fp8_paged_mqa_topk_chunked for a bf16 cache."""
    return _chunked_topk(bf16_paged_mqa_logits_chunked, q, kv_cache, weights, row_request, row_limit, block_table,
                         max_context_len, k, return_values, out, values_out, scale_layout, max_scratch_bytes,
                         check_values)
