"""`verify`: re-check every shipped dispatch entry and family default against the reference.

Each module's sha256 is checked against its table, then the module runs tuner.families.run_all_gates
(reference values, the -inf mask, CUDA-graph replay with other lengths, a poisoned block table)
on fresh random inputs of its bucket's shape capped at 64 x 32K (the full reference of every
replay must fit); a decode module on an sm_90+ GPU also runs tuner.pdl_gate (its programmatic
dependent launch, after a kernel that writes q, must equal its plain launch). Then an entry is
checked at its bucket's own shape, uncapped on a GPU (tuner.verify_bucket: a sample of rows
against the oracle over the whole width, the -inf mask of every row, the poisoned table; a
shape that would not fit the free memory is skipped and says so), and every distinct paged
module once more on a cache pool of more than 4 GiB read past the 4 GiB byte offset
(tuner.verify_pool). On a GPU the module runs as shipped. On
CPU it runs under TRITON_INTERPRET=1, whose bf16/fp8 tl.dot is wrong: a module with a native dot
is checked through its stand-in, the same (problem, config) rendered with an fp16 (fp8 inputs)
or fp32 (bf16) dot: same tiling, masks and addressing, but the native dot itself is checked only
on a GPU. Every row says which way it was checked.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from indexer_logits import _dispatch
from indexer_logits._identity import Config, Problem, variant_name

from .families import family_of, run_all_gates
from .gates import GateFailure
from .pdl_gate import pdl_gate, pdl_supported
from .render import emit as render_emit
from .render import load_module
from .tables import interpreter_dot_dtype
from .verify_bucket import BucketCheck, check_bucket, shape_text
from .verify_pool import CPU_POOL, GPU_POOL, check_pool
from .verify_progress import Progress, plan_cost
from .verify_sample import RANDOM_ROWS

# Shapes of the gates: a tuned entry runs at its bucket, capped; a default (no bucket) at a
# typical small shape. The bucket check runs uncapped on a GPU (or at `bucket_cap`), at the
# gates' shape under the interpreter.
GPU_CAPS = {"batch": 64, "context": 32768}
CPU_CAPS = {"batch": 2, "context": 256}


@dataclass
class VerifyRow:
    table: str  # gpu slug of the table
    what: str  # "entry" | "default" | "interp-default"
    problem: str  # problem slug
    bucket: str  # "b8_c4096" or "-"
    variant: str
    how: str  # how it was checked
    shape: str  # the inputs' shape
    ok: bool
    detail: str  # relative error, or the failure
    problem_key: str = ""
    bucket_shape: Optional[tuple[int, int]] = None  # the entry's bucket (batch, context)
    full: Optional[BucketCheck] = None  # the check at the bucket's own shape, or on the large pool
    gates: str = ""  # what the capped gates found (detail holds it and the bucket check's)


def _shape(problem: Problem, bucket: Optional[tuple[int, int]], on_gpu: bool) -> tuple[int, int]:
    family = family_of(problem)
    if bucket is None:
        return family.verify_shape_gpu if on_gpu else family.verify_shape_cpu
    return family.verify_shape(bucket, GPU_CAPS if on_gpu else CPU_CAPS, on_gpu)


def _inputs(problem: Problem, shape: tuple[int, int], seed: int, device: str):
    return family_of(problem).verify_inputs(problem, shape, seed, device)


class _Checker:
    def __init__(self, on_gpu: bool, seed: int, bucket_cap: Optional[tuple[int, int]] = None,
                 random_rows: int = RANDOM_ROWS):
        self.on_gpu = on_gpu
        self.seed = seed
        self.device = "cuda" if on_gpu else "cpu"
        self.bucket_cap = bucket_cap
        self.random_rows = random_rows
        self._tmp = tempfile.TemporaryDirectory(prefix="indexer_verify_")
        self._done: dict[tuple, tuple[bool, str]] = {}

    def close(self) -> None:
        self._tmp.cleanup()

    def plan(self, variant: str, info: dict) -> tuple[Problem, Config, str, bool]:
        """(problem, config to run, how, as shipped?)"""
        problem, config = Problem.from_dict(info["problem"]), Config.from_dict(info["config"])
        if self.on_gpu:
            return problem, config, "GPU, as shipped", True
        if config.dot_dtype in _dispatch.INTERPRETER_DOT_DTYPES[problem.cache_dtype]:
            return problem, config, "interpreter, as shipped", True
        stand_in = Config.from_dict({**info["config"], "dot_dtype": interpreter_dot_dtype(problem)})
        return problem, stand_in, f"interpreter, {stand_in.dot_dtype} tl.dot stand-in for native", False

    def bucket_shape(self, problem: Problem, bucket: tuple[int, int]) -> tuple[int, int]:
        """Where the bucket check runs: the bucket itself on a GPU (within bucket_cap if given),
        the gates' capped shape under the interpreter."""
        if not self.on_gpu:
            return _shape(problem, bucket, False)
        if self.bucket_cap is None:
            return tuple(bucket)
        return family_of(problem).verify_shape(bucket, dict(zip(("batch", "context"), self.bucket_cap)), True)

    def _module(self, directory: Path, variant: str, info: dict):
        """(module, problem, how) after the sha256 check, or a failure text instead of the module."""
        path = directory / info["file"]
        if not path.is_file():
            return None, None, "-", f"missing module file {path}"
        if _dispatch.file_sha256(path) != info["sha256"]:
            return None, None, "-", f"{path}: sha256 differs from the table (modified after emit)"
        problem, config, how, as_shipped = self.plan(variant, info)
        try:
            if as_shipped:
                return _dispatch.load_kernel(directory, variant, info), problem, how, ""
            return load_module(render_emit(problem, config, Path(self._tmp.name))), problem, how, ""
        except Exception as exc:
            return None, problem, how, f"error: {type(exc).__name__}: {exc}"[:300]

    def check(self, directory: Path, variant: str, info: dict, bucket) -> tuple[str, str, bool, str]:
        module, problem, how, failure = self._module(directory, variant, info)
        if module is None:
            return how, "-", False, failure
        _, config, _, as_shipped = self.plan(variant, info)
        shape = _shape(problem, bucket, self.on_gpu)
        shape_text = (f"B={shape[0]} ctx={shape[1]}" if problem.is_decode else f"M={shape[0]} Nk={shape[1]}")
        key = (variant_name(problem, config), shape)  # a stand-in equal to a shipped variant runs once
        if key not in self._done:
            try:
                err = run_all_gates(module, problem, _inputs(problem, shape, self.seed, self.device),
                                    clean_logits=True, seed=self.seed)
                detail = f"rel err {err:.2e}"
                if as_shipped and self.on_gpu and problem.is_decode:
                    if pdl_supported(module, self.device):
                        pdl_gate(module, _inputs(problem, shape, self.seed + 1, self.device), seed=self.seed)
                        detail += ", PDL launch ok"
                self._done[key] = (True, detail)
            except GateFailure as exc:
                self._done[key] = (False, f"{exc.reason}: {exc.detail}")
            except Exception as exc:  # a module that does not even run is a failure to report, not a crash
                self._done[key] = (False, f"error: {type(exc).__name__}: {exc}"[:300])
        ok, detail = self._done[key]
        return how, shape_text, ok, detail

    def check_at_bucket(self, directory: Path, variant: str, info: dict, bucket) -> BucketCheck:
        module, problem, how, failure = self._module(directory, variant, info)
        if module is None:
            return BucketCheck(tuple(bucket), "-", 0, error=failure)
        return check_bucket(module, problem, self.bucket_shape(problem, bucket), self.seed, self.device,
                            self.random_rows)

    def check_pool(self, directory: Path, variant: str, info: dict) -> tuple[str, BucketCheck]:
        module, problem, how, failure = self._module(directory, variant, info)
        if module is None:
            return how, BucketCheck((0, 0), "-", 0, error=failure)
        return how, check_pool(module, problem, self.seed, self.device, GPU_POOL if self.on_gpu else CPU_POOL)


