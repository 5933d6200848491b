"""Cross-compilation without a GPU: build a variant for a target GPU generation and record what
it uses (registers, spills, stack, shared memory, which tensor-core instruction).

`triton.compile` with an explicit `GPUTarget` runs the whole pipeline (TTIR -> PTX -> cubin) on
the CPU; we then run the target's `ptxas -v` on the PTX ourselves to read the register and spill
counts. Points outside the static space (`tuner.space.check`) are infeasible before anything
compiles; points whose real shared memory exceeds the target, that spill more than a threshold,
or whose compile runs out of resources are infeasible after; anything else that raises is an
error, recorded with its message (a failed candidate is data).

Compilation happens in spawned worker processes with `TRITON_INTERPRET` removed from their
environment (a test process may run under the interpreter) and a fresh `TRITON_CACHE_DIR` each,
so no cached kernel hides a compile. Nothing here touches a GPU.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import inspect
import multiprocessing
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from indexer_logits._identity import Config, Problem, variant_name

from . import __version__
from .render import emit, load_module, template_hash
from .signature import build_signature
from .interp import interpreter_env
from .space import TARGETS, InfeasibleConfig, Target, check

STATUSES = ("ok", "infeasible", "error")
# Spill bytes (stores + loads) above which a point counts as infeasible: a kernel that spills
# more than this in its inner loop is not worth timing.
MAX_SPILL_BYTES = 256
# Compile-time failures that mean "does not fit this target", not "the tool is broken".
_OUT_OF_RESOURCES = re.compile(
    r"out of resource|too much shared|uses too much|exceeds .*(shared|register|limit)|insufficient|"
    r"too many resources|register count",
    re.IGNORECASE,
)
_UNSUPPORTED = re.compile(r"not supported in this architecture|is not supported on|unsupported .*(arch|target)",
                          re.IGNORECASE)


@dataclass(frozen=True)
class CompileResult:
    """One variant built for one target. Resource fields are None when nothing was compiled.

    reason: a short tag ('shared_memory', 'spills', 'registers', ...; for errors the exception
      class); detail: the human-readable message. mma: the tensor-core instruction family in the
      PTX ('tcgen05', 'wgmma', 'mma.sync' or 'none'); mma_detail: its first full opcode.
    """

    variant: str
    target: str
    status: str
    reason: str = ""
    detail: str = ""
    registers: int | None = None
    spills: int | None = None  # bytes, spill stores + spill loads
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    compile_seconds: float = 0.0
    mma: str = ""
    mma_detail: str = ""
    problem: Problem | None = None
    config: Config | None = None
    triton: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status: expected one of {list(STATUSES)}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["problem"] = self.problem.to_dict() if self.problem else None
        data["config"] = self.config.to_dict() if self.config else None
        return data


# --------------------------------------------------------------------------------------------
# One compile (runs in a worker process).

def _ptxas_report(ptx: str, capability: int) -> dict[str, int]:
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    arch = sm_arch_from_capability(capability)
    # Triton 3.6+ takes the capability (a per-arch ptxas); 3.5 and older take nothing.
    ptxas = (get_ptxas(capability) if inspect.signature(get_ptxas).parameters else get_ptxas()).path
    with tempfile.TemporaryDirectory(prefix="xcompile_ptxas_") as d:
        src = Path(d) / "kernel.ptx"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, "-v", f"--gpu-name={arch}", str(src), "-o", str(Path(d) / "kernel.cubin")],
                              capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas --gpu-name={arch} failed ({proc.returncode}):\n{log[-2000:]}")
    return parse_ptxas_log(log)


def parse_ptxas_log(log: str) -> dict[str, int]:
    """registers, spill_stores, spill_loads, stack_bytes from a `ptxas -v` log (last entry wins)."""
    out = {"registers": 0, "spill_stores": 0, "spill_loads": 0, "stack_bytes": 0}
    if m := re.findall(r"Used (\d+) registers", log):
        out["registers"] = int(m[-1])
    if m := re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log):
        stack, stores, loads = m[-1]
        out.update(stack_bytes=int(stack), spill_stores=int(stores), spill_loads=int(loads))
    if not re.search(r"Used \d+ registers", log):
        raise RuntimeError(f"could not read a register count from the ptxas log:\n{log[-2000:]}")
    return out


def mma_flavour(ptx: str) -> tuple[str, str]:
    """('tcgen05' | 'wgmma' | 'mma.sync' | 'none', first full opcode) of the PTX's tensor-core ops."""
    for flavour, pattern in (("tcgen05", r"tcgen05\.mma[\w.:]*"), ("wgmma", r"wgmma\.mma_async[\w.:]*"),
                             ("mma.sync", r"\bmma\.sync[\w.:]*")):
        if m := re.search(pattern, ptx):
            return flavour, m.group(0)
    return "none", ""


