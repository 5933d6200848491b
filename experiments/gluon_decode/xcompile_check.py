"""Cross-compile the Gluon decode kernel for sm_90 on a machine without a GPU and report what it
uses: shared memory, registers and spills (ptxas -v), and whether the PTX has the features the
design needs (wgmma, bulk tensor copies, setmaxnreg for the warp-specialised partitions).

Usage (from the repo root, any machine): python3 experiments/gluon_decode/xcompile_check.py [--dump DIR]
Exits non-zero if a setting fails to compile or a feature is missing.

The launch arguments are built by the kernel's own `prepare` on small CPU tensors, and each is
specialised by Triton's own routine (as the JIT does at launch), so the signature compiled here is
the one a GPU launch would compile.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # must be unset before triton is imported

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

import kernel as K  # noqa: E402

def cpu_inputs(batch=4, context=4096, page_gap=64, next_n=1, lens_2d=False):
    """Small CPU tensors shaped like the real call (page stride with a gap, as tuner.inputs);
    lens_2d: context_lens [B, next_n] (each row its own length) instead of [B]."""
    pages = batch * context // 64 + 3
    stride = 64 * 132 + page_gap
    raw = torch.zeros(pages * stride, dtype=torch.uint8)
    kv = raw.as_strided((pages, 64, 1, 132), (stride, 132, 132, 1))
    q = torch.zeros(batch, next_n, 64, 128, dtype=torch.float8_e4m3fn)
    w = torch.zeros(batch * next_n, 64, dtype=torch.float32)
    lens = torch.full((batch, next_n) if lens_2d else (batch,), context, dtype=torch.int32)
    bt = torch.zeros(batch, context // 64, dtype=torch.int32)
    out = torch.zeros(batch * next_n, context, dtype=torch.float32)
    return q, kv, w, lens, bt, out, context


def build_source(fn, args, constexprs):
    """GluonASTSource for `fn` called with positional `args` and constexpr kwargs, specialised
    as the JIT's binder does (native_specialize_impl: pointer alignment, int divisibility, value
    1 -> constexpr, host TensorDescriptor -> 'tensordesc<...>')."""
    from triton._C.libtriton import native_specialize_impl

    signature, consts, attrs = {}, {}, {}
    it = iter(args)
    for i, p in enumerate(fn.params):
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            consts[p.name] = constexprs[p.name]
            continue
        value = next(it)
        kind, key = native_specialize_impl(CUDABackend, value, p.is_const, True, True)
        if kind == "constexpr":
            consts[p.name] = value
        elif isinstance(key, str) and key:
            attrs[(i,)] = CUDABackend.parse_attr(key)
        signature[p.name] = kind
    return GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs), signature


def ptxas_report(ptx: str):
    """(ptxas -v log, SASS text) of the PTX built for sm_90a."""
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(90).path
    cuobjdump = str(Path(ptxas).with_name("cuobjdump"))
    with tempfile.TemporaryDirectory() as d:
        src, cubin = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, "-v", "-arch=sm_90a", str(src), "-o", str(cubin)], capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode:
            raise RuntimeError(f"ptxas failed:\n{log[-3000:]}")
        sass = ""
        if Path(cuobjdump).exists():
            sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True).stdout
    return log, sass


def registers_by_region(sass: str):
    """[(setmaxnreg value, registers used)] for each stretch of SASS that starts at a USETMAXREG
    (in address order): the highest R index used there + 1. ptxas reports one count for the whole
    kernel (its .maxnreg); this shows what each partition really uses against its setmaxnreg."""
    regions, cur = [], None
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(.*?);", line)
        if not m:
            continue
        ins = m.group(1)
        if "USETMAXREG" in ins:
            v = re.search(r"0x([0-9a-f]+)\s*$", ins)
            cur = [int(v.group(1), 16) if v else -1, 0]
            regions.append(cur)
            continue
        if cur is not None:
            for r in re.findall(r"\bR(\d+)\b", ins):
                cur[1] = max(cur[1], int(r) + 1)
    return [tuple(r) for r in regions if r[1]]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", default=None, help="folder for the TTGIR / PTX of each setting")
    args = ap.parse_args()
    print(f"triton {triton.__version__}, torch {torch.__version__}, target sm_90 (ptxas -arch=sm_90a)")
    failures = 0
    for name, setting, next_n in ([(n, st, 1) for n, st in K.SETTINGS.items()]
                                  + [(n, st, 2) for n, st in K.SETTINGS_N2.items()]):
        ncons = setting["num_consumers"]
        try:
            _, kargs, kconst, opts = K.prepare(*cpu_inputs(next_n=next_n), **setting)
            split = K.register_split(ncons, opts["maxnreg"])
            src, sig = build_source(K._decode_ws_kernel, kargs, kconst)
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
            ptx = compiled.asm["ptx"]
            log, sass = ptxas_report(ptx)
        except Exception as exc:  # report and go on
            failures += 1
            print(f"[{name}] FAILED: {type(exc).__name__}: {str(exc)[-3000:]}")
            continue
        if args.dump:
            out = Path(args.dump)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.ttgir").write_text(compiled.asm["ttgir"])
            (out / f"{name}.ptx").write_text(ptx)
            (out / f"{name}.ptxas.txt").write_text(log)
        regs = re.findall(r"Used (\d+) registers", log)
        spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
        setmax = sorted({int(v) for v in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)})
        maxnreg_dir = re.findall(r"\.maxnreg (\d+)", ptx)
        md = compiled.metadata
        threads = 32 * md.num_warps
        launch_regs = int(regs[-1]) if regs else 0
        ctas_by_regs = 65536 // max(1, launch_regs * threads)
        ctas_by_smem = (228 * 1024) // (md.shared + 1024)
        feats = {
            "wgmma": bool(re.search(r"wgmma\.mma_async", ptx)),
            "cp.async.bulk.tensor": bool(re.search(r"cp\.async\.bulk\.tensor", ptx)),
            "setmaxnreg": bool(setmax),
            "mbarrier": bool(re.search(r"mbarrier\.(try_wait|arrive)", ptx)),
        }
        spill_txt = "/".join(spills[-1]) if spills else "?"
        print(f"[{name}] shared {md.shared} B, {md.num_warps} warps ({threads} threads), ptxas: {launch_regs} "
              f"registers a thread at launch (.maxnreg {maxnreg_dir[0] if maxnreg_dir else '-'}), "
              f"stack/spill stores/spill loads {spill_txt} B; CTAs per SM: {ctas_by_regs} by registers, "
              f"{ctas_by_smem} by shared memory")
        wg = re.findall(r"wgmma\.mma_async[\w.:]*", ptx)[:1]
        n_bulk = len(re.findall(r"cp\.async\.bulk\.tensor", ptx))
        print(f"    per partition inside warp_specialize (setmaxnreg): producer {split[0]}, "
              + (f"second consumer {split[1]}, " if ncons == 2 else "")
              + f"default consumer {split[2]}; setmaxnreg values in PTX {setmax}")
        print(f"    {wg[0] if wg else 'no wgmma'}, {n_bulk} bulk tensor copies in PTX")
        regions = registers_by_region(sass)
        if regions:
            print("    SASS registers used per setmaxnreg region (limit: used): "
                  + ", ".join(f"{lim}: {used}" for lim, used in regions))
            over = [(lim, used) for lim, used in regions if used > lim]
            if over:
                failures += 1
                print(f"    ERROR: a region uses more registers than its setmaxnreg: {over}")
        if spills and (int(spills[-1][1]) or int(spills[-1][2])):
            print("    WARNING: spills")
        missing = [k for k, v in feats.items() if not v]
        if missing:
            failures += 1
            print(f"    MISSING in PTX: {missing}")
        else:
            print("    PTX has: " + ", ".join(feats))
        if split[2] not in setmax or split[0] not in setmax:
            print("    NOTE: the expected per-partition register counts are not all among the PTX's setmaxnreg values")
    # The launch contract's other forms (clean_logits=True, 2-D lengths) of one setting of each kind:
    # they must compile without spills, as the plain form above.
    forms = [(next(iter(K.SETTINGS)), 1), ("n2_tp32_b3_c1_r96", 2), ("n2_tp128_b8_c4_r96", 2)]
    for name, next_n in forms:
        setting = (K.SETTINGS if next_n == 1 else K.SETTINGS_N2)[name]
        for lens_2d, clean in ((False, True), (True, False), (True, True)):
            tag = f"[{name} {'2-D' if lens_2d else '1-D'} lens, clean_logits={clean}]"
            try:
                _, kargs, kconst, opts = K.prepare(*cpu_inputs(next_n=next_n, lens_2d=lens_2d), **setting,
                                                   clean_logits=clean)
                src, _ = build_source(K._decode_ws_kernel, kargs, kconst)
                compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
                log, _ = ptxas_report(compiled.asm["ptx"])
            except Exception as exc:  # report and go on
                failures += 1
                print(f"{tag} FAILED: {type(exc).__name__}: {str(exc)[-3000:]}")
                continue
            spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
            spill_txt = "/".join(spills[-1]) if spills else "?"
            print(f"{tag} compiles: shared {compiled.metadata.shared} B, stack/spill stores/spill loads {spill_txt} B")
            if not spills or int(spills[-1][1]) or int(spills[-1][2]):
                failures += 1
                print(f"    ERROR: spills (or no ptxas report) in {tag}")
    # The timing diagnostics (diag_gpu.py) of the first setting: they must compile too.
    first = next(iter(K.SETTINGS))
    for diag in (1, 2, 3, 4, 5):
        try:
            _, kargs, kconst, opts = K.prepare(*cpu_inputs(), **K.SETTINGS[first], diag=diag)
            src, _ = build_source(K._decode_ws_kernel, kargs, kconst)
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
            print(f"[{first} diag {diag}] compiles: shared {compiled.metadata.shared} B")
        except Exception as exc:  # report and go on
            failures += 1
            print(f"[{first} diag {diag}] FAILED: {type(exc).__name__}: {str(exc)[-3000:]}")
    print("OK" if not failures else f"{failures} setting(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
