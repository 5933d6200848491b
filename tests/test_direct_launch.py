"""indexer_logits._direct_launch on CPU: a replay's direct call of Triton 3.6.0's C launcher passes
what Triton's own launcher passes, encodes a tensor map once per pool, never reuses one for
another address or descriptor, and is not used under another Triton.

Triton's real CudaLauncher.__call__ and wrap_handle_tensordesc run here (made without compiling:
the C `launch` is a recorder); fill_tma_descriptor is a stand-in that returns what it was given."""

from __future__ import annotations

import types

import pytest
import torch
import triton
from triton.backends.nvidia import driver as nv
from triton.tools.tensor_descriptor import TensorDescriptor

from indexer_logits import _direct_launch as D
from indexer_logits import _fastpath as F

pytestmark = pytest.mark.skipif(triton.__version__ not in D.SUPPORTED, reason="written against Triton 3.6.0's launcher")

SIGNATURE = {"q": "*fp8e4nv", "kv_desc": "tensordesc<fp8e4nv[1, 64, 128]>", "out": "*fp32", "n": "i32",
             "CLEAN": "constexpr"}
META = [{"swizzle": 3, "elem_size": 1, "elem_type": 0, "block_size": [1, 64, 128], "fp4_padded": False}]
GRID = (132, 1, 1)


class _Utils:
    def __init__(self):
        self.encodes = []

    def fill_tma_descriptor(self, ptr, swizzle, elem_size, elem_type, block, shape, strides, padding):
        self.encodes.append(ptr)
        return ("map", ptr, swizzle, elem_size, elem_type, tuple(block), tuple(shape), tuple(strides), padding)


@pytest.fixture(autouse=True)
def fake_driver(monkeypatch):
    utils = _Utils()
    drv = types.SimpleNamespace(utils=utils, get_current_device=lambda: 0, get_current_stream=lambda d: 77)
    monkeypatch.setattr(triton.runtime.driver, "_active", drv)  # the DriverConfig
    monkeypatch.setattr(F, "active_driver", lambda: drv)
    runtime = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    monkeypatch.setattr(F, "_runtime_hooks", lambda: runtime)
    F.clear()
    yield utils
    F.clear()


def _launcher(signature=SIGNATURE, meta=META, scratch=0):
    """Triton's CudaLauncher as its __init__ leaves it, over a recording C launch."""
    calls = []
    run = object.__new__(nv.CudaLauncher)
    run.num_ctas = 1
    run.launch = nv.wrap_handle_tensordesc(lambda *a: calls.append(a), signature, meta)
    run.global_scratch_size, run.global_scratch_align = scratch, 1
    run.profile_scratch_size, run.profile_scratch_align = 0, 1
    run.launch_cooperative_grid, run.launch_pdl = False, True
    return run, calls


def _pool(pages=4, extra=0):
    return torch.zeros(pages * 64 * 132 + extra, dtype=torch.uint8)[: pages * 64 * 132].view(pages, 64, 1, 132)


def _desc(pool, pages=4, stride=64 * 132):
    return TensorDescriptor(pool.view(torch.float8_e4m3fn), [pages, 64, 128], [stride, 128, 1], [1, 64, 128])


def _recorded(pool, run):
    """A Replay as record() builds it: q, the pool, out as inputs 0-2; n and CLEAN constants."""
    q, out = torch.zeros(8, 128).to(torch.float8_e4m3fn), torch.zeros(8, 256)
    kernel = types.SimpleNamespace(run=run, function=1234, packed_metadata=(4, 1, 1000))
    template = [None, None, None, 256, True]
    replay = F.Replay(kernel, GRID, template, [(0, 0), (2, 2)], [(1, 1, _desc(pool))], ((8, 256), torch.float32))
    return replay, q, out


def _tritons_args(run, calls, q, pool, out):
    """What Triton's launcher hands the C launch for these tensors (the replay's old path)."""
    run(*GRID, 77, 1234, (4, 1, 1000), None, None, None, q, _desc(pool), out, 256, True)
    return calls.pop()


def _addresses(args) -> tuple:
    return tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("addresses", [True, False])
def test_the_direct_launch_passes_what_tritons_launcher_passes(fake_driver, monkeypatch, addresses):
    monkeypatch.setattr(D, "ADDRESSES", addresses)
    run, calls = _launcher()
    pool = _pool()
    replay, q, out = _recorded(pool, run)
    assert replay.direct is not None
    for p in (pool, _pool()):  # the recorded pool, then another one
        assert replay([q, p, out], 2) is out
        direct = calls.pop()
        tritons = _tritons_args(run, calls, q, p, out)
        if addresses:  # each tensor as its address (what the C launcher reads off it)
            assert [type(direct[i]) for i in (13, 15)] == [int, int] and _addresses(direct) == _addresses(tritons)
        else:
            assert direct == tritons
        assert direct[13 + 1][1] == p.data_ptr()  # the map over this call's pool
    assert replay.calls == 2


