"""The programmatic-dependent-launch gate for decode modules (sm_90+; `verify` runs it on the GPU).

A decode module launched with pdl=True may start while the kernel before it in the stream is
still running; it must wait for that kernel before reading anything. The gate captures, in one
CUDA graph, a kernel that writes a new q (itself a PDL launch that lets its dependents start at
once, so the module's programs really do start early) followed by the module's PDL launch, for
two different q, replays the graph, and requires each output to equal, bit for bit on the valid
positions, the module's plain launch on the same q. A module that read q before its wait would
score the other q (`python -m bench.pdl`'s `nowait` variant did).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from .gates import GateFailure, launch, new_output
from .inputs import DecodeInputs


@triton.jit
def _write_bytes(src_ptr, dst_ptr, n_bytes, BLOCK: tl.constexpr, PDL: tl.constexpr):
    if PDL:  # wait for the kernel before; let the one after launch at once
        tl_cuda.gdc_wait()
        tl_cuda.gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n_bytes), mask=offs < n_bytes)


def pdl_capable(device) -> bool:
    """Programmatic dependent launch needs a CUDA device of compute capability 9.0 or newer."""
    device = torch.device(device)
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9


def pdl_supported(module, device) -> bool:
    """The module takes pdl= and the device can launch it so."""
    return getattr(module, "SUPPORTS_PDL", False) is True and pdl_capable(device)


def write_q(src: torch.Tensor, q: torch.Tensor, pdl: bool = True) -> None:
    """q <- src (same shape and dtype, contiguous), byte for byte, by a kernel: the predecessor a
    model step's q quantisation would be. pdl=True: a PDL launch that lets its dependents start
    at once; pdl=False: a plain launch."""
    n = q.numel() * q.element_size()
    _write_bytes[(triton.cdiv(n, 4096),)](src.view(torch.uint8), q.view(torch.uint8), n, BLOCK=4096, PDL=pdl,
                                          num_warps=4, launch_pdl=pdl)


def pdl_gate(module, inputs: DecodeInputs, clean_logits: bool = True, seed: int = 0, replays: int = 3) -> None:
    """Raise GateFailure('pdl', ...) unless the PDL launch after a q writer equals the plain launch."""
    q = inputs.q
    original = q.clone()
    gen = torch.Generator(device=q.device).manual_seed(seed + 101)
    if not q.is_contiguous():
        raise ValueError("inputs.q: the PDL gate writes q byte for byte and needs it contiguous")
    sources = [(torch.randn(q.shape, device=q.device, generator=gen) * 0.5).to(q.dtype) for _ in range(2)]
    try:
        expect = []
        for src in sources:
            q.copy_(src)
            expect.append(launch(module, inputs, new_output(inputs, float("nan")), clean_logits).clone())
        outs = [new_output(inputs, float("nan")) for _ in sources]
        stream = torch.cuda.Stream(device=q.device)
        stream.wait_stream(torch.cuda.current_stream(q.device))
        with torch.cuda.stream(stream):  # compile and load outside the capture
            write_q(sources[0], q)
            launch(module, inputs, outs[0], clean_logits, pdl=True)
        torch.cuda.current_stream(q.device).wait_stream(stream)
        torch.cuda.synchronize(q.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for src, out in zip(sources, outs):
                write_q(src, q)
                launch(module, inputs, out, clean_logits, pdl=True)
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize(q.device)
        del graph
        valid = inputs.valid_mask()
        for i, (out, ref) in enumerate(zip(outs, expect)):
            differ = valid & ~torch.eq(out, ref)
            if clean_logits:
                differ |= ~valid & ~torch.isneginf(out)
            bad = int(differ.any(dim=1).sum())
            if bad:
                raise GateFailure("pdl", f"call {i} of the graph: {bad} of {out.shape[0]} rows differ from the plain "
                                         "launch on the same q (read before the wait?)")
    finally:
        q.copy_(original)
