"""From the trial store to what users take away: frozen modules and a dispatch table per GPU.

`emit_gpu` writes `<out>/<gpu_slug>/`: one module per distinct winning variant (rendered with
tuner.render.emit; nothing is autotuned at import or call time) and `dispatch.json`.
`emit_defaults` writes `<out>/default/`: the family defaults of the common problems, for GPUs
with no tuned table, plus their CPU-interpreter twins. Both are deterministic: the same store
gives the same bytes (the table's time is the latest trial's, never the clock), files are
written only when different, and modules a table no longer names are removed.

The table format (FORMAT = 1) is documented in docs/RUNTIME.md and validated on load by
indexer_logits._dispatch.validate_table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from indexer_logits import _dispatch
from indexer_logits._tables import table_text
from indexer_logits._versions import minor_of, version_dir_name
from indexer_logits._identity import INTERPRETER_DOT_DTYPES, Config, Problem, variant_name

from . import __version__
from .families import family_of
from .families import names as family_names
from .render import emit as render_emit
from .render import template_hash, write_if_different
from .space import TARGETS, InfeasibleConfig, check, default_config
from .store import FULL_TIMING, Store
from .verify_record import carry_records, code_digest

FORMAT = _dispatch.FORMAT
TABLE_FILE = _dispatch.TABLE_FILE
DEFAULT_SLUG = _dispatch.DEFAULT_SLUG

# Template versions whose timings carry over to a later one: current template hash -> the older
# hashes whose compiled code for the tuned GPU is the same, PTX instruction for instruction (the
# debug sections, which name the source file, aside). A trial timed with one of them counts as
# timed with the current template, so a change that alters no instruction (a comment, a form
# the compiler folds away) keeps a tuned table without a re-tune. Add an entry only with that
# evidence, for every variant a committed table ships.
PTX_EQUIVALENT_TEMPLATES: dict[str, tuple[str, ...]] = {
    # decode_paged, issue 30: `True & (i + 1 < n_tiles)` in the next tile's masks (Triton 3.9's
    # interpreter refused the int32 mask the bare comparison broadcast into). The sm_90 PTX under
    # Triton 3.6 of all 217 decode variants of tables/default and tables/nvidia_h200 is identical.
    "9685a8a3540ae0ce1676705c496320dad583caab010d86150db0a313f7007020": (
        "ef0cde9aae2ca034ec6d90a073d3ff12b7f0922385ddca641c94d6c7d0f59b78",),
    # prefill_paged, issue 30: `busy = True & (top_all > chunk_start)` (the same interpreter
    # refusal, at q's load). All 35 prefill_paged variants of both tables: identical sm_90 PTX.
    "829f023c308c034c874488545ad58fd8f013f972d60e1567ec39bbe3c8ebe408": (
        "462165aed7a1a1ed8424195e4bb795bccf840d68ad70e657b314a365805d5eb4",),
    # All three, issue 30: the head_sum axis (Config.head_sum 'chain': _head_sum.py.jinja, and in
    # prefill_ragged q's load above the `if`). 'tree' renders every module of tables/default,
    # tables/nvidia_h200 and the RTX PRO 6000's predicted table (717) byte for byte as before, the
    # header's template hash aside; the shipped H200 prefill and decode variants' sm_90 PTX under
    # Triton 3.6 is identical (tests/test_head_sum.py renders them; docs/PERF.md has the compiles).
    "ad5abc8fb6f58b1abc0d4ef06beec437595526e83ea92f442d1bedcf0ff930c8": (
        "9685a8a3540ae0ce1676705c496320dad583caab010d86150db0a313f7007020",
        "ef0cde9aae2ca034ec6d90a073d3ff12b7f0922385ddca641c94d6c7d0f59b78"),
    "33108b69ead548a4a34f365b187683705c912437ee554d25043a308e04078bf0": (
        "829f023c308c034c874488545ad58fd8f013f972d60e1567ec39bbe3c8ebe408",
        "462165aed7a1a1ed8424195e4bb795bccf840d68ad70e657b314a365805d5eb4"),
    "6bddbf56020cb56f002794caf80f2c30b292ba992c923831e003f8d70c8f9564": (
        "9946986c809bc2d74f1a0296d35c9de5f386795672814c019b41a80d79ab5df4",),
    # prefill_ragged, issue 30: the k_load axis (Config.k_load 'tma': _k_load.py.jinja). 'threads'
    # renders all 56 ragged modules of the committed tables byte for byte as before, the header's
    # template hash aside (tests/test_k_load.py); the H200 tables' two ragged variants (tree, chain)
    # compile to the same sm_90 PTX and SASS under Triton 3.6, 3.8 and 3.9 (docs/perf_logs/xcompile_k_load/).
    "08dfe33b2b31ef32abe05789f2533ad7d46ffc677f1612b44e875eef826c0f1f": (
        "6bddbf56020cb56f002794caf80f2c30b292ba992c923831e003f8d70c8f9564",
        "9946986c809bc2d74f1a0296d35c9de5f386795672814c019b41a80d79ab5df4"),
    # prefill_paged, issue 30: with head_sum 'chain' the flat loop stores a tile's logits through
    # a warp-aligned [16, BLOCK_T // 16, BLOCK_M] view (no CTA barrier in the layout change under
    # Triton 3.8+). 'tree' renders every committed prefill_paged module byte for byte as before,
    # the header's template hash aside (tests/test_head_sum.py); its PTX is unchanged. The '_hc'
    # prefill_paged trials that predated the store were re-timed (db/triton-3.8) or dropped
    # (db/triton-3.9; docs/PERF.md, "Chunked prefill (prefill_paged)").
    # decode_paged, issue 29: launch(tile_max=...), the top-k's tile maxima from the epilogue (every
    # added line behind the TILE_MAX constexpr, the new pointers None when off). Off, every decode
    # module of the committed tuned tables compiles to the same PTX (python -m bench.template_ptx:
    # tables/nvidia_h200 sm_90 under Triton 3.6, its triton-3.8 and triton-3.9 tables under those,
    # the RTX PRO 6000's predicted table sm_120 under 3.6; docs/perf_logs/topk_epilogue_ptx/).
    "42c3ed74e8c8d91f3376e762174cf8c6817d1caa9f152b71d05e62ceb66653e4": (
        "ad5abc8fb6f58b1abc0d4ef06beec437595526e83ea92f442d1bedcf0ff930c8",
        "9685a8a3540ae0ce1676705c496320dad583caab010d86150db0a313f7007020",
        "ef0cde9aae2ca034ec6d90a073d3ff12b7f0922385ddca641c94d6c7d0f59b78"),
    "cc038fdfc293e0d41842edeefc52474307272d94b32d41ef7ecc676e9b7593c6": (
        "33108b69ead548a4a34f365b187683705c912437ee554d25043a308e04078bf0",
        "829f023c308c034c874488545ad58fd8f013f972d60e1567ec39bbe3c8ebe408",
        "462165aed7a1a1ed8424195e4bb795bccf840d68ad70e657b314a365805d5eb4"),
    # prefill_ragged, issue 29: launch(tile_max=...), the top-k bound path's tile maxima over absolute
    # keys, read back from the program's stored chunk after its tile loop (_chunk_maxima; every added
    # line behind the TILE_MAX constexpr, the new pointers None when off). Off, every ragged module of
    # the committed tables compiles to the same PTX (python -m bench.template_ptx --family prefill_ragged:
    # tables/default (48) and tables/nvidia_h200 sm_90, the RTX PRO 6000 predicted table sm_120, under
    # Triton 3.6; docs/perf_logs/topk_prefill_blocks/ptx/tail_*; the hash after
    # the template's launch docstring and a comment gave the measured cost, the kernel unchanged).
    "a4709fb8181f676ebd81d2017068560e21d9bd4d0b0e6ff0259ed79ccb040652": (
        "08dfe33b2b31ef32abe05789f2533ad7d46ffc677f1612b44e875eef826c0f1f",
        "6bddbf56020cb56f002794caf80f2c30b292ba992c923831e003f8d70c8f9564",
        "9946986c809bc2d74f1a0296d35c9de5f386795672814c019b41a80d79ab5df4"),
}


def timing_hashes(current: str) -> tuple[str, ...]:
    """The template hashes whose trials stand for template `current`: itself, then its PTX-equivalent forebears."""
    return (current, *PTX_EQUIVALENT_TEMPLATES.get(current, ()))



def _is_module_file(name: str) -> bool:
    """A generated module's file name: `<family>__...py` of a registered family."""
    return name.endswith(".py") and "__" in name and name.split("__", 1)[0] in family_names()

