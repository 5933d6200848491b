"""Is a template change free for the committed tables? Each module a table ships, cross-compiled
(no GPU) as committed and as the current templates render its config, PTX body against PTX body.

    python -m bench.template_ptx [--table DIR] [--target sm_90] [--family decode_paged] [--jobs 2] [--json FILE]
    python -m bench.template_ptx --tile-max 8 [--table DIR] [--target sm_90]    # the top-k epilogue on

A table's trials were timed with the template its modules were rendered from; where every module
compiles to the same PTX under the current template (the .loc / .file debug lines, which name the
source file, aside), those timings stand for it, and the new template hash may be recorded as
equivalent (tuner.tables.PTX_EQUIVALENT_TEMPLATES). Run it under the Triton a table was tuned with
(its triton-X.Y tables under that Triton: the .ci/triton_matrix.sh venvs). Both forms are launched
as the tuner compiles them (tuner.signature: typical arguments, parameters the logits calls leave out
as None). Exit 1 when a module's PTX differs.

--tile-max TILE: instead, each split-grid decode module's current render with the top-k's epilogue on
(launch(tile_max=...) with tiles of TILE and the range merged, as indexer_logits._topk launches it):
that it compiles under this Triton, its registers and spills against the off form's. Exit 1 on a
failure or a spill."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from indexer_logits._identity import Config, Problem
from tuner.render import load_module, render
from tuner.space import TARGETS, Target
from tuner.xcompile import _ptxas_report, compile_fn

ROOT = Path(__file__).resolve().parent.parent


def ptx_body(ptx: str) -> str:
    """The kernel's body without its debug lines (they name the source file)."""
    body = ptx[ptx.index(".entry"):]
    return "\n".join(ln for ln in body.splitlines() if not re.match(r"\s*(\.loc|\.file|\.section\s+\.debug)", ln)
                     ).split("\n}", 1)[0]


# The epilogue's arguments as indexer_logits._topk passes them (tuner.signature's typical form).
TILE_MAX_ON = {"max_ptr": "*fp32", "max_stride": 16384, "ntiles_ptr": "*i32", "state_ptr": "*i32",
               "state_offset": 64 * 144, "state_stride": 144}


def compile_module(path: Path, problem: Problem, config: Config, target: Target, tile_max: int = 0):
    """(PTX body, ptxas report) of the module's kernel, launched as the tuner's cross-compile does
    (with tile_max: the top-k's epilogue on, tiles of that many keys, the range merged)."""
    fn = getattr(load_module(path), problem.kind.kernel)
    ptx = compile_fn(fn, problem, config, target, {"TILE_MAX": tile_max, "TILE_RANGE": True} if tile_max else None,
                     dict(TILE_MAX_ON) if tile_max else None).asm["ptx"]
    return ptx_body(ptx), _ptxas_report(ptx, target.capability)


def _one(job: tuple) -> dict:
    table_dir, variant, record, target, gen, tile_max = job
    problem, config = Problem(**record["problem"]), Config(**record["config"])
    new_path = Path(gen) / f"current__{variant}.py"
    new_path.write_text(render(problem, config))
    try:
        if tile_max:  # the epilogue on against off, both from the current render
            _, off = compile_module(new_path, problem, config, target)
            _, on = compile_module(new_path, problem, config, target, tile_max)
            spills = on["spill_stores"] + on["spill_loads"]
            return {"variant": variant, "same": spills == 0, "registers": [off["registers"], on["registers"]],
                    "spills": spills}
        old, old_rep = compile_module(Path(table_dir) / record["file"], problem, config, target)
        new, new_rep = compile_module(new_path, problem, config, target)
    except Exception as exc:  # a compile failure is a finding, not a crash of the whole run
        return {"variant": variant, "same": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"variant": variant, "same": old == new, "registers": [old_rep["registers"], new_rep["registers"]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.template_ptx", description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", action="append", default=None,
                    help="a table directory (repeatable; default indexer_logits/tables/nvidia_h200)")
    ap.add_argument("--target", default="sm_90", choices=sorted(TARGETS))
    ap.add_argument("--family", default="decode_paged")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", default=None, help="write every module's result here")
    ap.add_argument("--tile-max", type=int, default=0, help="the top-k epilogue on, tiles of this many keys")
    a = ap.parse_args(argv)
    # it compiles, never interprets: the generated modules are loaded (in the workers) after this
    os.environ.pop("TRITON_INTERPRET", None)
    import triton

    gen = tempfile.mkdtemp(prefix="template_ptx_")
    jobs = []
    for table in a.table or [str(ROOT / "indexer_logits/tables/nvidia_h200")]:
        modules = json.loads((Path(table) / "dispatch.json").read_text())["modules"]
        jobs += [(table, v, m, TARGETS[a.target], gen, a.tile_max) for v, m in sorted(modules.items())
                 if m["problem"]["family"] == a.family
                 and not (a.tile_max and m["config"].get("programs_per_sm", 0))]  # (a persistent grid refuses it)
    what = f"split-grid {a.family} modules, tile_max {a.tile_max} on" if a.tile_max else f"{a.family} modules"
    print(f"triton {triton.__version__}, {a.target}: {len(jobs)} {what}", flush=True)
    rows = []
    with ProcessPoolExecutor(max(1, a.jobs)) as pool:
        for i, row in enumerate(pool.map(_one, jobs), 1):
            rows.append(row)
            if not row["same"]:
                print(f"  DIFFERS {row['variant']}: {row.get('error') or row['registers']}", flush=True)
            if i % 20 == 0 or i == len(jobs):
                print(f"  {i}/{len(jobs)} compared", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"triton": triton.__version__, "target": a.target, "rows": rows}, indent=1))
    differ = sum(not r["same"] for r in rows)
    if a.tile_max:
        grew = [r["registers"][1] - r["registers"][0] for r in rows if "registers" in r]
        print(f"{len(rows) - differ} of {len(rows)} modules compile without a spill, registers {min(grew, default=0):+d} "
              f"to {max(grew, default=0):+d}" + (f"; {differ} fail or spill" if differ else ""))
    else:
        print(f"{len(rows) - differ} of {len(rows)} modules: the same PTX" + (f"; {differ} differ" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
