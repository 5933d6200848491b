"""A performance model per kernel family: a config's time on a bucket, parametric in the device
(tuner.devices: SM count, per-SM limits, copy bandwidth, matmul rate, launch and start costs) and
in the config's compiled resources (registers and shared memory from tuner.xcompile).

It ranks configs for a GPU nobody has tuned on (`cli.py predict`); it is not a list of winners.
Every term is one of docs/PERF.md's lessons from the H200 ("Lessons for tuning", "The fixed
cost per launch", "What bounds the small buckets"), cited where it is used:
  - programs resident per SM from registers and shared memory; a grid over the resident slots
    runs in waves, and a second wave is what costs ("One wave of programs");
  - a program's dependent start (lengths, block table) and its chain of tile reads: a short
    program pays its start per tile, a long one is bound by its per-tile chain ("Runs of at least
    MIN_RUN tiles", the 64x8K 1-tile and BLOCK_T 32 sweeps);
  - the stream: the bucket's bytes at 95.2% of the copy rate, or less when the copies in flight
    (resident programs x pipelined tiles) cannot cover the memory latency (the small buckets);
  - the dot: the scoring's flops at a fraction of the matmul rate (next_n = 2 reaches 77-80% of
    the memory floor at 1M tokens where next_n = 1 reaches 97-99%: compute starts to bound);
  - logits stored per tile cost more than their bytes ("Deferred logits stores": 5% of the
    64x8K time for 3% of its bytes);
  - the fixed cost: launch to launch plus the tail (1.0 + ~1.5 us on the H200 timeline).
Fit: on the ok H200 trials of db/trials.sqlite (102 decode buckets with 5+ configs, the trials'
own registers and shared memory), choosing by the model costs a geo-mean 1.020 of the best timed
score per bucket (worst 1.10; `python -m bench.model_fit`; 1.031 and 1.21 before model 8);
tuner/devices.py's H200 start and latency are that fit's. Model 5 added two terms with no fitted
constant (the dot's busiest SM, the run's epilogue at the copy rate): 1.030 -> 1.031 there, the fp8 blind tunes' stores
(docs/perf_logs/blind_tune_h200/call3, call4) 1.054 -> 1.049 and 1.069 -> 1.064.
Model 6 added the key-tile load's prior for ragged prefill (k_load_cost, assumed): the same
prediction for every config with k_load 'threads'. Model 7 set both head-sum and key-load terms
from the H200 A/B of 2026-12-03 under Triton 3.6, 3.8 and 3.9 (docs/PERF.md, "The `k_load` axis"):
TMA with the chain costs 2-9%, TMA with the tree gains 2.5-3% under 3.8 (the fence), and the
tree costs 1.10-1.19x under 3.8 on ragged prefill. Model 8: a run's first tile is not overlapped
(its read's whole latency, then its dot), which the chain term had given the pipeline's rate;
and a program's q is in flight beside its first tiles, not streamed after them. Model 9: the prefill
body's shape fit to the H200's stored prefill trials (prefill_body_cost): top-1 regret over their 6
buckets 1.085 (worst 1.30) -> 1.018 (worst 1.06), in sample (`python -m bench.model_fit --family prefill`);
the decode fit unchanged.
Times are in microseconds. MODEL_VERSION changes when a term does (it is in each table's provenance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from indexer_logits._identity import Config, Problem
from indexer_logits._versions import minor_of, running_triton

from .devices import Device
from .families import family_of
from .space import estimate_shared_bytes

MODEL_VERSION = "9"

STREAM_EFFICIENCY = 0.952  # the fixed-cost fit's slope: streaming at 95.2% of the floor's rate
STORE_TILE_COST = 1.7  # per-tile logits stores: 5% of the time for 3% of the bytes
MMA_EFFICIENCY = 0.55  # small dots (64-256 rows): next_n = 2 at 1M reaches ~770 of 1400 TFLOP/s
MMA_SYNC_ON_WGMMA_ARCH = 0.15  # sm_90 kernels that fall back to mma.sync (a dot too small for wgmma)
MIN_RUN = 4  # the split grid's shortest run (templates: MIN_RUN = min(4, TILES))
# Fit to the 10,304 ok H200 trials of db/trials.sqlite (fp8 next_n 1 and 2, bf16; median of
# measured / predicted by feature), for what the terms above do not explain:
Q_ROWS_COST = 1.6  # orient q_rows: the head sum across warps (every H200 winner is k_rows)
PERSISTENT_COST = 1.45  # the persistent grid's tile loop (its winners: one bf16 bucket of 12)
SPAN_PAGES_COST = 1.2  # a tile over several pages reads one block-table entry a token, no TMA box
DOT_WARPS_FULL = 16  # resident warps an SM's dot needs (fit, with the next_n = 2 run-store A/B below)
START_QUEUE_WEIGHT = 0.4  # share of a wave's extra first copies that delays it (fit: the stages sweep)
# Each pipeline stage past 3 slows a decode program's body by this much: the H200's 4-stage
# configs lost 5-11% to their 3-stage twins at next_n = 2, B 4-64 x 4K-32K (the stored trials'
# regret there, bt64_tp8_w4_s4 chosen), and four stages at 16,384 tiles 2-4% (docs/PERF.md,
# "One wave of programs"); the queue term above alone left the model preferring them. Fit: the
# stored H200 trials' top-1 regret 1.035 -> 1.030 (flat from 0.04 to 0.08; `python -m bench.model_fit`).
STAGE_PAST_3_COST = 0.04
SPAN_PAGES_DOT_COST = 1.5  # ... and its dot waits on those gathers (next_n = 2: 1.7x)
PREFILL_L2_REUSE = 4.0  # prefill's key chunks are read by every row block: mostly from L2 (assumption)
# The prefill body's shape (model 9; prefill_body_cost). Fit by least squares in log time to the 166
# distinct ok H200 prefill trials of db/trials.sqlite (ragged and paged, fp8 and bf16, 6 buckets, one
# intercept a bucket; rms 0.22 in log). Model 8 had the dot's rows and key tile as min(1, rows / 256)
# and min(1, BLOCK_T / 64) and 0.6 for one stage, no q_rows, warps or prologue term: it ranked the H100's
# predicted ragged prefill bt64_tp8_w8_s4_m4 (q_rows, 8 warps) first, which ran 3.0x the family default
# bt64_tp32_w4_s3_m4_kr there (13.2 against 4.4 ms at 4096 x 64K; this fit says 1.92 x 1.41 x 1.12 = 3.0;
# docs/PERF.md, "The H100's predicted table"). Tiles of 128 and 256 keys fit 0.93 and 0.89 of 64's, not
# taken (their winners spill-free at 64 keys only; 1.0 from 64 keys up, as model 8 had).
PREFILL_DOT_ROWS_COST = {64: 1.40, 128: 1.04}  # query-head rows a dot (block_m x heads); 1.0 from 256
PREFILL_KEY_TILE_COST = {16: 3.40, 32: 2.56}  # keys a tile (BLOCK_T); 1.0 from 64
PREFILL_STAGES_COST = {1: 1.07, 2: 1.06}  # pipeline stages; 1.0 from 3
PREFILL_Q_ROWS_COST = 1.92  # orient q_rows (decode's Q_ROWS_COST: 1.6)
PREFILL_WARPS_COST = 1.41  # each doubling of the warps past 4
PREFILL_PROLOGUE_TILES = 1.0  # a program's q load and epilogue, in tiles: (1 + this / TILES)
# The head sum (Config.head_sum; docs/PERF.md, "Prefill under Triton 3.8 and 3.9: why"). Since
# Triton 3.7 tl.sum adds a thread's values as a tree: the 'tree' epilogue leaves half its weight
# multiplies unfused (+56 FP instructions a wgmma tile at 64 x 256; the H200 ran the shipped
# prefill 1.17-1.20x slower under 3.8, decode next_n = 2 1.05-1.08x, both with a proxy fence
# beside it; next_n = 1 +28, hidden by its memory bound). Under 3.6 both forms compile to the same
# FFMAs. On mma.sync (sm_80-sm_120) a thread holds other heads and the chain adds 2 layout
# conversions and 5-13 barriers a tile. The H200 A/B (ragged prefill, the shipped config, same
# process, docs/perf_logs/triton39_h200/ab_kload_*.log): tree / chain 1.10, 1.11, 1.18 under 3.8
# (1.72 under 3.9, where the tree also spills: the compile's spills say that), 1.001-1.014 under 3.6.
TREE_SUM_COST = 1.10  # the compute-bound body under Triton 3.7+ on wgmma, tree against chain
CHAIN_ON_MMA_SYNC_COST = 1.10  # the chain's conversions on mma.sync
CHAIN_NO_GAIN_COST = 1.001  # the chain where it gains nothing: the tree (the shipped form) wins ties
# How ragged prefill loads a key tile (Config.k_load; docs/PERF.md, same section). Since Triton 3.7 a
# cp.async tile read by wgmma waits behind a proxy fence (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S) every
# tile; a tile that TMA writes needs none, but waits on its mbarrier (2 more barriers a tile) and,
# with the chain, compiles at 255 registers. Measured on the H200 (same A/B, tma / threads):
TMA_FENCE_GAIN = 0.97  # with the tree under 3.7+ on wgmma: 0.972-0.976 under 3.8 (0.93 under 3.9, spilling)
TMA_WITH_CHAIN_COST = 1.04  # with the chain: 1.014-1.094 under 3.6, 3.8 and 3.9
TMA_NO_FENCE_COST = 1.01  # with the tree where there is no fence to save: 1.003-1.022 under 3.6


@dataclass(frozen=True)
class Resources:
    """What one compiled variant uses: per-thread registers, shared bytes, the dot's instruction."""

    registers: int
    shared_bytes: int
    mma: str = ""  # tuner.xcompile's flavour ('wgmma', 'mma.sync', 'tcgen05'), '' when unknown


