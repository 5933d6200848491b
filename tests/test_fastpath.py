"""indexer_logits._fastpath on CPU: what a recorded launch keeps, what it refuses, what a key holds.

Triton's objects are stood in for by fakes with the same calling convention (JITFunction.run,
CompiledKernel.run with the grid, stream, function, metadata, hooks, then every argument in
signature order); the launches on a GPU are tests/test_fastpath_gpu.py's."""

from __future__ import annotations

import inspect
import os
import types

import pytest
import torch

from indexer_logits import _fastpath as F


class _Param:
    def __init__(self, name, default=inspect.Parameter.empty):
        self.name, self.default = name, default


class _Compiled:
    """A CompiledKernel: run() is the launcher; it computes out = q * w + OFFSET from the addresses
    it is given, so a replay over the wrong tensors shows."""

    function, packed_metadata = "fn", "meta"

    def __init__(self):
        self.launches = []

    def run(self, g0, g1, g2, stream, function, metadata, launch_metadata, enter, exit_, *args):
        q, w, out, n, offset = args
        self.launches.append(((g0, g1, g2), stream, n, offset))
        # the kernel writes through the address with its own strides: a wider buffer's first columns
        out[:, :q.shape[1]].copy_(q * w + (offset if isinstance(offset, float) else 0.0))


class JITFunction:  # the name _fastpath recognises a kernel by
    def __init__(self):
        self.params = [_Param("q"), _Param("w"), _Param("out"), _Param("n"), _Param("OFFSET", 0.0)]
        self.compiled = _Compiled()
        self.runs = 0

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args, grid, warmup, **kwargs):
        self.runs += 1
        grid = grid(None) if callable(grid) else grid
        values = list(args) + [kwargs.get(p.name, p.default) for p in self.params[len(args):]]
        self.compiled.run(*grid, *(1,) * (3 - len(grid)), "stream", "fn", "meta", None, None, None, *values)
        return self.compiled


def _module(launch_body: str):
    """A module with one kernel and a launch() written in its namespace (as a generated one is)."""
    ns = {"torch": torch, "_fake_kernel": JITFunction(), "_fake_helper": object()}
    exec(f"def launch(q, w, out, offset):\n{launch_body}", ns)
    return types.SimpleNamespace(launch=ns["launch"], kernel=ns["_fake_kernel"], ns=ns)


_PLAIN = "    _fake_kernel[(q.shape[0],)](q, w, out, q.numel(), OFFSET=offset)\n    return out\n"


class _Driver:
    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return f"stream{device}"


class _HookChain:
    def __init__(self):
        self.calls = []


def install_fake_triton(monkeypatch):
    """Triton's active driver (stream "stream0") and its launch hooks (idle) stood in for, as the
    replays read them; returns the hooks' runtime (a test installs a hook by appending to one)."""
    runtime = types.SimpleNamespace(launch_enter_hook=_HookChain(), launch_exit_hook=_HookChain())
    monkeypatch.setattr(F, "active_driver", lambda: _Driver())
    monkeypatch.setattr(F, "_runtime_hooks", lambda: runtime)
    return runtime


@pytest.fixture(autouse=True)
def fake_triton(monkeypatch):
    runtime = install_fake_triton(monkeypatch)
    F.clear()
    yield runtime
    F.clear()


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g), torch.empty(4, 8)


def test_a_replay_launches_over_the_new_tensors():
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    got = F.record(("k",), mod.launch, (q, w, out, 2.0), {}, [q, w, out], 2)
    assert got is out and torch.equal(out, q * w + 2.0)
    replay = F.get(("k",))
    assert replay is not None and replay.grid == (4, 1, 1) and replay.calls == 0
    q2, w2, out2 = _inputs(1)
    served = replay([q2, w2, out2], 2)
    assert served is out2 and torch.equal(out2, q2 * w2 + 2.0)  # the constant OFFSET kept, tensors swapped
    assert replay.calls == 1 and mod.kernel.runs == 1  # Triton's run() was not called again
    assert mod.kernel.compiled.launches[-1] == ((4, 1, 1), "stream0", 32, 2.0)
    assert mod.ns["_fake_kernel"] is mod.kernel  # the module's global is restored


def test_a_replay_allocates_the_output_when_the_call_did():
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    F.record(("k",), mod.launch, (q, w, out, 0.0), {}, [q, w, out], 2)
    q2, w2, _ = _inputs(3)
    served = F.get(("k",))([q2, w2, None], 2)
    assert served.shape == (4, 8) and served.dtype == torch.float32 and torch.equal(served, q2 * w2)


