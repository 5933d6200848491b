"""What bounds fp8 decode on this GPU: measured ceilings beside the shipped kernel (issue 7).

For each decode bucket, on the same inputs and by the same CUDA-graph replay as `bench`
(8 launches per graph, several block tables over one pool larger than L2), time:
- empty:   a kernel that does nothing, on the bucket's grid (launch cost of one graph node);
- chain:   one program doing the decode kernel's dependent loads once (lengths -> block table
           -> cache -> store): the latency every launch pays before its first cache byte;
- stream:  the bucket's floor bytes read contiguously by a plain streaming kernel (best of a
           few configs): what a read of that size can reach at all;
- paged:   the bucket's valid pages read through the block table with the decode kernel's
           split grid and early exit, and no math (best of a few configs): the kernel's own
           access pattern with the compute taken away;
- paged even: the same, with each request's valid pages shared evenly by its row of programs
           (decode v7's split) instead of fixed chunks;
- paged even + q (--with-q): the same, each program first reading its request's q and w (8 KB +
           256 B for fp8, H=64, D=128, from L2) as a scoring program must: what a split with short
           programs costs before any math;
- paged even + q + logits (--with-logits): that, and each program writing its run's logits (4 bytes
           per valid token into an output of the real shape, once after its run's last page, as
           store "run" does): every byte a scoring kernel with this split moves, and no math;
           --logits-hints times it again for each way of writing the logits (after the run or
           after each page; a cache modifier or an eviction policy);
- paged + logits, paged + q + logits (--fixed-logits): the fixed-chunk read of 1-4 pages a program,
           writing each page's logits, without q and with q: what a short-program scoring kernel
           could reach at best;
- shipped: the runtime API (the dispatch table's pick).
Each as time and % of the floor (bytes / measured copy bandwidth).

Usage (GPU host): python3 -m bench.ceilings [--buckets 16x32768:full,...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from bench._common import no_cuda
from indexer_logits._identity import Bucket, Problem
from tuner.bench import api_launches
from tuner.buckets import DECODE_LENS_MODES, parse_bucket_specs
from tuner.gates import new_output
from tuner.measure import timing_inputs
from tuner.roofline import floor_ms
from tuner.timing import measure_copy_bandwidth, time_cuda_graph, warm_up_gpu


@triton.jit
def _empty_kernel(out_ptr):
    pass


@triton.jit
def _chain_kernel(lens_ptr, bt_ptr, kv_ptr, page_stride, out_ptr, PAGE: tl.constexpr):
    last = tl.load(lens_ptr) - 1
    page = tl.load(bt_ptr + last // PAGE)
    x = tl.load(kv_ptr + page.to(tl.int64) * page_stride)
    tl.store(out_ptr, x)


@triton.jit
def _stream_kernel(x_ptr, n_words, out_ptr, BLOCK: tl.constexpr, TILES: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in range(TILES):
        o = (pid * TILES + i).to(tl.int64) * BLOCK + offs
        acc ^= tl.load(x_ptr + o, mask=o < n_words, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _paged_read_kernel(kv_ptr, page_stride_words, bt_ptr, bt_stride, lens_ptr, out_ptr, q_ptr, logits_ptr, logits_stride,
                       PAGE: tl.constexpr, PAGE_WORDS: tl.constexpr, BLOCK: tl.constexpr, PAGES: tl.constexpr,
                       EVEN: tl.constexpr, Q_WORDS: tl.constexpr, LOGITS: tl.constexpr, HINT: tl.constexpr = ""):
    b = tl.program_id(0)
    c = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.int32)
    if Q_WORDS > 0:
        # Q_WORDS: every program first reads its request's q and w (as the scoring kernel must,
        # before its first tile), from a small buffer that stays in L2 like the real q.
        acc ^= tl.load(q_ptr + b * Q_WORDS + offs, mask=offs < Q_WORDS, other=0)
    n_pages = tl.cdiv(tl.load(lens_ptr + b), PAGE)
    # EVEN: the request's valid pages shared evenly by its row of programs (at most PAGES each),
    # as decode v7 does; otherwise fixed chunks of PAGES pages, the programs past the length idle.
    per = tl.cdiv(n_pages, tl.num_programs(1)) if EVEN else PAGES
    if c * per >= n_pages:
        return  # past the request's length: exit at once, like the decode kernel
    base = kv_ptr.to(tl.pointer_type(tl.int32))
    n_here = tl.minimum(per, n_pages - c * per)
    row = logits_ptr + b.to(tl.int64) * logits_stride + c * per * PAGE
    for i in range(0, n_here):  # valid pages only
        page = tl.load(bt_ptr + b * bt_stride + c * per + i)
        words = tl.load(base + page.to(tl.int64) * page_stride_words + offs, mask=offs < PAGE_WORDS, other=0)
        acc ^= words
        if LOGITS == 2:
            # Each page's logits after it (the shipped store "tile"): values that depend on the
            # page's words, so the store waits for them as a scoring kernel's does (a store of
            # constants would go out at once, overlapping the read: 0.6-1 us too fast at 8,192 tiles).
            _store_logits(row + i * PAGE + tl.arange(0, PAGE),
                          tl.zeros([PAGE], tl.float32) + tl.sum(words, 0).to(tl.float32), None, HINT)
    tl.store(out_ptr + b * tl.num_programs(1) + c, tl.sum(acc, 0))
    if LOGITS == 1:
        # The run's logits, 4 bytes a token, written once after its last page (the shipped store
        # "run" does the same), with values that depend on every page read.
        tok = tl.arange(0, PAGES * PAGE)
        _store_logits(row + tok, tl.zeros([PAGES * PAGE], tl.float32) + tl.sum(acc, 0).to(tl.float32),
                      tok < n_here * PAGE, HINT)


@triton.jit
def _store_logits(ptrs, values, mask, HINT: tl.constexpr):
    # HINT: "" a plain store; ".cs" / ".wt" a cache modifier; "evict_first" / "evict_last" an L2
    # eviction policy (--logits-hints: does the way the logits are written change their cost?)
    if HINT == "evict_first" or HINT == "evict_last":
        tl.store(ptrs, values, mask=mask, eviction_policy=HINT)
    elif HINT == "":
        tl.store(ptrs, values, mask=mask)
    else:
        tl.store(ptrs, values, mask=mask, cache_modifier=HINT)


# --logits-hints WHERE:HINT: where the logits are written (the kernel's LOGITS mode) and how
LOGITS_AT = {"run": 1, "page": 2}
LOGITS_HINT_CHOICES = ("", ".cs", ".wt", "evict_first", "evict_last")


@dataclass(frozen=True)
class Reads:
    """Which optional reads to time beside the fixed ones (the command line's flags)."""

    every_config: bool = False  # print each config's time, not only the best
    with_q: bool = False  # the paged even read with each program reading its request's q and w first
    with_logits: bool = False  # that read writing its run's logits
    logits_hints: tuple[str, ...] = ()  # that read again for each WHERE:HINT way of writing the logits
    fixed_logits: bool = False  # the fixed-chunk read writing logits, with and without q


def parse_logits_hints(text: str, with_logits: bool) -> tuple[str, ...]:
    """--logits-hints as WHERE:HINT items (ValueError with the reason if one is not)."""
    hints = tuple(h for h in text.split(",") if h)
    if hints and not with_logits:
        raise ValueError("--logits-hints: needs --with-logits (the hints are variants of that read)")
    for h in hints:
        where, sep, hint = h.partition(":")
        if not sep or where not in LOGITS_AT or hint not in LOGITS_HINT_CHOICES:
            raise ValueError(f"--logits-hints: expected WHERE:HINT with WHERE one of {'|'.join(LOGITS_AT)} and HINT "
                             f"one of {LOGITS_HINT_CHOICES}, got {h!r}")
    return hints


def best_of(make_fns, configs, replays, what="", every_config=False):
    best = None
    for cfg in configs:
        try:
            t = time_cuda_graph(make_fns(cfg), replays=replays)
        except Exception as exc:  # noqa: BLE001 - a config that does not compile is skipped
            print(f"  config {cfg}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            continue
        if every_config:
            print(f"    {what} {cfg}: {t.p50_ms * 1e3:.1f} us", flush=True)
        if best is None or t.p50_ms < best[1].p50_ms:
            best = (cfg, t)
    return best


def measure_bucket(problem: Problem, bucket: Bucket, lens: str, copy_bw: float, replays: int,
                   reads: Reads = Reads()) -> dict:
    def best(make_fns, configs, what):
        return best_of(make_fns, configs, replays, what, reads.every_config)

    sets = timing_inputs(problem, bucket, lens, device="cuda")
    x0 = sets[0]
    fl = floor_ms(x0, False, copy_bw=copy_bw)
    kv = x0.kv_cache
    page = problem.page_size
    page_bytes = page * problem.token_bytes
    page_stride = kv.stride(0)
    assert page_stride % 4 == 0 and page_bytes % 4 == 0
    width_pages = x0.block_table.shape[1]
    row = {"bucket": f"{bucket.batch}x{bucket.context}", "lens": lens, "floor_us": fl * 1e3}

    # empty: the decode split grid at the shipped default's chunk (4 tiles of 128 = 8 pages)
    grid = (bucket.batch, triton.cdiv(width_pages, 8))
    sink = torch.zeros(1, device="cuda")
    row["empty"] = time_cuda_graph([lambda: _empty_kernel[grid](sink)], replays=replays)
    outi = torch.zeros(1, dtype=torch.uint8, device="cuda")
    row["chain"] = time_cuda_graph(
        [lambda x=x: _chain_kernel[(1,)](x.context_lens, x.block_table, x.kv_cache, page_stride, outi, PAGE=page)
         for x in sets], replays=replays)

    # stream: the floor's bytes, contiguous, rotated over buffers that together exceed L2 twice
    nbytes = int(fl * 1e-3 * copy_bw)
    words = max(nbytes // 4, 1)
    nbuf = max(2, min(8, -(-(120 << 20) // max(nbytes, 1))))
    bufs = [torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda") for _ in range(nbuf)]
    sout = torch.zeros(triton.cdiv(words, 1024), dtype=torch.int32, device="cuda")

    def stream_fns(cfg):
        block, tiles, warps = cfg
        g = (triton.cdiv(words, block * tiles),)
        return [lambda b=b: _stream_kernel[g](b, words, sout, BLOCK=block, TILES=tiles, num_warps=warps) for b in bufs]

    row["stream"] = best(stream_fns, list(itertools.product((1024, 2048, 4096), (1, 4, 16), (4, 8))),
                         "stream (block, tiles, warps)")

    pout = torch.zeros(bucket.batch * width_pages, dtype=torch.int32, device="cuda")

    # q and w of each request, as int32 words (fp8 H=64 D=128: 8 KB + 256 B), for the "paged + q" read
    q_bytes = 1 if problem.q_dtype == "fp8" else 2
    q_words = (problem.next_n * problem.heads * (problem.head_dim * q_bytes + 4)) // 4
    qbuf = torch.randint(-2**31, 2**31 - 1, (bucket.batch * q_words,), dtype=torch.int32, device="cuda")

    # the logits outputs, one per input set as the shipped kernel gets (for --with-logits)
    louts = [new_output(x, 0.0) for x in sets] if reads.with_logits or reads.fixed_logits else [pout] * len(sets)

    def paged_fns(cfg, even=False, with_q=False, logits=0, hint=""):
        pages, warps, stages = cfg
        g = (bucket.batch, triton.cdiv(width_pages, pages))
        return [lambda x=x, lo=lo: _paged_read_kernel[g](x.kv_cache, page_stride // 4, x.block_table, x.block_table.stride(0),
                                                         x.context_lens, pout, qbuf, lo, lo.stride(0) if logits else 0,
                                                         PAGE=page, PAGE_WORDS=page_bytes // 4,
                                                         BLOCK=triton.next_power_of_2(max(page_bytes, q_words * 4) // 4),
                                                         PAGES=pages, EVEN=even, Q_WORDS=q_words if with_q else 0,
                                                         LOGITS=logits, HINT=hint, num_warps=warps, num_stages=stages)
                for x, lo in zip(sets, louts)]

    paged_configs = list(itertools.product((1, 2, 4, 8, 16), (4, 8), (2, 3)))
    row["paged"] = best(paged_fns, paged_configs, "paged (pages, warps, stages)")
    row["paged_even"] = best(lambda cfg: paged_fns(cfg, even=True), paged_configs, "paged even (pages, warps, stages)")
    if reads.with_q:
        row["paged_even_q"] = best(lambda cfg: paged_fns(cfg, even=True, with_q=True), paged_configs,
                                   "paged even + q (pages, warps, stages)")
    if reads.with_logits:
        row["paged_even_q_logits"] = best(lambda cfg: paged_fns(cfg, even=True, with_q=True, logits=1),
                                          paged_configs, "paged even + q + logits (pages, warps, stages)")
        # --logits-hints: "where:hint", where "run" (once after the run) or "page" (after each page)
        for spec in reads.logits_hints:
            where, _, hint = spec.partition(":")
            row[f"logits_{spec}"] = best(
                lambda cfg: paged_fns(cfg, even=True, with_q=True, logits=LOGITS_AT[where], hint=hint),
                [c for c in paged_configs if c[1] == 4], f"paged even + q + logits {spec} (pages, warps, stages)")
    if reads.fixed_logits:
        # The fastest bare read (fixed chunks of 1-4 pages a program) with the logits written after
        # each page: without q (as if the programs of a request shared one fetch of it), and with q
        # read by every program. What a short-program scoring kernel could reach at best.
        short = [c for c in paged_configs if c[0] <= 4 and c[1] == 4]
        row["paged_logits"] = best(lambda cfg: paged_fns(cfg, logits=2), short,
                                   "paged + logits (pages, warps, stages)")
        row["paged_q_logits"] = best(lambda cfg: paged_fns(cfg, with_q=True, logits=2), short,
                                     "paged + q + logits (pages, warps, stages)")

    row["shipped"] = time_cuda_graph(api_launches(problem, sets), replays=replays)
    del sets, bufs
    torch.cuda.empty_cache()
    return row


def fmt(row: dict, key: str) -> str:
    v = row.get(key)
    if v is None:
        return "-"
    t = v[1] if isinstance(v, tuple) else v
    return f"{t.p50_ms * 1e3:8.1f} us {100 * row['floor_us'] / (t.p50_ms * 1e3):4.0f}%"


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ceilings", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--buckets", default="1x8192:full,64x8192:full,64x8192:quarter,256x8192:quarter,64x32768:full,"
                    "64x131072:full,256x131072:full", help="BxCONTEXT:full|quarter, comma-separated")
    ap.add_argument("--every-config", action="store_true", help="print each stream / paged config's time")
    ap.add_argument("--with-q", action="store_true",
                    help="also time 'paged even + q': each program reads its request's q and w before its pages")
    ap.add_argument("--with-logits", action="store_true",
                    help="also time 'paged even + q + logits': that read writing its run's logits (implies --with-q)")
    ap.add_argument("--fixed-logits", action="store_true",
                    help="also time the fixed-chunk read (1-4 pages a program) writing each page's logits, without "
                         "and with q: what a short-program scoring kernel could reach")
    ap.add_argument("--logits-hints", default="",
                    help=f"with --with-logits: also time WHERE:HINT variants, comma-separated; WHERE one of "
                         f"{'|'.join(LOGITS_AT)}, HINT one of {LOGITS_HINT_CHOICES} (e.g. 'page:,run:.cs')")
    args = ap.parse_args()
    try:
        cases = parse_bucket_specs(args.buckets, lens_modes=DECODE_LENS_MODES)
    except ValueError as exc:
        ap.error(str(exc))
    try:
        reads = Reads(every_config=args.every_config, with_q=args.with_q or args.with_logits,
                      with_logits=args.with_logits, fixed_logits=args.fixed_logits,
                      logits_hints=parse_logits_hints(args.logits_hints, args.with_logits))
    except ValueError as exc:
        ap.error(str(exc))
    if not torch.cuda.is_available():
        return no_cuda()
    torch.manual_seed(0)
    warm_up_gpu()
    copy_bw = measure_copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    problem = Problem()  # fp8, H=64, D=128, page 64, next_n 1
    rows = []
    for bucket, lens in cases:
        row = measure_bucket(problem, bucket, lens, copy_bw, args.replays, reads)
        rows.append(row)
        print(f"{row['bucket']:>10} {lens:>7} floor {row['floor_us']:8.1f} us | empty {fmt(row, 'empty')} | chain "
              f"{fmt(row, 'chain')} | stream {fmt(row, 'stream')} | paged {fmt(row, 'paged')} | paged even "
              f"{fmt(row, 'paged_even')} | paged even + q {fmt(row, 'paged_even_q')} | + logits "
              f"{fmt(row, 'paged_even_q_logits')} | shipped "
              f"{fmt(row, 'shipped')}", flush=True)
        if row.get("stream"):
            print(f"    stream cfg (block, tiles, warps) {row['stream'][0]}; paged cfg (pages, warps, stages) "
                  f"{row['paged'][0] if row.get('paged') else '-'}; even {row['paged_even'][0] if row.get('paged_even') else '-'}",
                  flush=True)
    if args.out:
        def enc(v):
            if isinstance(v, tuple):
                return {"config": list(v[0]), "p50_ms": v[1].p50_ms, "p20_ms": v[1].p20_ms, "p80_ms": v[1].p80_ms}
            if hasattr(v, "p50_ms"):
                return {"p50_ms": v.p50_ms, "p20_ms": v.p20_ms, "p80_ms": v.p80_ms}
            return v
        with open(args.out, "w") as f:
            json.dump({"copy_bw": copy_bw, "rows": [{k: enc(v) for k, v in r.items()} for r in rows]}, f, indent=1)
    print("\nbucket lens | floor | empty | chain | stream | paged | paged even | paged even + q | + logits | shipped"
          "   (p50 per launch, % of floor)")
    for r in rows:
        for spec in reads.logits_hints:
            print(f"{r['bucket']} {r['lens']} logits {spec}: {fmt(r, f'logits_{spec}')}")
        if reads.fixed_logits:
            print(f"{r['bucket']} {r['lens']} paged + logits: {fmt(r, 'paged_logits')}; paged + q + logits: "
                  f"{fmt(r, 'paged_q_logits')}")
    for r in rows:
        print(f"{r['bucket']} {r['lens']} | {r['floor_us']:.1f} us | {fmt(r, 'empty')} | {fmt(r, 'chain')} | "
              f"{fmt(r, 'stream')} | {fmt(r, 'paged')} | {fmt(r, 'paged_even')} | {fmt(r, 'paged_even_q')} | "
              f"{fmt(r, 'paged_even_q_logits')} | "
              f"{fmt(r, 'shipped')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
