"""Gates a candidate must pass before its time counts.

(a) reference: on fresh random inputs the output matches the torch reference in the valid
    region (relative error < 1e-3), every valid position is written (the output is poisoned
    with NaN first), and the -inf mask is exact when clean_logits is set;
(b) graph: the launch is captured once (a CUDA graph on a GPU; on CPU the grid is recorded and
    the same tensors are re-used), then replayed after the lengths and block table are changed
    in place (lengths of 1, a non-multiple of the page, the full width, another table), and
    must still match; on CPU the grid must not change with the values;
(c) poison: a block table poisoned past the valid pages changes no output bit.
Chunked prefill over the paged cache (PrefillPagedInputs) takes all three; its graph gate
replays other row limits (the rows' requests are shapes of the call, their limits are values).
A failing gate raises GateFailure with a short reason tag; anything unexpected propagates.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .inputs import DecodeInputs, PrefillPagedInputs, make_lens, poison_block_table
from indexer_logits._identity import Problem
from .reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref, relative_error

TOLERANCE = 1e-3


class GateFailure(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def new_output(inputs, fill=float("nan")) -> torch.Tensor:
    if isinstance(inputs, DecodeInputs):
        rows = inputs.q.shape[0] * inputs.q.shape[1]
        return torch.full((rows, inputs.max_context_len), fill, dtype=torch.float32, device=inputs.q.device)
    if isinstance(inputs, PrefillPagedInputs):
        return torch.full((inputs.q.shape[0], inputs.max_context_len), fill, dtype=torch.float32, device=inputs.q.device)
    return torch.full((inputs.q.shape[0], inputs.kv[0].shape[0]), fill, dtype=torch.float32, device=inputs.q.device)


def launch(module, inputs, out: torch.Tensor, clean_logits: bool, pdl: bool = False) -> torch.Tensor:
    """Call a generated module's launcher with the family's argument list. pdl=True: a decode
    module's programmatic dependent launch (modules emitted before PDL support take no pdl=)."""
    if isinstance(inputs, DecodeInputs):
        extra = {"pdl": True} if pdl else {}
        return module.launch(inputs.q, inputs.kv_cache, inputs.weights, inputs.context_lens, inputs.block_table,
                             out, inputs.max_context_len, clean_logits, **extra)
    if pdl:
        raise ValueError("pdl: only decode modules launch as programmatic dependents")
    if isinstance(inputs, PrefillPagedInputs):
        return module.launch(inputs.q, inputs.kv_cache, inputs.weights, inputs.row_request, inputs.row_limit,
                             inputs.block_table, out, inputs.max_context_len, clean_logits)
    k = inputs.kv[0]
    k_scale = inputs.kv[1] if len(inputs.kv) > 1 else None
    return module.launch(inputs.q, k, k_scale, inputs.weights, inputs.cu_seqlen_ks, inputs.cu_seqlen_ke, out,
                         clean_logits)


def reference(inputs) -> torch.Tensor:
    if isinstance(inputs, DecodeInputs):
        return paged_mqa_logits_ref(*inputs.args(), scale_layout=inputs.scale_layout)
    if isinstance(inputs, PrefillPagedInputs):
        return paged_mqa_logits_chunked_ref(*inputs.args(), scale_layout=inputs.scale_layout)
    return mqa_logits_ref(*inputs.args())


def compare(out: torch.Tensor, ref: torch.Tensor, valid: torch.Tensor, clean_logits: bool, what: str) -> float:
    written = out[valid]
    if bool(torch.isnan(written).any()):
        raise GateFailure("unwritten", f"{what}: {int(torch.isnan(written).sum())} valid positions not written")
    err = relative_error(out, ref, valid)
    if not err < TOLERANCE:
        raise GateFailure("wrong_answer", f"{what}: relative error {err:.3g} >= {TOLERANCE}")
    if clean_logits and not bool(torch.isneginf(out[~valid]).all()):
        bad = int((~torch.isneginf(out[~valid])).sum())
        raise GateFailure("mask", f"{what}: {bad} invalid positions are not -inf with clean_logits")
    return err


def reference_gate(module, inputs, clean_logits: bool = True) -> float:
    out = launch(module, inputs, new_output(inputs), clean_logits)
    _sync(inputs)
    return compare(out, reference(inputs), inputs.valid_mask(), clean_logits, "reference")


def poison_gate(module, inputs, clean_logits: bool = True) -> None:
    """Decode or chunked-prefill inputs: the block table poisoned past each request's valid pages."""
    a = launch(module, inputs, new_output(inputs), clean_logits)
    b = launch(module, poison_block_table(inputs), new_output(inputs), clean_logits)
    _sync(inputs)
    if not torch.equal(torch.nan_to_num(a, nan=1.0), torch.nan_to_num(b, nan=1.0)):
        raise GateFailure("reads_past_valid_pages", "output changed when block-table entries past the valid pages were poisoned")


