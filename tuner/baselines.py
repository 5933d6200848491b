"""DeepGEMM as a bench baseline, wherever `import deep_gemm` works.

`deepgemm()` says once per process whether DeepGEMM can be taken: the module and its version, or
why not (no CUDA device, not installed, its import crashed or failed, a build without the indexer
kernels). The import is first tried in a child process: under some torch builds
`deep_gemm._C.init` segfaults (preloading the system libstdc++ avoids it), and a crash there must
cost the bench its DeepGEMM column, not the run. `INDEXER_BENCH_DEEPGEMM=0` leaves it out.

`unsupported(problem, device)` says why a bucket has no DeepGEMM figure (a family or layout
DeepGEMM does not serve); `launches(dg, problem, sets)` gives one DeepGEMM call per input set in
the bench's own harness:
- decode: `fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
  max_context_len, clean_logits=False)` with `schedule_meta` from
  `get_paged_mqa_logits_metadata(context_lens, page, get_num_sms())` computed once per input set,
  outside the timing (an engine computes it once a step and shares it across its layers); the
  call allocates its output (DeepGEMM takes no out=), which a CUDA graph does at capture;
- ragged prefill: `fp8_mqa_logits(q, (k_fp8, k_scale), weights, ks, ke, clean_logits=False)`.
`check(...)` compares DeepGEMM's logits with ours on the valid region (calc_diff, as DeepGEMM's
own tests do) before anything is timed: a row with a wrong baseline is worse than none.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from indexer_logits._identity import Problem

ENV_DEEPGEMM = "INDEXER_BENCH_DEEPGEMM"  # "0": leave DeepGEMM out even where it imports
MAX_DIFF = 1e-3  # DeepGEMM's own tests' bound on calc_diff
PRELOAD_HINT = ("under this torch, preloading the system libstdc++ "
                "(LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6) avoids the crash in deep_gemm._C.init")
NEEDED = ("fp8_paged_mqa_logits", "fp8_mqa_logits", "get_paged_mqa_logits_metadata", "get_num_sms")


@dataclass(frozen=True)
class DeepGEMM:
    """The imported module and its version, or (module None) the reason it is absent."""

    module: Any = None
    version: Optional[str] = None
    reason: Optional[str] = None

    def __bool__(self) -> bool:
        return self.module is not None


_FOUND: dict[str, DeepGEMM] = {}


def deepgemm(device: str = "cuda", probe: bool = True) -> DeepGEMM:
    """DeepGEMM for this process (cached per device kind), or the reason it cannot run."""
    key = "cuda" if str(device).startswith("cuda") else str(device)
    if key not in _FOUND:
        _FOUND[key] = _find(key, probe)
    return _FOUND[key]


def _find(device: str, probe: bool) -> DeepGEMM:
    if os.environ.get(ENV_DEEPGEMM, "").strip() == "0":
        return DeepGEMM(reason=f"{ENV_DEEPGEMM}=0")
    if device != "cuda":
        return DeepGEMM(reason=f"the bench runs on {device} (DeepGEMM needs a CUDA device)")
    if not torch.cuda.is_available():
        return DeepGEMM(reason="no CUDA device")
    if importlib.util.find_spec("deep_gemm") is None:
        return DeepGEMM(reason="deep_gemm is not installed (no module on sys.path)")
    if probe and "deep_gemm" not in sys.modules:
        why = probe_import()
        if why:
            return DeepGEMM(reason=why)
    try:
        dg = importlib.import_module("deep_gemm")
    except Exception as exc:  # a build for another torch or CUDA, a missing library: absent, with why
        return DeepGEMM(reason=f"import deep_gemm failed: {type(exc).__name__}: {first_line(exc)}")
    missing = [n for n in NEEDED if not hasattr(dg, n)]
    if missing:
        return DeepGEMM(reason=f"deep_gemm {getattr(dg, '__version__', '?')} lacks {', '.join(missing)} "
                               "(built without its fp8 kernels, e.g. for CUDA < 12.1)")
    return DeepGEMM(dg, version_of(dg))


def probe_import(timeout_s: float = 600.0) -> Optional[str]:
    """None if `import deep_gemm` succeeds in a child process with this environment, else why."""
    try:
        proc = subprocess.run([sys.executable, "-c", "import deep_gemm"], capture_output=True, text=True,
                              timeout=timeout_s, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return f"import deep_gemm did not finish in {timeout_s:.0f} s in a probe process"
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = str(-proc.returncode)
        hint = f"; {PRELOAD_HINT}" if "libstdc++" not in os.environ.get("LD_PRELOAD", "") else ""
        return f"import deep_gemm died of {name} in a probe process{hint}"
    if proc.returncode:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return f"import deep_gemm failed: {lines[-1] if lines else f'exit status {proc.returncode}'}"
    return None


def version_of(dg) -> str:
    """`<__version__>+<commit>`: the commit from the VERSION file the tree's assembly writes beside
    the package (`deep_gemm <sha>`), else from git, else `<__version__> (commit unknown)`."""
    base = str(getattr(dg, "__version__", "?"))
    root = Path(getattr(dg, "__file__", "") or ".").resolve().parent.parent
    sha = None
    version_file = root / "VERSION"
    if version_file.is_file():
        m = re.search(r"^deep_gemm\s+([0-9a-f]{7,40})", version_file.read_text(), re.MULTILINE)
        sha = m.group(1) if m else None
    if sha is None and (root / ".git").exists():
        try:
            sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                 timeout=10).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            sha = None
    return f"{base}+{sha[:7]}" if sha else f"{base} (commit unknown)"


def unsupported(problem: Problem, device: Optional[str] = None) -> Optional[str]:
    """Why DeepGEMM has no kernel for this problem (or this device), or None."""
    if problem.is_paged and not problem.is_decode:
        return "DeepGEMM has no chunked prefill over the paged cache"
    if problem.cache_dtype != "fp8" or problem.q_dtype != "fp8":
        return "DeepGEMM's indexer kernels are fp8 only"
    if problem.is_decode:
        if problem.scale_layout != "page_blocked":
            return f"DeepGEMM's paged cache is page-blocked, not {problem.scale_layout}"
        if problem.page_size != 64:
            return f"DeepGEMM's paged kernel takes 64-token pages, not {problem.page_size}"
        if problem.next_n not in (1, 2):
            return f"DeepGEMM's paged kernel takes next_n 1 or 2, not {problem.next_n}"
    if device is not None and str(device).startswith("cuda") and torch.cuda.is_available():
        major = torch.cuda.get_device_capability(torch.device(device))[0]
        if major not in (9, 10):
            return f"DeepGEMM's indexer kernels run on sm_90 and sm_100, not sm_{major}x"
    return None


def launches(dg, problem: Problem, sets: Sequence) -> list[Callable[[], torch.Tensor]]:
    """One DeepGEMM call per input set (bench inputs: DecodeInputs or PrefillInputs)."""
    fns = []
    if problem.is_decode:
        num_sms = dg.get_num_sms()
        for x in sets:
            meta = dg.get_paged_mqa_logits_metadata(x.context_lens, x.kv_cache.shape[1], num_sms)
            fns.append(lambda x=x, meta=meta: dg.fp8_paged_mqa_logits(
                x.q, x.kv_cache, x.weights, x.context_lens, x.block_table, meta, x.max_context_len, False))
    else:
        for x in sets:
            fns.append(lambda x=x: dg.fp8_mqa_logits(x.q, (x.kv[0], x.kv[1]), x.weights, x.cu_seqlen_ks,
                                                     x.cu_seqlen_ke, clean_logits=False))
    return fns


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """1 - 2<x, y> / (|x|^2 + |y|^2) in double (DeepGEMM's tests' measure); 0 for two zeros."""
    x, y = x.double(), y.double()
    den = float((x * x + y * y).sum())
    return 0.0 if den == 0 else 1.0 - 2.0 * float((x * y).sum()) / den


def check(theirs: torch.Tensor, ours: torch.Tensor, valid: torch.Tensor) -> float:
    """calc_diff of DeepGEMM's logits against ours inside the valid region (zeros elsewhere).
    Raises ValueError on a shape mismatch or a non-finite value inside the region."""
    if tuple(theirs.shape) != tuple(ours.shape):
        raise ValueError(f"DeepGEMM's logits are {list(theirs.shape)}, ours {list(ours.shape)}")
    valid = valid.to(ours.device)
    a, b = theirs.float().masked_fill(~valid, 0), ours.float().masked_fill(~valid, 0)
    if not bool(torch.isfinite(a).all()):
        raise ValueError("DeepGEMM's logits are not finite inside the valid region")
    return calc_diff(a, b)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""