# The problems served by family defaults: DeepSeek-V3.2/V4's H=64, D=128, page 64, and the head
# counts, head dims and page sizes the engines' and DeepGEMM's own tests call with (vLLM's and
# DeepGEMM 54e2261's H=32, D=64 and D=32 cases; a tensor-parallel split of 64 heads gives 32 or
# 16), so that none of them falls to the torch reference, which is slow and cannot be captured in
# a CUDA graph.
DEFAULT_HEADS, DEFAULT_HEAD_DIM, DEFAULT_PAGE = 64, 128, 64
DEFAULT_HEAD_COUNTS = (16, 32, 64, 128)
DEFAULT_HEAD_DIMS = (32, 64, 128)
# The page sizes of the paged families' defaults, per cache dtype: SGLang's and vLLM's 64, and 32
# for an fp8 cache (DeepGEMM 00b1d2d's paged logits take 32-token pages; its later sm_100 kernels
# take 32, 64 and 128 at every head count and D). The bf16 cache is this runtime's own, at 64.
DEFAULT_PAGES = {"fp8": (DEFAULT_PAGE, 32), "bf16": (DEFAULT_PAGE,)}


def default_problems() -> list[Problem]:
    """Every registered family's problems at these shapes, per dtype, page size (paged families
    only), head count and head dim (each family's own next_n and lens modes:
    tuner.families.base.Family.default_problems)."""
    return [p for dtype in ("fp8", "bf16") for name in family_names()
            for page in (DEFAULT_PAGES[dtype] if family_of(name).kind.paged else (DEFAULT_PAGE,))
            for heads in DEFAULT_HEAD_COUNTS for head_dim in DEFAULT_HEAD_DIMS
            for p in family_of(name).default_problems(dtype, page, heads, head_dim)]


