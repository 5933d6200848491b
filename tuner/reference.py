"""The torch reference: the oracle every candidate kernel is checked against.

The implementation lives in the shipped runtime (`indexer_logits/_reference.py`, torch only)
because the runtime also uses it as its last-resort fallback; one oracle, not two copies.
"""

from indexer_logits._checks import row_limits
from indexer_logits._reference import mqa_logits_ref, paged_mqa_logits_chunked_ref, paged_mqa_logits_ref

__all__ = ["paged_mqa_logits_ref", "mqa_logits_ref", "paged_mqa_logits_chunked_ref", "row_limits", "relative_error"]


def relative_error(out, ref, valid) -> float:
    """||out - ref|| / ||ref|| over the valid positions (SPEC.md's acceptance metric)."""
    import torch

    o = out[valid].double()
    r = ref[valid].double()
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    denom = float(r.norm())
    return float((o - r).norm()) / max(denom, 1e-30)
