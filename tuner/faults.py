"""Real GPU faults for the crash-isolation test on a GPU host.

The worker's test hook (tuner.worker, INDEXER_TUNER_FAULTS) can make a chosen candidate do, on
the device, what a broken kernel does: write through an address far outside any allocation (the
CUDA context is lost: "an illegal memory access was encountered") or spin forever (the launch
never completes; only killing the process frees the GPU). The host-side faults of the same hook
(os._exit, sleep) stand in for these on CPU machines; these are the real thing.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _write_far_away(ptr, far):
    tl.store(ptr + far, 1.0)  # `far` elements past a 1-element buffer: no mapping there


@triton.jit
def _spin_until_set(flag_ptr):
    # The flag is never set: volatile keeps the load inside the loop, so this never exits.
    while tl.load(flag_ptr, volatile=True) == 0:
        pass


def illegal_address() -> None:
    """Launch a kernel that faults, then synchronise: raises the CUDA error, context lost."""
    buf = torch.zeros(1, device="cuda")
    _write_far_away[(1,)](buf, 1 << 40)
    torch.cuda.synchronize()


def hang() -> None:
    """Launch a kernel that never finishes, then wait for it (forever)."""
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    _spin_until_set[(1,)](flag)
    torch.cuda.synchronize()
