"""What each Triton version makes of a config, without a GPU: the same variant cross-compiled (for
sm_90 unless --target says otherwise) by several Triton installs (one virtual environment each,
e.g. the CI matrix's under ~/.cache/indexer-logits/triton-matrix/), side by side: registers, spills and shared memory
(ptxas -v of each Triton's own ptxas), the tensor-core instructions (wgmma shapes and counts, the
wait_group depths), the main loop's TTGIR (pipeline ring depth, local_alloc / convert_layout /
proxy fences inside the loop, warp specialisation) and its SASS (the loop's instructions by
opcode, from each Triton's nvdisasm). Writes each variant's TTGIR, PTX and SASS to --out.

Why it exists (docs/PERF.md, "Prefill under Triton 3.8 and 3.9: why"): the ragged-prefill kernel
ran 1.2x slower under Triton 3.8 and 1.9x under 3.9 on the H200 with the same source; this reads
the reasons off the compiled code, and checks a candidate template (--alt experiments/<name>)
under every version before a GPU times it.

Usage: python -m bench.triton_versions --family prefill_ragged \\
           --configs '[{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"block_m":4,"orient":"k_rows"}]' \\
           [--python .venv/bin/python --python ~/.cache/indexer-logits/triton-matrix/triton-3.9.0/bin/python] \\
           [--alt experiments/<name>] [--options '{"maxnreg": 232}'] [--out DIR] [--json FILE]
Without --python: this interpreter and every Triton venv of the CI matrix (.ci/triton_matrix.sh) found.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._common import ROOT, overlay, parse_configs

FAMILIES = ("prefill_ragged", "decode_paged", "prefill_paged")
# SASS opcodes worth a column in the loop table (the rest are summed into "other").
SASS_COLUMNS = ("QGMMA", "HGMMA", "QMMA", "HMMA", "FMNMX", "FFMA", "FMUL", "FADD", "SHFL", "STS", "LDS", "LDL", "STL", "BAR",
                "MEMBAR", "FENCE", "LDGSTS", "UTMALDG", "SYNCS")


# --------------------------------------------------------------------------------------------
# Reading the compiled code (pure functions: tested without a compile).

def _code(line: str) -> str:
    """A TTGIR line without its location (braces in location strings are not structure)."""
    return line.split(" loc(")[0]


def ttgir_loops(ttgir: str) -> list[list[str]]:
    """The bodies (lines, nested loops included) of the outermost scf.for loops of a TTGIR."""
    loops, depth, start, body = [], 0, None, []
    for line in ttgir.splitlines():
        code = _code(line)
        if start is None and "scf.for" in code and code.rstrip().endswith("{"):
            start, body = depth, []
        elif start is not None:
            body.append(code)
        depth += code.count("{") - code.count("}")
        if start is not None and depth <= start:
            loops.append(body[:-1])  # the closing brace
            start = None
    return loops


def ttgir_summary(ttgir: str) -> dict:
    """The tile loop's structure: the loop holding the tensor-core dot, what runs in it, the
    pipeline's ring buffers (shapes of the multi-buffered allocations) and the MMA layout."""
    dot_loops = [b for b in ttgir_loops(ttgir) if any("warp_group_dot " in c or "tt.dot " in c or "tc_gen5_mma" in c
                                                      for c in b)]
    loop = dot_loops[0] if dot_loops else []
    count = lambda pat: sum(1 for c in loop if re.search(pat, c))  # noqa: E731
    rings = re.findall(r"ttg\.local_alloc\s*:\s*\(\)\s*->\s*!ttg\.memdesc<(\d+)x([\dx]+)x(\w+),[^>]*mutable>", ttgir)
    waits = [int(p) for c in loop for p in re.findall(r"warp_group_dot_wait .*\{pendings = (\d+)", c)]
    mma = re.search(r"#ttg\.nvidia_mma<\{versionMajor = (\d+).*?instrShape = \[([\d, ]+)\]", ttgir)
    return {
        "dot_loops": len(dot_loops),
        "loop_dots": count(r"warp_group_dot |tt\.dot |tc_gen5_mma"),
        "loop_dot_waits": waits,
        "loop_local_alloc_from_registers": count(r"ttg\.local_alloc %"),
        "loop_local_store": count(r"ttg\.local_store "),
        "loop_convert_layout": count(r"ttg\.convert_layout "),
        "loop_fence_async_shared": count(r"fence_async_shared"),
        "loop_async_copies": count(r"async_copy_global_to_local|async_tma_copy_global_to_local"),
        "rings": [f"{n}x{shape}x{dt}" for n, shape, dt in rings],
        "mma": f"v{mma.group(1)} {mma.group(2).replace(' ', '')}" if mma else "",
        "warp_specialize": len(re.findall(r"ttg\.warp_specialize", ttgir)),
    }


