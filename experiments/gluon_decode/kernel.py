"""Experimental Gluon (Triton 3.6) fp8 paged decode kernel with warp specialisation.

Problem: fp8 paged "indexer logits" decode, next_n = 1 or 2 (1-D or 2-D lengths), H = 64, D = 128,
PAGE = 64, page-blocked cache (each page: 64 x 128 fp8 values, then 64 fp32 scales; page stride
from kv_cache.stride(0)).
    out[b * n + r, t] = scale[t] * sum_h relu(q[b, r, h, :] . k[t, :]) * w[b * n + r, h]
                                                               for t < len[b] - n + 1 + r
(2-D lengths: t < len[b, r]). Positions past each row's limit are left untouched, or -inf with
clean_logits=True.

Design (docs/PERF.md, "v7 against the ceilings" / "Next ideas"):
- Split grid (B, cdiv(max_context_len, TILES * PAGE)), as decode v7: program (b, p) takes a run of
  request b's valid 64-token tiles (one tile = one page); the valid tiles are shared evenly by the
  row's programs in runs of at least MIN_RUN = 4. The grid depends on shapes only (graph-safe).
- gl.warp_specialize:
    * producer worker (1 warp, few registers): loads the run's block-table entries (below the length
      only) as one vector, issues a bulk tensor copy (TMA) of q [64, 128] once, and for each tile a
      TMA copy of the page's [64, 128] fp8 values and a second one of its 64 fp32 scales into a ring
      of NUM_BUF shared-memory slots, both on the slot's "ready" mbarrier (expect-tx bytes); it waits
      on the slot's "empty" mbarrier before reusing it.
    * consumer(s): one warpgroup (the default partition), or two (NUM_CONSUMERS = 2: a second
      4-warp worker takes the odd tiles, ping-ponging with the first). Per tile: wait "ready",
      wgmma K[64 tok, 128] x Q^T[128, 64 heads] -> fp32 [64, 64] in registers, read the scales from
      shared memory, release the slot ("empty"), then relu, * w, sum over heads (inside a thread quad),
      * scale, and store the 64 logits masked by t < len.
- The `maxnreg` compile option caps registers so that several CTAs share an SM (Triton otherwise
  gives a warp-specialised kernel the whole register file); see MAXNREG below.
Status: correct on the H200 and as fast as decode v7, not faster (README.md; docs/PERF.md).
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# What Gluon renamed between the Tritons engines run (the kernel compiles under 3.6, 3.8 and 3.9;
# xcompile_check.py under each): a CTA barrier (3.6 `thread_barrier`, 3.8+ `barrier`), the TMA copies
# (3.6 `async_copy_*`, 3.8 both names, 3.9 `async_load` / `async_store` only), and a shared-memory
# view of another type (`_reinterpret` in 3.6 and 3.8, `reinterpret` in 3.9: a method, so chosen by a
# constexpr branch whose dead side is never compiled).
_barrier = getattr(gl, "barrier", None) or gl.thread_barrier
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
PUBLIC_REINTERPRET: gl.constexpr = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))

# Problem constants (the only shape this experiment serves).
HEADS: gl.constexpr = gl.constexpr(64)
HEAD_DIM: gl.constexpr = gl.constexpr(128)
PAGE: gl.constexpr = gl.constexpr(64)
# Shortest run of tiles a split-grid program takes (as decode v7: min(4, tiles per program)).
MIN_RUN = 4
# Bytes one tile's copies bring: the values and the scales.
TILE_BYTES: gl.constexpr = gl.constexpr(64 * 128 + 64 * 4)
# Column (in fp32 words) of a page's first scale when the page is viewed as fp32 words.
SCALE_COL: gl.constexpr = gl.constexpr(64 * 128 // 4)

# Diagnostics (`diag=` of launch; not correct results, for timing what each part costs):
# 0 = the kernel; 1 = no per-tile logits store (one store a program keeps the math alive);
# 2 = no scale copies (scale 1); 3 = the ring's bare read: no wgmma, no epilogue, no store (q is
# still loaded and waited for).
DIAG_NONE: gl.constexpr = gl.constexpr(0)
DIAG_NO_STORE: gl.constexpr = gl.constexpr(1)
DIAG_NO_SCALES: gl.constexpr = gl.constexpr(2)
DIAG_READ_ONLY: gl.constexpr = gl.constexpr(3)
# 4 = the logits through shared memory and a bulk tensor store (TMA) instead of per-thread stores;
# writes whole tiles, so positions past the length in the last tile get values too (allowed with
# clean_logits=False by the spec, but not the "untouched" contract of check_gpu.py): timing only.
DIAG_TMA_STORE: gl.constexpr = gl.constexpr(4)
# 5 = the per-thread logits stores with eviction_policy="evict_last": the output lines stay in L2
# while the cache streams past, instead of being written back between its reads. Correct results.
DIAG_STORE_EVICT_LAST: gl.constexpr = gl.constexpr(5)

# Defaults of the tunables.
TILES_PER_PROGRAM = 16
NUM_BUF = 3
NUM_CONSUMERS = 1
NUM_WARPS = 4  # the default partition: one warpgroup
PRODUCER_REGS = 40  # setmaxnreg of the 1-warp producer's warpgroup (Triton pads it to 4 warps)
# The kernel's register limit (`maxnreg` compile option). Without it Triton gives a warp-specialised
# kernel the whole register file (255 a thread: one CTA per SM); decode wants several programs per
# SM. Per CTA: 4 warps a warpgroup x (1 + NUM_CONSUMERS) warpgroups x MAXNREG x 32 threads.
MAXNREG = {1: 64, 2: 80, 4: 96}  # 1 consumer: 16K registers a CTA (4 CTAs/SM); 2 consumers: 30K (2 CTAs/SM)
# (ptxas needs >= 58 registers a thread for the m64n64k32 wgmma's 32 accumulators plus addresses:
# maxnreg 48 or 56 fails to compile.)

# next_n 2: the accumulator is [64, 128] (64 registers a thread) and w [128] (32), against 32 and
# 16 at next_n 1; DeepGEMM's next_n 2 kernel runs its four math warp groups at 104 registers.
# The consumers use 109-114 registers (SASS) and ptxas needs a kernel limit of at least 90 (80
# fails: "Insufficient registers"). 1 consumer at 96: producer 40, consumer 152, 24K registers a
# CTA (2 CTAs/SM); 2 consumers at 96: producer 40, consumers 128 and 120, 36K (1 CTA/SM). Either
# way 2 consumer warp groups an SM, against the shipped kernel's 4 programs of one warp group.
MAXNREG_N2 = {1: 96, 2: 96, 4: 96}
# 4 consumers (DeepGEMM's one CTA an SM, 5 warpgroups): 96 x 5 x 128 = 61,440 registers; the
# producer gives up all but 24 so that each consumer gets 112 (the default partition 120).
PRODUCER_REGS_BY_CONSUMERS = {1: PRODUCER_REGS, 2: PRODUCER_REGS, 4: 24}

# Named settings the check scripts compile and time: launch(..., **SETTINGS[name]).
SETTINGS = {
    # 4 CTAs an SM (528 on 132 SMs): 16 tiles a program fill one wave at 8,192 tiles (64x8K,
    # 16x32K), 32 at 16,384 (32x32K), 4 at 2,048 (4x32K); 12 is the v7 table's one-wave pick.
    "tp16_b3_c1_r64": dict(tiles_per_program=16, num_buf=3, num_consumers=1, maxnreg=64),
    "tp16_b4_c1_r64": dict(tiles_per_program=16, num_buf=4, num_consumers=1, maxnreg=64),
    "tp12_b3_c1_r64": dict(tiles_per_program=12, num_buf=3, num_consumers=1, maxnreg=64),
    "tp32_b4_c1_r64": dict(tiles_per_program=32, num_buf=4, num_consumers=1, maxnreg=64),
    "tp4_b3_c1_r64": dict(tiles_per_program=4, num_buf=3, num_consumers=1, maxnreg=64),
    "tp16_b4_c2_r80": dict(tiles_per_program=16, num_buf=4, num_consumers=2, maxnreg=80),
    # 4 consumers, 1 CTA an SM (added 2026-12-04 after next_n 2's 4-consumer kernel ran 4-8% ahead
    # of the shipped one): producer 24, consumers 72 (58 used at next_n 1); programs sized so
    # that one wave covers the bucket (16 at 2,048 tiles, 64 at 8,192, 128 at 16,384).
    "tp16_b8_c4_r64": dict(tiles_per_program=16, num_buf=8, num_consumers=4, maxnreg=64),
    "tp64_b8_c4_r64": dict(tiles_per_program=64, num_buf=8, num_consumers=4, maxnreg=64),
    "tp128_b8_c4_r64": dict(tiles_per_program=128, num_buf=8, num_consumers=4, maxnreg=64),
}
# next_n 2 (issue 27: DeepGEMM leads by 5-17% there; docs/PERF.md, "Against DeepGEMM"): the shipped
# table runs tp16 at 8,192 tiles and tp32 at 16,384, 4 warps, 3 stages, 112 registers, 4 CTAs/SM.
SETTINGS_N2 = {
    "n2_tp16_b3_c1_r96": dict(tiles_per_program=16, num_buf=3, num_consumers=1, maxnreg=96),
    "n2_tp32_b3_c1_r96": dict(tiles_per_program=32, num_buf=3, num_consumers=1, maxnreg=96),
    "n2_tp32_b4_c2_r96": dict(tiles_per_program=32, num_buf=4, num_consumers=2, maxnreg=96),
    "n2_tp16_b4_c2_r96": dict(tiles_per_program=16, num_buf=4, num_consumers=2, maxnreg=96),
    # DeepGEMM's structure (added 2026-12-04, after the settings above measured 1.05-1.36x slower
    # than the shipped kernel): 4 consumers, 1 CTA an SM, so a program takes 4x the tiles of the
    # shipped table's to fill the one wave (64 at 8,192 tiles, 128 at 16,384, 256 at 32,768); 2-3 slots a consumer.
    "n2_tp64_b8_c4_r96": dict(tiles_per_program=64, num_buf=8, num_consumers=4, maxnreg=96),
    "n2_tp128_b8_c4_r96": dict(tiles_per_program=128, num_buf=8, num_consumers=4, maxnreg=96),
    "n2_tp128_b12_c4_r96": dict(tiles_per_program=128, num_buf=12, num_consumers=4, maxnreg=96),
    "n2_tp256_b8_c4_r96": dict(tiles_per_program=256, num_buf=8, num_consumers=4, maxnreg=96),
    # (call 3 of 2026-12-04 measured the four above; these fill in each bucket's one-wave size and
    # three slots a consumer)
    "n2_tp8_b8_c4_r96": dict(tiles_per_program=8, num_buf=8, num_consumers=4, maxnreg=96),
    "n2_tp64_b12_c4_r96": dict(tiles_per_program=64, num_buf=12, num_consumers=4, maxnreg=96),
    "n2_tp256_b12_c4_r96": dict(tiles_per_program=256, num_buf=12, num_consumers=4, maxnreg=96),
}

@gluon.jit
def _as_fp32_row(buf, layout: gl.constexpr):
    """A [PAGE] fp32 view of one slot of a shared-memory ring (the scales', the logits')."""
    if PUBLIC_REINTERPRET:
        view = buf.reinterpret(gl.float32, [PAGE], layout)
    else:
        view = buf._reinterpret(gl.float32, [PAGE], layout)
    return view


@gluon.jit
def _slot(i, NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr):
    """(ring slot, mbarrier phase parity) of tile i. With two consumers each has its own half of
    the ring (tile i goes to consumer i % 2), so a consumer that runs ahead cannot mistake a later
    round's phase of a slot for the one it waits for."""
    PER: gl.constexpr = NUM_BUF // NUM_CONSUMERS
    j = i // NUM_CONSUMERS
    s = (i % NUM_CONSUMERS) * PER + j % PER
    return s, (j // PER) & 1


@gluon.jit
def _consumer(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
              k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem,
              NUM_BUF: gl.constexpr, CONSUMER: gl.constexpr, NUM_CONSUMERS: gl.constexpr, DIAG: gl.constexpr,
              NEXT_N: gl.constexpr, CLEAN: gl.constexpr):
    # wgmma accumulator of one warpgroup: [64 tokens, NEXT_N * 64 query rows] fp32 (m64n64k32 or
    # m64n128k32 instructions); row r * 64 + h is draft token r's head h.
    NH: gl.constexpr = NEXT_N * HEADS
    acc_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, NH, 32])
    row_l: gl.constexpr = gl.SliceLayout(1, acc_l)  # per token (each value held by one thread quad)
    col_l: gl.constexpr = gl.SliceLayout(0, acc_l)  # per query row
    scale_sl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    if n_tiles > CONSUMER:
        cols = gl.arange(0, NH, layout=col_l)
        w = gl.load(w_ptr + (b * NEXT_N + cols // HEADS).to(gl.int64) * w_stride + cols % HEADS)
        offs_t = gl.arange(0, PAGE, layout=row_l)
        # draft token r of request b sees keys t < lim_r (the kernel body reads them: 1-D lengths
        # len - NEXT_N + 1 + r, as the spec; 2-D lengths row r's own)
        limit = gl.minimum(lim0, max_context_len)
        limit1 = gl.minimum(lim1, max_context_len)
        out_row = out_ptr + (b * NEXT_N).to(gl.int64) * out_stride
        zero = gl.zeros([PAGE, NH], gl.float32, acc_l)
        mbarrier.wait(q_bar, 0)
        q_t = q_smem.reshape([NH, HEAD_DIM]).permute([1, 0])  # Q^T [128, NH], K-major
        kept = gl.zeros([PAGE], gl.float32, row_l)  # DIAG_NO_STORE: what the skipped stores held
        for i in range(CONSUMER, n_tiles, NUM_CONSUMERS):
            s, phase = _slot(i, NUM_BUF, NUM_CONSUMERS)
            mbarrier.wait(ready.index(s), phase)
            if DIAG == DIAG_READ_ONLY:
                # the bare read through this ring: release the slot at once, no math, no store
                _barrier()
                mbarrier.arrive(empty.index(s))
            else:
                k = k_bufs.index(s).reshape([PAGE, HEAD_DIM])
                acc = warpgroup_mma(k, q_t, zero, use_acc=False)
                if DIAG == DIAG_NO_SCALES:
                    sc = gl.full([PAGE], 1.0, gl.float32, row_l)
                else:
                    # (the [1, 64] NVMMA(swizzle 0) slot read as plain 1-D fp32 words: verified on the H200)
                    sc = _as_fp32_row(s_bufs.index(s), scale_sl).load(row_l)
                # Every thread of the warpgroup is done with the slot (wgmma waited, scales in
                # registers) before one thread releases it to the producer.
                _barrier()
                mbarrier.arrive(empty.index(s))
                t = (first_tile + i) * PAGE + offs_t
                if NEXT_N == 2:
                    # The two draft tokens' heads: column bit 6 is held inside a thread (wgmma's
                    # accumulator gives a thread column bit 0 and bits 3 up), so the reshape and the
                    # split relabel registers; each half is then summed as next_n 1's tile.
                    x = gl.maximum(acc, 0.0) * w[None, :]
                    x0, x1 = gl.split(x.reshape([PAGE, NEXT_N, HEADS]).permute([0, 2, 1]))
                    l0 = gl.convert_layout(gl.sum(x0, axis=1), row_l) * sc
                    l1 = gl.convert_layout(gl.sum(x1, axis=1), row_l) * sc
                    if CLEAN:
                        # -inf past each row's limit in the tile (the tiles past every limit: the body)
                        gl.store(out_row + t, gl.where(t < limit, l0, float("-inf")), mask=t < max_context_len)
                        gl.store(out_row + out_stride + t, gl.where(t < limit1, l1, float("-inf")),
                                 mask=t < max_context_len)
                    else:
                        gl.store(out_row + t, l0, mask=t < limit)
                        gl.store(out_row + out_stride + t, l1, mask=t < limit1)
                else:
                    logits = gl.sum(gl.maximum(acc, 0.0) * w[None, :], axis=1) * sc
                    if DIAG == DIAG_NO_STORE:
                        kept += gl.where(t < limit, logits, 0.0)
                    elif DIAG == DIAG_TMA_STORE:
                        j = (i // NUM_CONSUMERS) % 2
                        tma.store_wait(1)  # the bulk store that last read this buffer (two tiles ago) is done
                        _as_fp32_row(o_smem.index(j), scale_sl).store(logits)
                        fence_async_shared()
                        _barrier()
                        _tma_store(out_desc, [b, (first_tile + i) * PAGE], o_smem.index(j))
                    elif DIAG == DIAG_STORE_EVICT_LAST:
                        gl.store(out_row + t, logits, mask=t < limit, eviction_policy="evict_last")
                    elif CLEAN:
                        gl.store(out_row + t, gl.where(t < limit, logits, float("-inf")), mask=t < max_context_len)
                    else:
                        gl.store(out_row + t, logits, mask=t < limit)
        if DIAG == DIAG_TMA_STORE:
            tma.store_wait(0)
        if DIAG == DIAG_NO_STORE:
            # one 256-byte store a program instead of one a tile, so the math is not dead code
            gl.store(out_row + first_tile * PAGE + offs_t, kept, mask=first_tile * PAGE + offs_t < limit)


@gluon.jit
def _consumer0(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
               k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem,
               NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr, DIAG: gl.constexpr, NEXT_N: gl.constexpr,
               CLEAN: gl.constexpr):
    _consumer(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
              k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, 0, NUM_CONSUMERS, DIAG, NEXT_N, CLEAN)


@gluon.jit
def _consumer1(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
               k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem,
               NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr, DIAG: gl.constexpr, NEXT_N: gl.constexpr,
               CLEAN: gl.constexpr):
    _consumer(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
              k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, 1, NUM_CONSUMERS, DIAG, NEXT_N, CLEAN)


@gluon.jit
def _consumer2(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
               k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem,
               NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr, DIAG: gl.constexpr, NEXT_N: gl.constexpr,
               CLEAN: gl.constexpr):
    _consumer(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
              k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, 2, NUM_CONSUMERS, DIAG, NEXT_N, CLEAN)


@gluon.jit
def _consumer3(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
               k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem,
               NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr, DIAG: gl.constexpr, NEXT_N: gl.constexpr,
               CLEAN: gl.constexpr):
    _consumer(w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
              k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, 3, NUM_CONSUMERS, DIAG, NEXT_N, CLEAN)


@gluon.jit
def _producer(kv_desc, sc_desc, q_desc, bt_ptr, bt_stride, b, first_tile, n_tiles,
              k_bufs, s_bufs, q_smem, ready, empty, q_bar,
              NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr, TILES_P2: gl.constexpr, DIAG: gl.constexpr,
              NEXT_N: gl.constexpr):
    if n_tiles > 0:
        mbarrier.expect(q_bar, NEXT_N * HEADS * HEAD_DIM)
        _tma_load(q_desc, [b, 0, 0], q_bar, q_smem)
    # The run's block-table entries in one vector load (entries below the length only).
    bt_l: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    offs = gl.arange(0, TILES_P2, layout=bt_l)
    pages = gl.load(bt_ptr + b.to(gl.int64) * bt_stride + first_tile + offs, mask=offs < n_tiles, other=0)
    for i in range(n_tiles):
        s, phase = _slot(i, NUM_BUF, NUM_CONSUMERS)
        # Parity 1 on a fresh barrier passes at once: a slot's first use does not wait.
        mbarrier.wait(empty.index(s), phase ^ 1)
        page = gl.sum(gl.where(offs == i, pages, 0), axis=0)
        bar = ready.index(s)
        if DIAG == DIAG_NO_SCALES:
            mbarrier.expect(bar, PAGE * HEAD_DIM)
            _tma_load(kv_desc, [page, 0, 0], bar, k_bufs.index(s))
        else:
            mbarrier.expect(bar, TILE_BYTES)
            _tma_load(kv_desc, [page, 0, 0], bar, k_bufs.index(s))
            _tma_load(sc_desc, [page, SCALE_COL], bar, s_bufs.index(s))


@gluon.jit
def _decode_ws_kernel(kv_desc, sc_desc, q_desc, out_desc, w_ptr, lens_ptr, bt_ptr, out_ptr,
                      w_stride, bt_stride, out_stride, lens_stride, max_context_len,
                      TILES: gl.constexpr, TILES_P2: gl.constexpr, MIN_RUN: gl.constexpr,
                      NUM_BUF: gl.constexpr, NUM_CONSUMERS: gl.constexpr,
                      PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, DIAG: gl.constexpr,
                      NEXT_N: gl.constexpr, LENS_2D: gl.constexpr, CLEAN: gl.constexpr):
    # This program's run of the request's valid tiles (decode v7's split).
    b = gl.program_id(0)
    # Each row's limit, and the request's widest (what its tiles cover).
    if LENS_2D:
        lim0 = gl.load(lens_ptr + b.to(gl.int64) * lens_stride)
        lim1 = gl.load(lens_ptr + b.to(gl.int64) * lens_stride + (NEXT_N - 1))
        top = gl.maximum(gl.maximum(lim0, lim1), 0)
    else:
        top = gl.maximum(gl.load(lens_ptr + b), 0)
        lim0 = top - NEXT_N + 1
        lim1 = top
    valid_tiles = gl.minimum(gl.cdiv(top, PAGE), gl.cdiv(max_context_len, PAGE))
    per_program = gl.maximum(gl.cdiv(valid_tiles, gl.num_programs(1)), MIN_RUN)
    first_tile = gl.program_id(1) * per_program
    # (<= TILES by the grid's width; clamped so the producer's vector of entries (TILES_P2 >= TILES
    # wide) always covers it)
    n_tiles = gl.minimum(gl.minimum(gl.maximum(valid_tiles - first_tile, 0), per_program), TILES)

    k_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, 1, PAGE, HEAD_DIM], kv_desc.layout)
    s_bufs = gl.allocate_shared_memory(gl.float32, [NUM_BUF, 1, PAGE], sc_desc.layout)
    q_smem = gl.allocate_shared_memory(gl.float8e4nv, [1, NEXT_N * HEADS, HEAD_DIM], q_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    # two tiles of logits for the bulk stores of DIAG_TMA_STORE (one word otherwise)
    O_BUF: gl.constexpr = 2 if DIAG == DIAG_TMA_STORE else 1
    O_LEN: gl.constexpr = PAGE if DIAG == DIAG_TMA_STORE else 1
    o_smem = gl.allocate_shared_memory(gl.float32, [O_BUF, 1, O_LEN], out_desc.layout)
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    mbarrier.init(q_bar, count=1)
    fence_async_shared()

    # (argument tuples written inline: a tuple bound to a local name turns its constexprs into
    # runtime values, and the partitions need NUM_BUF / TILES as constexprs)
    if NUM_CONSUMERS == 1:
        gl.warp_specialize([
            (_consumer0, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
            (_producer, (kv_desc, sc_desc, q_desc, bt_ptr, bt_stride, b, first_tile, n_tiles,
                         k_bufs, s_bufs, q_smem, ready, empty, q_bar, NUM_BUF, NUM_CONSUMERS, TILES_P2, DIAG, NEXT_N)),
        ], [1], [PRODUCER_REGS])
    elif NUM_CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer0, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
            (_producer, (kv_desc, sc_desc, q_desc, bt_ptr, bt_stride, b, first_tile, n_tiles,
                         k_bufs, s_bufs, q_smem, ready, empty, q_bar, NUM_BUF, NUM_CONSUMERS, TILES_P2, DIAG, NEXT_N)),
            (_consumer1, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
        ], [1, 4], [PRODUCER_REGS, CONSUMER_REGS])
    else:
        # DeepGEMM's shape: one CTA an SM, one TMA warp feeding four math warpgroups, tile i to
        # consumer i % 4, each on its own quarter of the ring.
        gl.warp_specialize([
            (_consumer0, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
            (_producer, (kv_desc, sc_desc, q_desc, bt_ptr, bt_stride, b, first_tile, n_tiles,
                         k_bufs, s_bufs, q_smem, ready, empty, q_bar, NUM_BUF, NUM_CONSUMERS, TILES_P2, DIAG, NEXT_N)),
            (_consumer1, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
            (_consumer2, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
            (_consumer3, (w_ptr, out_ptr, w_stride, out_stride, b, lim0, lim1, max_context_len, first_tile, n_tiles,
                          k_bufs, s_bufs, q_smem, ready, empty, q_bar, out_desc, o_smem, NUM_BUF, NUM_CONSUMERS, DIAG,
                          NEXT_N, CLEAN)),
        ], [1, 4, 4, 4], [PRODUCER_REGS, CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS])

    for i in gl.static_range(NUM_BUF):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    mbarrier.invalidate(q_bar)

    if CLEAN:
        # The tiles of this program's fixed chunk of the output that lie past every row's limit:
        # -inf, without reading the cache (a tile holding a limit is masked where it is scored).
        fill_l: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])  # the default partition's 4 warps
        offs = gl.arange(0, 2 * PAGE, layout=fill_l)  # (row r, token c) = (offs // PAGE, offs % PAGE)
        row_ptr = out_ptr + (b * NEXT_N + offs // PAGE).to(gl.int64) * out_stride
        neg = gl.full([2 * PAGE], float("-inf"), gl.float32, fill_l)
        static_first = gl.program_id(1) * TILES
        for i in range(gl.minimum(gl.maximum(valid_tiles - static_first, 0), TILES), TILES):
            t = (static_first + i) * PAGE + offs % PAGE
            gl.store(row_ptr + t, neg, mask=(offs // PAGE < NEXT_N) & (t < max_context_len))


# ------------------------------------------------------------------------------------------------
# Host side.

def _layouts():
    kv_l = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=3)  # [1, 64, 128] fp8
    sc_l = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)  # [1, 64] fp32
    return kv_l, sc_l, kv_l


def register_split(num_consumers, maxnreg, producer_regs=None):
    """(producer, each worker consumer, default partition) registers a thread inside warp_specialize.
    The first two are the setmaxnreg requests we pass; Triton gives the default partition what is
    left of (warpgroups x maxnreg), and the sum must fit the CTA's allocation or a setmaxnreg.inc
    would wait for registers that never come. setmaxnreg takes multiples of 8 in [24, 256]."""
    producer_regs = PRODUCER_REGS_BY_CONSUMERS[num_consumers] if producer_regs is None else producer_regs
    left = (1 + num_consumers) * maxnreg - producer_regs
    second = (left // num_consumers) // 8 * 8 if num_consumers > 1 else 0
    default = left - (num_consumers - 1) * second
    ok = maxnreg % 8 == 0 and producer_regs % 8 == 0 and 24 <= producer_regs and 24 <= default <= 256
    if num_consumers > 1:
        ok = ok and 24 <= second <= 256
    if not ok:
        raise ValueError(f"maxnreg {maxnreg}: no register split for {num_consumers} consumer(s) (producer "
                         f"{producer_regs}, other consumers {second}, default partition {default})")
    return producer_regs, max(second, 24), default


def prepare(q, kv_cache, weights, context_lens, block_table, out, max_context_len,
            tiles_per_program=TILES_PER_PROGRAM, num_buf=NUM_BUF, num_consumers=NUM_CONSUMERS, maxnreg=None, diag=0,
            clean_logits=False):
    """(grid, positional args, constexpr kwargs, launch options) of one launch, or None when there
    is nothing to do. Shapes and base addresses only (no device reads): graph-safe. Raises
    NotImplementedError for shapes or strides this experiment does not serve (TMA needs
    16-byte-aligned bases and strides)."""
    batch, n, h, d = q.shape
    if n not in (1, 2) or (h, d) != (64, 128) or q.dtype != torch.float8_e4m3fn:
        raise NotImplementedError(f"gluon decode: only q [B, 1 or 2, 64, 128] fp8, got {list(q.shape)} {q.dtype}")
    if kv_cache.dim() != 4 or tuple(kv_cache.shape[1:]) != (64, 1, 132) or kv_cache.dtype != torch.uint8:
        raise NotImplementedError(f"gluon decode: only a page-blocked fp8 cache [pages, 64, 1, 132] uint8, got "
                                  f"{list(kv_cache.shape)} {kv_cache.dtype}")
    if context_lens.dim() == 2 and tuple(context_lens.shape) == (batch, n) and context_lens.stride(1) == 1:
        lens_2d, lens_stride = True, context_lens.stride(0)
    elif context_lens.dim() == 1:
        lens_2d, lens_stride = False, 1
    else:
        raise NotImplementedError(f"gluon decode: context_lens [B] or [B, next_n] with unit row stride, got "
                                  f"{list(context_lens.shape)} strides {context_lens.stride()}")
    if not isinstance(tiles_per_program, int) or not 1 <= tiles_per_program <= 256:
        raise ValueError(f"tiles_per_program: expected an int in [1, 256], got {tiles_per_program!r}")
    if num_consumers not in (1, 2, 4) or num_buf < num_consumers or num_buf % num_consumers:
        raise ValueError(f"num_consumers {num_consumers}, num_buf {num_buf}: expected 1, 2 or 4 consumers and a "
                         f"ring that splits evenly between them")
    maxnreg = (MAXNREG if n == 1 else MAXNREG_N2)[num_consumers] if maxnreg is None else maxnreg
    producer_regs, second_regs, _ = register_split(num_consumers, maxnreg)
    num_pages = kv_cache.shape[0]
    if batch == 0 or max_context_len <= 0 or num_pages == 0:
        return None
    page_stride = kv_cache.stride(0) if num_pages > 1 else 64 * 132
    if kv_cache.data_ptr() % 16 or page_stride % 16 or kv_cache.stride(1) != 132 or kv_cache.stride(3) != 1:
        raise NotImplementedError(f"gluon decode: TMA needs a 16-byte aligned cache base and page stride "
                                  f"(base % 16 = {kv_cache.data_ptr() % 16}, page stride {page_stride} bytes)")
    if (q.data_ptr() % 16 or q.stride(3) != 1 or (q.stride(0) % 16) or (q.stride(2) % 16)
            or (n > 1 and q.stride(1) != 64 * q.stride(2))):
        raise NotImplementedError(f"gluon decode: TMA needs q 16-byte aligned with 16-byte strides (a request's "
                                  f"draft tokens' heads one run of rows), got strides {q.stride()}")
    if weights.stride(1) != 1 or block_table.stride(1) != 1 or out.stride(1) != 1:
        raise NotImplementedError("gluon decode: weights, block_table and out need contiguous rows")
    kv_l, sc_l, q_l = _layouts()
    kv = kv_cache.view(torch.float8_e4m3fn)
    # Page p's values: [64 tokens, 128] at byte p * page_stride (token-major, 128 bytes a token).
    kv_desc = TensorDescriptor(kv, [num_pages, 64, 128], [page_stride, 128, 1], [1, 64, 128], kv_l)
    # Page p's scales: fp32 words [SCALE_COL, SCALE_COL + 64) of row p of a [pages, page_stride / 4] view.
    sc_desc = TensorDescriptor(kv_cache.view(torch.float32), [num_pages, page_stride // 4], [page_stride // 4, 1],
                               [1, 64], sc_l)
    # A request's q as one [NEXT_N * 64, 128] block: draft token r's head h is row r * 64 + h.
    q_desc = TensorDescriptor(q, [batch, n * 64, 128], [q.stride(0), q.stride(2), 1], [1, n * 64, 128], q_l)
    if diag and n > 1:
        raise NotImplementedError("gluon decode: the timing diagnostics are next_n 1 only")
    if diag == 4:
        if num_consumers != 1 or (out.stride(0) * 4) % 16 or out.data_ptr() % 16:
            raise NotImplementedError("diag 4 (bulk stores): one consumer and an output whose rows are "
                                      "16-byte aligned")
        out_desc = TensorDescriptor(out, [out.shape[0], max_context_len], [out.stride(0), 1], [1, 64], sc_l)
    else:
        out_desc = sc_desc  # unused (a descriptor of the same type keeps one kernel signature)
    grid = (batch, triton.cdiv(max_context_len, tiles_per_program * 64))
    args = (kv_desc, sc_desc, q_desc, out_desc, weights, context_lens, block_table, out,
            weights.stride(0), block_table.stride(0), out.stride(0), lens_stride, max_context_len)
    constexprs = dict(TILES=tiles_per_program, TILES_P2=triton.next_power_of_2(tiles_per_program),
                      MIN_RUN=min(MIN_RUN, tiles_per_program), NUM_BUF=num_buf, NUM_CONSUMERS=num_consumers,
                      PRODUCER_REGS=producer_regs, CONSUMER_REGS=second_regs, DIAG=int(diag), NEXT_N=n,
                      LENS_2D=lens_2d, CLEAN=bool(clean_logits))
    options = dict(num_warps=NUM_WARPS, maxnreg=maxnreg)
    return grid, args, constexprs, options


def launch(q, kv_cache, weights, context_lens, block_table, out, max_context_len, clean_logits,
           tiles_per_program=TILES_PER_PROGRAM, num_buf=NUM_BUF, num_consumers=NUM_CONSUMERS, maxnreg=None, diag=0):
    """Same signature and semantics as the project's generated decode modules (1-D or 2-D
    context_lens, clean_logits either way); the keyword arguments pick a setting. Grid from shapes only; no host synchronisation,
    no allocation."""
    if diag not in (0, 1, 2, 3, 4, 5):
        raise ValueError(f"diag: expected 0 (the kernel) or 1-5 (timing diagnostics), got {diag!r}")
    if diag and clean_logits:
        raise NotImplementedError("gluon decode: the timing diagnostics run with clean_logits=False only")
    prep = prepare(q, kv_cache, weights, context_lens, block_table, out, max_context_len,
                   tiles_per_program, num_buf, num_consumers, maxnreg, diag, clean_logits)
    if prep is None:
        if clean_logits and q.shape[0] > 0 and max_context_len > 0:
            out[:, :max_context_len].fill_(float("-inf"))  # no pages, so no valid key: every position
        return out
    grid, args, constexprs, options = prep
    # (`maxnreg` is a launch option, as CUDAOptions names it)
    _decode_ws_kernel[grid](*args, **constexprs, **options)
    return out