def estimate_resources(problem: Problem, config: Config, device: Device) -> Resources:
    """An optimistic guess before compiling (the cheap pre-rank): the accumulator's registers plus a
    base, shared memory from tuner.space's estimate. Compiled resources replace it."""
    rows = family_of(problem).dot_rows(problem, config)
    threads = 32 * config.num_warps
    acc = rows * config.block_t // threads
    run = 0
    if config.store == "run":
        run = config.tiles_per_program * config.block_t * problem.next_n // threads
    return Resources(min(255, 32 + acc + run), estimate_shared_bytes(problem, config),
                     _likely_mma(problem, config, device))


def _likely_mma(problem: Problem, config: Config, device: Device) -> str:
    cap = device.target_limits.capability
    if cap >= 120 or cap < 90:
        return "mma.sync"
    if cap >= 100:
        return "tcgen05"
    return "wgmma" if config.num_warps % 4 == 0 and config.block_t >= 64 else "mma.sync"


def programs_per_sm(device: Device, config: Config, res: Resources) -> int:
    """Resident programs an SM holds: the least of the register file, shared memory, warp and
    program limits (CUDA's occupancy rules: registers a warp in units of 256)."""
    arch = device.arch
    warps = config.num_warps
    per_warp = math.ceil(max(res.registers, 1) * 32 / arch.register_granule) * arch.register_granule
    by_regs = arch.registers_per_sm // (per_warp * warps)
    by_shared = arch.shared_per_sm // (res.shared_bytes + arch.shared_reserved_per_program)
    by_warps = arch.max_warps_per_sm // warps
    return max(0, min(by_regs, by_shared, by_warps, arch.max_programs_per_sm))


