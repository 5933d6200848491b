"""Write K into the paged cache layouts exactly as serving engines' writer kernels do.

Per token: scale = max(amax(|k|), 1e-4) / 448, optionally rounded up to a power of two
("ue8m0"); k_fp8 = (k / scale).to(e4m3). Read-back lives with the runtime (`unpack_pages`).
"""

from __future__ import annotations

import torch

from indexer_logits._layout import CacheLayout, check_cache, layout_of, unpack_pages

__all__ = ["CacheLayout", "quantize_tokens", "pack_pages", "unpack_pages", "layout_of", "check_cache",
           "FP8_MAX", "layout_for"]

FP8_MAX = 448.0


def layout_for(problem) -> CacheLayout:
    return CacheLayout(problem.cache_dtype, problem.page_size, problem.scale_layout, problem.head_dim)


def quantize_tokens(k: torch.Tensor, ue8m0: bool = False):
    """k [..., D] fp32/bf16 -> (k_fp8 [..., D] float8_e4m3fn, scale [...] fp32)."""
    if not isinstance(k, torch.Tensor) or k.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"k: expected a float32/bfloat16/float16 tensor, got {getattr(k, 'dtype', type(k).__name__)}")
    if k.dim() < 1 or k.shape[-1] == 0:
        raise ValueError(f"k: expected shape [..., D] with D > 0, got {list(k.shape)}")
    kf = k.float()
    scale = kf.abs().amax(dim=-1).clamp_min(1e-4) / FP8_MAX
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    k_fp8 = (kf / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return k_fp8, scale


def pack_pages(k: torch.Tensor, layout: CacheLayout, page_stride_bytes: int | None = None,
               ue8m0: bool = False) -> torch.Tensor:
    """k [num_pages, PAGE, D] (fp32/bf16) -> the cache view [num_pages, PAGE, 1, D(+4)].

    `page_stride_bytes` (default: one page) places each page inside a larger allocation, as
    engines do when the index cache shares a buffer; the gap bytes are filled with 0xFF so a
    kernel that reads them produces garbage rather than plausible zeros.
    """
    if k.dim() != 3 or k.shape[1] != layout.page_size or k.shape[2] != layout.head_dim:
        raise ValueError(
            f"k: expected shape [num_pages, {layout.page_size}, {layout.head_dim}], got {list(k.shape)}"
        )
    num_pages, page, d = k.shape
    stride = layout.page_bytes if page_stride_bytes is None else page_stride_bytes
    if stride < layout.page_bytes or stride % 4:
        raise ValueError(f"page_stride_bytes: expected a multiple of 4 that is >= {layout.page_bytes}, got {stride}")
    buf = torch.full((num_pages * stride,), 0xFF, dtype=torch.uint8, device=k.device)
    pages = buf.view(num_pages, stride)[:, : layout.page_bytes]
    if layout.cache_dtype == "bf16":
        if stride % 2:
            raise ValueError(f"page_stride_bytes: expected an even stride for a bf16 cache, got {stride}")
        pages.copy_(k.to(torch.bfloat16).reshape(num_pages, -1).view(torch.uint8))
        return buf.view(torch.bfloat16).as_strided((num_pages, page, 1, d), (stride // 2, d, d, 1))
    k_fp8, scale = quantize_tokens(k, ue8m0)
    values = k_fp8.view(torch.uint8).reshape(num_pages, page, d)
    scale_bytes = scale.contiguous().view(torch.uint8).reshape(num_pages, page, 4)
    if layout.scale_layout == "page_blocked":
        pages[:, : page * d] = values.reshape(num_pages, -1)
        pages[:, page * d :] = scale_bytes.reshape(num_pages, -1)
    else:
        tok = pages.view(num_pages, page, d + 4)
        tok[..., :d] = values
        tok[..., d:] = scale_bytes
    return buf.as_strided((num_pages, page, 1, d + 4), (stride, d + 4, d + 4, 1))
