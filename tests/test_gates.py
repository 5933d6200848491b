"""The gates fail the candidates they exist to catch (CPU, with stand-in modules that compute
through the independent loop oracle (tests/_loop_oracle.py, float64 from the cache's bytes), so
only the rule under test is broken, and a gate that passes a correct stand-in has compared the
project's reference with a computation that shares none of its code)."""

import types

import pytest
import torch

import _loop_oracle as oracle
from tuner.gates import GateFailure, graph_gate, poison_gate, reference_gate
from tuner.inputs import make_decode_inputs
from indexer_logits._identity import Problem

PROBLEM = Problem(heads=16, head_dim=32, page_size=32, next_n=2)


class _Kernel:
    def __init__(self, body):
        self.body = body

    def __getitem__(self, grid):
        return self.body


def _module(grid_of, body):
    """A generated-module look-alike: `launch` computes a grid, then runs `_decode_paged_kernel[grid]`."""
    mod = types.SimpleNamespace()

    def launch(q, kv, w, lens, bt, out, width, clean):
        mod._decode_paged_kernel[grid_of(q, lens, width)](q, kv, w, lens, bt, out, width, clean)
        return out

    mod._decode_paged_kernel = _Kernel(body)
    mod.launch = launch
    return mod


def _exact(q, kv, w, lens, bt, out, width, clean):
    """The right answer, from the loop oracle (-inf off the valid region, clean or not)."""
    out.copy_(oracle.paged_logits(q, kv, w, lens, bt, width, PROBLEM.scale_layout).to(out.dtype))


def _inputs():
    return make_decode_inputs(PROBLEM, 3, 160, "random", seed=2)


def test_a_correct_stand_in_passes_every_gate():
    mod = _module(lambda q, lens, width: (q.shape[0], width // 64), _exact)
    x = _inputs()
    assert reference_gate(mod, x) < 1e-6  # the reference agrees with the oracle to fp32 rounding
    poison_gate(mod, x)
    graph_gate(mod, PROBLEM, x)


def _scaled(factor):
    """A stand-in whose every logit is off by `factor` (relative error |factor - 1| exactly)."""

    def body(q, kv, w, lens, bt, out, width, clean):
        _exact(q, kv, w, lens, bt, out, width, clean)
        out.mul_(factor)

    return _module(lambda q, lens, width: (q.shape[0],), body)


def test_reference_gate_reports_the_measured_error():
    # The returned error is ||out - ref|| / ||ref||: a gate that compared the output with itself,
    # or the reference with itself, would report 0 here.
    err = reference_gate(_scaled(1.0 + 3e-4), _inputs())
    assert err == pytest.approx(3e-4, rel=0.05)


def test_a_wrong_answer_is_caught():
    with pytest.raises(GateFailure) as e:
        reference_gate(_scaled(1.0 + 2e-3), _inputs())  # just past the 1e-3 tolerance
    assert e.value.reason == "wrong_answer"


def test_dropping_the_relu_is_caught():
    # A stand-in that sums w * (q . k) over all heads (no relu): the oracle's formula without
    # relu, so only the relu is missing.
    def body(q, kv, w, lens, bt, out, width, clean):
        neg_q = q.float().neg().to(q.dtype)
        pos = oracle.paged_logits(q, kv, w, lens, bt, width, PROBLEM.scale_layout)
        neg = oracle.paged_logits(neg_q, kv, w, lens, bt, width, PROBLEM.scale_layout)
        # relu(x) - relu(-x) = x: the head sum of w * (q . k), scaled, where valid.
        out.copy_(torch.where(torch.isfinite(pos), pos - neg, pos).to(out.dtype))

    mod = _module(lambda q, lens, width: (q.shape[0],), body)
    with pytest.raises(GateFailure) as e:
        reference_gate(mod, _inputs())
    assert e.value.reason == "wrong_answer"


def test_a_finite_value_past_the_valid_region_is_caught_with_clean_logits():
    def body(q, kv, w, lens, bt, out, width, clean):
        _exact(q, kv, w, lens, bt, out, width, clean)
        out.nan_to_num_(neginf=0.0)  # valid positions right, invalid ones 0 instead of -inf

    mod = _module(lambda q, lens, width: (q.shape[0],), body)
    x = make_decode_inputs(PROBLEM, 3, 160, [5, 70, 160], seed=2)
    with pytest.raises(GateFailure) as e:
        reference_gate(mod, x)
    assert e.value.reason == "mask"
    reference_gate(mod, x, clean_logits=False)  # without clean logits those values are unspecified


def test_grid_from_the_lengths_is_caught():
    mod = _module(lambda q, lens, width: (int(lens.max()),), _exact)
    with pytest.raises(GateFailure) as e:
        graph_gate(mod, PROBLEM, _inputs())
    assert e.value.reason == "grid_depends_on_values"


def test_lengths_frozen_at_capture_are_caught():
    frozen = {}

    def body(q, kv, w, lens, bt, out, width, clean):
        snap = frozen.setdefault("lens", lens.clone())  # what a kernel baking values into the graph does
        _exact(q, kv, w, snap, bt, out, width, clean)

    mod = _module(lambda q, lens, width: (q.shape[0],), body)
    with pytest.raises(GateFailure) as e:
        graph_gate(mod, PROBLEM, _inputs())
    assert e.value.reason in ("wrong_answer", "unwritten", "mask")


def test_reading_past_the_valid_pages_is_caught():
    def body(q, kv, w, lens, bt, out, width, clean):
        _exact(q, kv, w, lens, bt, out, width, clean)
        last = bt[:, -1:].float().clamp(-1, 1)  # the table's last entry: past every short row's valid pages
        out.add_(last.repeat_interleave(q.shape[1], 0))

    mod = _module(lambda q, lens, width: (q.shape[0],), body)
    x = make_decode_inputs(PROBLEM, 3, 160, [5, 7, 9], seed=2)  # short rows: the last table column is past them
    with pytest.raises(GateFailure) as e:
        poison_gate(mod, x)
    assert e.value.reason == "reads_past_valid_pages"


def test_unwritten_positions_are_caught():
    def body(q, kv, w, lens, bt, out, width, clean):
        _exact(q, kv, w, lens, bt, out, width, clean)
        out[0, 0] = float("nan")

    mod = _module(lambda q, lens, width: (q.shape[0],), body)
    with pytest.raises(GateFailure) as e:
        reference_gate(mod, make_decode_inputs(PROBLEM, 2, 96, "full", seed=3))
    assert e.value.reason == "unwritten"
