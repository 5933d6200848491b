"""DeepGEMM as the bench's baseline (issue 27): its pinned source tree assembled here, built there.

    python -m bench.deepgemm assemble --deepgemm DIR --cutlass DIR --fmt DIR [--out .dgz/dg.tar.xz]
    python3 -m bench.deepgemm build [--tar .dgz/dg.tar.xz] [--into /tmp/dg]    # on the GPU host

DeepGEMM has no release that builds against the device image's torch, and the GPU host reaches no
network, so the tree travels: `assemble` takes three git checkouts (DeepGEMM, NVIDIA/cutlass,
fmtlib/fmt; `fetch` gives bare mirrors, which work too), exports each at the pinned commit, keeps
what the build reads (cutlass' include/, fmt's include/ and src/) and writes one xz tarball with
a VERSION file naming the three commits (tuner.baselines.version_of reads it into every bench
row). ~1.3 MB against ~30 MB unpacked: it fits beside the wheels in a device call's 64 MiB.
Name its folder in .git/info/exclude and carry it.

`build` unpacks it, copies cutlass' cute/ and cutlass/ into deep_gemm/include/ (DeepGEMM's JIT
compiles its kernels against that folder at run time), runs `setup.py build_ext --inplace` (~80 s
on the H200 host's 16 cores) and prints the environment a process needs to import it:
PYTHONPATH with the tree, and LD_PRELOAD of the system libstdc++, without which
`deep_gemm._C.init` dies of SIGSEGV under that image's torch. The build is kept: a second `build`
into the same folder only checks the import.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

# The commits DeepGEMM's baseline figures were measured at (issue 27), and each tree's part the
# build reads: the paths under a commit that go into the tarball, and where they land in it.
PINS = {
    "deepgemm": ("477618cd51baffca09c4b0b87e97c03fe827ef03", [("", "")]),
    "cutlass": ("f3fde58372d33e9a5650ba7b80fc48b3b49d40c8", [("include", "third-party/cutlass/include")]),
    "fmt": ("553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28", [("include", "third-party/fmt/include"),
                                                          ("src", "third-party/fmt/src")]),
}
LIBSTDCXX = "/lib/x86_64-linux-gnu/libstdc++.so.6"
DEFAULT_TAR = Path(".dgz/dg.tar.xz")


def git_archive(repo: Path, commit: str, path: str) -> bytes:
    """`git archive` of one path at one commit, as tar bytes; a clear error if the commit is missing."""
    cmd = ["git", "-C", str(repo), "archive", "--format=tar", commit] + ([path] if path else [])
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode:
        raise SystemExit(f"{repo}: git archive {commit[:7]} {path or '.'} failed: "
                         f"{proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    return proc.stdout


def assemble(repos: dict[str, Path], out: Path, pins: dict = PINS) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    try:
        with tarfile.open(partial, "w:xz") as dst:
            for name, (commit, parts) in pins.items():
                for src_path, dst_path in parts:
                    src = tarfile.open(fileobj=io.BytesIO(git_archive(repos[name], commit, src_path)))
                    for member in src.getmembers():
                        rel = member.name[len(src_path):].lstrip("/") if src_path else member.name
                        if name == "deepgemm" and rel.startswith("third-party/"):
                            continue  # its submodules' empty folders; the pinned trees go there
                        member.name = f"{dst_path}/{rel}".strip("/") if rel else dst_path
                        if not member.name:
                            continue
                        dst.addfile(member, src.extractfile(member) if member.isfile() else None)
            version = "".join(f"{name if name != 'deepgemm' else 'deep_gemm'} {commit}\n"
                              for name, (commit, _) in pins.items()).encode()
            info = tarfile.TarInfo("VERSION")
            info.size, info.mtime = len(version), int(time.time())
            dst.addfile(info, io.BytesIO(version))
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)  # a cut run leaves no tarball that looks whole
    return out


def build(tar: Path, into: Path) -> dict[str, str]:
    env = {"PYTHONPATH": f"{into}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep),
           "LD_PRELOAD": LIBSTDCXX}
    if not list(into.glob("deep_gemm/_C*.so")):
        if not tar.is_file():
            raise SystemExit(f"--tar: {tar} not found (assemble it here with `python -m bench.deepgemm assemble`, "
                             "and carry its folder)")
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tar) as src:
            src.extractall(into, filter="data")
        for part in ("cute", "cutlass"):
            subprocess.run(["cp", "-r", str(into / "third-party/cutlass/include" / part), str(into / "deep_gemm/include/")],
                           check=True)
        t0 = time.time()
        proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=into, stdout=sys.stderr,
                              env={**os.environ, "DG_USE_LOCAL_VERSION": "0"})  # stdout: the export lines alone
        if proc.returncode:
            raise SystemExit(f"DeepGEMM build failed (exit {proc.returncode}) in {into}")
        print(f"built DeepGEMM in {time.time() - t0:.0f} s", file=sys.stderr)
    probe = subprocess.run([sys.executable, "-c", "import deep_gemm, tuner.baselines as b; print(b.version_of(deep_gemm))"],
                           env={**os.environ, **env, "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{Path.cwd()}"},
                           capture_output=True, text=True)
    if probe.returncode:
        raise SystemExit(f"import deep_gemm failed after the build: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    print(f"deep_gemm {probe.stdout.strip()} imports", file=sys.stderr)
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.deepgemm", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("assemble", help="the pinned tree as one tarball (here, from git checkouts)")
    for name in PINS:
        a.add_argument(f"--{name}", type=Path, required=True, help=f"a git checkout or mirror of {name}")
    a.add_argument("--out", type=Path, default=DEFAULT_TAR)
    b = sub.add_parser("build", help="unpack, build, check the import; prints `export` lines to eval")
    b.add_argument("--tar", type=Path, default=DEFAULT_TAR)
    b.add_argument("--into", type=Path, default=Path("/tmp/dg"))
    args = ap.parse_args(argv)
    if args.cmd == "assemble":
        out = assemble({name: getattr(args, name) for name in PINS}, args.out)
        print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB")
    else:
        for key, value in build(args.tar, args.into).items():
            print(f"export {key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
