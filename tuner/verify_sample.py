"""`verify` at a bucket's own shape: a deterministic sample of output rows against the reference,
and the -inf mask of every row from the lengths alone.

At 256 requests x 1M tokens the output is 1 GiB and the reference cannot hold [rows, heads, keys]
(nor a full [rows, keys] copy beside the kernel's). So:
- values: a sample of rows (the first, the last, the one with the widest valid window, and a few
  seeded random ones) over the whole width, computed by the torch oracle on those rows' own inputs
  (indexer_logits._reference: per request it gathers only the valid pages and forms scores 2,048
  keys at a time, so the extra memory is the sample's [rows, width] plus one request's keys);
  criterion DeepGEMM's calc_diff < 1e-3 over the sample together and for each row alone, and the
  SPEC's relative error < 1e-3 over the sample, or else every sampled logit within the fp32
  rounding bound of its own terms (tuner.verify_bound: what any correct evaluation satisfies, so a
  row whose logits nearly cancel, one valid key say, is not failed for its tiny norm);
- mask: every row, compared with where the lengths (decode, chunked prefill) or the windows
  (ragged prefill) say the output must be -inf (clean_logits=True); a valid position must be
  finite (NaN = never written: the output is filled with NaN before the launch). Done a block of
  rows at a time, with no reference at all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .gates import TOLERANCE, reference
from .inputs import DecodeInputs, PrefillPagedInputs
from .verify_bound import rounding_bound

CALC_DIFF_LIMIT = 1e-3
RANDOM_ROWS = 4  # seeded random rows beside the first, the last and the widest
MASK_BLOCK_ELEMENTS = 1 << 26  # positions compared per block of rows (64M: a few hundred MB of temporaries)


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's test metric, 1 - 2<x, y> / (|x|^2 + |y|^2) in double (0 for two zero tensors);
    the caller zeroes the positions that are -inf in the reference."""
    x, y = x.double(), y.double()
    denominator = float((x * x + y * y).sum())
    if denominator == 0.0:
        return 0.0
    return 1.0 - 2.0 * float((x * y).sum()) / denominator


def num_rows(inputs) -> int:
    return inputs.q.shape[0] * inputs.q.shape[1] if isinstance(inputs, DecodeInputs) else inputs.q.shape[0]


def width(inputs) -> int:
    if isinstance(inputs, (DecodeInputs, PrefillPagedInputs)):
        return inputs.max_context_len
    return inputs.kv[0].shape[0]