def interpreter_dot_dtype(problem: Problem) -> str:
    """The tl.dot dtype the CPU interpreter computes exactly and cheapest: fp16 for fp8 inputs,
    fp32 for bf16 (the first of indexer_logits._identity.INTERPRETER_DOT_DTYPES)."""
    return INTERPRETER_DOT_DTYPES[problem.cache_dtype][0]


@dataclass
class EmitResult:
    slug: str
    directory: Path
    entries: int
    modules: int
    written: list[str] = field(default_factory=list)  # files whose bytes changed
    removed: list[str] = field(default_factory=list)  # modules no table names any more
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


def _fits(problem: Problem, config: Config) -> list[str]:
    """The targets whose static limits (shared memory, registers) this point fits."""
    fits = []
    for name, target in sorted(TARGETS.items(), key=lambda kv: kv[1].capability):
        try:
            check(problem, config, target)
            fits.append(name)
        except InfeasibleConfig:
            pass
    return fits


def _module_info(problem: Problem, config: Config, path: Path) -> dict:
    return {"file": path.name, "sha256": _dispatch.file_sha256(path), "problem": problem.to_dict(),
            "problem_key": problem.key, "config": config.to_dict(), "fits_targets": _fits(problem, config)}


def _one_or_all(values: Iterable) -> object:
    vals = sorted({v for v in values if v not in (None, "")}, key=str)
    return vals[0] if len(vals) == 1 else (vals or "")


def _write_dir(directory: Path, table: dict, module_files: set[str], result: EmitResult) -> None:
    for path in sorted(directory.glob("*.py")):
        if _is_module_file(path.name) and path.name not in module_files:
            path.unlink()
            result.removed.append(path.name)
    if write_if_different(directory / TABLE_FILE, table_text(table)):
        result.written.append(TABLE_FILE)
    _dispatch.validate_table(json.loads((directory / TABLE_FILE).read_text()), directory / TABLE_FILE,
                             table["provenance"]["gpu_slug"])


def _render_into(problem: Problem, config: Config, directory: Path, result: EmitResult) -> Path:
    path = directory / f"{variant_name(problem, config)}.py"
    before = path.read_bytes() if path.exists() else None
    render_emit(problem, config, directory)
    if path.read_bytes() != before:
        result.written.append(path.name)
    return path


def gpu_slugs(store: Store) -> list[str]:
    rows = store.db.execute("select distinct gpu_slug from trials where status = 'ok' and score_ms is not null")
    return sorted(r[0] for r in rows.fetchall())


