"""tuner.model and tuner.devices: the model's monotonic properties, its occupancy arithmetic, the
device list and its overrides. No GPU, no compile."""

from __future__ import annotations

import itertools

import pytest

from bench import template_ab
from indexer_logits._identity import Config, Problem, slugify
from tuner import model
from tuner.devices import DEVICES, device
from tuner.space import feasible_points

N1 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 1, "1d")
N2 = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 2, "1d")
RAGGED = Problem("prefill_ragged", "fp8", "fp8", 0, "page_blocked", 64, 128, 1, "1d")
BUCKETS = [(1, 4096), (8, 32768), (64, 8192), (256, 131072), (2, 1048576)]


def sample(problem, step=37):
    return feasible_points(problem, device("h200").target_limits)[::step]


def resources(problem, config, dev):
    return model.estimate_resources(problem, config, dev)


@pytest.mark.parametrize("problem", [N1, N2, RAGGED])
def test_more_bandwidth_is_never_slower(problem):
    for name in ("h200", "rtx_pro_6000"):
        slow = device(name)
        fast = device(name, bandwidth=2 * slow.copy_bandwidth / 1e9)
        for config, (b, c) in itertools.product(sample(problem), BUCKETS):
            if not problem.kind.decode:
                b, c = 4096, max(c, 8192)
            res = resources(problem, config, slow)
            assert (model.predict_score_us(fast, problem, config, res, b, c)
                    <= model.predict_score_us(slow, problem, config, res, b, c) + 1e-9), (name, config.slug, b, c)


def test_more_sms_never_add_waves_nor_time_to_a_full_bucket():
    """Waves never rise; time neither on the split grid (a persistent grid's programs grow with the SMs,
    and each reads q once more)."""
    for config, (b, c) in itertools.product(sample(N1), BUCKETS):
        base = device("rtx_pro_6000")
        more = device("rtx_pro_6000", sm=2 * base.sm_count)
        res = resources(N1, config, base)
        few = model.decode_breakdown(base, N1, config, res, b, c)
        many = model.decode_breakdown(more, N1, config, res, b, c)
        assert many.waves <= few.waves, (config.slug, b, c)
        if config.programs_per_sm == 0:
            assert many.total_us <= few.total_us + 1e-9, (config.slug, b, c)


def test_a_second_wave_costs():
    """docs/PERF.md, "One wave of programs": at 16,384 tiles tp24 with 123 registers (4 programs an
    SM, 2 waves) against 63 (6 an SM, one wave): 47.0 against 39.2 us."""
    h200 = device("h200")
    config = Config(block_t=64, tiles_per_program=24, num_warps=4, num_stages=3, block_m=1, dot_dtype="native",
                    orient="k_rows")
    one = model.decode_breakdown(h200, N1, config, model.Resources(63, 33048, "wgmma"), 32, 32768)
    two = model.decode_breakdown(h200, N1, config, model.Resources(123, 33048, "wgmma"), 32, 32768)
    assert (one.resident, one.waves) == (6, 1) and (two.resident, two.waves) == (4, 2)
    assert two.total_us > 1.1 * one.total_us
    assert 30 < one.total_us < 50  # measured 39.2 us


@pytest.mark.parametrize("regs, shared, warps, programs", [
    (63, 24576, 4, 8), (128, 16384, 4, 4), (32, 0, 1, 32), (32, 0, 4, 16), (40, 110000, 4, 2)])
def test_occupancy_matches_the_sm90_arithmetic(regs, shared, warps, programs):
    config = Config(block_t=64, tiles_per_program=1, num_warps=warps, num_stages=1, block_m=1)
    got = model.programs_per_sm(device("h200"), config, model.Resources(regs, shared))
    assert got == programs == template_ab.programs_per_sm(regs, shared, warps)


def test_sm120_holds_fewer_warps_and_less_shared():
    config = Config(block_t=64, tiles_per_program=1, num_warps=8, num_stages=1, block_m=1)
    assert model.programs_per_sm(device("rtx_pro_6000"), config, model.Resources(32, 0)) == 6  # 48 warps / 8
    assert model.programs_per_sm(device("rtx_pro_6000"), config, model.Resources(32, 60_000)) == 1


def test_devices_and_overrides():
    rtx = device("rtx_pro_6000")
    assert rtx.target == "sm_120" and rtx.sm_count == 188
    assert set(rtx.slugs) == {slugify("NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
                              slugify("NVIDIA RTX PRO 6000 Blackwell Server Edition")}
    assert device("h200").copy_bandwidth == pytest.approx(4.27e12)
    changed = device("rtx_pro_6000", sm=170, bandwidth=1500)
    assert changed.sm_count == 170 and changed.copy_bandwidth == 1.5e12
    assert "overridden" in changed.sources["sm_count"] and "--bandwidth 1500" in changed.sources["copy_bandwidth"]
    with pytest.raises(ValueError, match="gpu: expected one of"):
        device("h300")
    with pytest.raises(ValueError, match="not a device property"):
        device("h200", colour=1)
    for d in DEVICES.values():
        assert d.copy_bandwidth <= d.nominal_bandwidth and d.target in ("sm_89", "sm_90", "sm_100", "sm_120")
        assert d.to_dict()["limits"]["registers_per_sm"] == 65536
