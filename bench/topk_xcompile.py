"""The top-k selection kernels cross-compiled for a GPU generation (no GPU needed): registers,
spills and shared memory of each kernel of every path (indexer_logits._topk_select.PATHS), as
launched for decode at 64 x 32K, k = 2048 (the launcher's settings: BLOCK, warps, bins, PDL on).

    python -m bench.topk_xcompile [--target sm_90] [--k 2048] [--json]

Each row also carries `ptx_sha1`, a hash of the kernel's PTX body (bench.template_ptx.ptx_body: no
debug lines), so that a change meant to leave a kernel as it was can be
checked against the commit before it: run the tool in both trees and compare the column.

Run it without TRITON_INTERPRET (it compiles for real, TTIR -> PTX -> ptxas -v)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile

from bench.template_ptx import ptx_body

ROWS, WIDTH = 64, 32768
TARGETS = {"sm_80": 80, "sm_90": 90, "sm_100": 100, "sm_120": 120}


def _args(k: int) -> dict:
    """Typical launch arguments by parameter name: pointers as Triton types, ints as values."""
    return {"logits_ptr": "*fp32", "stride_row": WIDTH, "lo_ptr": "*i32", "hi_ptr": "*i32", "len_ptr": "*i32",
            "next_n": 1, "width": WIDTH, "k": k, "ws_ptr": "*i32", "cand_ptr": "*i64", "idx_ptr": "*i32",
            "stride_idx": k, "val_ptr": "*i32", "stride_val": k, "chunk_len": 2048,
            # the tiles path's own (tiles of 16: 2,048 maxima a row, a buffer of 2k tiles)
            "maxima_ptr": "*fp32", "maxima_stride": WIDTH // 16, "ntiles_ptr": "*i32", "vals_ptr": "*fp32",
            "vals_stride": k, "list_ptr": "*i32", "list_stride": 2 * k, "cand_len_ptr": "*i32", "buf_ptr": "*fp32",
            "buf_stride": 2 * k * 16, "slots_per_program": 128, "idx_stride": k, "counts_ptr": "*i32",
            "nchunks": 4, "chunk_tiles": 1024, "tau_ptr": "*fp32", "ws_first_ptr": "*i32", "ws_second_ptr": "*i32",
            # the bound path's segments (64 x 32K: 16 programs a row of 2,048 keys, 512 positions each)
            "seg_ptr": "*i32", "seg_cap": 512, "counts_ptr": "*i32", "k_tiles": -(-k // 8)}


def kernels(k: int) -> list[tuple[str, object, dict, int]]:
    """(name, jit function, constexprs, warps) of every kernel each path launches."""
    from indexer_logits import _topk_fused as F, _topk_kernels as KN, _topk_row as R, _topk_select as S
    from indexer_logits import _topk_bound as B, _topk_bound_count as BC, _topk_resident as RS, _topk_tiles as T
    common = {"WINDOW": 1, "BLOCK": S.BLOCK, "BINS_": KN.BINS}
    kp = 1 << (k - 1).bit_length()
    compact = {"KP": kp, "WRITE_VALUES": False, "SCAN_SLOTS": S.SCAN_SLOTS, "PDL": True}
    w = S.NUM_WARPS
    return [
        ("rounds: range", KN.topk_range_kernel, {**common, "PDL": False}, w),
        ("rounds: round 1", KN.topk_hist_kernel, {**common, "ROUND": 1, "PDL": True, "FIT_CAP_": 0}, w),
        ("rounds: round 2", KN.topk_hist_kernel, {**common, "ROUND": 2, "PDL": True, "FIT_CAP_": 0}, w),
        ("rounds: compaction", KN.topk_compact_kernel,
         {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "FIT_CAP_": 0}, w),
        ("fused: round 1 (sampled range)", F.topk_round1_kernel, {**common, "SAMPLE_": F.SAMPLE, "PDL": False}, w),
        ("fused: compaction + selection", F.topk_select_kernel, {**common, **compact, "CAP_": F.CAP, "CB_": F.CB}, w),
        ("row: the one kernel", R.topk_row_kernel,
         {"WINDOW": 1, "BLOCK_": R.BLOCK, "BINS_": R.bins_for(WIDTH), "CAP_": R.CAP, "WRITE_VALUES": False, "PDL": False}, R.NUM_WARPS),
        # and its row of at most two steps held in registers (HOLD: 128 x 8K's)
        ("row: the one kernel, held", R.topk_row_kernel,
         {"WINDOW": 1, "BLOCK_": R.BLOCK, "BINS_": R.bins_for(8192), "CAP_": R.CAP, "WRITE_VALUES": False, "PDL": False,
          "HOLD_": True}, R.NUM_WARPS),
        # and its write pass's stores by inline PTX (INLINE: on CUDA by default), held and not
        ("row: the one kernel, held, inline stores", R.topk_row_kernel,
         {"WINDOW": 1, "BLOCK_": R.BLOCK, "BINS_": R.bins_for(8192), "CAP_": R.CAP, "WRITE_VALUES": False, "PDL": False,
          "HOLD_": True, "INLINE_": True}, R.NUM_WARPS),
        ("row: the one kernel, inline stores", R.topk_row_kernel,
         {"WINDOW": 1, "BLOCK_": R.BLOCK, "BINS_": R.bins_for(WIDTH), "CAP_": R.CAP, "WRITE_VALUES": True, "PDL": False,
          "INLINE_": True}, R.NUM_WARPS),
        # the tiles path: its own four kernels (its two selections are the rounds' above)
        ("tiles: tile maxima", T.topk_tile_max_kernel, {"WINDOW": 1, "TILE_": 16, "STEP": T.STEP_KEYS // 16, "PDL": True}, w),
        ("tiles: round 2 over the maxima", KN.topk_hist_kernel,
         {**common, "ROUND": 2, "PDL": True, "FIT_CAP_": T.fit_cap(k)}, w),
        ("tiles: compaction over the maxima", KN.topk_compact_kernel,
         {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "FIT_CAP_": T.fit_cap(k)}, w),
        ("tiles: pick counts", T.topk_tile_count_kernel,
         {"KB": min(1024, kp), "PB": T.PICK_BLOCK, "BINS_": KN.BINS, "FIT_CAP_": T.fit_cap(k), "PDL": True}, w),
        ("tiles: pick", T.topk_tile_pick_kernel,
         {"WINDOW": 1, "TILE_": 16, "PB": T.PICK_BLOCK, "NCP": 4, "BINS_": KN.BINS, "FIT_CAP_": T.fit_cap(k),
          "PDL": True}, w),
        ("tiles: gather", T.topk_tile_gather_kernel,
         {"WINDOW": 1, "TILE_": 16, "STEP": T.STEP_KEYS // 16, "BINS_": KN.BINS, "PDL": True}, w),
        ("tiles: pick + gather (MERGE)", T.topk_tile_pick_gather_kernel,
         {"WINDOW": 1, "TILE_": 16, "PB": min(T.PICK_BLOCK, T.STEP_KEYS // 16), "NCP": 4, "BINS_": KN.BINS,
          "FIT_CAP_": T.fit_cap(k), "PDL": True}, w),
        ("tiles: remap", T.topk_tile_remap_kernel, {"TILE_": 16, "KB": min(1024, kp), "PDL": True}, w),
        ("tiles: compaction remapping (MERGE)", KN.topk_compact_remap_kernel,
         {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "REMAP_": 16}, w),
        # the bound path: its maxima's range and round 1 are the rounds' kernels above
        *((f"bound: keys above the bound{' (SEGMENTS)' if g else ''}", BC.topk_bound_count_kernel,
           {**common, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": g}, w) for g in (False, True)),
        # and its count at the tuner's other steps (COUNT_STEP), loading a step ahead (COUNT_PREFETCH)
        *((f"bound: count, {c} a step{', ahead' if f else ''}{' (SEGMENTS)' if g else ''}", BC.topk_bound_count_kernel,
           {**common, "BLOCK": c, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": g, "PREFETCH_": f}, w)
          for c, f, g in ((512, True, True), (1024, False, True), (1024, True, True), (1024, True, False))),
        # and its count by rows of 32 keys (COUNT_LANES: inline PTX), its sub-segments packed through
        # registers at the most slots it takes (SUB_SLOTS) and at a typical 64 a sub-segment
        *((f"bound: count, {c} a step, lanes, {p} a sub-segment (SEGMENTS)", BC.topk_bound_count_kernel,
           {**common, "BLOCK": c, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": True, "LANES_": True, "ASM_": True,
            "SUB_P2": p}, w)
          for c in (512, 1024) for p in (64, B.SUB_SLOTS // (c // 32))),
        # and its count claiming its segment slots from a counter (COUNT_BALLOT: inline PTX, a warp's claims one
        # atomic) at two steps
        *((f"bound: count, {c} a step{', ahead' if f else ''}, slots claimed (SEGMENTS)", BC.topk_bound_count_kernel,
           {**common, "BLOCK": c, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": True, "BALLOT_": True, "ASM_": True,
            "PREFETCH_": f}, w)
          for c, f in ((512, False), (1024, False), (512, True))),
        # and its count by a prefix sum a step with its atomics and stores by inline PTX (COUNT_INLINE)
        ("bound: count, atomics and stores inline (SEGMENTS)", BC.topk_bound_count_kernel,
         {**common, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": True, "INLINE_": True}, w),
        # and its count letting the compaction launch at its start (TRIGGER: griddepcontrol.launch_dependents)
        ("bound: count, triggering its dependent (SEGMENTS)", BC.topk_bound_count_kernel,
         {**common, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": True, "TRIGGER_": True}, w),
        # and its count with its mapping and first step's keys loaded before its window's test (COUNT_EARLY), in
        # the prefix sum's inline form and the claims'
        *((f"bound: count{', slots claimed' if b else ', inline'}, loads early (SEGMENTS)", BC.topk_bound_count_kernel,
           {**common, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": True, "BALLOT_": b, "ASM_": b, "INLINE_": not b,
            "EARLY_": True}, w)
          for b in (False, True)),
        # and its count filling a sub-segment a warp by votes (COUNT_VOTE), at two steps (4 and 8 keys a thread) and
        # with its loads early, and the compaction reading those sub-segments (with its loads early: the decode form)
        *((f"bound: count, {c} a step, voted{', loads early' if e else ''} (SEGMENTS)", BC.topk_bound_count_kernel,
           {**common, "BLOCK": c, "MARGIN_": B.MARGIN, "PDL": True, "SEG_": True, "VOTE_": w, "ASM_": True,
            "PACK_": c // (32 * w), "EARLY_": e}, w)
          for c, e in ((512, False), (1024, False), (512, True))),
        ("bound: compaction, voted sub-segments, loads early (SEGMENTS)", B.topk_bound_compact_kernel,
         {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "SEG_": True, "VOTE_": w, "EARLY_": True}, w),
        # and the compaction a program a group of count programs (COMPACT_GROUP: their segments read as one list of
        # sub-segments, at most B.COMPACT_SUBSEGMENTS): 8 plain ones, or 4 voted ones of the count's warps each, with
        # its loads early (the decode form)
        *((f"bound: compaction, a group of {g}{', voted' if v else ''}, loads early (SEGMENTS)",
           B.topk_bound_compact_kernel, {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "SEG_": True,
                                         "VOTE_": g * (w if v else 1), "EARLY_": True}, w)
          for g, v in ((8, False), (B.COMPACT_SUBSEGMENTS // w, True))),
        *((f"bound: compaction{' (SEGMENTS)' if g else ''}", B.topk_bound_compact_kernel,
           {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "SEG_": g}, w)
          for g in (False, True)),
        # and its round 1 over the maxima with their range loaded before its window's test (COUNT_EARLY)
        ("bound: round 1 over the maxima, range early", KN.topk_hist_kernel,
         {**common, "ROUND": 1, "PDL": True, "FIT_CAP_": 0, "EARLY_": True}, w),
        # and its segment's first block loaded before its thresholds (COMPACT_EARLY)
        ("bound: compaction, loads early (SEGMENTS)", B.topk_bound_compact_kernel,
         {**common, **compact, "CAP_": KN.CAP, "RANK_TILE_": KN.RANK_TILE, "SEG_": True, "EARLY_": True}, w),
        # the resident path: one kernel at each of the tuner's settings (tuner.topk_tune.space), its chunk
        # read a step a phase or held in registers (a chunk of one step)
        *((f"resident: {st} a step, {wr} warps{', held' if hold else ''}", RS.topk_resident_kernel,
           {"WINDOW": 1, "STEP": st, "KP": kp, "CAP_": KN.CAP, "WRITE_VALUES": False, "BINS_": KN.BINS,
            "SCAN_SLOTS": RS.SCAN_SLOTS, "RANK_TILE_": KN.RANK_TILE, "PDL": False, "PHASE_": 0, "HOLD_": hold}, wr)
          for st, wr in ((8192, 16), (8192, 8), (4096, 8)) for hold in (False, True)),
    ]


def compile_one(fn, constexprs: dict, k: int, capability: int, num_warps: int) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
    from tuner.signature import _specialize_int
    from tuner.xcompile import _ptxas_report

    args = _args(k)
    signature, consts, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            # (a constexpr with a default, named by none of the rows written before it: its default)
            consts[p.name] = constexprs[p.name] if p.name in constexprs or not p.has_default else p.default
            continue
        value = args[p.name]
        kind, spec = (value, "D") if isinstance(value, str) else _specialize_int(value)
        if kind == "constexpr":
            consts[p.name] = value
        elif spec:
            attrs[(i,)] = CUDABackend.parse_attr(spec)
        signature[p.name] = kind
    src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32), options={"num_warps": num_warps})
    report = _ptxas_report(compiled.asm["ptx"], capability)
    return {**report, "shared_bytes": int(compiled.metadata.shared), "ptx_sha1": ptx_sha1(compiled.asm["ptx"])}


def ptx_sha1(ptx: str) -> str:
    """12 hex digits of sha1 over the kernel's PTX body as bench.template_ptx compares it (no debug lines)."""
    return hashlib.sha1(ptx_body(ptx).encode()).hexdigest()[:12]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.topk_xcompile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="sm_90", choices=sorted(TARGETS))
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("bench.topk_xcompile: unset TRITON_INTERPRET (it compiles for a real target)", file=sys.stderr)
        return 2
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="topk_xcompile_")  # no cached kernel hides a compile
    from indexer_logits import _topk_select as S
    rows = []
    for name, fn, constexprs, warps in kernels(a.k):
        rep = compile_one(fn, constexprs, a.k, TARGETS[a.target], warps)
        rows.append({"kernel": name, "target": a.target, "num_warps": warps, **rep})
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'kernel':<38}{'warps':>6}{'regs':>6}{'spill st':>10}{'spill ld':>10}{'stack':>7}{'shared':>8}"
              f"{'ptx sha1':>14}   ({a.target}, k {a.k})")
        for r in rows:
            print(f"{r['kernel']:<38}{r['num_warps']:>6}{r['registers']:>6}{r['spill_stores']:>10}{r['spill_loads']:>10}"
                  f"{r['stack_bytes']:>7}{r['shared_bytes']:>8}{r['ptx_sha1']:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
