"""Programmatic dependent launch of the shipped decode kernels on a real GPU (sm_90+).

In one CUDA graph, a kernel writes a new q right before each indexer call (tuner.pdl_gate.write_q);
both are PDL launches (the writer waits for its predecessor and lets its dependents launch at its
start), so the
indexer's programs start while the writer may still be running. Every call must score the q
written just before it: the logits equal those of the same call without PDL, and the
reference's. A kernel that read q before `griddepcontrol.wait` returned would score an older q
(bench/pdl.py's `nowait` variant does, at 64 x 8K). Run on a GPU host:
python3 -m pytest -q -s -m gpu tests/test_gpu_pdl.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _helpers import check_output

import indexer_logits as K
from tuner.inputs import make_decode_inputs
from tuner.pdl_gate import pdl_capable, write_q
from indexer_logits._identity import Problem
from tuner.reference import paged_mqa_logits_ref

DECODE = Problem()  # fp8, H=64, D=128, page 64, page-blocked, next_n 1


@pytest.mark.gpu
@pytest.mark.parametrize("batch, context, lens", [(64, 8192, "full"), (3, 40000, "random")])
def test_pdl_decode_scores_the_q_written_just_before(batch, context, lens):
    if not pdl_capable("cuda"):
        pytest.skip("PDL needs sm_90+")
    x = make_decode_inputs(DECODE, batch, context, lens, seed=21, device="cuda")
    q = x.q
    gen = torch.Generator(device="cuda").manual_seed(22)
    srcs = [(torch.randn(q.shape, device="cuda", generator=gen) * 0.5).to(q.dtype) for _ in range(4)]
    rows = q.shape[0] * q.shape[1]
    bufs = [torch.full((rows, context + 3), float("nan"), device="cuda") for _ in srcs]
    outs = [b[:, :context] for b in bufs]

    def call(out, pdl):
        return K.fp8_paged_mqa_logits(q, x.kv_cache, x.weights, x.context_lens, x.block_table, None, context, True,
                                      out=out, check_values=False, enable_pdl=pdl)

    expect = []
    for src in srcs:
        q.copy_(src)
        expect.append(call(None, False).clone())

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # compile and load outside the capture
        write_q(srcs[0], q)
        call(outs[0], True)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for src, out in zip(srcs, outs):
            write_q(src, q)
            call(out, True)
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()

    valid = x.valid_mask()
    for i, (buf, out) in enumerate(zip(bufs, outs)):
        assert torch.equal(out[valid], expect[i][valid]), f"call {i}: PDL logits differ from the plain launch's"
        q.copy_(srcs[i])
        ref = paged_mqa_logits_ref(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in x.args()],
                                   True, scale_layout=x.scale_layout)
        check_output(buf, out, ref.to(out.device), valid, True, "the valid rule")


@pytest.mark.gpu
@pytest.mark.parametrize("problem", [DECODE, Problem(q_dtype="bf16", cache_dtype="bf16", scale_layout="none")],
                         ids=["fp8", "bf16"])
def test_pdl_gate_passes_the_shipped_module(problem, tmp_path):
    """tuner.pdl_gate (what `verify` runs on every decode entry) on the table's 64 x 8K module."""
    if not pdl_capable("cuda"):
        pytest.skip("PDL needs sm_90+")
    from indexer_logits import _dispatch
    from tuner.pdl_gate import pdl_gate, pdl_supported

    x = make_decode_inputs(problem, 64, 8192, "random", seed=31, device="cuda")
    sel = K.paged_selection(x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, x.max_context_len,
                            scale_layout=x.scale_layout)
    table = _dispatch.load_table(sel.table)
    module = _dispatch.load_kernel(Path(sel.table).parent, sel.variant, table["modules"][sel.variant])
    assert pdl_supported(module, "cuda")
    q_before = x.q.clone()
    pdl_gate(module, x, seed=3)
    assert torch.equal(x.q.view(torch.uint8), q_before.view(torch.uint8))  # the gate restores q
    assert sel.variant.startswith(f"decode_paged__{problem.cache_dtype}_")
