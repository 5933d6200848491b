"""Paged index-cache layouts: geometry, input checks and read-back. Imports only torch.

Layouts (see SPEC.md):
- page_blocked (fp8): a page is PAGE*D fp8 values (token t at bytes [D*t, D*t + D)), then PAGE
  fp32 scales (token t's at PAGE*D + 4*t). The [pages, PAGE, 1, D + 4] uint8 shape is a view only.
- token_interleaved (fp8): token t at bytes [(D+4)*t, (D+4)*t + D), its scale right after.
- none (bf16): [pages, PAGE, 1, D] bfloat16, no scale.
Pages may sit inside a larger allocation: stride(0) may exceed a page, and is a multiple of 4 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._identity import ScaleLayout

SCALE_LAYOUTS = tuple(s.value for s in ScaleLayout)


@dataclass(frozen=True)
class CacheLayout:
    cache_dtype: str  # "fp8" | "bf16"
    page_size: int
    scale_layout: str
    head_dim: int

    def __post_init__(self) -> None:
        if self.scale_layout not in SCALE_LAYOUTS:
            raise ValueError(f"scale_layout: expected one of {list(SCALE_LAYOUTS)}, got {self.scale_layout!r}")
        if (self.cache_dtype == "bf16") != (self.scale_layout == "none"):
            raise ValueError(
                f"scale_layout: {self.scale_layout!r} does not go with cache_dtype {self.cache_dtype!r} "
                "(bf16 takes 'none', fp8 takes 'page_blocked' or 'token_interleaved')"
            )

    @property
    def token_bytes(self) -> int:
        return self.head_dim * 2 if self.cache_dtype == "bf16" else self.head_dim + 4

    @property
    def page_bytes(self) -> int:
        return self.page_size * self.token_bytes

    @property
    def view_last_dim(self) -> int:
        """Last dim of the [pages, PAGE, 1, X] tensor view that callers pass."""
        return self.head_dim if self.cache_dtype == "bf16" else self.head_dim + 4

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.cache_dtype == "bf16" else torch.uint8


def layout_of(kv_cache: torch.Tensor, scale_layout: str = "page_blocked") -> CacheLayout:
    """Infer the layout of a cache tensor from its dtype and shape, checking both."""
    if not isinstance(kv_cache, torch.Tensor):
        raise ValueError(f"kv_cache: expected a torch.Tensor, got {type(kv_cache).__name__}")
    if kv_cache.dim() != 4 or kv_cache.shape[2] != 1:
        raise ValueError(f"kv_cache: expected shape [num_pages, page_size, 1, D(+4)], got {list(kv_cache.shape)}")
    if kv_cache.dtype == torch.bfloat16:
        if scale_layout not in ("none", "page_blocked"):
            raise ValueError(f"scale_layout: a bf16 cache has no scales, expected 'none', got {scale_layout!r}")
        return CacheLayout("bf16", kv_cache.shape[1], "none", kv_cache.shape[3])
    if kv_cache.dtype != torch.uint8:
        raise ValueError(f"kv_cache: expected dtype uint8 (fp8 values + fp32 scales) or bfloat16, got {kv_cache.dtype}")
    if scale_layout == "none":
        raise ValueError("scale_layout: an fp8 (uint8) cache needs 'page_blocked' or 'token_interleaved', got 'none'")
    if kv_cache.shape[3] <= 4:
        raise ValueError(f"kv_cache: expected last dim D + 4 with D > 0, got {kv_cache.shape[3]}")
    return CacheLayout("fp8", kv_cache.shape[1], scale_layout, kv_cache.shape[3] - 4)


def check_cache(kv_cache: torch.Tensor, layout: CacheLayout) -> int:
    """Check the cache's strides against the layout; return the page stride in elements of its dtype."""
    s0, s1, s2, s3 = kv_cache.stride()
    x = layout.view_last_dim
    if s3 != 1 or (kv_cache.shape[1] > 1 and s1 != x):
        raise ValueError(
            f"kv_cache: expected each page to be contiguous (strides [page_stride, {x}, *, 1]), got {list(kv_cache.stride())}"
        )
    elem = kv_cache.element_size()
    if kv_cache.shape[0] > 1 and s0 * elem < layout.page_bytes:
        raise ValueError(f"kv_cache: page stride {s0 * elem} bytes is smaller than a page ({layout.page_bytes} bytes)")
    if (s0 * elem) % 4 or (kv_cache.storage_offset() * elem) % 4:
        raise ValueError(f"kv_cache: expected the page stride and offset to be multiples of 4 bytes, got stride {s0 * elem}")
    return s0 if kv_cache.shape[0] > 1 else layout.page_bytes // elem


def unpack_pages(kv_cache: torch.Tensor, layout: CacheLayout, page_ids: torch.Tensor | None = None):
    """Read pages back: (values fp32 [n, PAGE, D], scales fp32 [n, PAGE]); bf16 scales are 1."""
    stride0 = check_cache(kv_cache, layout)
    num_pages, page, d = kv_cache.shape[0], layout.page_size, layout.head_dim
    if layout.cache_dtype == "bf16":
        raw = kv_cache.as_strided((num_pages, page * d), (stride0, 1))
        if page_ids is not None:
            raw = raw[page_ids.long()]
        values = raw.reshape(-1, page, d).float()
        return values, torch.ones(values.shape[:2], dtype=torch.float32, device=values.device)
    raw = kv_cache.as_strided((num_pages, layout.page_bytes), (stride0, 1))
    if page_ids is not None:
        raw = raw[page_ids.long()]
    n = raw.shape[0]
    if layout.scale_layout == "page_blocked":
        values = raw[:, : page * d].reshape(n, page, d)
        scales = raw[:, page * d :].reshape(n, page, 4)
    else:
        tok = raw.reshape(n, page, d + 4)
        values, scales = tok[..., :d], tok[..., d:]
    values = values.contiguous().view(torch.float8_e4m3fn).float()
    scales = scales.contiguous().view(torch.float32).reshape(n, page)
    return values, scales
