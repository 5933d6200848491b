"""The ragged prefill top-k's blocks with the logits kernel of every block but the first launched as a programmatic
dependent of the block before's last selection kernel (which reads the scratch the next block overwrites): its
launch and programs' start overlap that kernel's end, each program waiting (griddepcontrol.wait) before its first
write. The serving module's source edited and imported (docs/perf_logs/topk_drain/_probe.py), the call replicated
(indexer_logits._topk._ragged_topk's blocks) so that each block's logits launch can be told to be a dependent:

  served     K.fp8_mqa_topk as shipped (the control);
  replica    the replica with the module as emitted (what the edit is measured against);
  pdl_start  every block but the first a dependent, its programs waiting at their start;
  pdl_store  likewise, waiting just before each global write (the first tile's K load and dot before it).

Every variant's indices are checked against the served call's (each row's set). Eager calls, alternated.

    python3 docs/perf_logs/topk_gaps/pdl_probe.py [--shape 4096x65536] [--rounds 5] [--out FILE]
"""

import inspect
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "topk_drain"))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from _probe import checked_and_timed, edit_source, module_from_source, prefill_case, ragged_replica  # noqa: E402
import indexer_logits as K  # noqa: E402
from indexer_logits import _prefill, _topk as T  # noqa: E402

WAIT = "    if PDL_:\n        tl_cuda.gdc_wait()\n"


def _edit(src: str, old: str, new: str) -> str:
    return edit_source(src, old, new, "pdl_probe")


def indent(text: str, by: int) -> str:
    return "".join(" " * by + line if line.strip() else line for line in text.splitlines(True))


def variant(path: Path, where: str, name: str):
    src = path.read_text()
    src = _edit(src, "import triton.language as tl\n",
                "import triton.language as tl\nfrom triton.language.extra import cuda as tl_cuda\n")
    src = _edit(src, "TILE_MAX: tl.constexpr = 0, TILE_RANGE: tl.constexpr = False,\n):",
                "TILE_MAX: tl.constexpr = 0, TILE_RANGE: tl.constexpr = False, PDL_: tl.constexpr = False,\n):")
    src = _edit(src, "def launch(q, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, clean_logits, tile_max=None):",
                "def launch(q, k, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, clean_logits, tile_max=None, "
                "pdl=False):")
    src = _edit(src, "num_warps=NUM_WARPS, num_stages=NUM_STAGES,\n    )",
                "PDL_=bool(pdl), launch_pdl=bool(pdl), num_warps=NUM_WARPS, num_stages=NUM_STAGES,\n    )")
    if where == "start":
        src = _edit(src, "    MH: tl.constexpr = BLOCK_M * HEADS\n", "    MH: tl.constexpr = BLOCK_M * HEADS\n" + WAIT)
    elif where == "store":  # before the tile count's store, each tile's store, and the maxima's epilogue
        src = _edit(src, "        if tl.program_id(1) == 0:", indent(WAIT, 4) + "        if tl.program_id(1) == 0:")
        src = _edit(src, "            tl.store(out_rows[None, :] + t[:, None], logits",
                    indent(WAIT, 8) + "            tl.store(out_rows[None, :] + t[:, None], logits")
        src = _edit(src, "    if TILE_MAX > 0:\n        tl.debug_barrier()", WAIT + "    if TILE_MAX > 0:\n        tl.debug_barrier()")
    return module_from_source(src, f"pdl_probe_{name}")


def main() -> int:
    a, rows, keys, dev, (q, kv, w, ks, ke), (kk, ksc) = prefill_case(__doc__)
    k = 2048
    step, blocks = T._blocks(rows, keys, None, k, dev)
    sel = _prefill.ragged_selection(q[:step], kv, w[:step], ks[:step], ke[:step])
    path = Path(inspect.getsourcefile(sel.launch))
    info = {"gpu": torch.cuda.get_device_name(), "shape": a.shape, "block_rows": step, "blocks": len(blocks),
            "module": sel.variant, "tile_max_block": sel.tile_max_block}
    print(json.dumps(info), flush=True)
    mods = {w_: variant(path, w_, w_) for w_ in ("none", "start", "store")}
    scratch = torch.empty((step, keys), dtype=torch.float32, device=dev)

    def replica(mod, pdl, idx):  # every block's logits but the first's a dependent where pdl
        return ragged_replica((q, kv, w, ks, ke), (kk, ksc), keys, k, blocks, scratch, mod, "pdl_probe",
                              lambda b: {"pdl": pdl and b > 0})(idx)

    outs = {name: torch.empty(rows, k, dtype=torch.int32, device=dev)
            for name in ("served", "replica", "pdl_start", "pdl_store")}
    fns = {"served": lambda: K.fp8_mqa_topk(q, kv, w, ks, ke, k, out=outs["served"]),
           "replica": replica(mods["none"], False, outs["replica"]),
           "pdl_start": replica(mods["start"], True, outs["pdl_start"]),
           "pdl_store": replica(mods["store"], True, outs["pdl_store"])}
    logits_buf = torch.empty(rows, keys, dtype=torch.float32, device=dev)
    more = {"logits": lambda: K.fp8_mqa_logits(q, kv, w, ks, ke, False, out=logits_buf)}  # (bench.topk's baseline)
    return checked_and_timed(fns, outs, info, a.rounds, a.out, more)


if __name__ == "__main__":
    raise SystemExit(main())
