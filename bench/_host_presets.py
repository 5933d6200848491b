"""bench.host's presets: the tune, emit, verify, bench and check commands a step can name, with
their time limits (`python -m bench.host --list` prints them)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

PY = sys.executable or "python3"
POW2 = "1,2,4,8,16,32,64,128,256"
DECODE_CONTEXTS = "4K,8K,32K,128K,1M"
BENCH_CONTEXTS = "4096,8192,32768,131072,1048576"
KERNELS = "shipped,shipped_pdl,default,autotune"
PREFILL_METHODS = "shipped,default,autotune,reference"
DEFAULT_LIMIT_S = 300
RESERVE_S = 10  # kept back from a step's limit for the packing at the end, with --total-s


@dataclass(frozen=True)
class Preset:
    limit_s: int
    argv: tuple[str, ...]
    kind: str = "run"  # tune: gets --db, --time-budget, --tune-args; bench: --run-id, --out


def _tune(*args: str) -> tuple[str, ...]:
    return (PY, "cli.py", "tune", "--quiet", *args)


def _bench(*args: str) -> tuple[str, ...]:
    return (PY, "cli.py", "bench", *args)


PRESETS: dict[str, Preset] = {
    "tests": Preset(150, (PY, "-m", "pytest", "-q", "-s", "-m", "gpu", "tests/")),
    "tune-decode-fp8": Preset(540, _tune("--dtype", "fp8", "--next-n", "1,2", "--batch", "pow2", "--context",
                                         DECODE_CONTEXTS, "--trials", "12", "--ask-batch", "4"), "tune"),
    "tune-decode-fp8-n1": Preset(350, _tune("--dtype", "fp8", "--next-n", "1", "--batch", "pow2", "--context",
                                            DECODE_CONTEXTS, "--trials", "14", "--ask-batch", "4"), "tune"),
    "tune-decode-fp8-n2": Preset(350, _tune("--dtype", "fp8", "--next-n", "2", "--batch", "pow2", "--context",
                                            DECODE_CONTEXTS, "--trials", "14", "--ask-batch", "4"), "tune"),
    "tune-decode-bf16": Preset(70, _tune("--dtype", "bf16", "--batch", "1,8,64,256", "--context", "8K,32K,128K",
                                         "--trials", "6", "--ask-batch", "3"), "tune"),
    "tune-prefill-ragged": Preset(60, _tune("--family", "prefill_ragged", "--batch", "4096", "--context", "16K,64K",
                                            "--trials", "6", "--ask-batch", "3"), "tune"),
    "tune-prefill-paged-fp8": Preset(110, _tune("--family", "prefill_paged", "--dtype", "fp8", "--batch", "4096",
                                                "--context", "22528,131072", "--trials", "10", "--ask-batch", "5"),
                                     "tune"),
    "tune-prefill-paged-bf16": Preset(80, _tune("--family", "prefill_paged", "--dtype", "bf16", "--batch", "4096",
                                                "--context", "22528,131072", "--trials", "6", "--ask-batch", "6"),
                                      "tune"),
    "merge": Preset(60, (PY, "cli.py", "merge-db", "--into", "db/trials.sqlite", "{lane_stores}")),
    "emit": Preset(120, (PY, "cli.py", "emit", "--gpu", "{table}")),
    # the capped gates (81 s for the H200's 108 entries), then every entry at its own bucket and
    # the > 4 GiB pool: `verify --plan-only` estimates 2m31s for that table
    "verify": Preset(300, (PY, "cli.py", "verify", "--gpu", "{table}", "--no-defaults")),
    "bench-decode-fp8-n1": Preset(330, _bench("--dtype", "fp8", "--next-n", "1", "--batch", POW2, "--context",
                                              BENCH_CONTEXTS, "--methods", KERNELS, "--candidates", "3",
                                              "--replays", "10"), "bench"),
    "bench-decode-fp8-n2": Preset(200, _bench("--dtype", "fp8", "--next-n", "2", "--batch", POW2, "--context",
                                              BENCH_CONTEXTS, "--lens", "full", "--methods", KERNELS,
                                              "--candidates", "3", "--replays", "10"), "bench"),
    "bench-decode-bf16": Preset(60, _bench("--dtype", "bf16", "--batch", "1,8,64,256", "--context",
                                           "8192,32768,131072", "--lens", "full", "--methods", KERNELS,
                                           "--candidates", "3", "--replays", "10"), "bench"),
    # the torch baselines cost up to seconds a call at 1M: at B=64 only
    "bench-baselines-8k": Preset(60, _bench("--dtype", "fp8", "--batch", "64", "--context", "8192", "--methods",
                                            "shipped,shipped_pdl,torch_fullwidth,reference", "--candidates", "3",
                                            "--replays", "10"), "bench"),
    "bench-baselines-long": Preset(60, _bench("--dtype", "fp8", "--batch", "64", "--context", "131072,1048576",
                                              "--lens", "full", "--methods", "shipped,shipped_pdl,torch_fullwidth",
                                              "--candidates", "3", "--replays", "10"), "bench"),
    "bench-prefill-ragged": Preset(45, _bench("--family", "prefill_ragged", "--batch", "4096", "--context",
                                              "16384,65536", "--methods", PREFILL_METHODS, "--candidates", "3",
                                              "--replays", "5"), "bench"),
    "bench-prefill-paged-fp8": Preset(45, _bench("--family", "prefill_paged", "--dtype", "fp8", "--batch", "4096",
                                                 "--context", "22528,131072", "--methods", PREFILL_METHODS,
                                                 "--candidates", "3", "--replays", "5"), "bench"),
    "bench-prefill-paged-bf16": Preset(45, _bench("--family", "prefill_paged", "--dtype", "bf16", "--batch", "4096",
                                                  "--context", "22528,131072", "--methods", PREFILL_METHODS,
                                                  "--candidates", "3", "--replays", "5"), "bench"),
    "ceilings": Preset(300, (PY, "-m", "bench.ceilings", "--replays", "20", "--out", "{lane_dir}/ceilings.json")),
    "chunked-prefill": Preset(60, (PY, "-m", "bench.chunked_prefill", "--no-alternatives", "--replays", "5")),
    "page-stride": Preset(90, (PY, "-m", "bench.checks", "page-stride", "--table", "{table}")),
    "ab": Preset(300, (PY, "-m", "bench.template_ab", "--table", "{table}")),
    "workers": Preset(300, (PY, "-m", "bench.workers", "--workers", "{gpus}", "--out", "{lane_dir}/workers")),
}