def test_a_pool_is_encoded_once_and_another_address_gets_its_own_map(fake_driver):
    run, calls = _launcher()
    first, second = _pool(), _pool()
    replay, q, out = _recorded(first, run)
    assert fake_driver.encodes == [first.data_ptr()]  # the recording's map
    for _ in range(3):
        replay([q, first, out], 2)
    assert fake_driver.encodes == [first.data_ptr()]  # the same pool: no new encoding
    replay([q, second, out], 2)
    replay([q, first, out], 2)
    replay([q, second, out], 2)
    assert fake_driver.encodes == [first.data_ptr(), second.data_ptr()]
    maps = [c[14] for c in calls]
    assert [m[1] for m in maps] == [first.data_ptr()] * 3 + [second.data_ptr(), first.data_ptr(), second.data_ptr()]


def test_another_shape_stride_or_block_is_another_map_at_the_same_address(fake_driver):
    pool = _pool(8)
    base = pool.view(torch.float8_e4m3fn)
    descs = [TensorDescriptor(base, [8, 64, 128], [64 * 132, 128, 1], [1, 64, 128]),
             TensorDescriptor(base, [4, 64, 128], [64 * 132, 128, 1], [1, 64, 128]),  # shape
             TensorDescriptor(base, [4, 64, 128], [2 * 64 * 132, 128, 1], [1, 64, 128]),  # strides
             TensorDescriptor(base, [8, 64, 128], [64 * 132, 128, 1], [1, 32, 128])]  # block shape
    consts = {D._const_of(d, META[0]) for d in descs}
    assert len(consts) == 4
    seen = []
    for d in descs:
        run, calls = _launcher()
        kernel = types.SimpleNamespace(run=run, function=1, packed_metadata=(4, 1, 0))
        replay = F.Replay(kernel, GRID, [None, None, None, 1, True], [(0, 0), (2, 2)], [(1, 1, d)], ((8, 8), torch.float32))
        replay([torch.zeros(8), pool, torch.zeros(8, 8)], 2)
        seen.append(calls.pop()[14])
    assert len(fake_driver.encodes) == 4  # one encoding each: no entry shared
    # (the map itself takes the kernel's block size, from its metadata: another block shape alone
    # encodes the same map, kept apart all the same)
    assert len(set(seen)) == 3 and seen[3] == seen[0]
    assert [m[6] for m in seen] == [(8, 64, 128), (4, 64, 128), (4, 64, 128), (8, 64, 128)]
    assert [m[7][0] for m in seen] == [64 * 132, 64 * 132, 2 * 64 * 132, 64 * 132]
    other_meta = dict(META[0], swizzle=2)
    assert D._const_of(descs[0], other_meta) not in consts  # the kernel's swizzle is part of it too


def test_the_maps_are_bounded(monkeypatch, fake_driver):
    monkeypatch.setattr(D, "MAX_MAPS", 2)
    run, calls = _launcher()
    pools = [_pool() for _ in range(4)]
    replay, q, out = _recorded(pools[0], run)
    for p in pools:
        replay([q, p, out], 2)
    assert all(len(m) <= 2 for m in D._MAPS.values())
    assert [c[14][1] for c in calls] == [p.data_ptr() for p in pools]


@pytest.mark.parametrize("version", ["3.5.1", "3.6.1", "3.7.0", "3.8.0", None])
def test_another_triton_takes_tritons_own_launcher(monkeypatch, version, fake_driver):
    monkeypatch.setattr(triton, "__version__", version, raising=False)
    run, calls = _launcher()
    pool, other = _pool(), _pool()
    replay, q, out = _recorded(pool, run)
    assert replay.direct is None
    replay([q, other, out], 2)  # the old path: Triton's launcher, a fresh map per call
    replay([q, other, out], 2)
    assert fake_driver.encodes == [other.data_ptr()] * 2
    assert calls[-1] == _tritons_args(run, calls[:-1], q, other, out)
    assert isinstance(calls[-1][13], torch.Tensor)  # Triton's launch: the tensors themselves