def _table_work(table: dict, on_gpu: bool, families, pool: bool) -> list[tuple]:
    """(what, variant, bucket) of one table: its entries, its defaults, then one pool case per
    distinct paged module of its entries."""
    work = [("entry", e["variant"], (e["bucket"]["batch"], e["bucket"]["context"])) for e in table["entries"]]
    for section, what in (("defaults", "default"), ("interpreter_defaults", "interp-default")):
        for variant in sorted((table.get(section) or {}).values()):
            if on_gpu and section == "interpreter_defaults":
                continue  # CPU-only variants: checked where they run
            work.append((what, variant, None))
    if pool:
        paged = [e["variant"] for e in table["entries"] if Problem.from_dict(e["problem"]).is_paged]
        work += [("pool", v, None) for v in dict.fromkeys(paged)]
    if families:
        work = [w for w in work if table["modules"][w[1]]["problem"].get("family") in families]
    return work


def verify_tables(root: Path, gpus: Optional[Sequence[str]] = None, include_defaults: bool = True,
                  on_gpu: bool = False, seed: int = 0, families: Optional[Sequence[str]] = None,
                  on_row: Optional[Callable[[int, int, VerifyRow], None]] = None, *, at_bucket: bool = True,
                  pool: bool = True, bucket_cap: Optional[tuple[int, int]] = None, random_rows: int = RANDOM_ROWS,
                  max_entries: Optional[int] = None, progress: Optional[Progress] = None,
                  dry_run: bool = False) -> list[VerifyRow]:
    """Check the tables' modules. families: only entries of these kernel families; on_row(i, n,
    row): called as each row is done (progress: a long GPU check killed by a time limit still
    leaves the rows before it). at_bucket: also check each entry at its bucket's own shape
    (bucket_cap: at most this (batch, context)); pool: the large-pool case of each paged module;
    max_entries: only the first that many checks of the plan. dry_run: run nothing; one row per
    planned check, its shape and estimated seconds (the plan of a GPU run when on_gpu)."""
    root = Path(root)
    slugs = sorted(p.parent.name for p in root.glob(f"*/{_dispatch.TABLE_FILE}")
                   if p.parent.name != _dispatch.DEFAULT_SLUG)
    if gpus:
        missing = [g for g in gpus if g not in slugs]
        if missing:
            raise ValueError(f"--gpu: no table for {missing} under {root}; tables: {slugs or 'none'}")
        slugs = sorted(dict.fromkeys(gpus))
    if include_defaults:
        slugs.append(_dispatch.DEFAULT_SLUG)
    rows: list[VerifyRow] = []
    plan = []  # (slug, directory, modules, what, variant, bucket): every check, counted before any runs
    for slug in slugs:
        directory = root / slug
        path = directory / _dispatch.TABLE_FILE
        try:
            table = _dispatch.load_table(path, slug)
        except (_dispatch.DispatchTableError, FileNotFoundError) as exc:
            rows.append(VerifyRow(slug, "table", "-", "-", "-", "-", "-", False, str(exc)))
            continue
        plan += [(slug, directory, table["modules"], *w) for w in _table_work(table, on_gpu, families, pool)]
    if max_entries is not None:
        plan = plan[:max_entries]
    checker = _Checker(on_gpu, seed, bucket_cap, random_rows)
    if progress is not None:
        progress.start([cost for cost, _ in _plan_costs(checker, plan, at_bucket)])
    if dry_run:
        checker.close()
        for (slug, _, modules, what, variant, bucket), (cost, shape) in zip(plan, _plan_costs(checker, plan, at_bucket)):
            problem = Problem.from_dict(modules[variant]["problem"])
            text = "-" if shape is None else shape_text(problem, shape)
            rows.append(VerifyRow(slug, what, problem.slug, "-" if bucket is None else f"b{bucket[0]}_c{bucket[1]}",
                                  variant, "planned", text, True, f"estimated {cost:.1f} s", problem.key, bucket))
        return rows
    try:
        for i, (slug, directory, modules, what, variant, bucket) in enumerate(plan):
            rows.append(_run_one(checker, slug, directory, modules[variant], what, variant, bucket, at_bucket))
            if progress is not None:
                progress.done(i)
            if on_row is not None:
                on_row(i + 1, len(plan), rows[-1])
    finally:
        checker.close()
    return rows


