"""What the worker process computes (see tuner.worker): calibration, inputs, gates, timings.

Runs only inside the worker. Each request handler takes and returns plain dicts (they cross a
Pipe). Inputs are built once and kept: the gate inputs of the current problem and the timing
inputs of the current bucket (on a GPU these are gigabytes, so only one bucket is held).
A handler failure is classified into a trial status by `classify`.
"""

from __future__ import annotations

import gc
from pathlib import Path

import torch

from indexer_logits._identity import Bucket, Config, Problem

from .families import family_of, run_all_gates
from .gates import GateFailure, reference_gate
from .measure import time_candidate, timing_inputs
from .render import emit, load_module
from .roofline import floor_ms
from .timing import measure_copy_bandwidth, measure_matmul_rate

# A short timing (`fidelity` "short"): enough to tell a clear loser from the bucket's best, at a
# fraction of the full timing's GPU time on large buckets: one warm-up replay, ~60 ms and at
# least 3 replays, against 3 warm-up replays, ~400 ms and at least 5. The same 8 launches a
# replay and 20 ms of warm-up as the full timing: a graph of one launch per input set (4) carried
# twice the graph's own cost per launch, and at 3-5 us kernels with 2 ms of warm-up the H200's
# short timings read 1.25-1.4x the full ones (its blind run cut the shipped small-bucket configs).
SHORT = {"replays": 10, "budget_ms": 60.0, "warmup_replays": 1, "min_replays": 3}

# GateFailure reasons whose store status has another name.
GATE_STATUS = {"grid_depends_on_values": "graph_unsafe"}
_CONTEXT_LOST = ("illegal memory access", "unspecified launch failure", "misaligned address",
                 "illegal instruction", "CUDA error", "device-side assert", "an illegal")


class TaskFailure(Exception):
    """A request failed with a known trial status (e.g. inputs not prepared)."""

    def __init__(self, status: str, detail: str, fatal: bool = False):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.fatal = status, detail, fatal


def context_lost(exc: BaseException) -> bool:
    """Whether the CUDA context is unusable after `exc` (every later call would fail too)."""
    if type(exc).__name__ == "AcceleratorError":
        return True
    text = str(exc)
    return any(marker in text for marker in _CONTEXT_LOST)


def classify(exc: BaseException, stage: str) -> tuple[str, bool]:
    """(trial status, worker must exit) for an exception raised while handling a request."""
    lost = context_lost(exc)
    if isinstance(exc, GateFailure):
        return GATE_STATUS.get(exc.reason, exc.reason), lost
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import InterpreterError, OutOfResources, PTXASError

    if isinstance(exc, (CompilationError, OutOfResources, PTXASError, InterpreterError)):
        return "compile_error", lost
    if stage == "graph" and torch.cuda.is_available():
        return "graph_unsafe", lost  # capture refused the launch (a sync or an allocation inside)
    if lost:
        return "crash", True
    return "error", False


