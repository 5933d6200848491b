"""indexer_logits._recorded_launches on CPU: a call's several launches recorded once, replayed over
the next call's tensors, refused where they cannot be. Triton's objects are fakes with its calling
convention (JITFunction.run, CompiledKernel.run with grid, stream, function, metadata, hooks, then
every argument in signature order), as in tests/test_fastpath.py; the top-k's launches on a GPU
are tests/test_topk_gpu.py's."""

from __future__ import annotations

import pytest
import torch

from indexer_logits import _recorded_launches as R
from test_fastpath import _Param, install_fake_triton


class _Compiled:
    """A launcher that runs the kernel's body over the arguments it is handed."""

    function, packed_metadata = "fn", "meta"

    def __init__(self, body):
        self.body = body
        self.launches = []

    def run(self, g0, g1, g2, stream, function, metadata, launch_metadata, enter, exit_, *args):
        self.launches.append(((g0, g1, g2), stream))
        self.body(*args)


class JITFunction:
    def __init__(self, names, body):
        self.params = [_Param(n) for n in names] + [_Param("SCALE", 1.0)]
        self.compiled = _Compiled(body)
        self.runs = 0

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args, grid, warmup, **kwargs):
        self.runs += 1
        values = list(args) + [kwargs.get(p.name, p.default) for p in self.params[len(args):]]
        self.compiled.run(*grid, *(1,) * (3 - len(grid)), "stream", "fn", "meta", None, None, None, *values)
        return self.compiled


def _add(x, out, n, scale):  # out = x * scale + n
    out.copy_(x * scale + n)


def _twice(out, scale):  # out *= 2 (a second launch that reads the first one's output)
    out.mul_(2)


ADD = JITFunction(["x", "out", "n"], _add)
TWICE = JITFunction(["out"], _twice)


def _launches(x, out, extra=None):
    def code(launch):
        launch(ADD, (x.shape[0],), x, out, x.shape[0], SCALE=3.0, num_warps=4)
        launch(TWICE, (1,), out if extra is None else extra)
    return code


@pytest.fixture(autouse=True)
def fake_triton(monkeypatch):
    runtime = install_fake_triton(monkeypatch)
    for jit in (ADD, TWICE):
        jit.runs = 0
    R.clear()
    yield runtime
    R.clear()


def _call(x, out, scalars=(7,), extra=None, tag="t"):
    R.run_any(tag, [x, out, None], scalars, _launches(x, out, extra), out_index=1)


def test_the_second_call_replays_both_launches_over_its_own_tensors():
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out)
    assert torch.equal(out, (x * 3 + 4) * 2) and ADD.runs == TWICE.runs == 1
    (seq,) = R.sequences().values()
    x2, out2 = torch.randn(4, 8), torch.empty(4, 8)
    _call(x2, out2)
    assert torch.equal(out2, (x2 * 3 + 4) * 2)  # the constant SCALE and n kept, the tensors swapped
    assert ADD.runs == TWICE.runs == 1 and seq.calls == 1  # Triton's run() not called again
    assert ADD.compiled.launches[-1] == ((4, 1, 1), "stream0")


def test_other_scalars_shapes_or_tags_record_their_own():
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out)
    _call(x, out, scalars=(8,))
    _call(x, out, tag="u")
    _call(torch.randn(5, 8), torch.empty(5, 8))
    assert len(R.sequences()) == 4 and ADD.runs == 4


def test_a_launch_over_a_tensor_that_is_no_input_is_never_cached():
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out, extra=torch.empty(4, 8))
    assert not R.sequences() and "of no input" in R.why_not_cached("t", [x, out, None], (7,))
    _call(x, out, extra=torch.empty(4, 8))
    assert ADD.runs == 2  # the launch code each time, right


def test_a_launch_hook_takes_the_launch_code(fake_triton):
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out)
    fake_triton.launch_enter_hook.calls.append(print)
    x2, out2 = torch.randn(4, 8), torch.empty(4, 8)
    _call(x2, out2)
    assert torch.equal(out2, (x2 * 3 + 4) * 2) and ADD.runs == 2
    assert next(iter(R.sequences().values())).calls == 0


def test_disabled_by_the_environment(monkeypatch):
    monkeypatch.setenv("INDEXER_LOGITS_FAST_LAUNCH", "0")
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out)
    _call(x, out)
    assert not R.sequences() and ADD.runs == 2


def test_cpu_tensors_take_the_launch_code_through_run():
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    R.run("t", [x, out, None], (7,), _launches(x, out), out_index=1)
    R.run("t", [x, out, None], (7,), _launches(x, out), out_index=1)
    assert not R.sequences() and ADD.runs == 2 and torch.equal(out, (x * 3 + 4) * 2)


def test_found_by_the_exact_key_without_guards(monkeypatch):
    from indexer_logits import _call_key
    monkeypatch.setattr(_call_key, "GUARDS", None)
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out)
    _call(torch.randn(4, 8), out)
    assert ADD.runs == 1 and next(iter(R.sequences().values())).calls == 1


def test_direct_plans_launch_in_order_on_one_stream_read():
    """Where every launch has Triton 3.6.0's direct plan (the GPU's case), the stream is read once
    for the sequence and each plan launched over the call's inputs, in the recorded order."""
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    _call(x, out)
    (seq,) = R.sequences().values()
    seen, reads = [], []

    class Plan:
        def __init__(self, name, stream=None):
            self.name, self.stream = name, stream

        def __call__(self, inputs, stream):
            seen.append((self.name, inputs[0] is x2, stream))

    seq.direct = [Plan("add", stream=lambda: reads.append(1) or "s7"), Plan("twice")]
    x2, out2 = torch.randn(4, 8), torch.empty(4, 8)
    _call(x2, out2)
    assert seen == [("add", True, "s7"), ("twice", True, "s7")] and reads == [1] and seq.calls == 1
    assert ADD.runs == 1