def test_a_wider_buffer_comes_back_as_the_full_path_returns_it():
    mod = _module("    _fake_kernel[(1,)](q, w, out, 0, OFFSET=offset)\n    return out\n")
    q, w, _ = _inputs(0)
    wide = torch.zeros(4, 12)
    narrow = wide[:, :8]
    F.record(("k",), mod.launch, (q, w, narrow, 0.0), {}, [q, w, narrow], 2)
    served = F.get(("k",))([q, w, torch.zeros(4, 12)], 2)
    assert served.shape == (4, 8)


@pytest.mark.parametrize("body, why", [
    ("    tmp = torch.empty_like(out)\n    _fake_kernel[(1,)](q, w, tmp, 0)\n    return out\n", "of no input"),
    ("    _fake_kernel[lambda m: (1,)](q, w, out, 0)\n    return out\n", "grid"),
    ("    _fake_kernel[(1,)](q, w, out, 0)\n    _fake_kernel[(1,)](q, w, out, 0)\n    return out\n", "2 kernel launches"),
    ("    _fake_kernel[(1,)](q, w, out, 0, OFFSET=[1])\n    return out\n", "is a list"),
], ids=["allocation", "callable-grid", "two-launches", "odd-argument"])
def test_a_launch_that_cannot_be_replayed_is_not_cached(body, why):
    mod = _module(body)
    q, w, out = _inputs(0)
    F.record(("k",), mod.launch, (q, w, out, 0.0), {}, [q, w, out], 2)
    assert F.get(("k",)) is None
    assert why in (F.why_not_cached(("k",)) or "")


def test_two_inputs_at_one_address_are_not_cached():
    mod = _module(_PLAIN)
    q, _, out = _inputs(0)
    F.record(("k",), mod.launch, (q, q, out, 0.0), {}, [q, q, out], 2)
    assert F.get(("k",)) is None and "several inputs" in F.why_not_cached(("k",))


def test_a_launch_hook_sends_the_call_back_to_the_full_path(fake_triton):
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    F.record(("k",), mod.launch, (q, w, out, 0.0), {}, [q, w, out], 2)
    fake_triton.launch_enter_hook.calls.append(print)
    q2, w2, out2 = _inputs(1)
    assert F.get(("k",))([q2, w2, out2], 2) is None
    assert F.get(("k",)).calls == 0


def test_disabled_by_the_environment(monkeypatch):
    monkeypatch.setenv(F.ENV_FAST_LAUNCH, "0")
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    F.record(("k",), mod.launch, (q, w, out, 0.0), {}, [q, w, out], 2)
    assert F.get(("k",)) is None and torch.equal(out, q * w)


def test_no_key_no_record():
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    F.record(None, mod.launch, (q, w, out, 0.0), {}, [q, w, out], 2)
    assert F.replays() == {}


def test_a_key_is_none_for_cpu_and_unknown_arguments():
    q = torch.zeros(4, 8)
    assert F.call_key("t", (q,), ()) is None
    assert F.get(None) is None


class _CudaLike:
    """Not a torch.Tensor (a subclass or a fake has no address to key on): no key."""

    is_cuda = True


def test_a_key_refuses_tensor_stand_ins():
    assert F.call_key("t", (_CudaLike(),), ()) is None


@pytest.mark.gpu
def test_a_key_holds_alignment_scalars_types_and_environment(monkeypatch):
    base = torch.zeros(64, device="cuda")
    k = F.call_key("t", (base[:16], None), (1, True))
    assert k == F.call_key("t", (base[16:32], None), (1, True))  # same shape, 64-byte offset: same key
    assert k != F.call_key("t", (base[1:17], None), (1, True))  # 4 bytes off: another alignment
    assert k != F.call_key("t", (base[:16], None), (True, True))  # bool is not int
    monkeypatch.setenv(F.ENV_FAST_LAUNCH, "1")
    assert k != F.call_key("t", (base[:16], None), (1, True))


def test_serve_is_the_recorded_launch_or_none(fake_triton):
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    assert F.serve(("k",), [q, w, out], 2) is None  # nothing recorded yet: the caller's full path
    F.record(("k",), mod.launch, (q, w, out, 1.0), {}, [q, w, out], 2)
    q2, w2, out2 = _inputs(1)
    assert F.serve(("k",), [q2, w2, out2], 2) is out2 and torch.equal(out2, q2 * w2 + 1.0)
    fake_triton.launch_enter_hook.calls.append(print)
    assert F.serve(("k",), [q2, w2, out2], 2) is None  # a hook: Triton's own launch


# ---------------------------------------------------------------------------------------------
# The key's content (key_of: call_key less its CUDA gate, so CPU and meta tensors show it here).

