"""bench/ceilings.py. Its paged read (under the interpreter on CPU, compiled on a GPU) must read
each valid page through the block table at the page stride, and with --with-logits write every
valid token's logit and nothing past a request's last valid page, whether once after the run (as
store "run") or after each page (as store "tile"), at any pages per program, split evenly or in
fixed chunks; else the I/O ceiling it reports would time the wrong bytes. Its command line is
checked before it looks for a GPU."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import ceilings

ROOT = Path(__file__).resolve().parent.parent

BATCH, PAGE, WIDTH = 3, 4, 8  # requests, tokens per page, pages per row of the block table
PAGE_WORDS, STRIDE, Q_WORDS, BLOCK = 8, 12, 4, 8  # int32 words: a page, the page stride, q and w, a load


def _expected(kv, block_table, lens, q, pages, even, logits):
    """What the kernel must leave in the logits (NaN where it must not write) and in its sink."""
    out = torch.full((BATCH, WIDTH * PAGE), float("nan"))
    programs = -(-WIDTH // pages)
    sink = torch.zeros(BATCH * programs, dtype=torch.int32)
    for b in range(BATCH):
        n_pages = -(-int(lens[b]) // PAGE)
        per = -(-n_pages // programs) if even else pages
        for c in range(programs):
            if c * per >= n_pages:
                continue
            n_here = min(per, n_pages - c * per)
            acc = torch.zeros(BLOCK, dtype=torch.int32)
            acc[:Q_WORDS] = q[b * Q_WORDS:(b + 1) * Q_WORDS]
            for i in range(n_here):
                words = kv.view(-1)[int(block_table[b, c * per + i]) * STRIDE:][:PAGE_WORDS]
                acc ^= words
                if logits == 2:
                    start = (c * per + i) * PAGE
                    out[b, start:start + PAGE] = float(words.sum())
            sink[b * programs + c] = acc.sum()
            if logits == 1:
                out[b, c * per * PAGE:(c * per + n_here) * PAGE] = float(acc.sum())
    return out, sink


@pytest.mark.parametrize("even", [True, False], ids=["even-split", "fixed-chunks"])
@pytest.mark.parametrize("logits", [1, 2], ids=["after-run", "after-page"])
@pytest.mark.parametrize("pages", [1, 2, 4])
def test_paged_read_writes_exactly_the_valid_tokens(logits, pages, even, device):
    gen = torch.Generator().manual_seed(pages * 10 + logits + 2 * even)
    lens = torch.tensor([32, 5, 13], dtype=torch.int32)  # full, one page and a bit, a partial last page
    pool = BATCH * WIDTH + 5
    # a shuffled block table over a pool with spare pages: a read that skips the table, or takes
    # the page size for the stride, reads other words
    block_table = torch.randperm(pool, generator=gen)[:BATCH * WIDTH].to(torch.int32).reshape(BATCH, WIDTH)
    kv = torch.randint(0, 1000, (pool, STRIDE), dtype=torch.int32, generator=gen)
    q = torch.randint(0, 1 << 20, (BATCH * Q_WORDS,), dtype=torch.int32, generator=gen)
    expect, expect_sink = _expected(kv, block_table, lens, q, pages, even, logits)
    assert expect.isnan().any() and (expect[~expect.isnan()] != 0).all()  # the check can tell

    out = torch.full((BATCH, WIDTH * PAGE), float("nan"), device=device)
    programs = -(-WIDTH // pages)
    sink = torch.zeros(BATCH * programs, dtype=torch.int32, device=device)
    ceilings._paged_read_kernel[(BATCH, programs)](
        kv.to(device), STRIDE, block_table.to(device), WIDTH, lens.to(device), sink, q.to(device), out, out.stride(0),
        PAGE=PAGE, PAGE_WORDS=PAGE_WORDS, BLOCK=BLOCK, PAGES=pages, EVEN=even, Q_WORDS=Q_WORDS, LOGITS=logits)
    out, sink = out.cpu(), sink.cpu()
    assert torch.equal(out.isnan(), expect.isnan()), (out, expect)
    assert torch.equal(out[~out.isnan()], expect[~expect.isnan()]), (out, expect)
    # the sink holds each program's XOR of q and its pages (programs past a request's length: 0)
    assert torch.equal(sink, expect_sink)


def test_logits_hints_are_parsed_and_refused():
    assert ceilings.parse_logits_hints("page:,run:.cs,run:evict_first", True) == ("page:", "run:.cs", "run:evict_first")
    assert ceilings.parse_logits_hints("", False) == ()
    with pytest.raises(ValueError, match="needs --with-logits"):
        ceilings.parse_logits_hints("page:", False)
    for bad in ("page", "tile:", "run:.xx"):
        with pytest.raises(ValueError, match="expected WHERE:HINT"):
            ceilings.parse_logits_hints(bad, True)


def _run(*args):
    return subprocess.run([sys.executable, "-m", "bench.ceilings", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_command_line_is_checked_before_the_gpu():
    bad = _run("--buckets", "64x8192:half")
    assert bad.returncode == 2 and "lens 'half'" in bad.stderr
    bad = _run("--logits-hints", "run:.cs")
    assert bad.returncode == 2 and "needs --with-logits" in bad.stderr
    if not torch.cuda.is_available():
        proc = _run("--buckets", "1x8192:full")
        assert proc.returncode == 2 and "no CUDA device" in proc.stderr


@pytest.mark.gpu
def test_ceilings_of_a_small_bucket(tmp_path):
    """On a GPU: every ceiling of a small bucket is timed, none slower than the shipped kernel by
    much, and the rows go to --out."""
    out = tmp_path / "ceilings.json"
    proc = _run("--buckets", "8x8192:full", "--replays", "5", "--with-logits", "--fixed-logits",
                "--logits-hints", "page:", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    import json

    (row,) = json.loads(out.read_text())["rows"]
    for key in ("empty", "chain", "stream", "paged", "paged_even", "paged_even_q", "paged_even_q_logits",
                "logits_page:", "paged_logits", "paged_q_logits", "shipped"):
        assert row[key]["p50_ms"] > 0, key
    assert row["paged"]["p50_ms"] < 2 * row["shipped"]["p50_ms"]