def ptx_loop(ptx: str) -> list[str]:
    """The instructions of the PTX loop that issues the tensor-core ops (the innermost loop
    holding a wgmma / mma / tcgen05): from its header label to the branch back to it."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\$L__\w+):", ln))}
    best = None
    for i, ln in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", ln)
        if m and labels.get(m.group(1), i + 1) <= i:
            body = lines[labels[m.group(1)]:i + 1]
            if any(re.search(r"wgmma\.mma_async|\bmma\.sync|tcgen05\.mma", b) for b in body):
                best = body if best is None or len(body) < len(best) else best
    return best or []


def ptx_summary(ptx: str) -> dict:
    """Tensor-core instructions by shape, the wait_group depths, and the loop's fences and barriers."""
    loop = ptx_loop(ptx)
    in_loop = lambda pat: sum(1 for ln in loop if re.search(pat, ln))  # noqa: E731
    version = re.search(r"^\.version\s+([\d.]+)", ptx, re.M)
    return {
        "ptx_version": version.group(1) if version else "",
        "mma": dict(collections.Counter(re.findall(r"\b(wgmma\.mma_async[\w.:]*|mma\.sync[\w.:]*|tcgen05\.mma[\w.:]*)",
                                                   ptx))),
        "wait_group": sorted(set(int(n) for n in re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx))),
        "loop_lines": len(loop),
        "loop_fence_proxy_async": in_loop(r"fence\.proxy\.async"),
        "loop_bar_sync": in_loop(r"\b(?:bar|barrier)\.sync\b"),
        "loop_st_shared": in_loop(r"\bst\.shared"),
    }


def sass_instructions(sass: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """(address, instruction) pairs and label addresses of an `nvdisasm` listing."""
    ins, labels, pending = [], {}, []
    for line in sass.splitlines():
        if m := re.match(r"\s*(\.L_x_\d+):", line):
            pending.append(m.group(1))
            continue
        if m := re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line):
            addr = int(m.group(1), 16)
            labels.update({p: addr for p in pending})
            pending = []
            ins.append((addr, m.group(2).strip()))
    return ins, labels


def sass_opcode(instruction: str) -> str:
    """`@!P0 FFMA.FTZ R1, ...` -> 'FFMA'."""
    return re.sub(r"^@!?U?P[T\d]+\s+", "", instruction).split()[0].split(".")[0]


def sass_loop(sass: str) -> list[str]:
    """The instructions of the smallest SASS loop (a backward branch) holding a tensor-core op."""
    ins, labels = sass_instructions(sass)
    best = None
    for addr, text in ins:
        if sass_opcode(text) != "BRA":
            continue
        m = re.search(r"(\.L_x_\d+)", text)
        if m and labels.get(m.group(1), addr + 1) <= addr:
            body = [t for a, t in ins if labels[m.group(1)] <= a <= addr]
            if any("MMA" in sass_opcode(t) for t in body):  # HGMMA, QGMMA, HMMA, QMMA, UTC*MMA
                best = body if best is None or len(body) < len(best) else best
    return best or []


def sass_summary(sass: str) -> dict:
    loop = sass_loop(sass)
    ops = collections.Counter(sass_opcode(t) for t in loop)
    row = {k: ops.pop(k, 0) for k in SASS_COLUMNS}
    row["other"] = sum(ops.values())
    return {"sass_total": len(sass_instructions(sass)[0]), "sass_loop": len(loop), "sass_loop_ops": row}


# --------------------------------------------------------------------------------------------
# One Triton's compile (the worker, run by each venv's python).