def _classify(exc: BaseException) -> tuple[str, str, str]:
    """(status, reason, detail) for an exception raised while compiling."""
    try:
        from triton.runtime.errors import OutOfResources
    except ImportError:  # pragma: no cover
        OutOfResources = ()
    chain, seen, cur = [], set(), exc
    while cur is not None and id(cur) not in seen:  # Triton wraps the real error (CompilationError)
        seen.add(id(cur))
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    root = chain[-1]
    text = "\n".join(str(e) for e in chain)
    detail = f"{type(root).__name__}: {str(root).strip()}"[:2000]
    if root is not exc:
        detail += f"\n(raised as {type(exc).__name__}: ...{str(exc).strip()[-1500:]})"
    if isinstance(exc, OutOfResources) or _OUT_OF_RESOURCES.search(text):
        return "infeasible", "out_of_resources", detail
    if _UNSUPPORTED.search(text):
        return "infeasible", "unsupported_on_target", detail
    return "error", type(exc).__name__, detail


def _scratch_dir() -> Path:
    """This process's scratch folder (rendered modules); created on first use."""
    global _SCRATCH
    if _SCRATCH is None:
        import atexit

        _SCRATCH = Path(tempfile.mkdtemp(prefix="xcompile_src_"))
        atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
    return _SCRATCH


_SCRATCH: Path | None = None


def compile_kernel(problem: Problem, config: Config, target: Target, template_dir: Path | None = None):
    """Triton's compiled kernel of one variant for `target` (its .asm: ttir, ttgir, ptx, cubin).
    This process must have TRITON_INTERPRET unset; compile_variant says whether the kernel fits."""
    # a candidate's modules go to their own folder: load_module caches by path
    out_dir = _scratch_dir() / ("alt_" + template_hash(problem.family, template_dir)[:12] if template_dir else "")
    module = load_module(emit(problem, config, out_dir, template_dir))
    return compile_fn(getattr(module, problem.kind.kernel), problem, config, target)