def test_a_launcher_with_scratch_or_of_another_kind_is_not_planned():
    run, _ = _launcher(scratch=16)
    assert D.plan(run, 1, (4, 1, 0), GRID, [None, None, None, 1, True], [(0, 0), (2, 2)], [(1, 1, _desc(_pool()))]) is None
    other = types.SimpleNamespace(launch=run.launch, global_scratch_size=0, profile_scratch_size=0)
    assert D.plan(other, 1, (4, 1, 0), GRID, [None] * 5, [(0, 0), (2, 2)], [(1, 1, _desc(_pool()))]) is None
    run, _ = _launcher()
    run.launch = lambda *a: None  # not Triton's `inner` nor its compiled launch
    assert D.plan(run, 1, (4, 1, 0), GRID, [None] * 5, [(0, 0), (2, 2)], [(1, 1, _desc(_pool()))]) is None


def test_a_descriptor_the_launcher_does_not_expand_is_not_planned():
    run, _ = _launcher()
    # the recorded descriptor at argument 3 where Triton's launcher expands argument 1
    assert D.plan(run, 1, (4, 1, 0), GRID, [None, None, None, None, True], [(0, 0), (2, 2), (1, 1)],
                  [(3, 1, _desc(_pool()))]) is None


def test_a_kernel_without_descriptors_launches_its_tensors_and_constants(monkeypatch):
    calls = []
    raw = lambda *a: calls.append(a)  # noqa: E731  (the compiled launch: no wrapper without descriptors)
    signature = {"q": "*fp32", "out": "*fp32", "n": "i32", "C": "constexpr"}
    run, _ = _launcher(signature, None)
    assert run.launch is not None
    run.launch = raw
    monkeypatch.setattr(D, "_unwrap", lambda launch: (launch, set(), []) if launch is raw else None)
    kernel = types.SimpleNamespace(run=run, function=9, packed_metadata=(4, 1, 0))
    q, out = torch.zeros(4, 4), torch.zeros(4, 4)
    replay = F.Replay(kernel, (2, 1, 1), [None, None, 4, False], [(0, 0), (1, 1)], [], ((4, 4), torch.float32))
    assert replay.direct is not None
    replay([q, out], 1)
    run(2, 1, 1, 77, 9, (4, 1, 0), None, None, None, q, out, 4, False)
    assert _addresses(calls[0]) == _addresses(calls[1]) and calls[0][13:15] == (q.data_ptr(), out.data_ptr())


def _torch_cuda_stand_ins(monkeypatch, drv_cls=types.SimpleNamespace):
    """torch's C stream and device readers (absent from a CPU build) and a driver as Triton 3.6's GPUDriver holds them."""
    state = {"bad_fork": False, "device": 3}
    raw = lambda device: 1000 + device  # noqa: E731
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", raw, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: state["device"], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_isInBadFork", lambda: state["bad_fork"], raising=False)
    monkeypatch.setattr(torch.cuda, "_initialized", True)
    drv = drv_cls(get_current_stream=raw, get_current_device=torch.cuda.current_device, utils=_Utils())
    monkeypatch.setattr(triton.runtime.driver, "_active", drv)
    return state, drv


def test_the_stream_reader_reads_what_the_driver_would_or_nothing(monkeypatch):
    assert D.stream_reader() is None  # the fixture's driver reads streams its own way: not this reader's
    state, drv = _torch_cuda_stand_ins(monkeypatch)
    read = D.stream_reader()
    assert read is not None and read() == 1003
    state["device"] = 1
    assert read() == 1001  # the current device at each call
    state["bad_fork"] = True
    assert read() is None  # a forked child: torch.cuda.current_device would refuse
    state["bad_fork"] = False
    monkeypatch.setattr(torch.cuda, "_initialized", False)
    assert read() is None  # not initialised: current_device would initialise
    monkeypatch.setattr(torch.cuda, "_initialized", True)
    monkeypatch.setattr(triton.runtime.driver, "_active", types.SimpleNamespace(**vars(drv)))
    assert read() is None  # another active driver: ask it
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert D.stream_reader() is None  # a driver whose device reader is not torch.cuda.current_device


def test_a_replay_takes_the_readers_stream_else_the_drivers(monkeypatch):
    state, drv = _torch_cuda_stand_ins(monkeypatch)
    monkeypatch.setattr(F, "active_driver", lambda: types.SimpleNamespace(get_current_device=lambda: 5,
                                                                          get_current_stream=lambda d: 2000 + d))
    run, calls = _launcher()
    pool = _pool()
    replay, q, out = _recorded(pool, run)
    replay([q, pool, out], 2)
    assert calls[-1][3] == 1003
    state["bad_fork"] = True
    replay([q, pool, out], 2)
    assert calls[-1][3] == 2005