def windows(inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Each output row's valid window [lo, hi) (int64, on the inputs' device), from the lengths."""
    if isinstance(inputs, (DecodeInputs, PrefillPagedInputs)):
        hi = inputs.limits().to(inputs.q.device).clamp(max=inputs.max_context_len)
        return torch.zeros_like(hi), hi
    keys = width(inputs)
    lo = inputs.cu_seqlen_ks.long().clamp(0, keys)
    return lo, torch.maximum(inputs.cu_seqlen_ke.long().clamp(0, keys), lo)


def sample_rows(inputs, random_rows: int = RANDOM_ROWS, seed: int = 0) -> list[int]:
    """The rows checked against the reference: first, last, widest, and `random_rows` seeded
    random others (fewer when there are not that many), sorted."""
    m = num_rows(inputs)
    if m == 0:
        return []
    lo, hi = windows(inputs)
    chosen = {0, m - 1, int(torch.argmax((hi - lo).cpu()))}
    g = torch.Generator().manual_seed(seed)
    rest = [r for r in torch.randperm(m, generator=g)[: random_rows + 3].tolist() if r not in chosen]
    chosen.update(rest[:random_rows])
    return sorted(chosen)


def subset(inputs, rows: list[int]):
    """The inputs of the sampled rows alone (decode: of their requests, whole) and, for each
    sampled row, its row in the subset's output."""
    dev = inputs.q.device
    if isinstance(inputs, DecodeInputs):
        n = inputs.q.shape[1]
        requests = sorted({r // n for r in rows})
        req = torch.tensor(requests, device=dev)
        out_rows = torch.tensor([r for b in requests for r in range(b * n, (b + 1) * n)], device=dev)
        sub = replace(inputs, q=inputs.q[req], weights=inputs.weights[out_rows],
                      context_lens=inputs.context_lens[req.to(inputs.context_lens.device)],
                      block_table=inputs.block_table[req.to(inputs.block_table.device)])
        position = {b: i for i, b in enumerate(requests)}
        return sub, [position[r // n] * n + r % n for r in rows]
    idx = torch.tensor(rows, device=dev)
    if isinstance(inputs, PrefillPagedInputs):  # rows stay grouped by request: a sorted subset of sorted rows
        sub = replace(inputs, q=inputs.q[idx], weights=inputs.weights[idx], row_request=inputs.row_request[idx],
                      row_limit=inputs.row_limit[idx])
    else:
        sub = replace(inputs, q=inputs.q[idx], weights=inputs.weights[idx], cu_seqlen_ks=inputs.cu_seqlen_ks[idx],
                      cu_seqlen_ke=inputs.cu_seqlen_ke[idx])
    return sub, list(range(len(rows)))


def reference_rows(inputs, rows: list[int]) -> torch.Tensor:
    """The torch oracle's logits of `rows` over the whole width, [len(rows), width] fp32."""
    sub, picks = subset(inputs, rows)
    ref = reference(sub)
    return ref[torch.tensor(picks, device=ref.device)]


@dataclass
class SampleCheck:
    rows: list[int]  # the sampled rows
    total_rows: int
    width: int
    calc_diff: float  # over the sampled rows together
    worst_row_calc_diff: float
    worst_row: int
    rel_err: float  # ||out - ref|| / ||ref|| over the sample's valid positions
    mask_errors: int  # positions of any row whose -inf-ness differs from the lengths' rule
    unwritten: int  # valid positions left NaN
    nonfinite: int  # valid positions at +-inf
    # max over the sample's valid positions of |out - ref| / the rounding bound of the position's
    # terms (tuner.verify_bound): <= 1 means within what any correct fp32 evaluation may differ
    bound_ratio: float = 0.0

    @property
    def rel_ok(self) -> bool:
        """The SPEC's 1e-3 of the sample's norm, or else every logit within its rounding bound."""
        return self.rel_err < TOLERANCE or self.bound_ratio <= 1.0

    @property
    def ok(self) -> bool:
        return (self.calc_diff < CALC_DIFF_LIMIT and self.worst_row_calc_diff < CALC_DIFF_LIMIT and self.rel_ok
                and not (self.mask_errors or self.unwritten or self.nonfinite))

    def detail(self) -> str:
        within = ("" if self.rel_err < TOLERANCE else
                  f" (>= {TOLERANCE:g}; every logit within {self.bound_ratio:.2f} of its fp32 rounding bound)"
                  if self.bound_ratio <= 1.0 else f" (>= {TOLERANCE:g}, and {self.bound_ratio:.3g}x the fp32 "
                  "rounding bound of some logit's terms)")
        text = (f"calc_diff {self.calc_diff:.2e} (worst row {self.worst_row}: {self.worst_row_calc_diff:.2e}), "
                f"rel err {self.rel_err:.2e}{within} on rows {self.rows} of {self.total_rows} x {self.width}; "
                f"-inf mask of all rows: {self.mask_errors} wrong")
        if self.unwritten or self.nonfinite:
            text += f", {self.unwritten} valid positions unwritten (NaN), {self.nonfinite} +-inf"
        return text

    def record(self) -> dict:
        return {"calc_diff": self.calc_diff, "worst_row_calc_diff": self.worst_row_calc_diff,
                "rel_err": self.rel_err, "rounding_bound_ratio": self.bound_ratio,
                "rows_checked": self.rows, "rows": self.total_rows,
                "mask": "exact, every row" if not self.mask_errors else f"{self.mask_errors} positions wrong"}


def mask_errors(out: torch.Tensor, inputs) -> tuple[int, int, int]:
    """(positions whose -inf-ness breaks the rule, valid positions NaN, valid positions +-inf),
    over every row, a block of rows at a time."""
    lo, hi = windows(inputs)
    m, w = out.shape[0], width(inputs)
    t = torch.arange(w, device=out.device)
    block = max(1, MASK_BLOCK_ELEMENTS // max(w, 1))
    wrong = nan = inf = 0
    for r0 in range(0, m, block):
        o = out[r0:r0 + block, :w]
        valid = (t[None, :] >= lo[r0:r0 + block, None]) & (t[None, :] < hi[r0:r0 + block, None])
        neginf = torch.isneginf(o)
        wrong += int((neginf == valid).sum())  # -inf inside the window, or anything else outside it
        nan += int((torch.isnan(o) & valid).sum())
        inf += int((torch.isposinf(o) & valid).sum())
    return wrong, nan, inf


def check_sampled(out: torch.Tensor, inputs, random_rows: int = RANDOM_ROWS, seed: int = 0) -> SampleCheck:
    """The kernel's output `out` (launched with clean_logits=True) against the oracle on a sample
    of rows and against the lengths' -inf rule on every row."""
    rows = sample_rows(inputs, random_rows, seed)
    wrong, nan, inf = mask_errors(out, inputs)
    ref = reference_rows(inputs, rows) if rows else out[:0]
    got = out[torch.tensor(rows, dtype=torch.long, device=out.device)] if rows else out[:0]
    invalid = torch.isneginf(ref)
    got0 = torch.nan_to_num(got.masked_fill(invalid, 0.0), nan=0.0, posinf=0.0, neginf=0.0)
    ref0 = ref.masked_fill(invalid, 0.0)
    per_row = [calc_diff(got0[i], ref0[i]) for i in range(len(rows))]
    worst = max(range(len(rows)), key=lambda i: per_row[i]) if rows else 0
    valid = ~invalid
    diff = (got[valid].double() - ref[valid].double())
    finite = bool(torch.isfinite(diff).all())
    rel = float(diff.norm()) / max(float(ref[valid].double().norm()), 1e-30) if finite else float("inf")
    lo, hi = windows(inputs)
    bound = rounding_bound(inputs, rows, lo, hi, width(inputs))[valid].double()
    ratio = float((diff.abs() / bound.clamp_min(1e-300)).max()) if finite and diff.numel() else (
        0.0 if finite else float("inf"))
    return SampleCheck(rows, num_rows(inputs), width(inputs), calc_diff(got0, ref0),
                       per_row[worst] if rows else 0.0, rows[worst] if rows else -1, rel, wrong, nan, inf, ratio)
