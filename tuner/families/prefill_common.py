"""What the two prefill families share: the axes, the verify shape and the default config of a
compute-bound kernel over many query rows, each with its own limit (SPEC.md, "Prefill")."""

from __future__ import annotations

from indexer_logits._identity import Config, Problem

from .base import Family

PREFILL_AXES = {
    "block_t": (32, 64, 128, 256),
    "tiles_per_program": (1, 2, 4, 8, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (1, 2, 3, 4),
    "block_m": (1, 2, 4),
    "dot_dtype": ("native", "fp16", "bf16", "fp32"),
    "orient": ("q_rows", "k_rows"),
    "programs_per_sm": (0,),
    "store": ("tile",),
    # The epilogue's weighted head sum: tl.sum ('tree') or a chain of FFMAs ('chain'); under
    # Triton 3.7+ the tree costs +56 FP instructions a tile, on mma.sync targets the chain costs
    # layout conversions (docs/PERF.md, "Prefill under Triton 3.8 and 3.9: why").
    "head_sum": ("tree", "chain"),
}


class PrefillFamily(Family):
    axes = PREFILL_AXES
    verify_shape_gpu = (256, 4096)
    verify_shape_cpu = (8, 256)
    unused_options = ("next_n", "lens_mode")

    def verify_shape(self, bucket, caps, on_gpu) -> tuple[int, int]:
        batch, context = min(bucket[0], caps["batch"] if on_gpu else 8), min(bucket[1], caps["context"])
        return batch, max(context, batch)

    def default_tile(self, problem: Problem) -> int:
        return 64

    def default_config(self, problem: Problem, dot_dtype: str = "native") -> Config:
        """The best of the H200 prefill sweep (docs/PERF.md): 256 query-head rows per dot (block_m=4
        at H=64), 64-key tiles, 32 tiles per program, 3 stages, the key tile on the dot's M side."""
        block_m = max(1, min(4, 256 // problem.heads))
        return Config(block_t=self.default_tile(problem), tiles_per_program=32, num_warps=4, num_stages=3,
                      block_m=block_m, dot_dtype=dot_dtype, orient="k_rows")