def _problem(family: str, dtype: str, next_n: int):
    from indexer_logits._identity import Problem

    layout = "page_blocked" if dtype == "fp8" else "none"
    kw = dict(q_dtype=dtype, cache_dtype=dtype, heads=64, head_dim=128, scale_layout=layout)
    if family == "decode_paged":
        return Problem(family="decode_paged", page_size=64, next_n=next_n, **kw)
    if family == "prefill_paged":
        return Problem(family="prefill_paged", page_size=64, **kw)
    return Problem(family="prefill_ragged", page_size=0, **kw)


def _nvdisasm() -> str | None:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    return str(path) if path.exists() else None


def compile_one(problem, config, target_name: str, template_dir: Path | None, options: dict, out: Path | None) -> dict:
    """Compile one variant with this process's Triton; its resources and code summaries."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tuner.render import emit, load_module
    from tuner.signature import build_signature
    from tuner.space import TARGETS
    from tuner.xcompile import _ptxas_report, _scratch_dir

    target = TARGETS[target_name]
    module = load_module(emit(problem, config, _scratch_dir() / ("alt" if template_dir else "cur"), template_dir))
    fn = getattr(module, problem.kind.kernel)
    signature, constexprs, attrs = build_signature(fn, problem, config=config)
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    opts = {"num_warps": config.num_warps, "num_stages": config.num_stages, **options}
    kernel = triton.compile(src, target=GPUTarget("cuda", target.capability, target.warp_size), options=opts)
    ptx, ttgir = kernel.asm["ptx"], kernel.asm["ttgir"]
    row = {"triton": triton.__version__, "config": config.slug, "options": options,
           "shared": int(kernel.metadata.shared), **_ptxas_report(ptx, target.capability)}
    row["spills"] = row["spill_stores"] + row["spill_loads"]
    row["ttgir"] = ttgir_summary(ttgir)
    row["ptx"] = ptx_summary(ptx)
    sass = ""
    if (nvdisasm := _nvdisasm()) and "cubin" in kernel.asm:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            proc = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True)
            sass = proc.stdout if proc.returncode == 0 else ""
    row["sass"] = sass_summary(sass) if sass else None
    if out is not None:
        stem = f"{problem.family}__{config.slug}__triton{triton.__version__}" + ("__alt" if template_dir else "")
        for kind, text in (("ttgir", ttgir), ("ptx", ptx), ("sass", sass)):
            if text:
                (out / f"{stem}.{kind}").write_text(text)
    return row


def worker(args) -> int:
    """--worker: compile every config with this interpreter's Triton; one JSON line each."""
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton_versions_cache_"))
    configs = parse_configs(args.configs)
    problem = _problem(args.family, args.dtype, args.next_n)
    options = json.loads(args.options or "{}")
    out = Path(args.out) if args.out else None
    template_dir = Path(args.template_dir) if args.template_dir else None
    for config in configs:
        try:
            row = compile_one(problem, config, args.target, template_dir, options, out)
        except Exception as exc:  # a failed compile is data
            import triton

            row = {"triton": triton.__version__, "config": config.slug, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        print("ROW " + json.dumps(row), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# The driver: one worker per Triton, a table across them.

def matrix_pythons() -> list[str]:
    """This interpreter, then the CI matrix's Triton venvs (.ci/triton_matrix.sh) that exist."""
    root = Path(os.environ.get("TRITON_MATRIX_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "indexer-logits" / "triton-matrix")
    found = sorted(root.glob("triton-*/bin/python"), key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.parent.name)])
    return [sys.executable] + [str(p) for p in found]


def run_worker(python: str, args, template_dir: Path | None) -> list[dict]:
    cmd = [python, "-W", "ignore", "-m", "bench.triton_versions", "--worker", "--family", args.family,
           "--dtype", args.dtype, "--next-n", str(args.next_n), "--target", args.target, "--configs", args.configs,
           "--options", args.options or "{}"]
    if template_dir:
        cmd += ["--template-dir", str(template_dir)]
    if args.out:
        cmd += ["--out", str(args.out)]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    rows = [json.loads(ln[4:]) for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
    if proc.returncode != 0 or not rows:
        rows = [{"triton": "?", "python": python, "error": (proc.stderr or proc.stdout)[-2000:]}]
    for r in rows:
        r["python"] = python
        r["template"] = "alt" if template_dir else "current"
    return rows


def format_rows(rows: list[dict]) -> str:
    """One line per (config, template, Triton): resources, the tensor-core pattern, the loop."""
    head = (f"{'config':24s} {'templ':7s} {'triton':6s} {'regs':>4s} {'spill':>5s} {'smem':>6s}  "
            f"{'wgmma (count x shape)':36s} {'wait':5s} {'ring':14s} {'loop: alloc cvt fence':21s} "
            f"{'ptx: fence bar st.sh':20s} sass loop")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"{r.get('config', '?'):24s} {r.get('template', ''):7s} {r['triton']:6s} ERROR "
                         f"{r['error'].strip().splitlines()[-1][:160] if r['error'].strip() else ''}")
            continue
        t, p, s = r["ttgir"], r["ptx"], r["sass"]
        mma = ", ".join(f"{n}x {re.sub(r'^wgmma.mma_async.sync.aligned.', '', k)}" for k, n in p["mma"].items()) or "-"
        ring = ",".join(x.split("x")[0] + "x" + "x".join(x.split("x")[1:3]) for x in t["rings"]) or "-"
        loop_ir = f"{t['loop_local_alloc_from_registers']:5d} {t['loop_convert_layout']:3d} {t['loop_fence_async_shared']:5d}"
        loop_ptx = f"{p['loop_fence_proxy_async']:5d} {p['loop_bar_sync']:3d} {p['loop_st_shared']:6d}"
        sass = ("-" if not s else f"{s['sass_loop']} instr: "
                + " ".join(f"{k} {v}" for k, v in s["sass_loop_ops"].items() if v))
        lines.append(f"{r['config']:24s} {r['template']:7s} {r['triton']:6s} {r['registers']:4d} {r['spills']:5d} "
                     f"{r['shared']:6d}  {mma[:36]:36s} {','.join(map(str, p['wait_group'])):5s} {ring[:14]:14s} "
                     f"{loop_ir:21s} {loop_ptx:20s} {sass}"
                     + (f"  warp_specialize {t['warp_specialize']}" if t["warp_specialize"] else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.triton_versions", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", required=True, help="JSON list (or @FILE) of configs")
    ap.add_argument("--family", default="prefill_ragged", choices=FAMILIES)
    ap.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    ap.add_argument("--next-n", type=int, default=1, help="decode_paged only")
    ap.add_argument("--target", default="sm_90", choices=["sm_90", "sm_100", "sm_120"])
    ap.add_argument("--python", action="append", default=None,
                    help="an interpreter whose Triton compiles (repeat; default: this one and the CI matrix's venvs)")
    ap.add_argument("--alt", type=Path, default=None, help="also compile a candidate (a folder of templates, e.g. "
                                                           "experiments/<name>) beside the current templates")
    ap.add_argument("--options", default="{}", help='extra triton.compile options as JSON, e.g. \'{"maxnreg": 232}\'')
    ap.add_argument("--out", type=Path, default=None, help="folder for each variant's TTGIR, PTX and SASS")
    ap.add_argument("--json", type=Path, default=None, help="write the rows as JSON lines here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--template-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        configs = parse_configs(args.configs)
        json.loads(args.options or "{}")
    except (ValueError, TypeError) as exc:
        ap.error(f"--configs / --options: {exc}")
    if not configs:
        ap.error("--configs: no config given")
    if args.worker:
        return worker(args)
    if args.out:
        args.out = args.out.resolve()  # the workers run in the repository root
        args.out.mkdir(parents=True, exist_ok=True)
    pythons = args.python or matrix_pythons()
    alt_dir = overlay(args.alt) if args.alt else None
    rows = []
    for python in pythons:
        for template_dir in ([None, alt_dir] if alt_dir else [None]):
            got = run_worker(python, args, template_dir)
            rows += got
            for r in got:
                print(f"  compiled {r.get('config', '?')} ({r['template']}) with Triton {r['triton']} "
                      f"({'error' if 'error' in r else 'ok'})", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: (r.get("config", ""), r["template"], [int(x) for x in re.findall(r"\d+", r["triton"])]))
    print(format_rows(rows))
    if args.json:
        args.json.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    if args.out:
        print(f"TTGIR, PTX and SASS in {args.out}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