class Tasks:
    """The worker's state and request handlers; `stage` names what the last request was doing."""

    REQUESTS = ("calibrate", "gate_inputs", "bucket_inputs", "gate", "time")

    def __init__(self, device: str):
        self.device = device
        self.stage = ""
        self._gate = None  # (problem key, inputs)
        self._bucket = None  # (problem key, bucket key, {"full": sets, "partial": sets})

    def handle(self, kind: str, payload: dict) -> dict:
        """Run request `kind`; only the listed requests are reachable through the protocol."""
        if kind not in self.REQUESTS:
            raise TaskFailure("error", f"unknown request {kind!r}; expected one of {list(self.REQUESTS)}")
        self.stage = kind
        return getattr(self, kind)(payload)

    # -- preparation ------------------------------------------------------------------------

    def calibrate(self, p: dict) -> dict:
        """Copy bandwidth (bytes/s) and matmul rate (flop/s) of this GPU, for the floors."""
        self.stage = "calibrate"
        if self.device != "cuda":
            return {"copy_bw": None, "matmul_rate": None}
        copy_bw = measure_copy_bandwidth()
        rate = measure_matmul_rate(p.get("dtype", "fp8"))
        torch.cuda.empty_cache()
        return {"copy_bw": copy_bw, "matmul_rate": rate}

    def gate_inputs(self, p: dict) -> dict:
        """Random inputs the gates use for every config of one problem."""
        self.stage = "gate_inputs"
        problem = Problem.from_json(p["problem"])
        self._gate = None
        x = family_of(problem).gate_inputs(problem, p["batch"], p["context"], p["seed"], self.device)
        self._gate = (problem.key, x)
        return {}

    def bucket_inputs(self, p: dict) -> dict:
        """Timing inputs of one bucket: full lengths and, for decode, the same tables partly filled."""
        self.stage = "bucket_inputs"
        problem, bucket = Problem.from_json(p["problem"]), Bucket.from_json(p["bucket"])
        self._bucket = None
        gc.collect()
        if self.device == "cuda":
            torch.cuda.empty_cache()
            sets = timing_inputs(problem, bucket, "full", device="cuda", seed=p["seed"])
        else:  # the interpreter: no cache to defeat, keep the pool small
            sets = timing_inputs(problem, bucket, "full", device="cpu", seed=p["seed"], sets=2, min_pool_bytes=0)
        modes = {"full": sets}
        partial = family_of(problem).partial_timing_inputs(problem, bucket, sets, p["seed"])
        if partial is not None:
            modes["partial"] = partial
        self._bucket = (problem.key, bucket.key, modes)
        return {}

    # -- candidates -------------------------------------------------------------------------

    def _set_stage(self, stage: str) -> None:
        self.stage = stage

    def _module(self, p: dict):
        problem, config = Problem.from_json(p["problem"]), Config.from_json(p["config"])
        self.stage = "load"
        return problem, load_module(emit(problem, config, Path(p["src_dir"])))

    def gate(self, p: dict) -> dict:
        """Every gate (SPEC.md): reference (clean and not), poisoned table, graph replay (the
        paged families; chunked prefill replays other row limits)."""
        problem, module = self._module(p)
        if self._gate is None or self._gate[0] != problem.key:
            raise TaskFailure("error", "gate inputs were not prepared for this problem")
        inputs = self._gate[1]
        err = run_all_gates(module, problem, inputs, True, p["seed"], on_stage=self._set_stage)
        self.stage = "reference_unclean"  # the path that is timed (engines pass clean_logits=False)
        reference_gate(module, inputs, clean_logits=False)
        self.stage = ""
        return {"rel_err": err, **_resources(module, problem)}

    def time(self, p: dict) -> dict:
        """Time one candidate on the prepared bucket; per lengths mode: Timing fields + floor."""
        problem, module = self._module(p)
        bucket = Bucket.from_json(p["bucket"])
        if self._bucket is None or self._bucket[:2] != (problem.key, bucket.key):
            raise TaskFailure("error", f"timing inputs were not prepared for bucket {bucket.slug}")
        method = "cuda_graph" if self.device == "cuda" else "wall_clock"
        out = {}
        for mode, sets in self._bucket[2].items():
            self.stage = f"time_{mode}"
            if p.get("fidelity") == "short":
                t = time_candidate(module, sets, clean_logits=False, method=method, **SHORT)
            else:
                t = time_candidate(module, sets, clean_logits=False, method=method, replays=p["replays"])
            floor = None
            if p.get("copy_bw") or p.get("matmul_rate"):
                try:
                    floor = floor_ms(sets[0], False, copy_bw=p.get("copy_bw"), matmul_rate=p.get("matmul_rate"))
                except ValueError:
                    floor = None  # the rate this family needs was not measured
            out[mode] = {**t.to_dict(), "floor_ms": floor}
        self.stage = ""
        return out


def _resources(module, problem: Problem) -> dict:
    """Registers, spills and shared memory of the compiled kernel (None under the interpreter)."""
    found = {"registers": None, "spills": None, "shared_bytes": None}
    try:
        fn = getattr(module, problem.kind.kernel)
        for caches in getattr(fn, "device_caches", {}).values():
            for kernel in caches[0].values():
                kernel = kernel.result() if hasattr(kernel, "result") else kernel
                kernel._init_handles()
                found["registers"] = max(found["registers"] or 0, int(kernel.n_regs))
                found["spills"] = max(found["spills"] or 0, int(kernel.n_spills))
                found["shared_bytes"] = max(found["shared_bytes"] or 0, int(kernel.metadata.shared))
    except Exception:  # noqa: BLE001 - resources are informative only
        pass
    return found