def compile_fn(fn, problem: Problem, config: Config, target: Target, constexprs: dict | None = None,
               extra_args: dict | None = None):
    """Triton's compiled kernel of a module's jit function for `target`, specialised as
    tuner.signature.build_signature launches it (`constexprs`, `extra_args`: as it takes them)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, consts, attrs = build_signature(fn, problem, constexprs, config, extra_args)
    src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", target.capability, target.warp_size),
                          options={"num_warps": config.num_warps, "num_stages": config.num_stages})


def compile_variant(problem: Problem, config: Config, target: Target,
                    max_spill_bytes: int = MAX_SPILL_BYTES, template_dir: Path | None = None) -> CompileResult:
    """Build one variant for `target` and say whether it fits. Compiles in this process: call it
    from a worker (see `compile_many`) unless this process has TRITON_INTERPRET unset.
    template_dir: render from another set of templates (a candidate: `python -m bench.template_ab --xcompile`)."""
    variant = variant_name(problem, config)
    base = dict(variant=variant, target=target.name, problem=problem, config=config)
    try:
        check(problem, config, target)
    except InfeasibleConfig as exc:
        return CompileResult(status="infeasible", reason=exc.reason, detail=exc.detail, **base)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return CompileResult(status="error", reason="interpreter", **base,
                             detail="TRITON_INTERPRET is set in the compiling process; use compile_many")
    start = time.perf_counter()
    try:
        import triton

        base["triton"] = triton.__version__
        compiled = compile_kernel(problem, config, target, template_dir)
        ptx = compiled.asm["ptx"]
        shared = int(compiled.metadata.shared)
        report = _ptxas_report(ptx, target.capability)
    except Exception as exc:  # a failed candidate is data
        status, reason, detail = _classify(exc)
        return CompileResult(status=status, reason=reason, detail=detail,
                             compile_seconds=round(time.perf_counter() - start, 3), **base)
    flavour, opcode = mma_flavour(ptx)
    spills = report["spill_stores"] + report["spill_loads"]
    status, reason, detail = "ok", "", ""
    if shared > target.max_shared_bytes:
        status, reason, detail = "infeasible", "shared_memory", f"{shared} bytes > {target.max_shared_bytes} on {target.name}"
    elif spills > max_spill_bytes:
        status, reason = "infeasible", "spills"
        detail = (f"{report['spill_stores']} bytes spill stores + {report['spill_loads']} bytes spill loads "
                  f"> {max_spill_bytes} at {report['registers']} registers")
    return CompileResult(
        status=status, reason=reason, detail=detail, registers=report["registers"], spills=spills,
        stack_bytes=report["stack_bytes"], shared_bytes=shared,
        compile_seconds=round(time.perf_counter() - start, 3), mma=flavour, mma_detail=opcode, **base,
    )


# --------------------------------------------------------------------------------------------
# Many compiles in parallel.

def _worker_init(scratch_root: str) -> None:
    """Runs first in each spawned worker, before Triton is imported there."""
    global _SCRATCH
    os.environ.pop("TRITON_INTERPRET", None)
    root = Path(tempfile.mkdtemp(prefix="worker_", dir=scratch_root))
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton_cache")
    _SCRATCH = root / "src"
    _SCRATCH.mkdir()


def compile_many(points: Iterable[tuple[Problem, Config, Target]], jobs: int | None = None,
                 on_result: Callable[[CompileResult], None] | None = None,
                 max_spill_bytes: int = MAX_SPILL_BYTES) -> list[CompileResult]:
    """Compile every (problem, config, target) in spawned workers; results in input order.

    Statically infeasible points are settled here without a worker. `on_result` is called in
    this process as each result arrives (for progress lines and incremental output).
    """
    points = list(points)
    jobs = max(1, jobs or os.cpu_count() or 1)
    results: list[CompileResult | None] = [None] * len(points)

    def done(i: int, result: CompileResult) -> None:
        results[i] = result
        if on_result is not None:
            on_result(result)

    pending = []
    for i, (problem, config, target) in enumerate(points):
        try:
            check(problem, config, target)
            pending.append(i)
        except InfeasibleConfig as exc:
            done(i, CompileResult(variant=variant_name(problem, config), target=target.name, status="infeasible",
                                  reason=exc.reason, detail=exc.detail, problem=problem, config=config))
    if not pending:
        return results  # type: ignore[return-value]

    scratch_root = tempfile.mkdtemp(prefix="xcompile_")
    try:
        ctx = multiprocessing.get_context("spawn")
        # compiled, not interpreted: the pool's processes start with TRITON_INTERPRET unset
        with interpreter_env(False), cf.ProcessPoolExecutor(max_workers=min(jobs, len(pending)), mp_context=ctx,
                                                            initializer=_worker_init, initargs=(scratch_root,)) as pool:
            futures = {pool.submit(compile_variant, *points[i], max_spill_bytes): i for i in pending}
            for future in cf.as_completed(futures):
                i = futures[future]
                problem, config, target = points[i]
                try:
                    result = future.result()
                except Exception as exc:  # the worker died (e.g. a compiler crash)
                    result = CompileResult(variant=variant_name(problem, config), target=target.name,
                                           status="error", reason=type(exc).__name__,
                                           detail=f"worker failed: {exc}"[:4000], problem=problem, config=config)
                done(i, result)
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    return results  # type: ignore[return-value]


def reproducer(result: CompileResult) -> str:
    """A shell command that compiles this one variant again in the foreground."""
    code = ("from indexer_logits._identity import Problem, Config; from tuner.space import target_for; "
            "from tuner.xcompile import compile_variant; "
            f"print(compile_variant(Problem.from_json({result.problem.to_json()!r}), "
            f"Config.from_json({result.config.to_json()!r}), target_for({result.target!r})))")
    return f"env -u TRITON_INTERPRET python -c {shlex.quote(code)}"


def summarize(results: Sequence[CompileResult]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for r in results:
        counts[r.status] += 1
    return counts


def local_target() -> Target:
    """The target of this machine's GPU (queried now, never at import); ValueError without one."""
    import torch

    if not torch.cuda.is_available():
        raise ValueError("'local' needs a CUDA GPU and there is none here; name a target instead "
                         f"(one of {sorted(TARGETS)})")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    capability = props.major * 10 + props.minor
    known = TARGETS.get(f"sm_{capability}")
    if known is not None:
        return known
    optin = getattr(props, "shared_memory_per_block_optin", 0) or 0
    if not optin:
        raise ValueError(f"'local' is sm_{capability}, which the tool has no limits for; expected one of {sorted(TARGETS)}")
    return Target(f"sm_{capability}", capability, int(optin))


def result_row(result: CompileResult) -> dict[str, Any]:
    """One JSON-lines row: the result plus what could change it (tool and template versions)."""
    row = result.to_dict()
    row["tool"] = __version__
    row["template_hash"] = template_hash(result.problem.family) if result.problem else ""
    return row


def _kb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f}"


def _num(n: int | None) -> str:
    return "-" if n is None else str(n)


def progress_line(result: CompileResult, index: int, total: int) -> str:
    if result.status == "ok":
        what = (f"regs={result.registers} spills={result.spills} smem={_kb(result.shared_bytes)}KB "
                f"{result.mma} {result.compile_seconds:.1f}s")
    else:
        what = f"{result.reason}: {result.detail.splitlines()[0] if result.detail else ''}"[:160]
    return f"[{index}/{total}] {result.target} {result.status:<10} {result.variant}  {what}"


def format_table(results: Sequence[CompileResult]) -> str:
    """A fixed-width table, one row per variant, in the given order."""
    header = ("variant", "status", "regs", "spills", "smem KB", "mma", "reason")
    rows = [(r.variant, r.status, _num(r.registers), _num(r.spills), _kb(r.shared_bytes), r.mma or "-",
             r.reason or "") for r in results]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    right = {2, 3, 4}

    def line(row) -> str:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def summary_line(results: Sequence[CompileResult]) -> str:
    c = summarize(results)
    return f"{c['ok']} ok / {c['infeasible']} infeasible / {c['error']} error"
