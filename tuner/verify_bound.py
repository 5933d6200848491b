"""The floor of verify's relative-error criterion: the rounding bound of the sums a logit is made of.

A logit is  s_t * sum_h w_h * relu(sum_d q_hd * k_td):  D products per head (exact in fp32 for
fp8 and bf16 operands), H weighted heads, a scale. Any fp32 evaluation of it, in any order and
tiling, is within gamma_n * M of the exact value (Higham, "Accuracy and Stability of Numerical
Algorithms", 2nd ed., section 3.1: a sum's error is at most gamma_n times the sum of its terms'
magnitudes), where
  M = s_t * sum_h |w_h| * sum_d |q_hd| |k_td|  (the magnitudes of every term; relu is 1-Lipschitz),
  n = D + H  (each term meets at most D - 1 additions in its dot, one product with its weight,
             H - 1 additions in the head sum and one product with the scale),
  gamma_n = n u / (1 - n u),  u = 2^-24 (fp32's unit roundoff).
The kernel and the torch reference are two such evaluations, so |kernel - reference| <= 2 gamma_n M.

Where a row's logits are not small against their terms, 1e-3 of the logits is the tighter test
and the bound changes nothing. A row whose logits nearly cancel (one valid key, heads of both
signs) can miss 1e-3 of its own norm while inside the bound: the H200 table's fp8 next_n = 2
entry at 1x131072 did (one logit of 0.105 off by 3.1e-4; docs/PERF.md, "Verify at every bucket").
A wrong tile (another key's values, a lost scale, a dropped head) is off by a sizeable part of the
logits themselves, far outside it. The bound is fp32's: Hopper's fp8 tensor cores accumulate with
fewer bits in the worst case, and that measured case sits 20x inside it.

M needs no relu and no [heads, keys] temporary: with every factor taken as its magnitude,
sum_h |w_h| |q_h| . |k_t| = v . |k_t| with v = sum_h |w_h| |q_h|, one matrix-vector product per row.
"""

from __future__ import annotations

import torch

from indexer_logits._layout import layout_of, unpack_pages

from .inputs import DecodeInputs, PrefillPagedInputs

UNIT_ROUNDOFF = 2.0 ** -24  # fp32
KEY_CHUNK = 1 << 16  # keys gathered at once for one row (32 MiB of fp32 at D = 128)


def gamma(n: int) -> float:
    """Higham's gamma_n for fp32: the relative bound of n successive roundings."""
    nu = n * UNIT_ROUNDOFF
    return nu / (1.0 - nu)


def evaluations_bound(heads: int, head_dim: int) -> float:
    """|kernel - reference| <= this times M: two fp32 evaluations, each within gamma_{D+H} M."""
    return 2.0 * gamma(head_dim + heads)


def _row_keys(inputs, row: int, t0: int, t1: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys t0 .. t1-1 of a row's sequence as (values fp32 [t1-t0, D], scales fp32 [t1-t0])."""
    if isinstance(inputs, (DecodeInputs, PrefillPagedInputs)):
        if isinstance(inputs, DecodeInputs):
            request = row // inputs.q.shape[1]
        else:
            request = int(inputs.row_request[row])
        layout = layout_of(inputs.kv_cache, inputs.scale_layout)
        page = layout.page_size
        first, last = t0 // page, -(-t1 // page)
        pages = inputs.block_table[request, first:last]
        values, scales = unpack_pages(inputs.kv_cache, layout, pages)
        skip = t0 - first * page
        return (values.reshape(-1, layout.head_dim)[skip:skip + t1 - t0],
                scales.reshape(-1)[skip:skip + t1 - t0])
    k = inputs.kv[0] if isinstance(inputs.kv, (tuple, list)) else inputs.kv
    if isinstance(inputs.kv, (tuple, list)) and len(inputs.kv) > 1:
        scales = inputs.kv[1].reshape(-1)[t0:t1].float()
    else:
        scales = torch.ones(t1 - t0, dtype=torch.float32, device=k.device)
    return k[t0:t1].float(), scales


def _row_query(inputs, row: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [H, D], w [H]) of one output row, fp32."""
    if isinstance(inputs, DecodeInputs):
        n = inputs.q.shape[1]
        return inputs.q[row // n, row % n].float(), inputs.weights[row].float()
    return inputs.q[row].float(), inputs.weights[row].float()


def term_magnitudes(inputs, rows: list[int], lo: torch.Tensor, hi: torch.Tensor, width: int) -> torch.Tensor:
    """M of each position of `rows` ([len(rows), width] fp32, 0 outside each row's window
    [lo[r], hi[r]) as verify_sample.windows gives them)."""
    out = torch.zeros((len(rows), width), dtype=torch.float32, device=inputs.q.device)
    for i, row in enumerate(rows):
        q, w = _row_query(inputs, row)
        v = (w.abs()[:, None] * q.abs()).sum(dim=0)  # [D]
        start, stop = int(lo[row]), int(hi[row])
        for t0 in range(start, stop, KEY_CHUNK):
            t1 = min(stop, t0 + KEY_CHUNK)
            k, s = _row_keys(inputs, row, t0, t1)
            out[i, t0:t1] = (k.abs() @ v) * s.abs()
    return out


def rounding_bound(inputs, rows: list[int], lo: torch.Tensor, hi: torch.Tensor, width: int) -> torch.Tensor:
    """The most a correct kernel may differ from the reference at each position of `rows`."""
    heads, head_dim = inputs.q.shape[-2], inputs.q.shape[-1]
    return term_magnitudes(inputs, rows, lo, hi, width) * evaluations_bound(heads, head_dim)