def _fresh_winners(store: Store, slug: str, hashes: dict[str, str], notes: list[str]) -> list[dict]:
    """Store.winners, except that a winner measured with another version of its template (its
    module would not be the code that was timed) gives way to the best trial of this version."""
    winners = store.winners(slug)
    out, carried = [], {}
    for w in winners:
        current = hashes[w["family"]]
        accepted = timing_hashes(current)
        if w["template_hash"] in accepted:
            out.append(w)
            if w["template_hash"] != current:
                carried[w["template_hash"]] = carried.get(w["template_hash"], 0) + 1
            continue
        marks = ", ".join("?" * len(accepted))
        rows = store.trials(f"gpu_slug = ? and status = 'ok' and score_ms is not null and {FULL_TIMING} "
                            f"and problem_key = ? and bucket_batch = ? and bucket_context = ? and template_hash in ({marks})",
                            [slug, w["problem_key"], w["bucket_batch"], w["bucket_context"], *accepted])
        where = f"{Problem.from_json(w['problem_json']).slug} b{w['bucket_batch']}_c{w['bucket_context']}"
        if rows:
            best = min(rows, key=lambda r: (r["score_ms"], r["trial_key"]))
            notes.append(f"{where}: winner {w['variant']} was timed with template {w['template_hash'][:12]}; "
                         f"using the best trial of the current template, {best['variant']}")
            out.append(best)
        else:
            notes.append(f"{where}: skipped, every ok trial was timed with an older template "
                         f"({w['template_hash'][:12]}); re-tune it")
    for old, count in sorted(carried.items()):
        notes.append(f"{count} winners were timed with template {old[:12]}, whose compiled code equals the current "
                     "template's (tuner.tables.PTX_EQUIVALENT_TEMPLATES)")
    return out


def build_gpu_table(store: Store, slug: str, directory: Path, result: EmitResult) -> tuple[dict, set[str]]:
    hashes = {f: template_hash(f) for f in family_names()}
    winners = _fresh_winners(store, slug, hashes, result.notes)
    modules: dict[str, dict] = {}
    entries = []
    for w in winners:
        problem = Problem.from_json(w["problem_json"])
        config = Config.from_json(w["config_json"])
        variant = variant_name(problem, config)
        if variant not in modules:
            modules[variant] = _module_info(problem, config, _render_into(problem, config, directory, result))
        entries.append({
            "problem_key": problem.key, "problem": problem.to_dict(),
            "bucket": {"batch": int(w["bucket_batch"]), "context": int(w["bucket_context"])},
            "variant": variant, "timer": w["timer"], "trial_key": w["trial_key"], "run_id": w["run_id"],
            "p20_ms": w["p20_ms"], "p50_ms": w["p50_ms"], "p80_ms": w["p80_ms"],
            "partial_p50_ms": w["partial_p50_ms"], "floor_ms": w["floor_ms"],
            "frac_of_floor": w["frac_of_floor"], "partial_frac_of_floor": w["partial_frac_of_floor"],
            "pct_of_floor": None if w["frac_of_floor"] is None else round(100.0 * w["frac_of_floor"], 2),
            "rel_err": w["rel_err"], "registers": w["registers"], "spills": w["spills"],
            "shared_bytes": w["shared_bytes"],
        })
    entries.sort(key=lambda e: (e["problem"]["family"], json.dumps(e["problem"], sort_keys=True),
                                e["bucket"]["batch"], e["bucket"]["context"]))
    latest = store.db.execute("select max(created_at) from trials where gpu_slug = ?", [slug]).fetchone()[0]
    provenance = {
        "kind": "tuned",
        "gpu_slug": slug,
        "gpu_name": _one_or_all(w["gpu_name"] for w in winners),
        "compute_capability": _one_or_all(w["compute_capability"] for w in winners),
        "sm_count": _one_or_all(w["sm_count"] for w in winners),
        "driver": _one_or_all(w["driver"] for w in winners),
        "cuda_version": _one_or_all(w["cuda_version"] for w in winners),
        "torch_version": _one_or_all(w["torch_version"] for w in winners),
        "triton_version": _one_or_all(w["triton_version"] for w in winners),
        "tuned_with_tool_version": _one_or_all(w["tool_version"] for w in winners),
        "tool_version": __version__,
        "template_hashes": hashes,
        "tuned_at": latest or "",
        "timers": sorted({w["timer"] for w in winners}),
        "run_ids": sorted({w["run_id"] for w in winners}),
        "notes": list(result.notes),
        "selection": "best ok trial per (problem, bucket) by score_ms (p50 + partial p50 for decode), "
                     "every one checked against the reference, CUDA-graph replay and a poisoned block table",
    }
    table = {"format": FORMAT, "provenance": provenance, "modules": modules, "entries": entries, "defaults": {}}
    return table, {m["file"] for m in modules.values()}


def store_triton(store: Store, slug: str) -> str:
    """The Triton a store's ok trials of one GPU ran under; ValueError when they ran under several
    minor versions (a table is tuned for one: indexer_logits._versions) or record none."""
    rows = store.db.execute("select distinct triton_version from trials where gpu_slug = ? and status = 'ok' "
                            "and score_ms is not null", [slug]).fetchall()
    versions = sorted({r[0] for r in rows if r[0]})
    minors = {minor_of(v) for v in versions}
    if len(minors) != 1 or None in minors:
        raise ValueError(f"{slug}: the store's trials ran under Triton {versions or 'unrecorded'}; "
                         "a table per Triton needs a store of one (cli.py retime keeps one per version)")
    return versions[-1]


