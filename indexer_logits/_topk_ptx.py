"""The selection kernels' atomics and stores as inline PTX (CUDA only; the interpreter cannot run them, so
every caller has a tl.atomic_add / tl.store form for it): each is an elementwise op, so its operands keep
their layout, where tl.atomic_add and tl.store convert addresses, values and masks through shared memory
behind barriers (cross-compiled for sm_90: two of the bound count's four barriers a step). Each has
is_pure=False, so that nothing drops it when its output (a dummy 0, or the slot) is not read. (The bound
compaction's atomics and stores the same way, ~8 barriers a step fewer, timed level with tl.atomic_add's:
docs/perf_logs/topk_ballot, call 3; not kept.)"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _red_add_one(addr, pred):
    """A relaxed atomic add of 1 at each int32 address where pred (a dummy 0 out)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p red.relaxed.gpu.global.add.u32 [$1], 1; mov.u32 $0, 0; }",
        "=r,l,r", [addr.to(tl.int64), pred.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _store_where(addr, value, pred):
    """int32 value to each address where pred (a dummy 0 out)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$1], $3; mov.u32 $0, 0; }",
        "=r,l,r,r", [addr.to(tl.int64), pred.to(tl.int32), value], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _store64_where(addr, value, pred):
    """int64 value to each address where pred (a dummy 0 out)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b64 [$1], $3; mov.u32 $0, 0; }",
        "=r,l,r,l", [addr.to(tl.int64), pred.to(tl.int32), value], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _claim_slots(counter, pred):
    """Distinct slots, claimed from the int32 at each `counter` address, for the elements where pred: a
    warp's admitted lanes of this register take one atomic between them (a ballot; the highest admitted
    lane adds their popcount, the others read the old count by a shuffle and add their rank). Inline PTX,
    an elementwise op, one register at a time: the slots are distinct whatever the layout puts in a
    thread. Every lane of the warp must run it (vote.sync and shfl.sync with a full mask): the caller's
    loop is uniform in the program."""
    return tl.inline_asm_elementwise(
        """{
        .reg .pred p, lead;
        .reg .b32 bal, below, n, old, last, first;
        setp.ne.b32 p, $2, 0;
        vote.sync.ballot.b32 bal, p, 0xffffffff;
        mov.u32 below, %lanemask_lt;
        and.b32 below, below, bal;
        popc.b32 below, below;
        popc.b32 n, bal;
        add.u32 last, below, 1;
        setp.eq.and.u32 lead, last, n, p;
        mov.u32 old, 0;
        @lead atom.relaxed.gpu.global.add.u32 old, [$1], n;
        bfind.u32 last, bal;
        shfl.sync.idx.b32 first, old, last, 0x1f, 0xffffffff;
        add.u32 $0, first, below;
        }""",
        "=r,l,r", [counter.to(tl.int64), pred.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)
