"""scripts/gpu_ceilings.py's paged read (under the interpreter): with --with-logits it must write
every valid token's logit and nothing past a request's last valid page, whether once after the
run (as store "run") or after each page (as store "tile"), at any pages per program, split evenly
or in fixed chunks; else the I/O ceiling it reports would time the wrong bytes."""

import sys
from pathlib import Path

import pytest
import torch

from conftest import INTERPRET

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

pytestmark = pytest.mark.skipif(not INTERPRET, reason="runs the Triton interpreter on CPU tensors")


@pytest.mark.parametrize("even", [True, False], ids=["even-split", "fixed-chunks"])
@pytest.mark.parametrize("logits", [1, 2], ids=["after-run", "after-page"])
@pytest.mark.parametrize("pages", [1, 2, 4])
def test_paged_read_writes_exactly_the_valid_tokens(logits, pages, even):
    import gpu_ceilings

    batch, page, width = 3, 4, 8  # tokens per page, pages per row of the table
    lens = torch.tensor([32, 5, 13], dtype=torch.int32)  # full, one page and a bit, a partial last page
    block_table = torch.arange(batch * width, dtype=torch.int32).reshape(batch, width)
    kv = torch.zeros(batch * width, page * 8, dtype=torch.int32)
    sink = torch.zeros(batch * width, dtype=torch.int32)
    q = torch.zeros(batch * 4, dtype=torch.int32)
    out = torch.full((batch, width * page), float("nan"))
    grid = (batch, -(-width // pages))
    gpu_ceilings._paged_read_kernel[grid](kv, 8, block_table, width, lens, sink, q, out, out.stride(0), PAGE=page,
                                          PAGE_WORDS=8, BLOCK=8, PAGES=pages, EVEN=even, Q_WORDS=4, LOGITS=logits)
    for b in range(batch):
        valid = -(-int(lens[b]) // page) * page  # whole valid pages: the tokens a run scores
        assert (out[b, :valid] == 0).all(), (b, out[b])  # the cache is zeros: so are the words' sums
        assert out[b, valid:].isnan().all(), (b, out[b])