def _dot_rate(device: Device, problem: Problem, res: Resources) -> float:
    rate = device.matmul_rate(problem.cache_dtype) * MMA_EFFICIENCY
    if res.mma == "mma.sync" and 90 <= device.target_limits.capability < 100:
        rate *= MMA_SYNC_ON_WGMMA_ARCH / MMA_EFFICIENCY
    return rate


def _running_minor():
    """(major, minor) of the Triton that compiles what the model ranks (None without triton)."""
    return minor_of(running_triton())


def _wgmma_since_37(res: Resources, triton_minor=None) -> bool:
    """Whether the body runs on wgmma under Triton 3.7 or later, where both priors below apply (the
    tree's sum left unfused, the per-tile proxy fence after cp.async). triton_minor: (major, minor)
    [default: the running Triton]."""
    minor = _running_minor() if triton_minor is None else triton_minor
    return res.mma == "wgmma" and minor is not None and minor >= (3, 7)


def head_sum_cost(problem: Problem, config: Config, res: Resources, triton_minor=None) -> float:
    """The head sum's factor on a compute-bound body (TREE_SUM_COST and the two below it).
    triton_minor: (major, minor) [default: the running Triton]."""
    if config.orient != "k_rows":  # q_rows sums across warps: head_sum is tied to 'tree' there
        return 1.0
    chain = config.head_sum == "chain"
    if res.mma == "mma.sync":
        return CHAIN_ON_MMA_SYNC_COST if chain else 1.0
    compute_bound = not problem.kind.decode or problem.next_n > 1
    if _wgmma_since_37(res, triton_minor) and compute_bound:
        return 1.0 if chain else TREE_SUM_COST
    return CHAIN_NO_GAIN_COST if chain else 1.0