_BASE = torch.zeros(4096)
_T = _BASE[:64].view(8, 8)
_CHANGES = {
    "shape": lambda: _BASE[:64].view(4, 16),
    "strides": lambda: _BASE[:128].view(8, 16)[:, :8],
    "dtype": lambda: _T.to(torch.float16),
    "device": lambda: torch.empty(8, 8, device="meta"),
    "alignment": lambda: _BASE[1:65].view(8, 8),  # 4 bytes off the 16-byte grid
}


def _key(t=None, *, scalars=(1, True), pair=None, tag="t"):
    return F.key_of(tag, (_T if t is None else t, pair or (_T, None), None), scalars)


@pytest.mark.parametrize("change", list(_CHANGES))
def test_the_key_changes_with_every_property_of_a_tensor(change):
    other = _CHANGES[change]()
    assert _key() == _key(_BASE[16:80].view(8, 8))  # another address on the same 16-byte grid: the same key
    assert _key() != _key(other)  # the first argument
    assert _key() != _key(pair=(other, None))  # an item of a tuple argument


def test_the_key_changes_with_scalars_their_types_the_tag_and_the_environment(monkeypatch):
    assert _key() != _key(scalars=(True, True)) and _key() != _key(scalars=(1.0, True))  # equal values, other types
    assert _key() != _key(scalars=(2, True)) and _key() != _key(tag="u")
    for name in (F.ENV_FAST_LAUNCH, "TRITON_INTERPRET", "INDEXER_LOGITS_BACKEND", "INDEXER_LOGITS_TABLE_DIR",
                 "INDEXER_LOGITS_CHECK_VALUES", "INDEXER_LOGITS_PDL"):
        before, old = _key(), os.environ.get(name)
        monkeypatch.setenv(name, "some-value")
        assert _key() != before, name
        monkeypatch.setenv(name, old) if old is not None else monkeypatch.delenv(name)
        assert _key() == before, name


def test_arguments_moving_between_a_tuple_and_its_neighbour_give_other_keys():
    """The flat key marks each tuple with its length: kv=(k,) then w=X is not kv=(k, X) then w=None."""
    k, x = torch.zeros(4, 8), torch.zeros(4, 4)
    assert F.key_of("t", ((k,), x, None), ()) != F.key_of("t", ((k, x), None, None), ())
    assert F.key_of("t", ((k, None), x), ()) != F.key_of("t", ((k,), None, x), ())
    assert F.key_of("t", ([k], x), ()) != F.key_of("t", ((k,), x), ())  # a list is not a tuple
    assert F.key_of("t", ((k, "s"),), ()) is None and F.key_of("t", (3,), ()) is None  # not tensors: no key


def test_an_unknown_triton_never_gets_the_direct_launch(monkeypatch):
    """Whatever Triton is installed: under a version _direct_launch was not written for, no plan, so
    a replay calls the CompiledKernel's own launcher (tests/test_direct_launch.py: the rest)."""
    import triton
    from indexer_logits import _direct_launch
    monkeypatch.setattr(triton, "__version__", "9.9.9", raising=False)
    assert _direct_launch.plan(object(), 0, (4, 1, 0), (1, 1, 1), [None], [(0, 0)], []) is None
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    F.record(("k",), mod.launch, (q, w, out, 2.0), {}, [q, w, out], 2)
    assert F.get(("k",)).direct is None


# ---------------------------------------------------------------------------------------------
# The guard index (indexer_logits._call_key): a call finds its launch without its exact key.

from indexer_logits import _call_key as K  # noqa: E402

needs_guards = pytest.mark.skipif(K.GUARDS is None, reason="this torch's TensorGuards failed the self-test")


def _serve(q, w, out, offset=2.0, mod=None):
    """A call as an entry point makes it: serve_any, then on a miss the full path recorded."""
    served, key = F.serve_any("t", (q, w, out), (offset,), [q, w, out], 2)
    if served is not None:
        return served, "served"
    return F.record(key, mod.launch, (q, w, out, offset), {}, [q, w, out], 2), "recorded"


@needs_guards
def test_the_guard_index_serves_a_second_call_without_its_exact_key(monkeypatch):
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    assert _serve(q, w, out, mod=mod)[1] == "recorded"
    q2, w2, out2 = _inputs(1)
    monkeypatch.setattr(F, "exact_of", lambda *a: pytest.fail("the exact key was built"))
    got, how = _serve(q2, w2, out2, mod=mod)
    assert how == "served" and got is out2 and torch.equal(out2, q2 * w2 + 2.0)
    assert mod.kernel.runs == 1


