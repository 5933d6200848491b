"""verify's check at a bucket's own shape, on CPU: the row sample, the reference on the sampled
rows alone, the -inf mask from the lengths, the memory guard, the ETA, and the > 4 GiB pool case
scaled down (a pool of MiB read past its own offset). Each check is shown to fail on a broken
output: a corrupted sampled row, a wrong -inf outside the sample, an unwritten position, a
kernel reading 32-bit-wrapped page offsets."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from indexer_logits._identity import Problem
from tuner.families import family_of
from tuner.gates import launch, new_output, reference
from tuner.render import emit as render_emit
from tuner.render import load_module
from tuner import verify_bucket, verify_sample
from tuner.verify_bucket import check_bucket, needed_bytes
from tuner.verify_pool import CPU_POOL, GPU_POOL, check_pool, pool_inputs, read_extent, relocate
from tuner.verify_progress import Progress, plan_cost
from tuner.verify_sample import calc_diff, check_sampled, mask_errors, reference_rows, sample_rows

from conftest import INTERPRET

needs_interpreter = pytest.mark.skipif(not INTERPRET, reason="runs the kernels on CPU tensors under the interpreter")

DECODE_N2 = Problem(next_n=2)
DECODE_2D = Problem(next_n=2, lens_mode="2d")
DECODE_BF16 = Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none")
CHUNKED = Problem(family="prefill_paged")
RAGGED = Problem(family="prefill_ragged", page_size=0)
SHAPES = {"decode_paged": (5, 512), "prefill_paged": (9, 512), "prefill_ragged": (9, 512)}
CASES = [DECODE_N2, DECODE_2D, DECODE_BF16, CHUNKED, RAGGED]


def inputs_of(problem: Problem, seed: int = 0):
    return family_of(problem).verify_inputs(problem, SHAPES[problem.family], seed, "cpu")


@pytest.fixture(scope="module")
def modules(kernel_dir):
    """An interpreter-exact module (fp16 dot for fp8, fp32 for bf16) per problem, by slug."""
    out = {}
    for p in CASES:
        config = family_of(p).default_config(p, "fp16" if p.cache_dtype == "fp8" else "fp32")
        out[p.slug + p.family] = load_module(render_emit(p, config, kernel_dir))
    return out


def module_of(modules, problem):
    return modules[problem.slug + problem.family]


def test_calc_diff_is_deepgemms():
    x = torch.randn(50)
    assert calc_diff(x, x) == pytest.approx(0.0, abs=1e-12)
    assert calc_diff(x, -x) == pytest.approx(2.0)
    assert calc_diff(torch.zeros(3), torch.zeros(3)) == 0.0
    assert calc_diff(x, 1.01 * x) == pytest.approx(1 - 2 * 1.01 / (1 + 1.01 ** 2), rel=1e-4)


@pytest.mark.parametrize("problem", CASES, ids=lambda p: f"{p.family}-{p.slug}")
def test_sample_is_first_last_widest_and_seeded(problem):
    x = inputs_of(problem)
    lo, hi = verify_sample.windows(x)
    rows = sample_rows(x, 3, seed=1)
    m = verify_sample.num_rows(x)
    assert rows == sorted(set(rows)) and rows[0] == 0 and rows[-1] == m - 1
    widest = int(torch.argmax(hi - lo))
    assert widest in rows and len(rows) == min(m, len({0, m - 1, widest}) + 3)
    assert sample_rows(x, 3, seed=1) == rows  # deterministic
    assert sample_rows(x, 0) == sorted({0, m - 1, int(torch.argmax(hi - lo))})
    assert sample_rows(x, 100) == list(range(m))  # every row when asked for more than there are


@pytest.mark.parametrize("problem", CASES, ids=lambda p: f"{p.family}-{p.slug}")
def test_reference_of_sampled_rows_equals_the_full_references_rows(problem):
    x = inputs_of(problem)
    full = reference(x)
    rows = sample_rows(x, 2, seed=3)
    got = reference_rows(x, rows)
    assert got.shape == (len(rows), full.shape[1])
    torch.testing.assert_close(got, full[rows], rtol=1e-6, atol=1e-6)
    assert torch.equal(torch.isneginf(got), torch.isneginf(full[rows]))


@pytest.mark.parametrize("problem", CASES, ids=lambda p: f"{p.family}-{p.slug}")
def test_mask_from_lengths_matches_the_reference_mask(problem, monkeypatch):
    x = inputs_of(problem)
    full = reference(x)
    monkeypatch.setattr(verify_sample, "MASK_BLOCK_ELEMENTS", 3 * full.shape[1])  # several blocks of rows
    assert mask_errors(full, x) == (0, 0, 0)
    bad = full.clone()
    r = int(torch.isneginf(full).any(dim=1).nonzero()[-1])  # a row with masked positions
    t = int(torch.isneginf(full[r]).nonzero()[0])
    bad[r, t] = 0.5  # an invalid position left finite
    valid = (~torch.isneginf(full)).nonzero()
    bad[int(valid[0, 0]), int(valid[0, 1])] = float("-inf")  # a valid position masked
    bad[int(valid[-1, 0]), int(valid[-1, 1])] = float("nan")  # a valid position never written
    assert mask_errors(bad, x) == (2, 1, 0)


@needs_interpreter
@pytest.mark.parametrize("problem", CASES, ids=lambda p: f"{p.family}-{p.slug}")
def test_kernel_output_passes_and_corruptions_fail(problem, modules):
    x = inputs_of(problem)
    out = launch(module_of(modules, problem), x, new_output(x), True)
    good = check_sampled(out, x, random_rows=2, seed=0)
    assert good.ok, good.detail()
    assert good.calc_diff < 1e-6 and good.mask_errors == 0 and good.rows == sample_rows(x, 2, 0)
    r = good.rows[1]
    flipped = out.clone()
    flipped[r] = torch.where(torch.isneginf(out[r]), out[r], -out[r])  # one sampled row negated
    bad = check_sampled(flipped, x, random_rows=2, seed=0)
    assert not bad.ok and bad.worst_row == r and bad.worst_row_calc_diff > 1e-3
    scaled = out.clone()
    scaled[r] = out[r] * 1.05  # too small for calc_diff (1.2e-3 of one row), not for the relative error
    assert not check_sampled(scaled, x, random_rows=2, seed=0).ok
    outside = [i for i in range(out.shape[0]) if i not in good.rows and bool(torch.isneginf(out[i]).any())]
    if outside:  # an unsampled row's mask broken: caught without any reference of that row
        masked = out.clone()
        masked[outside[0]] = torch.nan_to_num(out[outside[0]], neginf=0.0)
        bad = check_sampled(masked, x, random_rows=2, seed=0)
        assert not bad.ok and bad.mask_errors > 0


@needs_interpreter
def test_check_bucket_runs_a_module_and_reports(modules):
    res = check_bucket(module_of(modules, DECODE_N2), DECODE_N2, (5, 512), 0, "cpu", random_rows=2)
    assert res.ran and res.ok and res.poison is True and "B=5 N=2 ctx=512" in res.detail()
    record = res.record()
    assert record["ok"] and record["rows"] == 10 and record["rows_checked"] == res.sample.rows


@needs_interpreter
def test_check_bucket_fails_a_module_that_corrupts_a_row(modules):
    real = module_of(modules, CHUNKED)

    class Corrupting:
        def launch(self, *args):
            out = real.launch(*args)
            out[-1] = torch.where(torch.isneginf(out[-1]), out[-1], 0.0)  # the last row: always sampled
            return out

    res = check_bucket(Corrupting(), CHUNKED, (9, 512), 0, "cpu", random_rows=1)
    assert res.ran and not res.ok and "calc_diff" in res.detail()


def test_memory_guard_skips_and_says_so(monkeypatch):
    monkeypatch.setattr(verify_bucket, "free_bytes", lambda device: 1 << 30)
    res = check_bucket(None, Problem(), (256, 1 << 20), 0, "cuda")
    assert not res.ran and res.ok and "needs about" in res.detail() and "1.0 GiB free" in res.detail()
    big = needed_bytes(Problem(), (256, 1 << 20))  # 35.7 GB of pages x 1.5, two 1 GiB outputs, ...
    assert 50e9 < big < 65e9
    assert needed_bytes(Problem(), (1, 4096)) < 4e9


def test_progress_weighs_large_buckets_and_scales_by_elapsed():
    small = plan_cost(Problem(), "entry", (1, 4096))
    large = plan_cost(Problem(), "entry", (256, 1 << 20))
    assert large > 2.5 * small  # 55 GB of inputs to build against the capped gates alone
    now = [0.0]
    p = Progress(clock=lambda: now[0])
    p.start([1.0, 3.0])
    assert p.estimate == 4.0 and p.eta() == 4.0
    now[0] = 2.0
    p.done(0)
    assert p.eta() == pytest.approx(6.0) and "ETA 6s" in p.text()


@pytest.mark.parametrize("problem", [Problem(), DECODE_BF16, CHUNKED], ids=lambda p: f"{p.family}-{p.slug}")
def test_pool_case_reads_past_the_offset(problem):
    x = pool_inputs(problem, 0, "cpu", CPU_POOL)
    pool, highest = read_extent(x)
    assert pool > CPU_POOL["pool_bytes"] and highest >= CPU_POOL["offset"]
    stride = x.kv_cache.stride(0) * x.kv_cache.element_size()
    assert int(x.block_table.max()) == x.kv_cache.shape[0] - 1  # the pool's very last page is read
    if problem.is_decode:
        assert bool((x.block_table[3].long() * stride < 2 ** 31).all())  # the control request
    assert torch.isfinite(reference(x)).any()
    assert GPU_POOL["pool_bytes"] > 4 << 30 and GPU_POOL["offset"] == 4 << 30


def test_relocate_keeps_every_logit():
    from tuner.inputs import make_decode_inputs

    small = make_decode_inputs(Problem(), 4, 256, "random", seed=2, pool_factor=1.0)
    moved = relocate(small, CPU_POOL["pool_bytes"], CPU_POOL["offset"], seed=2)
    assert moved.kv_cache.shape[0] > small.kv_cache.shape[0]
    assert torch.equal(reference(small), reference(moved))


@needs_interpreter
@pytest.mark.parametrize("problem", [Problem(), CHUNKED], ids=lambda p: p.family)
def test_pool_check_passes_and_catches_wrapped_offsets(problem, kernel_dir):
    config = family_of(problem).default_config(problem, "fp16")
    module = load_module(render_emit(problem, config, kernel_dir))
    res = check_pool(module, problem, 0, "cpu", CPU_POOL)
    assert res.ran and res.ok, res.detail()
    assert "past" in res.text and "NOT past" not in res.text

    class Wrapping:
        """What a kernel with 32-bit page offsets reads: the pages at (id * stride) mod 2**k."""

        def launch(self, q, kv_cache, *rest):
            stride = kv_cache.stride(0) * kv_cache.element_size()
            wrap = CPU_POOL["offset"] // stride  # the scaled stand-in for 2**32 // stride
            args = list(rest)
            bt_index = 2 if problem.is_decode else 3
            args[bt_index] = (args[bt_index].long() % wrap).to(torch.int32)
            return module.launch(q, kv_cache, *args)

    res = check_pool(Wrapping(), problem, 0, "cpu", CPU_POOL)
    assert res.ran and not res.ok
