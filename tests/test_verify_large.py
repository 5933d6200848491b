"""verify's checks on the GPU at the largest shipped buckets and on a cache pool of more than
4 GiB (marker gpu; skipped without CUDA or without a table for this GPU).

- every problem of the running GPU's table at its largest bucket (the H200's: fp8 decode n1 and
  n2 at 256 x 1M, bf16 decode at 256 x 128K, chunked prefill at 4096 x 128K, ragged prefill at
  4096 x 64K): tuner.verify_bucket.check_bucket, the module as shipped: sampled rows against the
  oracle over the whole width (calc_diff and relative error < 1e-3), the exact -inf mask of every
  row, the poisoned block table;
- the same check fails a module that zeroes one sampled row at 256 x 1M;
- every paged problem's largest-bucket module on a 5 GiB pool read past its 4 GiB byte offset,
  decode and chunked prefill (tuner.verify_pool), and the check fails a launch whose page ids
  wrap as 32-bit byte offsets would.

On an H200 (about a minute):
    .venv/bin/python -m pytest -q -m gpu tests/test_verify_large.py -rfEs
"""

from __future__ import annotations

import pytest
import torch

from indexer_logits import _dispatch
from indexer_logits._identity import Problem
from tuner.envinfo import current
from tuner.verify_bucket import check_bucket
from tuner.verify_pool import GPU_POOL, check_pool

pytestmark = pytest.mark.gpu


def device_table():
    slug = current().gpu_slug
    directory = _dispatch.TABLES_DIR / slug
    if not (directory / _dispatch.TABLE_FILE).is_file():
        pytest.skip(f"no shipped table for this GPU ({slug})")
    return directory, _dispatch.load_table(directory / _dispatch.TABLE_FILE, slug)


def largest_entries(table, paged_only: bool = False) -> list[dict]:
    """Per problem of the table, its entry with the largest batch x context."""
    best: dict[str, dict] = {}
    for e in table["entries"]:
        size = e["bucket"]["batch"] * e["bucket"]["context"]
        key = e["problem_key"]
        if paged_only and not Problem.from_dict(e["problem"]).is_paged:
            continue
        if key not in best or size > best[key]["bucket"]["batch"] * best[key]["bucket"]["context"]:
            best[key] = e
    return sorted(best.values(), key=lambda e: (e["problem"]["family"], Problem.from_dict(e["problem"]).slug))


def module_of(directory, table, entry):
    return _dispatch.load_kernel(directory, entry["variant"], table["modules"][entry["variant"]])


def bucket_of(entry) -> tuple[int, int]:
    return entry["bucket"]["batch"], entry["bucket"]["context"]


def test_gpu_every_problem_at_its_largest_bucket():
    directory, table = device_table()
    skipped, failed = [], []
    for e in largest_entries(table):
        problem = Problem.from_dict(e["problem"])
        res = check_bucket(module_of(directory, table, e), problem, bucket_of(e), 0, "cuda")
        print(f"{problem.family} {problem.slug} b{bucket_of(e)}: {'ok' if res.ok else 'FAIL'} "
              f"{res.detail()} ({res.seconds:.1f} s)")
        if not res.ran:
            skipped.append(f"{problem.slug}: {res.skipped}")
        elif not res.ok:
            failed.append(f"{problem.slug}: {res.detail()}")
    assert not failed, failed
    if skipped:
        pytest.skip(f"not run for memory: {skipped}")


def test_gpu_a_zeroed_row_is_caught_at_the_largest_decode_bucket():
    directory, table = device_table()
    decode = [e for e in largest_entries(table) if Problem.from_dict(e["problem"]).is_decode]
    if not decode:
        pytest.skip("no decode entry in this GPU's table")
    e = max(decode, key=lambda e: bucket_of(e)[0] * bucket_of(e)[1])
    real = module_of(directory, table, e)

    class ZeroingLastRow:
        def launch(self, *args, **kwargs):
            out = real.launch(*args, **kwargs)
            out[-1] = torch.where(torch.isneginf(out[-1]), out[-1], torch.zeros_like(out[-1]))
            return out

    res = check_bucket(ZeroingLastRow(), Problem.from_dict(e["problem"]), bucket_of(e), 0, "cuda")
    if not res.ran:
        pytest.skip(res.skipped)
    assert not res.ok and res.sample.worst_row == res.sample.total_rows - 1, res.detail()


def test_gpu_pool_over_4_gib_decode_and_chunked_prefill():
    directory, table = device_table()
    entries = largest_entries(table, paged_only=True)
    if not entries:
        pytest.skip("no paged entry in this GPU's table")
    assert GPU_POOL["pool_bytes"] > 4 << 30 and GPU_POOL["offset"] >= 4 << 30
    failed, families = [], set()
    for e in entries:
        problem = Problem.from_dict(e["problem"])
        res = check_pool(module_of(directory, table, e), problem, 0, "cuda", GPU_POOL)
        print(f"{problem.family} {problem.slug} {e['variant']}: {'ok' if res.ok else 'FAIL'} {res.detail()}")
        if not res.ran:
            pytest.skip(res.skipped)
        assert "NOT past" not in res.text
        families.add(problem.family)
        if not res.ok:
            failed.append(f"{problem.slug}: {res.detail()}")
    assert not failed, failed
    assert families == {f for f in ("decode_paged", "prefill_paged") if any(
        x["problem"]["family"] == f for x in table["entries"])}


def test_gpu_pool_check_catches_32_bit_wrapped_offsets():
    directory, table = device_table()
    decode = [e for e in largest_entries(table, paged_only=True) if Problem.from_dict(e["problem"]).is_decode]
    if not decode:
        pytest.skip("no decode entry in this GPU's table")
    e, real = decode[0], None
    real = module_of(directory, table, e)

    class Wrapping:
        """Reads the pages a kernel computing byte offsets in 32 bits would: (id * stride) mod 2**32."""

        def launch(self, q, kv_cache, weights, lens, block_table, *rest, **kwargs):
            stride = kv_cache.stride(0) * kv_cache.element_size()
            wrapped = ((block_table.long() * stride) % (1 << 32)) // stride
            return real.launch(q, kv_cache, weights, lens, wrapped.to(torch.int32), *rest, **kwargs)

    res = check_pool(Wrapping(), Problem.from_dict(e["problem"]), 0, "cuda", GPU_POOL)
    if not res.ran:
        pytest.skip(res.skipped)
    assert not res.ok, res.detail()