@needs_guards
@pytest.mark.parametrize("change", list(_CHANGES))
def test_a_guard_refuses_what_the_exact_key_tells_apart(change):
    skeleton, flat = K.skeleton_of("t", (_T, (_T, None), None), (1, True))
    K.file(skeleton, flat, "replay")
    same, same_flat = K.skeleton_of("t", (_BASE[16:80].view(8, 8), (_T, None), None), (1, True))
    assert K.find(same, same_flat) == "replay"  # another address on the same 16-byte grid
    other = _CHANGES[change]()
    for args in ((other, (_T, None), None), (_T, (other, None), None)):
        sk, fl = K.skeleton_of("t", args, (1, True))
        assert K.find(sk, fl) is None, args


@needs_guards
def test_the_skeleton_holds_scalars_their_types_the_structure_and_the_environment(monkeypatch):
    def sk(args=(_T, (_T, None), None), scalars=(1, True), tag="t"):
        return K.skeleton_of(tag, args, scalars)[0]
    base = sk()
    assert base != sk(scalars=(True, True)) and base != sk(scalars=(1.0, True)) and base != sk(tag="u")
    assert base != sk(args=(_T, [_T, None], None)) and base != sk(args=(_T, (_T,), None))
    assert base != sk(args=(_T, (_T, None), _T))
    monkeypatch.setenv("INDEXER_LOGITS_CHECK_VALUES", "1")
    assert base != sk()
    assert K.skeleton_of("t", (_T, ("s",)), ()) == (None, None)


@needs_guards
def test_a_call_found_by_its_exact_key_files_its_own_guard():
    """A guard also checks requires_grad (and dispatch keys): such a call misses the guard, is served
    by its exact key, and files a guard of its own; the next one like it is found by the guard."""
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    _serve(q, w, out, mod=mod)
    q2, w2, out2 = _inputs(1)
    q2.requires_grad_(True)
    skeleton, flat = K.skeleton_of("t", (q2, w2, out2), (2.0,))
    assert K.find(skeleton, flat) is None  # the guard filed at recording wants requires_grad False
    with torch.no_grad():
        assert _serve(q2, w2, out2, mod=mod)[1] == "served"
        skeleton, flat = K.skeleton_of("t", (q2, w2, out2), (2.0,))
        assert K.find(skeleton, flat) is F.get(F.key_of("t", (q2, w2, out2), (2.0,)))
    assert mod.kernel.runs == 1


def test_without_guards_every_call_is_found_by_its_exact_key(monkeypatch):
    monkeypatch.setattr(K, "GUARDS", None)
    mod = _module(_PLAIN)
    q, w, out = _inputs(0)
    assert _serve(q, w, out, mod=mod)[1] == "recorded"
    q2, w2, out2 = _inputs(1)
    assert _serve(q2, w2, out2, mod=mod)[1] == "served" and torch.equal(out2, q2 * w2 + 2.0)
    assert K._INDEX == {}


def test_the_guard_self_test_refuses_a_guard_that_checks_nothing():
    class Lax:
        def __init__(self, *tensors, **kwargs):
            pass

        def check(self, *tensors):
            return True
    saved = K.GUARDS
    try:
        assert K._self_test(Lax) is False
    finally:
        K.GUARDS = saved


@needs_guards
def test_more_shapes_than_a_skeleton_holds_never_build_a_guard_a_call(monkeypatch):
    """Recordings push the oldest guard out; a call found by its exact key files one only where
    the list has room, so rotating through more shapes than MAX_PER_SKELETON costs what the key did."""
    monkeypatch.setattr(K, "MAX_PER_SKELETON", 2)
    mod = _module(_PLAIN)
    q, w, _ = _inputs(0)
    outs = [torch.zeros(4, 8 + i) for i in range(3)]  # the third tensor's shape: one skeleton, three keys
    for out in outs:
        assert _serve(q, w, out, mod=mod)[1] == "recorded"
    (skeleton,) = K._INDEX
    assert len(K._INDEX[skeleton]) == 2 and len(F.replays()) == 3
    monkeypatch.setattr(K, "_guard_of", lambda flat: pytest.fail("a guard was built for a call"))
    got, how = _serve(q, w, outs[0], mod=mod)  # its guard was pushed out: found by its exact key
    assert how == "served" and torch.equal(got[:, :8], q * w + 2.0)
    assert len(K._INDEX[skeleton]) == 2
    monkeypatch.setattr(F, "exact_of", lambda *a: pytest.fail("the exact key was built"))
    assert _serve(q, w, outs[2], mod=mod)[1] == "served"  # the newest: by its guard
    assert mod.kernel.runs == 3
