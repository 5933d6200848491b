"""The candidate's kernel cross-compiled (no GPU): with the epilogue off (tile_max=None: its new
pointers are None constexprs) its PTX against the current template's, and with it on (tiles of 8,
with and without the range merged, and 16) its registers and spills, for the H200 table's decode
configs.

    python experiments/topk_epilogue/xcompile.py [--target sm_90] [--all]

Default: the configs of the fp8 next_n 1 and 2 entries at 32K-1M (the top-k's tiles path serves
128K and up); --all: every decode config of the table. Exit 1 when an off form's PTX differs."""

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from bench._common import overlay  # noqa: E402
from indexer_logits._identity import Config, Problem  # noqa: E402
from tuner.render import TEMPLATE_DIR, load_module, render  # noqa: E402
from tuner.signature import build_signature  # noqa: E402
from tuner.xcompile import _ptxas_report  # noqa: E402

TARGETS = {"sm_90": 90, "sm_120": 120}
EPILOGUE_ARGS = {"max_ptr": "*fp32", "max_stride": 16384, "ntiles_ptr": "*i32"}
RANGE_ARGS = {"state_ptr": "*i32", "state_stride": 144}


def compile_one(problem, config, template_dir, gen, capability, tile, merge_range=False):
    path = gen / f"{'alt' if template_dir != TEMPLATE_DIR else 'cur'}__{problem.slug}__{config.slug}.py"
    path.write_text(render(problem, config, template_dir))
    fn = getattr(load_module(path), problem.kind.kernel)
    names = {p.name for p in fn.params}
    given = {**(EPILOGUE_ARGS if tile else {}), **(RANGE_ARGS if merge_range else {})}
    absent = [n for n in {**EPILOGUE_ARGS, **RANGE_ARGS} if n in names and n not in given]
    signature, consts, attrs = build_signature(fn, problem, config=config,
                                               extra_args={**given, **{n: "*fp32" for n in absent}})
    if "max_ptr" in names:
        consts.update(TILE_MAX=tile, TILE_RANGE=merge_range)
        signature.update(TILE_MAX="constexpr", TILE_RANGE="constexpr")
        for n in absent:  # as launch() passes what it is not given: None, a constexpr
            signature[n] = "constexpr"
            consts[n] = None
        attrs = {k: v for k, v in attrs.items() if fn.params[k[0]].name not in absent}
    c = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", capability, 32),
                       options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    ptx = c.asm["ptx"]
    body = ptx[ptx.index(".entry"):]
    body = "\n".join(ln for ln in body[:body.index("\n}")].splitlines() if not re.match(r"\s*(\.loc|\.file)", ln))
    return body, _ptxas_report(ptx, capability), int(c.metadata.shared)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="sm_90", choices=sorted(TARGETS))
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    table = json.loads((ROOT / "indexer_logits/tables/nvidia_h200/dispatch.json").read_text())
    points = []
    for e in table["entries"]:
        p, b = e["problem"], e["bucket"]
        if p["family"] != "decode_paged":
            continue
        if not a.all and not (p["cache_dtype"] == "fp8" and p["lens_mode"] == "1d" and b["context"] >= 32768):
            continue
        point = (Problem(**p), Config(**table["modules"][e["variant"]]["config"]))
        if point not in points:
            points.append(point)
    alt, gen = overlay(ROOT / "experiments/topk_epilogue"), Path(tempfile.mkdtemp())
    cap = TARGETS[a.target]
    print(f"triton {triton.__version__}, {a.target}: {len(points)} configs")
    print(f"{'problem':28s} {'config':26s} {'off: PTX':>9s} {'regs':>5s}  {'tiles of 8':>16s}  {'8, range':>16s}  "
          f"{'tiles of 16':>16s}")
    differ = 0
    for problem, config in points:
        cur, rep, _ = compile_one(problem, config, TEMPLATE_DIR, gen, cap, 0)
        off, rep_off, _ = compile_one(problem, config, alt, gen, cap, 0)
        same = cur == off
        differ += not same
        cells = []
        for tile, merge_range in ((8, False), (8, True), (16, False)):
            if config.programs_per_sm or config.block_t % tile:
                cells.append("-")
                continue
            _, r, shared = compile_one(problem, config, alt, gen, cap, tile, merge_range)
            cells.append(f"{r['registers']} regs, {r['spill_stores'] + r['spill_loads']} B")
        print(f"{problem.slug:28s} {config.slug:26s} {'same' if same else 'DIFFERS':>9s} {rep['registers']:>5d}  "
              + "  ".join(f"{c:>16s}" for c in cells), flush=True)
    print("OK: every off form's PTX is the current template's" if not differ else f"{differ} off forms differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