def _plan_costs(checker: _Checker, plan: list, at_bucket: bool) -> list[tuple[float, Optional[tuple[int, int]]]]:
    """(estimated seconds, bucket-check shape or None) of each planned check."""
    out = []
    for _, _, modules, what, variant, bucket in plan:
        problem = Problem.from_dict(modules[variant]["problem"])
        shape = checker.bucket_shape(problem, bucket) if at_bucket and bucket is not None else None
        out.append((plan_cost(problem, what, shape, checker.on_gpu), shape))
    return out


def _run_one(checker: _Checker, slug: str, directory: Path, info: dict, what: str, variant: str, bucket,
             at_bucket: bool) -> VerifyRow:
    problem = Problem.from_dict(info["problem"])
    if what == "pool":
        how, full = checker.check_pool(directory, variant, info)
        return VerifyRow(slug, what, problem.slug, "-", variant, how, full.text, full.ok, full.detail(),
                         problem.key, None, full)
    how, shape, ok, gates = checker.check(directory, variant, info, bucket)
    full, detail = None, gates
    if at_bucket and bucket is not None and ok:
        full = checker.check_at_bucket(directory, variant, info, bucket)
        ok, detail = full.ok, f"{gates}; {full.detail()}"
    return VerifyRow(slug, what, problem.slug, "-" if bucket is None else f"b{bucket[0]}_c{bucket[1]}", variant,
                     how, shape, ok, detail, problem.key, None if bucket is None else tuple(bucket), full, gates)


def format_rows(rows: list[VerifyRow]) -> str:
    head = ("table", "what", "problem", "bucket", "config", "checked how", "inputs", "result")
    body = [(r.table, r.what, r.problem, r.bucket, r.variant.split("__")[2] if r.variant.count("__") >= 3 else r.variant,
             r.how, r.shape, ("ok " if r.ok else "FAIL ") + r.detail) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
