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


def _vote_asm(pack: int) -> str:
    """_vote_step's PTX for `pack` elements a thread (a thread's whole step, so that the warp's running count
    goes through every one of its registers in turn). Operands: $0..: the new count (each element's copy);
    then `pack` each of: the count so far, the position, admitted, its histogram bin's address, the segment's
    address, the sub-segment's slots (only the first copy of the last two is read)."""
    n, t, adm, hist, seg, cap = (pack * i for i in range(1, 7))
    lines = ["{", ".reg .pred p, q;", ".reg .b32 bal, below, lt, c, w, slot;", ".reg .b64 a;",
             "mov.u32 lt, %lanemask_lt;", "mov.u32 w, %tid.x;", "shr.u32 w, w, 5;",
             f"mul.lo.u32 w, w, ${cap};", f"mov.u32 c, ${n};"]
    for j in range(pack):  # (element j of every lane of the warp: one vote)
        lines += [f"setp.ne.b32 p, ${adm + j}, 0;", "vote.sync.ballot.b32 bal, p, 0xffffffff;",
                  "and.b32 below, bal, lt;", "popc.b32 below, below;", "add.u32 slot, c, below;",
                  f"setp.lt.and.u32 q, slot, ${cap}, p;", "add.u32 slot, slot, w;",
                  "mul.wide.u32 a, slot, 4;", f"add.s64 a, a, ${seg};", f"@q st.global.b32 [a], ${t + j};",
                  f"@p red.relaxed.gpu.global.add.u32 [${hist + j}], 1;", "popc.b32 bal, bal;", "add.u32 c, c, bal;"]
    return "\n".join(lines + [f"mov.u32 ${j}, c;" for j in range(pack)] + ["}"])


def _warp_count_asm(pack: int) -> str:
    """_store_warp_count's PTX: lane 0 of each warp stores its count (operand $pack) at the address (operand
    $2pack) plus the warp's index; a dummy 0 out for each element."""
    return "\n".join(["{", ".reg .pred p;", ".reg .b32 l, w;", ".reg .b64 a;", "mov.u32 l, %laneid;",
                      "setp.eq.u32 p, l, 0;", "mov.u32 w, %tid.x;", "shr.u32 w, w, 5;", "mul.wide.u32 a, w, 4;",
                      f"add.s64 a, a, ${2 * pack};", f"@p st.global.b32 [a], ${pack};"]
                     + [f"mov.u32 ${j}, 0;" for j in range(pack)] + ["}"])


def _constraints(pack: int, inputs: str) -> str:
    """`pack` 32-bit outputs, then `pack` of each input's constraint letter."""
    return ",".join(["=r"] * pack + [c for c in inputs for _ in range(pack)])


# (an op's asm is a constant: one for each count of elements a thread a step the count can have, indexed by it;
# _topk_paths refuses the others)
VOTE_PACKS = (1, 2, 4, 8, 16)
_VOTE = tl.constexpr(tuple(_vote_asm(p) if p in VOTE_PACKS else "" for p in range(17)))
_VOTE_C = tl.constexpr(tuple(_constraints(p, "rrrllr") if p in VOTE_PACKS else "" for p in range(17)))
_WARP_COUNT = tl.constexpr(tuple(_warp_count_asm(p) if p in VOTE_PACKS else "" for p in range(17)))
_WARP_COUNT_C = tl.constexpr(tuple(_constraints(p, "rl") if p in VOTE_PACKS else "" for p in range(17)))


@triton.jit
def _vote_step(n, t, admitted, hist_addr, seg, sub_cap, PACK: tl.constexpr):
    """The count of a step's admitted keys by warp (_topk_bound_count._count_voting): each warp's admitted keys of
    a register take the next slots of its sub-segment (seg + warp * sub_cap) by a vote, their rank among the
    warp's lanes and its running count `n` (every element of a warp holds it); the first sub_cap are stored
    there, and every admitted key adds 1 to its histogram bin at hist_addr. No atomic answers, no barrier,
    no shared memory. PACK: the elements a thread holds (every one of them in one op, in turn; one of
    VOTE_PACKS). Returns the new count (past sub_cap where the sub-segment overflowed)."""
    tl.static_assert(PACK <= 16, "_vote_step: 1, 2, 4, 8 or 16 elements a thread")
    args = [n, t, admitted.to(tl.int32), hist_addr.to(tl.int64), (seg + n * 0).to(tl.int64), sub_cap + n * 0]
    return tl.inline_asm_elementwise(_VOTE[PACK], _VOTE_C[PACK], args, dtype=tl.int32, is_pure=False, pack=PACK)


@triton.jit
def _store_warp_count(counts, n, PACK: tl.constexpr):
    """Each warp's count `n` (_vote_step's) to counts[warp], by its lane 0 (a dummy 0 out)."""
    tl.static_assert(PACK <= 16, "_store_warp_count: 1, 2, 4, 8 or 16 elements a thread")
    args = [n, (counts + n * 0).to(tl.int64)]
    return tl.inline_asm_elementwise(_WARP_COUNT[PACK], _WARP_COUNT_C[PACK], args, dtype=tl.int32, is_pure=False,
                                     pack=PACK)
