"""Render, import and compile a batch of candidates in parallel, before the worker needs them.

The worker gates and times one candidate at a time; compiling is the slow part of a new
candidate and needs only CPU, so each asked batch is first built in a process pool over the
host's cores ('spawn': fresh interpreters that choose the interpreter or the compiler before
Triton is imported). On a GPU a build calls the jit kernel's `warmup` with the argument types
and integer values of the real launches (the gate inputs and the bucket's timing inputs, shaped
as meta tensors so nothing is allocated); that fills Triton's on-disk cache, and the worker's
first launch of the same specialisation loads the binary instead of compiling it. Under the
interpreter there is nothing to compile: a build renders and imports the module (catching a
template or syntax error early).

Only render and import failures are verdicts here ('compile_error'). A warmup that raises is
reported as a warning and the candidate still goes to the worker, whose first launch compiles
it for real and classifies any error: a wrong guess here must never reject a good kernel.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from indexer_logits._identity import Config, Problem

from .families import family_of
from .gates import launch, new_output
from .render import emit, load_module
from .interp import interpreter_env
from .worker import pool_init


@dataclass(frozen=True)
class LaunchShape:
    """One launch to warm: decode (requests, page-table width), prefill (rows, keys) or chunked
    prefill (rows, page-table width)."""

    batch: int
    context: int
    clean_logits: bool


@dataclass(frozen=True)
class BuildResult:
    config: Config
    status: str  # "ok" | "compile_error"
    detail: str = ""  # the error, or a warmup warning when status is "ok"
    seconds: float = 0.0


class Prebuilder:
    """A persistent pool of build processes (started on first use)."""

    def __init__(self, interpret: bool, src_dir: Path, jobs: int | None = None, timeout_s: float = 600.0):
        self.interpret = interpret
        self.src_dir = Path(src_dir)
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.timeout_s = timeout_s
        self._pool: cf.ProcessPoolExecutor | None = None
        self._ahead: dict[tuple, cf.Future] = {}  # (problem key, config key, shapes) -> a build `prefetch` started

    def _submit(self, problem: Problem, config: Config, shapes: tuple) -> cf.Future:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=pool_init, initargs=(self.interpret,))
        with interpreter_env(self.interpret):  # the pool spawns its processes as work is submitted
            return self._pool.submit(build_one, problem.to_json(), config.to_json(), str(self.src_dir), self.interpret,
                                     shapes)

    def prefetch(self, problem: Problem, configs: Sequence[Config], shapes: Sequence[LaunchShape]) -> None:
        """Start building configs a later `build` will ask for (the next buckets' seeds), without
        waiting: compiling overlaps the worker's gates and timings."""
        shapes = tuple((s.batch, s.context, s.clean_logits) for s in shapes)
        for c in configs:
            key = (problem.key, c.key, shapes)
            if key not in self._ahead:
                self._ahead[key] = self._submit(problem, c, shapes)

    def build(self, problem: Problem, configs: Sequence[Config], shapes: Sequence[LaunchShape]) -> list[BuildResult]:
        """Build each config (or wait for its prefetched build); results in input order. A build
        that does not finish within the timeout is left to the worker (status ok, with a warning)."""
        if not configs:
            return []
        shapes = tuple((s.batch, s.context, s.clean_logits) for s in shapes)
        futures = [self._ahead.pop((problem.key, c.key, shapes), None) or self._submit(problem, c, shapes)
                   for c in configs]
        results = []
        deadline = time.monotonic() + self.timeout_s
        for config, future in zip(configs, futures):
            try:
                status, detail, seconds = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                status, detail, seconds = "ok", f"prebuild did not finish within {self.timeout_s:g} s", 0.0
            except Exception as exc:  # noqa: BLE001 - a dead pool process: the worker will try
                status, detail, seconds = "ok", f"prebuild process failed: {exc!r}", 0.0
                self._restart()
            results.append(BuildResult(config, status, detail, seconds))
        return results

    def _restart(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        self._ahead.clear()

    def close(self) -> None:
        if self._pool is None:
            return
        # A build stuck in the compiler must not keep the tuner from exiting.
        procs = list(getattr(self._pool, "_processes", {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        self._pool = None


def build_one(problem_json: str, config_json: str, src_dir: str, interpret: bool,
              shapes: Sequence[tuple[int, int, bool]]) -> tuple[str, str, float]:
    """(status, detail, seconds) for one candidate; runs in a pool process."""
    start = time.perf_counter()
    problem, config = Problem.from_json(problem_json), Config.from_json(config_json)
    try:
        module = load_module(emit(problem, config, Path(src_dir)))
    except Exception:  # noqa: BLE001 - a template or syntax error is this candidate's verdict
        return "compile_error", traceback.format_exc()[-4000:], time.perf_counter() - start
    if interpret:
        return "ok", "", time.perf_counter() - start
    try:
        for batch, context, clean in shapes:
            warm(module, problem, batch, context, clean)
    except Exception:  # noqa: BLE001 - see the module docstring: the worker decides
        return "ok", "warmup failed: " + traceback.format_exc()[-2000:], time.perf_counter() - start
    return "ok", "", time.perf_counter() - start


def warm(module, problem: Problem, batch: int, context: int, clean_logits: bool) -> None:
    """Run the module's launcher on meta tensors of the real shapes, with the jit kernel swapped
    for its `warmup` (compile, do not launch), so the specialisation matches the real launch."""
    name = problem.kind.kernel
    kernel = getattr(module, name)
    setattr(module, name, _Warmup(kernel))
    try:
        inputs = mock_inputs(problem, batch, context)
        launch(module, inputs, new_output(inputs), clean_logits)
    finally:
        setattr(module, name, kernel)


class _Warmup:
    """Stands in for `kernel` in `kernel[grid](*args, **kw)` and compiles instead of launching."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        import torch

        def compile_only(*args, **kwargs):
            # MockTensor (what a dtype becomes) claims a 16-byte-aligned pointer, as torch's
            # allocations are; integers keep their values, which is what specialisation reads.
            args = [a.dtype if isinstance(a, torch.Tensor) else a for a in args]
            return self.kernel.warmup(*args, grid=grid, **kwargs)

        return compile_only


def mock_inputs(problem: Problem, batch: int, context: int):
    """Meta tensors with the shapes and strides `tuner.measure.timing_inputs` produces."""
    return family_of(problem).mock_inputs(problem, batch, context)
