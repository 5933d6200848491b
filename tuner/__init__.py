"""Tuner for the DeepSeek sparse-attention indexer logits kernels.

Renders Triton kernels from templates, checks them against the torch reference and the
CUDA-graph rule, times them on the GPU and records every trial; see README.md.
"""

__version__ = "0.1.0"