def k_load_cost(problem: Problem, config: Config, res: Resources, triton_minor=None) -> float:
    """The key-tile load's factor on a compute-bound body ('threads' 1.0; 'tma' the three measured
    factors above). triton_minor: (major, minor) [default: the running Triton]."""
    if "k_load" not in family_of(problem).axes or config.k_load != "tma":  # tied to 'threads' elsewhere
        return 1.0
    if config.head_sum == "chain" and config.orient == "k_rows":
        return TMA_WITH_CHAIN_COST
    return TMA_FENCE_GAIN if _wgmma_since_37(res, triton_minor) else TMA_NO_FENCE_COST


@dataclass(frozen=True)
class Breakdown:
    """One predicted time and its terms (us), for reports and tests."""

    total_us: float
    waves: int
    resident: int  # programs an SM
    programs: int  # programs that score tiles
    stream_us: float
    serial_us: float
    dot_us: float
    fixed_us: float


INFEASIBLE = Breakdown(math.inf, 0, 0, 0, math.inf, math.inf, math.inf, 0.0)


def decode_breakdown(device: Device, problem: Problem, config: Config, res: Resources, batch: int, context: int,
                     fill: str = "full") -> Breakdown:
    """Decode over the paged cache, every request at `context` ("full") or a quarter of it."""
    resident = programs_per_sm(device, config, res)
    if resident == 0:
        return INFEASIBLE
    bt, n_rows = config.block_t, problem.next_n
    valid = context if fill == "full" else max(1, context // 4)
    tiles = math.ceil(valid / bt)  # a request's valid tiles
    if config.programs_per_sm == 0:
        # The split grid (batch, cdiv(width, CHUNK)); a request's valid tiles shared evenly by its
        # row of programs in runs of at least MIN_RUN ("Runs of at least MIN_RUN tiles").
        row = math.ceil(context / (bt * config.tiles_per_program))
        run = min(tiles, max(math.ceil(tiles / row), min(MIN_RUN, config.tiles_per_program)))
        programs = batch * math.ceil(tiles / run)
    else:
        # The persistent grid: PROGRAMS_PER_SM programs an SM share every request's tiles.
        programs = min(device.sm_count * config.programs_per_sm, batch * tiles)
        run = math.ceil(batch * tiles / programs)
    slots = device.sm_count * resident
    waves = math.ceil(programs / slots)
    store = 1.0 if config.store == "run" else STORE_TILE_COST
    q_bytes = problem.heads * (problem.head_dim * (1 if problem.q_dtype == "fp8" else 2) + 4) * n_rows
    # Bytes a program moves: its run's cache tiles and logits, and its q and weights.
    program_bytes = batch * valid * (problem.token_bytes + 4 * n_rows * store) / programs + q_bytes
    depth = max(config.num_stages - 1, 1)  # tiles in flight a program: stages - 1 (one without a pipeline)
    # The dot: the scoring's flops at a fraction of the matmul rate, shared by an SM's programs.
    flops_tile = 2.0 * bt * n_rows * problem.heads * problem.head_dim
    # An SM's tensor cores need DOT_WARPS_FULL resident warps to keep busy (next_n = 2 with the
    # run's buffer: 167 registers, 3 programs an SM, timed 1.16-1.19x slower than 112 registers and 4).
    dot_rate = _dot_rate(device, problem, res) * min(1.0, resident * config.num_warps / DOT_WARPS_FULL)
    # The dot is as slow as its busiest SM: a grid of 171 programs on 132 SMs puts two on 39 of
    # them, and those SMs score twice the tiles (busy_per_sm = the SM's share, rounded up; model 5).
    busy_per_sm = max(1, min(resident, math.ceil(programs / device.sm_count)))
    dot_tile_us = flops_tile * busy_per_sm / (dot_rate / device.sm_count) * 1e6
    # A program's own chain: its dependent start, then its tiles. With two or more tiles in flight
    # a tile's read overlaps the previous tile's dot (the next block-table entry is read one tile
    # ahead, so deeper pipelines hide at most half a round trip more); with one (num_stages <= 2)
    # read and dot take turns (next_n = 2 at 1M: 2 stages ~1.8x the time of 3). A run's first tile
    # has nothing before it to overlap: its whole read, then its dot (model 8). So a one-tile run
    # gains nothing from stages (bf16 next_n = 2 at 1x8K, tp1: 1 / 2 / 3 stages 6.37 / 6.79 / 6.87
    # us, docs/perf_logs/blind_tune_h200/call5_untuned_long.sqlite at commit 8f5bc02), and two tiles pay
    # more than one.
    # Fit, no new constant: top-1 regret over the stored H200 trials 1.031 -> 1.027, the blind
    # tunes' stores 1.049 -> 1.021 and 1.064 -> 1.025, the untuned problem's 1.030 -> 1.014.
    if depth >= 2:
        per_tile_us = max(device.latency_us / 2, dot_tile_us)
    else:
        per_tile_us = device.latency_us + dot_tile_us
    # Wave by wave ("One wave of programs": a second wave is what costs): each starts with its
    # programs' dependent start, then streams its bytes at the copy rate, or slower when its
    # programs' copies in flight cannot cover the latency (a last, partial wave; a small bucket),
    # or as fast as one program's chain of tiles allows.
    def wave(here: int) -> tuple[float, float]:  # (stream, chain) of a wave of `here` programs
        # A program's q and weights load at its start, beside its first tiles: they are in flight
        # with them, not after them (model 8; bf16 next_n = 2 reads 33 KB of q against a 16 KB tile,
        # and model 7, streaming them at the tiles' rate, ranked one-tile runs' 2 stages last of
        # their neighbours at 1x8K, timed within 1.07 of the best). Fit: 1.027 -> 1.020 (worst 1.21
        # -> 1.10) over the stored trials, the blind tunes' 1.021 -> 1.018 and 1.025 -> 1.021.
        # The tiles in flight could be limited to the run too (a one-tile run has one): with the q
        # term that changes no pick in any stored H200 bucket; without it, it fit worse (1.049).
        in_flight = here * (depth * bt * problem.token_bytes + q_bytes)
        rate = min(device.copy_bandwidth * STREAM_EFFICIENCY, in_flight / (device.latency_us * 1e-6))
        stream = here * program_bytes / rate * 1e6 * (SPAN_PAGES_COST if bt > problem.page_size else 1.0)
        return stream, device.latency_us + dot_tile_us + (run - 1) * per_tile_us + run_epilogue_us(here)

    def run_epilogue_us(here: int) -> float:
        # store='run' writes a run's logits after its last tile, not between its cache reads: a
        # wave's programs end together and their stores then share the copy rate, on the chain
        # (model 5). Where the stream bounds a wave this hides under it; where the dot or the chain
        # does (bf16, next_n = 2) it is what "run" costs over "tile".
        if config.store != "run":
            return 0.0
        return here * run * bt * n_rows * 4 / device.copy_bandwidth * 1e6

    full_waves, last = divmod(programs, slots)
    stream_us = serial_us = body = 0.0
    for count, here in ((full_waves, slots), (1 if last else 0, last)):
        if count:
            wave_stream, wave_chain = wave(here)
            stream_us += count * wave_stream
            serial_us += count * (device.start_us + wave_chain)
            # A wave's first copies queue at the memory before its first tile scores: the copies past
            # one a program delay it (64x8K tp16 at 3 / 4 / 5 stages: 22.1 / 22.4 / 23.1 us).
            queue_us = START_QUEUE_WEIGHT * here * (depth - 1) * bt * problem.token_bytes / device.copy_bandwidth * 1e6
            body += count * (device.start_us + queue_us + max(wave_stream, wave_chain))
    dot_us = batch * tiles * flops_tile / dot_rate * 1e6
    if bt > problem.page_size:
        dot_us *= SPAN_PAGES_DOT_COST
    # The tail: SMs end apart when a wave fills them (1x1M: 2.0 us apart); a few programs do not.
    fixed = device.launch_us + device.tail_us * min(1.0, programs / slots)
    body = max(body, dot_us)
    if config.orient == "q_rows":
        body *= Q_ROWS_COST
    if config.programs_per_sm:
        body *= PERSISTENT_COST
    body *= 1.0 + STAGE_PAST_3_COST * max(0, config.num_stages - 3)
    body *= head_sum_cost(problem, config, res)
    return Breakdown(fixed + body, waves, resident, programs, stream_us, serial_us, dot_us, fixed)


def _stepwise(value: int, costs: dict, full: int) -> float:
    """A fitted cost of `value`: 1.0 from `full` up, costs[value] where fitted, between two fitted values
    the lower one's, and below the smallest fitted value that cost scaled by how many times smaller it is."""
    if value >= full:
        return 1.0
    if value in costs:
        return costs[value]
    least = min(costs)
    return costs[least] * least / max(value, 1) if value < least else costs[max(v for v in costs if v < value)]


def prefill_body_cost(problem: Problem, config: Config) -> float:
    """The prefill body's factor from its config's shape (model 9's PREFILL_* terms, fit on the H200's
    stored prefill trials): the dot's query-head rows and key tile, the pipeline's stages, q_rows,
    the warps, and a program's prologue shared by its tiles."""
    cost = _stepwise(config.block_m * problem.heads, PREFILL_DOT_ROWS_COST, 256)
    cost *= _stepwise(config.block_t, PREFILL_KEY_TILE_COST, 64)
    cost *= PREFILL_STAGES_COST.get(config.num_stages, 1.0)
    if config.orient == "q_rows":
        cost *= PREFILL_Q_ROWS_COST
    cost *= PREFILL_WARPS_COST ** max(0.0, math.log2(config.num_warps / 4))
    return cost * (1.0 + PREFILL_PROLOGUE_TILES / config.tiles_per_program)


def prefill_breakdown(device: Device, problem: Problem, config: Config, res: Resources, rows: int,
                      keys: int) -> Breakdown:
    """The prefill families: `rows` query rows at the end of one causal sequence of `keys` keys
    (what tune times), compute-bound: the dot's flops at the matmul rate, the grid in waves."""
    resident = programs_per_sm(device, config, res)
    if resident == 0:
        return INFEASIBLE
    chunk = config.block_t * config.tiles_per_program
    row_blocks = math.ceil(rows / config.block_m)
    chunks = math.ceil(keys / chunk)
    pairs = rows * (keys - rows) + rows * (rows + 1) / 2  # causal: row i sees keys - rows + i + 1
    busy = max(1.0, row_blocks * chunks * pairs / (rows * keys))  # programs with a valid key
    slots = device.sm_count * resident
    waves = math.ceil(busy / slots)
    flops = 2.0 * problem.heads * problem.head_dim * pairs
    quantised = waves * slots / busy  # a last partial wave idles part of the GPU
    dot_us = flops / _dot_rate(device, problem, res) * 1e6 * quantised * head_sum_cost(problem, config, res)
    dot_us *= prefill_body_cost(problem, config)
    dot_us *= k_load_cost(problem, config, res)
    key_bytes = pairs / config.block_m * problem.token_bytes
    stream_us = key_bytes / (device.copy_bandwidth * STREAM_EFFICIENCY * PREFILL_L2_REUSE) * 1e6
    serial_us = waves * (device.start_us + config.tiles_per_program * device.latency_us / max(config.num_stages - 1, 1))
    fixed = device.launch_us + device.tail_us
    return Breakdown(fixed + max(dot_us, stream_us, serial_us), waves, resident, int(busy), stream_us, serial_us,
                     dot_us, fixed)


# Where several points tie on the bound that decides (a bandwidth-bound bucket), prefer the one
# whose other bounds (its program chain, its dot) leave the most room: a 5% weight on them.
TIE_WEIGHT = 0.05


def rank_us(device: Device, problem: Problem, config: Config, res: Resources, batch: int, context: int) -> float:
    """What predict ranks by: the predicted score plus TIE_WEIGHT of the full bucket's lesser bounds."""
    if problem.kind.decode:
        full = decode_breakdown(device, problem, config, res, batch, context)
        score = full.total_us + decode_breakdown(device, problem, config, res, batch, context, "quarter").total_us
    else:
        full = prefill_breakdown(device, problem, config, res, batch, context)
        score = full.total_us
    return score + TIE_WEIGHT * (full.serial_us + full.dot_us) if math.isfinite(score) else score


def predict_score_us(device: Device, problem: Problem, config: Config, res: Resources, batch: int,
                     context: int) -> float:
    """What the tuner ranks by, predicted: decode's full plus quarter-filled time (score_ms is p50 +
    partial p50), the prefill families' one time."""
    if problem.kind.decode:
        return sum(decode_breakdown(device, problem, config, res, batch, context, fill).total_us
                   for fill in ("full", "quarter"))
    return prefill_breakdown(device, problem, config, res, batch, context).total_us