def replay_length_sets(problem: Problem, inputs: DecodeInputs, seed: int = 0) -> list[torch.Tensor]:
    """Lengths to replay a captured launch with: 1, a non-multiple of the page, full, random."""
    b, width = inputs.q.shape[0], inputs.max_context_len
    page = inputs.kv_cache.shape[1]
    odd = max(1, min(width, page + page // 2 + 1)) if page > 1 else max(1, width // 3 + 1)
    return [make_lens(problem, b, width, mode, seed + i) for i, mode in enumerate((1, odd, "full", "random"))]


def graph_gate(module, problem: Problem, inputs: DecodeInputs, clean_logits: bool = True, seed: int = 0) -> None:
    """Capture with the inputs' lengths, replay with others (and a reshuffled block table)."""
    _replay_gate(module, inputs, "context_lens", replay_length_sets(problem, inputs, seed), "lengths",
                 clean_logits, seed)


def _replay_gate(module, inputs, field: str, value_sets, what: str, clean_logits: bool, seed: int) -> None:
    """Capture one launch, then per value set: write it into `inputs.<field>` in place (and, every
    other time, shuffle the block table's rows between requests), replay, compare with the
    reference. The shared body of the decode and chunked-prefill graph gates."""
    values_buf = getattr(inputs, field).clone()
    table_buf = inputs.block_table.clone()
    live = replace(inputs, **{field: values_buf, "block_table": table_buf})
    out = new_output(inputs)
    runner = _Captured(module, live, out, clean_logits)
    g = torch.Generator().manual_seed(seed)
    for i, values in enumerate(value_sets):
        values_buf.copy_(values.to(values_buf.device, values_buf.dtype))
        if i % 2:  # another block table: the same pages, rows shuffled between requests
            perm = torch.randperm(table_buf.shape[0], generator=g)
            table_buf.copy_(inputs.block_table[perm.to(inputs.block_table.device)])
        out.fill_(float("nan"))
        runner.replay()
        _sync(inputs)
        compare(out, reference(live), live.valid_mask(), clean_logits,
                f"graph replay {i} ({what} {values.flatten()[:4].tolist()}...)")


def replay_row_limit_sets(inputs: PrefillPagedInputs, seed: int = 0) -> list[torch.Tensor]:
    """Row limits to replay a captured chunked-prefill launch with (the rows' requests kept):
    1 for every row, each request's chunk at p0 = 0 (row r sees t <= r), the full width, and
    random limits (0 included); all within the table's capacity and the output width."""
    m = inputs.q.shape[0]
    cap = min(inputs.max_context_len, inputs.block_table.shape[1] * inputs.kv_cache.shape[1])
    req = inputs.row_request.cpu().long()
    first = torch.zeros(m, dtype=torch.int64)
    if m:
        starts = torch.ones(m, dtype=torch.bool)
        starts[1:] = req[1:] != req[:-1]
        first = torch.cummax(torch.where(starts, torch.arange(m), 0), 0).values
    at_zero = (torch.arange(m) - first + 1).clamp(max=cap)
    g = torch.Generator().manual_seed(seed)
    rand = torch.randint(0, cap + 1, (m,), generator=g)
    return [torch.ones(m, dtype=torch.int64).clamp(max=cap), at_zero, torch.full((m,), cap), rand]


def chunked_graph_gate(module, inputs: PrefillPagedInputs, clean_logits: bool = True, seed: int = 0) -> None:
    """Capture with the inputs' row limits, replay with others (and a reshuffled block table)."""
    _replay_gate(module, inputs, "row_limit", replay_row_limit_sets(inputs, seed), "row limits", clean_logits, seed)


class _Captured:
    """A launch captured once and replayed: a CUDA graph on a GPU; on CPU the same call on the
    same tensors, with the launch grid recorded at capture and checked at every replay."""

    def __init__(self, module, inputs, out, clean_logits):
        self.module, self.inputs, self.out, self.clean = module, inputs, out, clean_logits
        if inputs.q.is_cuda:
            launch(module, inputs, out, clean_logits)  # compile outside the capture
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                launch(module, inputs, out, clean_logits)
        else:
            self.graph = None
            self.grid = self._grid_of_launch()

    def _grid_of_launch(self):
        kernel_name = next(n for n in dir(self.module) if n.startswith("_") and n.endswith("_kernel"))
        kernel = getattr(self.module, kernel_name)
        seen = []

        class Recorder:
            def __getitem__(_, grid):
                seen.append(tuple(grid))
                return kernel[grid]

        setattr(self.module, kernel_name, Recorder())
        try:
            launch(self.module, self.inputs, self.out, self.clean)
        finally:
            setattr(self.module, kernel_name, kernel)
        return seen

    def replay(self):
        if self.graph is not None:
            self.graph.replay()
            return
        grid = self._grid_of_launch()
        if grid != self.grid:
            raise GateFailure("grid_depends_on_values", f"launch grid changed from {self.grid} to {grid} with the lengths")


def _sync(inputs) -> None:
    if inputs.q.is_cuda:
        torch.cuda.synchronize()
