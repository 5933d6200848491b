"""The gates fail the candidates they exist to catch (CPU, with stand-in modules that compute
through the reference, so only the rule under test is broken)."""

import types

import pytest

from tuner.gates import GateFailure, graph_gate, poison_gate, reference_gate
from tuner.inputs import make_decode_inputs
from tuner.problem import Problem
from tuner.reference import paged_mqa_logits_ref

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
    paged_mqa_logits_ref(q, kv, w, lens, bt, width, clean, out=out)


def _inputs():
    return make_decode_inputs(PROBLEM, 3, 160, "random", seed=2)


def test_a_correct_stand_in_passes_every_gate():
    mod = _module(lambda q, lens, width: (q.shape[0], width // 64), _exact)
    x = _inputs()
    assert reference_gate(mod, x) < 1e-6
    poison_gate(mod, x)
    graph_gate(mod, PROBLEM, x)


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
