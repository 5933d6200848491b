"""What this folder's probes share: a kernel module's source edited and imported, the decode logits of a case, the
row path's kernel launched directly over them, and their command line."""

import argparse
import importlib.util
import inspect
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from indexer_logits import _topk_row  # noqa: E402
from tuner.inputs import make_decode_inputs, make_prefill_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

K_BEST = 2048
# The source of a Triton helper reading the GPU's %globaltimer (ns; it moves in steps of 0.256 us on an H100), for
# the probes that add it to a kernel's module
GTIMER_SOURCE = '''

@triton.jit
def _gtimer(dummy):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dummy], dtype=tl.int64, is_pure=False,
                                     pack=1)
'''


def module_from_source(src: str, name: str):
    """`src` written to a temporary file and imported as `name` (Triton's JIT reads a kernel's source from a file)."""
    f = Path(tempfile.mkdtemp(prefix=f"{name}_")) / f"{name}.py"
    f.write_text(src)
    spec = importlib.util.spec_from_file_location(name, f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def row_source(path=None) -> str:
    """_topk_row's source (or the file at `path`), its relative import made absolute."""
    src = Path(path or inspect.getsourcefile(_topk_row)).read_text()
    return src.replace("from ._topk_kernels import", "from indexer_logits._topk_kernels import").replace(
        "from ._topk_ptx import", "from indexer_logits._topk_ptx import")


def decode_case(case: str, dev):
    """(batch, ctx, the logits call's arguments, its logits, every row's length) of a "BxCTX" case, bench.topk's
    inputs (full lengths)."""
    batch, ctx = (int(x) for x in case.split("x"))
    inp = make_decode_inputs(Problem(), batch, ctx, lens="full", device=dev, max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, ctx)
    logits = K.fp8_paged_mqa_logits(*args, False)
    return batch, ctx, args, logits, torch.full((batch,), ctx, dtype=torch.int32, device=dev)


def edit_source(src: str, old: str, new: str, probe: str) -> str:
    """`src` with its one `old` replaced by `new`; the probe (named in the message) stops where `old` is not there
    exactly once (the module it edits has changed since the probe was written)."""
    if src.count(old) != 1:
        raise SystemExit(f"{probe}: expected one {old!r} in the module, found {src.count(old)}")
    return src.replace(old, new)


def prefill_case(doc: str):
    """A ragged-prefill probe's command line (--shape RxK, --rounds, --out) and inputs (bench.topk's): (its
    arguments, rows, keys, the device, (q, kv, weights, ks, ke), (K, its scales as one vector))."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--shape", default="4096x65536")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows, keys = (int(x) for x in a.shape.split("x"))
    dev = torch.device("cuda")
    inp = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), rows, keys, device=dev)
    q, kv, w, ks, ke = inp.args()
    return a, rows, keys, dev, (q, kv, w, ks, ke), (kv[0], kv[1].reshape(-1))


def row_launch(kernel, logits, lens, idx, cands, k: int = K_BEST, **extra):
    """A launch of a row-path kernel (a _topk_row.topk_row_kernel or an edited copy) over `logits` with the
    module's settings, every row's window [0, lens[row]), indices into idx, no scores."""
    rk = _topk_row
    rows, width = logits.shape
    hold = rk.holds(rk.HOLD, width, rk.BLOCK, rk.NUM_WARPS)
    return lambda: kernel[(rows,)](logits, logits.stride(0), lens, lens, lens, 1, width, k, idx, idx.stride(0), idx,
                                   idx.stride(0), cands, WINDOW=2, BLOCK_=rk.BLOCK, BINS_=rk.bins_for(width),
                                   CAP_=rk.CAP, WRITE_VALUES=False, PDL=False, HOLD_=hold, num_warps=rk.NUM_WARPS,
                                   **extra)


def same_as_torch(idx, logits, k: int = K_BEST) -> bool:
    """Whether idx holds each row's k best positions (as sets) by torch.topk (no ties on these inputs)."""
    ref = torch.sort(torch.topk(logits, k, dim=1).indices.int(), dim=1).values
    return bool(torch.equal(torch.sort(idx, dim=1).values, ref))


def ab_arguments(doc: str, cases: str = "128x8192,64x8192", rounds: int = 7):
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--cases", default=cases)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--out", default=None)
    return ap.parse_args()


def ragged_replica(inputs, kparts, keys: int, k: int, blocks, scratch, module, probe: str, block_kwargs=None):
    """A fn(idx) -> run: a replica of the ragged top-k call (indexer_logits._topk._ragged_topk's blocks, the bound
    path's tile maxima from the logits kernel) over prefill_case's inputs (q, kv, weights, ks, ke) and K parts (K,
    its scales), in `blocks` of rows (_topk._blocks'), each block's logits written into `scratch` by `module`'s
    launch in place of the serving module's, with block_kwargs(b) (a dict) as further keywords of block b's launch;
    `probe` names the script in its refusal where the selection takes no tile maxima."""
    from indexer_logits import _topk as T

    q, _, w, ks, ke = inputs
    step = max(i1 - i0 for i0, i1 in blocks)

    def replica(idx):
        def run():
            ws, kept = T.call_workspace([i1 - i0 for i0, i1 in blocks], keys, q.device, "prefill")
            maxima, tile, words = T._ragged_epilogue(q, step, keys, k, ws)
            if not maxima:
                raise SystemExit(f"{probe}: the block's selection takes no tile maxima from the logits kernel")
            plans = {} if T.SHARE_PLANS else None
            for b, (i0, i1) in enumerate(blocks):
                n = i1 - i0
                tm = (maxima[0][:n], maxima[1][:n], tile, ws, n * words, words)
                module.launch(q[i0:i1], *kparts, w[i0:i1], ks[i0:i1], ke[i0:i1], scratch[:n], False, tile_max=tm,
                              **(block_kwargs(b) if block_kwargs else {}))
                T._select(scratch[:n], k, T.WINDOW_RAGGED, idx[i0:i1], None, ws, lo=ks[i0:i1], hi=ke[i0:i1],
                          tile_maxima=(tm[0], tm[1], True), plans=plans)
            T.give_back(kept, ws)
        return run
    return replica


def checked_and_timed(fns: dict, outs: dict, info: dict, rounds: int, out_path, more_fns=None) -> int:
    """Every fn run once and its rows (outs[name]) checked as sets against outs["served"], then every fn and the
    logits alone ("logits", more_fns after) timed eagerly, alternated; a table printed, the result written to
    out_path; 0 where every row is as served."""
    from bench.topk import best_alternated, eager_us

    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    ref = outs["served"].sort(1).values
    bad = {name: int((o.sort(1).values != ref).any(1).sum()) for name, o in outs.items()}
    print(json.dumps({"rows_unlike_served": bad}), flush=True)
    best = best_alternated({**fns, **(more_fns or {})}, rounds, timer=eager_us)
    res = {**info, "rows_unlike_served": bad, "us": best,
           "over_logits": {n: v / best["logits"] for n, v in best.items()}}
    width = max(len(n) for n in best)
    for n, v in best.items():
        print(f"{n:{width}s} {v:9.1f} us  {v / best['logits']:.3f} of the logits", flush=True)
    if out_path:
        Path(out_path).write_text(json.dumps(res, indent=1))
    return 0 if not any(bad.values()) else 1