def emit_gpu(store: Store, slug: str, out_root: Path, by_triton: bool = False) -> EmitResult:
    """The table of one GPU into <out_root>/<slug>/, or with `by_triton` into its side-by-side
    <out_root>/<slug>/triton-X.Y/ for the Triton the store's trials ran under (store_triton)."""
    directory = Path(out_root) / slug
    if by_triton:
        directory = directory / version_dir_name(store_triton(store, slug))
    directory.mkdir(parents=True, exist_ok=True)
    result = EmitResult(slug, directory, 0, 0)
    previous = _previous_table(directory)
    # a module whose code stays (the header's template hash aside), where the file on disk is the
    # one the previous table names (its sha256): the records of what was verified carry over
    before = {p.name: (_dispatch.file_sha256(p), code_digest(p.read_text()))
              for p in directory.glob("*.py") if _is_module_file(p.name)}
    named = {v: m.get("sha256") for v, m in ((previous or {}).get("modules") or {}).items()}
    table, files = build_gpu_table(store, slug, directory, result)
    same_code = frozenset(v for v, m in table["modules"].items() if m["file"] in before
                          and before[m["file"]][0] == named.get(v)
                          and before[m["file"]][1] == code_digest((directory / m["file"]).read_text()))
    carry_records(previous, table, same_code)  # verify --record's fields, where still true
    result.entries, result.modules = len(table["entries"]), len(table["modules"])
    _write_dir(directory, table, files, result)
    return result


def _previous_table(directory: Path) -> Optional[dict]:
    """The table already in directory (None if absent or unreadable): its verify records carry over."""
    try:
        return json.loads((directory / TABLE_FILE).read_text())
    except (OSError, ValueError):
        return None


def emit_defaults(out_root: Path) -> EmitResult:
    directory = Path(out_root) / DEFAULT_SLUG
    directory.mkdir(parents=True, exist_ok=True)
    result = EmitResult(DEFAULT_SLUG, directory, 0, 0)
    modules, defaults, interp, skipped = {}, {}, {}, []
    for problem in default_problems():
        for dot, section in (("native", defaults), (interpreter_dot_dtype(problem), interp)):
            config = default_config(problem, dot)
            try:
                check(problem, config)
            except InfeasibleConfig as exc:
                if dot == "native":
                    skipped.append({"problem": problem.to_dict(), "problem_slug": problem.slug, "reason": str(exc)})
                continue
            variant = variant_name(problem, config)
            modules[variant] = _module_info(problem, config, _render_into(problem, config, directory, result))
            section[problem.key] = variant
    native = [m for m in modules.values() if m["config"]["dot_dtype"] == "native"]
    provenance = {
        "kind": "defaults",
        "gpu_slug": DEFAULT_SLUG,
        "tool_version": __version__,
        "template_hashes": {f: template_hash(f) for f in family_names()},
        "tuned_at": None,
        "note": ("Family defaults (tuner.space.default_config), not tuned: what runs on a GPU with no tuned "
                 "table. The 'defaults' (native tl.dot) fit every target's static limits, sm_120's 101,376 B of "
                 "shared memory included, by construction of default_config (see each module's fits_targets; "
                 "`python cli.py check --target sm_120` cross-compiles them). 'interpreter_defaults' are the "
                 "same kernels with an fp16 (fp8 inputs) or fp32 (bf16) tl.dot, chosen only for CPU tensors "
                 "under TRITON_INTERPRET=1, whose bf16/fp8 dots are wrong."),
        "fit_all_targets": all(len(m["fits_targets"]) == len(TARGETS) for m in native),
        "not_emitted": skipped,
    }
    table = {"format": FORMAT, "provenance": provenance, "modules": modules, "entries": [], "defaults": defaults,
             "interpreter_defaults": interp}
    result.entries, result.modules = 0, len(modules)
    result.notes = [f"{s['problem_slug']}: no default ({s['reason']})" for s in skipped]
    _write_dir(directory, table, {m["file"] for m in modules.values()}, result)
    return result


def open_store_if_present(path: Path) -> Optional[Store]:
    """The store at path, or None when there is none (never creates an empty db)."""
    path = Path(path)
    return Store(path) if path.is_file() else None
