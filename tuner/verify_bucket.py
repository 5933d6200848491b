"""`verify`'s check of one shipped entry at its bucket's own shape (up to 256 requests x 1M tokens).

Fresh inputs of the bucket's shape (the family's verify_inputs: random lengths with 1, a
non-multiple of the page and the full width among them; causal windows for prefill), one launch
into an output filled with NaN, then tuner.verify_sample.check_sampled (a sample of rows against
the oracle over the whole width, the -inf mask of every row from the lengths) and, for the paged
families, the poisoned block table (a second launch must give the same bits). The CUDA-graph and
PDL gates stay at tuner.verify's capped shape: they compare every replay with the full reference.

Memory guard: the bytes the check will need are estimated from the shape before anything is
built; a shape that would not fit the device's free memory is skipped, and says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import torch

from indexer_logits._identity import Problem

from .families import family_of
from .gates import launch, new_output
from .inputs import DecodeInputs, PrefillPagedInputs, poison_block_table
from .verify_sample import MASK_BLOCK_ELEMENTS, RANDOM_ROWS, SampleCheck, check_sampled

GIB = 1 << 30
POOL_FACTOR = 1.5  # make_*_inputs' default: a pool half as large again as the table addresses
PAGE_GAP_BYTES = 64
GENERATION_BYTES = 2 * GIB  # the cache is quantised a 256 MB slab of fp32 at a time: a few slabs of temporaries


def bytes_text(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def shape_text(problem: Problem, shape: tuple[int, int]) -> str:
    if problem.is_decode:
        return f"B={shape[0]} N={problem.next_n} ctx={shape[1]}"
    return f"M={shape[0]} Nk={shape[1]}" if not problem.is_paged else f"M={shape[0]} ctx={shape[1]}"


def needed_bytes(problem: Problem, shape: tuple[int, int], random_rows: int = RANDOM_ROWS) -> int:
    """Device memory a check at `shape` needs, estimated before building anything: the inputs,
    two outputs (the poison gate's second launch), the sampled reference (its rows' output and
    one request's keys gathered in fp32) and the temporaries of building and masking."""
    batch, width = shape
    h, d = problem.heads, problem.head_dim
    q_elem = 1 if problem.q_dtype == "fp8" else 2
    sample = random_rows + 3
    if problem.is_paged:
        page = problem.page_size
        requests = batch if problem.is_decode else min(2, batch)
        rows = batch * problem.next_n if problem.is_decode else batch
        pages = -(-width // page)
        pool = int(requests * pages * POOL_FACTOR) * (page * problem.token_bytes + PAGE_GAP_BYTES)
        tables = requests * pages * 4 * 2  # the block table and its poisoned copy
        inputs = pool + tables + rows * h * (d * q_elem + 4) + rows * 8
        gathered = width * (problem.token_bytes + 4 * d + 8) * 2  # raw pages, fp32 values, scales
        sample_rows = sample * problem.next_n
    else:
        rows = batch
        inputs = width * (d * (1 if problem.cache_dtype == "fp8" else 2) + 4) + rows * h * (d * q_elem + 4) + rows * 8
        gathered = width * (4 * d + 4)  # K in fp32
        sample_rows = sample
    outputs = 2 * rows * width * 4
    reference = gathered + 2 * sample_rows * width * 4
    return inputs + outputs + reference + GENERATION_BYTES + MASK_BLOCK_ELEMENTS * 4


def free_bytes(device: str) -> Optional[int]:
    """What the device could still allocate (its free memory plus what torch holds unused), or
    None off a GPU."""
    if device != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info()
    return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()


@dataclass
class BucketCheck:
    shape: tuple[int, int]
    text: str  # the shape as words
    needed: int  # estimated bytes
    skipped: str = ""  # why it did not run ("" if it ran)
    sample: Optional[SampleCheck] = None
    poison: Optional[bool] = None  # None: not a paged family
    error: str = ""
    seconds: float = 0.0

    @property
    def ran(self) -> bool:
        return not self.skipped

    @property
    def ok(self) -> bool:
        """Passed, or skipped (which is reported, not failed)."""
        if self.skipped:
            return True
        return not self.error and self.sample is not None and self.sample.ok and self.poison is not False

    def detail(self) -> str:
        if self.skipped:
            return f"at {self.text}: skipped, {self.skipped}"
        if self.error:
            return f"at {self.text}: {self.error}"
        text = f"at {self.text}: {self.sample.detail()}"
        if self.poison is not None:
            text += "; poisoned table " + ("same bits" if self.poison else "CHANGED the output")
        return text

    def record(self) -> dict:
        out = {"shape": self.text, "ok": self.ok and self.ran, "seconds": round(self.seconds, 2)}
        if self.sample is not None:
            out.update(self.sample.record())
        if self.poison is not None:
            out["poisoned_table"] = "same bits" if self.poison else "changed"
        if self.error:
            out["error"] = self.error
        return out


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _release(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()


def check_bucket(module, problem: Problem, shape: tuple[int, int], seed: int, device: str,
                 random_rows: int = RANDOM_ROWS) -> BucketCheck:
    """One module at `shape` (requests or rows, width): see the module docstring."""
    result = BucketCheck(shape, shape_text(problem, shape), needed_bytes(problem, shape, random_rows))
    _release(device)
    free = free_bytes(device)
    if free is not None and result.needed > free:
        result.skipped = f"needs about {result.needed / GIB:.1f} GiB, {free / GIB:.1f} GiB free"
        return result
    start = time.perf_counter()
    inputs = out = None
    try:
        inputs = family_of(problem).verify_inputs(problem, shape, seed, device)
        out = launch(module, inputs, new_output(inputs), True)
        _sync(device)
        result.sample = check_sampled(out, inputs, random_rows, seed)
        if isinstance(inputs, (DecodeInputs, PrefillPagedInputs)):
            again = launch(module, poison_block_table(inputs), new_output(inputs), True)
            _sync(device)
            result.poison = bool(torch.equal(torch.nan_to_num(out, nan=1.0), torch.nan_to_num(again, nan=1.0)))
            del again
    except torch.cuda.OutOfMemoryError:
        result.skipped = (f"out of memory although about {result.needed / GIB:.1f} GiB was estimated to fit "
                          f"({(free or 0) / GIB:.1f} GiB free)")
    except Exception as exc:  # a module that does not run is a failure to report, not a crash
        result.error = f"error: {type(exc).__name__}: {exc}"[:300]
    finally:
        del inputs, out
        _release(device)
    result.seconds = time.perf_counter() - start
    return result
