"""What the performance model (tuner.model) knows of a GPU nobody here has: a small built-in list
of device properties, each of which a flag can override (`cli.py predict --sm 170 ...`).

Two kinds of numbers live here. The per-SM limits of an architecture (register file, shared
memory, resident warps and programs) come from NVIDIA's CUDA programming guide tables for the
compute capability and are the same on every GPU of that architecture. The board's numbers (SM
count, memory bandwidth, matmul rates, L2) come from its datasheet; `sources` says where each
came from and which are estimates. Only the H200's copy bandwidth and matmul rates are measured
(docs/PERF.md, "The floors"); elsewhere the copy bandwidth is the nominal bandwidth times the
H200's measured / nominal ratio (4.27 / 4.8 = 0.89), and the matmul rates the dense datasheet
rate times the H200's measured / datasheet ratio (fp8 1400 / 1979, bf16 723 / 989).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from indexer_logits._identity import slugify

from .space import TARGETS, Target

# The H200's measured / nominal ratios, applied to datasheet numbers of other boards.
COPY_OF_NOMINAL = 4.27 / 4.8  # docs/PERF.md: copy 4.27 TB/s of the 4.8 TB/s HBM3e
FP8_OF_DATASHEET = 1400 / 1979  # docs/PERF.md: fp8 1366-1421 TFLOP/s measured, 1979 dense on the datasheet
BF16_OF_DATASHEET = 723 / 989  # docs/PERF.md: bf16 723 measured, 989 dense on the datasheet


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of a compute capability (CUDA programming guide, "Technical Specifications
    per Compute Capability"); the shared-memory figure is the per-SM carve-out, not the per-block
    opt-in maximum (that one is tuner.space.TARGETS' max_shared_bytes)."""

    registers_per_sm: int = 65_536
    max_warps_per_sm: int = 64
    max_programs_per_sm: int = 32
    shared_per_sm: int = 233_472  # 228 KB
    shared_reserved_per_program: int = 1_024  # the driver keeps 1 KB a block since sm_80
    register_granule: int = 256  # registers are given a warp in units of 256 (8 a thread)


ARCH_LIMITS = {
    "sm_80": ArchLimits(shared_per_sm=167_936),  # 164 KB
    "sm_89": ArchLimits(max_warps_per_sm=48, max_programs_per_sm=24, shared_per_sm=102_400),  # 100 KB
    "sm_90": ArchLimits(),
    "sm_100": ArchLimits(),
    "sm_120": ArchLimits(max_warps_per_sm=48, max_programs_per_sm=32, shared_per_sm=102_400),  # 100 KB
}


@dataclass(frozen=True)
class Device:
    """One GPU as the model sees it. Bandwidth in bytes/s, rates in flop/s, times in us."""

    name: str  # the key in DEVICES and the --gpu choice
    gpu_names: tuple[str, ...]  # torch.cuda.get_device_name() of the boards this entry stands for
    target: str  # the cross-compile target (tuner.space.TARGETS)
    sm_count: int
    nominal_bandwidth: float
    copy_bandwidth: float  # what a device-to-device copy reaches (the decode floor's rate)
    fp8_rate: float  # dense fp8 matmul rate
    bf16_rate: float
    l2_bytes: int
    # Launch to launch inside a CUDA graph, and the tail of the last programs (docs/PERF.md, "The
    # fixed cost per launch": 1.0 us between launches, ~1.5 us of tail on the H200).
    launch_us: float = 1.0
    tail_us: float = 1.5
    # A program's dependent start before its first cache read: lengths, then its block-table
    # entries (the H200 timeline: lengths at 0.77 us, first entry 1.02 us).
    start_us: float = 1.0
    # A cache read's round trip under load, as one program sees it (sets how many copies in flight
    # a stream needs: at 4.27 TB/s, 1.6 us is 6.8 MB in flight; the H200 timeline's first tiles
    # were scored 2.8-4.4 us after start with 12 MB queued). 1.6 fits the H200 trial store best
    # (model 1: top-1 regret 1.057 against 1.082 at 1.0 and 1.054 at 2.0: `python -m bench.model_fit --latency-us X`).
    latency_us: float = 1.6
    sources: Mapping[str, str] = field(default_factory=dict)
    limits: ArchLimits | None = None  # None: ARCH_LIMITS[target]

    @property
    def slugs(self) -> tuple[str, ...]:
        """The runtime's table slugs of the boards (indexer_logits._identity.slugify)."""
        return tuple(slugify(n) for n in self.gpu_names)

    @property
    def target_limits(self) -> Target:
        return TARGETS[self.target]

    @property
    def arch(self) -> ArchLimits:
        return self.limits or ARCH_LIMITS[self.target]

    @property
    def model_key(self) -> tuple:
        """Everything the model reads, hashable (a cache key)."""
        return (self.target, self.sm_count, self.copy_bandwidth, self.fp8_rate, self.bf16_rate, self.launch_us,
                self.tail_us, self.start_us, self.latency_us, self.arch)

    def matmul_rate(self, dtype: str) -> float:
        return self.fp8_rate if dtype == "fp8" else self.bf16_rate

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["gpu_names"] = list(self.gpu_names)
        data["sources"] = dict(self.sources)
        data["limits"] = dataclasses.asdict(self.arch)
        return data


TB, TF, MB = 1e12, 1e12, 1 << 20

DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("h200", ("NVIDIA H200",), "sm_90", 132, 4.8 * TB, 4.27 * TB, 1400 * TF, 723 * TF, 50 * MB,
           sources={"sm_count": "measured (docs/PERF.md)", "copy_bandwidth": "measured 4.25-4.28 TB/s (docs/PERF.md)",
                    "fp8_rate": "measured 1366-1421 TFLOP/s", "bf16_rate": "measured 723 TFLOP/s",
                    "l2_bytes": "datasheet", "launch_us/tail_us/start_us": "measured (docs/PERF.md timeline)"}),
    Device("h100_sxm", ("NVIDIA H100 80GB HBM3",), "sm_90", 132, 3.35 * TB, 3.35 * TB * COPY_OF_NOMINAL,
           1979 * TF * FP8_OF_DATASHEET, 989 * TF * BF16_OF_DATASHEET, 50 * MB,
           sources={"sm_count": "datasheet", "nominal_bandwidth": "datasheet 3.35 TB/s",
                    "copy_bandwidth": "estimate: nominal x the H200's 0.89", "rates": "estimate: datasheet x the H200's ratio"}),
    Device("b200", ("NVIDIA B200",), "sm_100", 148, 8.0 * TB, 8.0 * TB * COPY_OF_NOMINAL,
           4500 * TF * FP8_OF_DATASHEET, 2250 * TF * BF16_OF_DATASHEET, 126 * MB,
           sources={"sm_count": "datasheet (148)", "nominal_bandwidth": "datasheet 8 TB/s",
                    "copy_bandwidth": "estimate: nominal x the H200's 0.89",
                    "rates": "estimate: dense datasheet 4.5 / 2.25 PFLOP/s x the H200's ratio",
                    "l2_bytes": "unsure (126 MB reported)"}),
    Device("l40s", ("NVIDIA L40S",), "sm_89", 142, 864e9, 864e9 * COPY_OF_NOMINAL,
           733 * TF * FP8_OF_DATASHEET, 362 * TF * BF16_OF_DATASHEET, 96 * MB,
           sources={"sm_count": "datasheet (142)", "nominal_bandwidth": "datasheet 864 GB/s GDDR6",
                    "copy_bandwidth": "estimate: nominal x the H200's 0.89",
                    "rates": "estimate: dense datasheet 733 / 362 TFLOP/s x the H200's ratio (unsure of the fp8 "
                             "accumulate rate)", "l2_bytes": "datasheet 96 MB"}),
    Device("rtx_pro_6000", ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                            "NVIDIA RTX PRO 6000 Blackwell Server Edition"), "sm_120", 188,
           1.792 * TB, 1.792 * TB * COPY_OF_NOMINAL, 1000 * TF * FP8_OF_DATASHEET, 500 * TF * BF16_OF_DATASHEET,
           128 * MB,
           sources={"sm_count": "datasheet (188 SMs, both editions)",
                    "nominal_bandwidth": "datasheet 1792 GB/s (512-bit GDDR7, 28 Gbps)",
                    "copy_bandwidth": "estimate: nominal x the H200's 0.89 (GDDR7 may reach another fraction)",
                    "rates": "unsure: ~1000 dense fp8 / ~500 bf16 TFLOP/s derived from the 4000 sparse-fp4 AI TOPS, "
                             "x the H200's ratio", "l2_bytes": "unsure: 128 MB (the full GB202's L2)",
                    "limits": "CUDA guide, CC 12.0: 48 warps, 32 blocks, 100 KB shared an SM",
                    "launch_us/tail_us/start_us/latency_us": "the H200's (GDDR7's latency is likely higher)"}),
)}

# What `predict` may override, by flag name: (Device field, scale from the flag's unit).
OVERRIDES = {
    "sm": ("sm_count", 1),
    "bandwidth": ("copy_bandwidth", 1e9),  # GB/s
    "fp8_tflops": ("fp8_rate", 1e12),
    "bf16_tflops": ("bf16_rate", 1e12),
    "l2_mb": ("l2_bytes", MB),
    "launch_us": ("launch_us", 1),
    "start_us": ("start_us", 1),
    "latency_us": ("latency_us", 1),
}


def device(name: str, **overrides) -> Device:
    """The built-in device `name` with flag overrides (None = keep), e.g. device("h200", sm=114)."""
    if name not in DEVICES:
        raise ValueError(f"gpu: expected one of {sorted(DEVICES)}, got {name!r}")
    base = DEVICES[name]
    changes, notes = {}, dict(base.sources)
    for flag, value in overrides.items():
        if value is None:
            continue
        if flag not in OVERRIDES:
            raise ValueError(f"{flag}: not a device property; expected one of {sorted(OVERRIDES)}")
        fname, scale = OVERRIDES[flag]
        changes[fname] = type(getattr(base, fname))(value * scale)
        notes[fname] = f"overridden on the command line: --{flag.replace('_', '-')} {value}"
    # The matmul rates are the SMs' sum: another SM count scales them, unless they are given too.
    if overrides.get("sm") is not None:
        for flag, fname in (("fp8_tflops", "fp8_rate"), ("bf16_tflops", "bf16_rate")):
            if overrides.get(flag) is None:
                changes[fname] = getattr(base, fname) * overrides["sm"] / base.sm_count
                notes[fname] = f"{base.sources.get(fname, 'built in')}, scaled to --sm {overrides['sm']}"
    return dataclasses.replace(base, **changes, sources=notes) if changes else base
