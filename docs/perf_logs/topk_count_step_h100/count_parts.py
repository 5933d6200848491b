"""Where the bound path's keys' count spends its time: a probe kernel shaped as
indexer_logits._topk_bound.topk_bound_count_kernel (a program a row and chunk, the runtime's chunks,
BLOCK keys a step), with its parts switched on one at a time: the digit of each key, the relaxed
atomic of each admitted key into its row's histogram, the admitted keys' positions to the program's
segment (a block-wide prefix sum a step); then lane_probe, the same with a step as rows of 32 keys
whose prefix sums stay within a warp (sub-segments a row), its atomics and stores as inline PTX or
not. Alone on one GPU (CUDA graphs of 4 launches, the best of
alternated rounds), over real logits: decode 64 x 32K (fp8_paged_mqa_logits) and a 164-row block of
the 4096 x 64K prefill (fp8_mqa_logits); the mapping admits each row's ~2,500 best keys, as the
bound does on these logits (docs/PERF.md, "The bound path measured"). A diagnostic, not the product:
the probe is not exact and is never served.

    python3 docs/perf_logs/topk_count_step_h100/count_parts.py [--rounds 7] [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench.topk import best_alternated, graph_us  # noqa: E402
from indexer_logits._topk_ptx import _red_add_one, _store_where  # noqa: E402
from indexer_logits._topk_digits import _digits  # noqa: E402
from indexer_logits._topk_launch import chunk_size  # noqa: E402
from tuner.inputs import make_decode_inputs, make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

KB = 128      # the keys' bins (2 x 64)
ADMIT = 2500  # keys admitted a row


@triton.jit
def _probe_program(logits_ptr, stride_row, width, chunk_len, map_ptr):
    """(row, row's logits, its mapping m_lo and scale, the chunk's start and end, the program's index)
    of a probe's program: a program a row and chunk, as the count's."""
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    start = chunk * chunk_len
    return (row, logits_ptr + row.to(tl.int64) * stride_row, tl.load(map_ptr + 2 * row),
            tl.load(map_ptr + 2 * row + 1), start, tl.minimum(start + chunk_len, width),
            row * tl.num_programs(1) + chunk)


@triton.jit
def count_probe(logits_ptr, stride_row, width, chunk_len, map_ptr, hist_ptr, seg_ptr, seg_cap, counts_ptr,
                BLOCK: tl.constexpr, KB_: tl.constexpr, DIGITS: tl.constexpr, ATOMIC: tl.constexpr,
                SEG: tl.constexpr):
    row, base, m_lo, scale, start, end, at = _probe_program(logits_ptr, stride_row, width, chunk_len, map_ptr)
    seg = seg_ptr + at.to(tl.int64) * seg_cap
    n_seg = at * 0
    acc = tl.zeros([BLOCK], tl.int32)
    offs = tl.arange(0, BLOCK)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        x = tl.load(base + t, mask=m, other=0.0)
        if DIGITS:
            d1, d2 = _digits(x, m_lo, scale, KB_)
        else:
            d1 = (x > m_lo + 1.0 / scale).to(tl.int32)
        admitted = m & (d1 > 0)
        if ATOMIC:
            tl.atomic_add(hist_ptr + row * KB_ + d1, 1, mask=admitted, sem="relaxed")
        if SEG:
            slot = n_seg + tl.cumsum(admitted.to(tl.int32), 0) - 1
            tl.store(seg + slot, t, mask=admitted & (slot < seg_cap))
            n_seg += tl.sum(admitted.to(tl.int32), 0)
        else:
            acc += admitted.to(tl.int32)
    tl.store(counts_ptr + at, n_seg + tl.sum(acc, 0))


@triton.jit
def lane_probe(logits_ptr, stride_row, width, chunk_len, map_ptr, hist_ptr, seg_ptr, seg_cap, counts_ptr,
               BLOCK: tl.constexpr, KB_: tl.constexpr, SEG: tl.constexpr, ASM: tl.constexpr):
    """count_probe's "all" with a step as BLOCK / 32 rows of 32 keys, each row's admitted keys to a
    sub-segment of its own: the prefix sum and count along a row are a warp's shuffles, no barrier
    (where its layout gives a row to a warp's 32 lanes); with ASM, the atomics and the segments'
    stores as inline PTX (the product's _red_add_one and _store_where: no layout conversion either)."""
    row, base, m_lo, scale, start, end, at = _probe_program(logits_ptr, stride_row, width, chunk_len, map_ptr)
    R: tl.constexpr = BLOCK // 32
    sub_cap = seg_cap // R
    r = tl.arange(0, R)
    hist = hist_ptr + row * KB_
    seg = seg_ptr + at.to(tl.int64) * seg_cap + r[:, None] * sub_cap
    n_seg = tl.zeros([R], tl.int32)
    offs = r[:, None] * 32 + tl.arange(0, 32)[None, :]
    dummy = tl.zeros([R, 32], tl.int32)
    for b0 in range(start, end, BLOCK):
        t = b0 + offs
        m = t < end
        x = tl.load(base + t, mask=m, other=0.0)
        d1, d2 = _digits(x, m_lo, scale, KB_)
        admitted = m & (d1 > 0)
        if ASM:
            dummy += _red_add_one(hist + d1, admitted)
        else:
            tl.atomic_add(hist + d1, 1, mask=admitted, sem="relaxed")
        if SEG:
            slot = n_seg[:, None] + tl.cumsum(admitted.to(tl.int32), 1) - 1
            if ASM:
                dummy += _store_where(seg + slot, t, admitted & (slot < sub_cap))
            else:
                tl.store(seg + slot, t, mask=admitted & (slot < sub_cap))
            n_seg += tl.sum(admitted.to(tl.int32), 1)
    tl.store(counts_ptr + at * R + r, n_seg + tl.sum(dummy, 1))


def mapping(logits: torch.Tensor) -> torch.Tensor:
    """Per row (m_lo, scale): bin 0 below the row's ADMIT-th best score, KB - 2 bins from there to its
    best (the bound's shape: _topk_bound._bound_mapping)."""
    a = logits.topk(ADMIT, dim=1).values[:, -1]
    top = logits.max(1).values
    scale = (KB - 2) / (top - a)
    return torch.stack([a - 1.0 / scale, scale], 1).contiguous()


def time_parts(logits: torch.Tensor, programs_per_sm: int, rounds: int) -> dict:
    rows, width = logits.shape
    maps = mapping(logits)
    hist = torch.zeros(rows, KB, dtype=torch.int32, device="cuda")
    fns = {}
    for block in (512, 1024):
        chunk = chunk_size(rows, width, 512, programs_per_sm)  # the runtime's chunks (BLOCK 512)
        grid = (rows, -(-width // chunk))
        seg = torch.empty(rows, grid[1], chunk, dtype=torch.int32, device="cuda")
        counts = torch.empty(rows, grid[1], dtype=torch.int32, device="cuda")
        for name, (d, a, s) in {"all": (1, 1, 1), "no segments": (1, 1, 0), "no atomics": (1, 0, 1),
                                "digits only": (1, 0, 0), "load and compare": (0, 0, 0)}.items():
            def fn(d=d, a=a, s=s, grid=grid, chunk=chunk, seg=seg, counts=counts, block=block):
                count_probe[grid](logits, logits.stride(0), width, chunk, maps, hist, seg, chunk, counts, BLOCK=block,
                                  KB_=KB, DIGITS=bool(d), ATOMIC=bool(a), SEG=bool(s), num_warps=4)
            fn()
            fns[f"{name}, {block}"] = fn
        lane_counts = torch.empty(rows, grid[1], block // 32, dtype=torch.int32, device="cuda")
        for name, (s, a) in {"lanes": (1, 0), "lanes, asm": (1, 1), "lanes, asm, no segments": (0, 1)}.items():
            def fn(s=s, a=a, grid=grid, chunk=chunk, seg=seg, block=block):
                lane_probe[grid](logits, logits.stride(0), width, chunk, maps, hist, seg, chunk, lane_counts,
                                 BLOCK=block, KB_=KB, SEG=bool(s), ASM=bool(a), num_warps=4)
            fn()
            fns[f"{name}, {block}"] = fn
    torch.cuda.synchronize()
    admitted = int(counts.sum()) / rows
    return {"admitted_per_row": admitted, "us": best_alternated(fns, rounds, timer=lambda f: graph_us(f))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    inp = make_decode_inputs(Problem(), 64, 32768, lens="full", device="cuda", max_pool_bytes=3 << 30)
    dec = K.fp8_paged_mqa_logits(inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, 32768,
                                 False).contiguous()
    pre_inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 4096, 65536, device="cuda")
    q, kv, w, ks, ke = pre_inp.args()
    pre = K.fp8_mqa_logits(q[:164], kv, w[:164], ks[:164], ke[:164], False)
    pre = torch.where(torch.isfinite(pre), pre, torch.full_like(pre, -1e30)).contiguous()  # (outside a window)
    out = {"decode 64x32K": time_parts(dec, 8, a.rounds), "prefill block 164x64K": time_parts(pre, 16, a.rounds)}
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    for case, r in out.items():
        print(f"\n{case} (admitted a row {r['admitted_per_row']:.0f}): "
              + ", ".join(f"{n} {us:.1f}" for n, us in r["us"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
