"""An independent per-element oracle for the indexer logits, written with plain Python loops.

It decodes the cache's raw bytes itself (fp8 e4m3fn by bit fields, fp32 scales and bf16 values
with `struct`), follows the block table one token at a time, applies SPEC.md's valid rule and
computes every logit in float64:

    logits[i, t] = k_scale[t] * sum_h w[i, h] * relu(q[i, h, :] . k[t, :])

It deliberately shares no code with the project: no `unpack_pages`, no `row_limits`, no
reference. Keep shapes tiny; it costs rows * valid tokens * H * D Python multiplications.
"""

from __future__ import annotations

import math
import struct

import torch

NEG_INF = float("-inf")


def _fp8_e4m3fn(byte: int) -> float:
    """Value of one float8_e4m3fn byte: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
    infinities, S.1111.111 is NaN; exponent 0 is subnormal (m/8 * 2^-6)."""
    sign = -1.0 if byte & 0x80 else 1.0
    exp = (byte >> 3) & 0xF
    man = byte & 0x7
    if exp == 0xF and man == 0x7:
        return math.nan
    if exp == 0:
        return sign * man * 2.0**-9
    return sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)


FP8_TABLE = tuple(_fp8_e4m3fn(b) for b in range(256))


def fp8_bytes_to_floats(raw: bytes) -> list[float]:
    return [FP8_TABLE[b] for b in raw]


def bf16_bytes_to_floats(raw: bytes) -> list[float]:
    """bf16 is the top half of an fp32: little-endian bytes (lo, hi) -> fp32 bytes (0, 0, lo, hi)."""
    return [struct.unpack("<f", b"\x00\x00" + raw[i : i + 2])[0] for i in range(0, len(raw), 2)]


def fp32_bytes_to_float(raw: bytes) -> float:
    return struct.unpack("<f", raw)[0]


def storage_bytes(x: torch.Tensor) -> tuple[bytes, int]:
    """All bytes of x's storage, and the byte offset where x starts."""
    st = x.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(st).numpy().tobytes()
    return raw, x.storage_offset() * x.element_size()


def tensor_floats(x: torch.Tensor) -> list[float]:
    """Flat row-major values of an fp8 / bf16 / fp32 tensor, decoded from its bytes."""
    x = x.contiguous().cpu()
    if x.dtype == torch.float8_e4m3fn:
        return fp8_bytes_to_floats(x.view(torch.uint8).numpy().tobytes())
    if x.dtype == torch.bfloat16:
        return bf16_bytes_to_floats(x.view(torch.uint8).numpy().tobytes())
    if x.dtype == torch.float32:
        return [float(v) for v in x.reshape(-1).tolist()]
    raise TypeError(f"oracle: unsupported dtype {x.dtype}")


class PagedCacheReader:
    """Reads token `t` of page `p` straight from the cache's bytes, per SPEC.md's layouts."""

    def __init__(self, kv_cache: torch.Tensor, scale_layout: str):
        self.raw, self.base = storage_bytes(kv_cache)
        self.page = kv_cache.shape[1]
        self.num_pages = kv_cache.shape[0]
        self.page_stride_bytes = kv_cache.stride(0) * kv_cache.element_size()
        self.layout = scale_layout
        if kv_cache.dtype == torch.bfloat16:
            self.layout = "none"
            self.d = kv_cache.shape[3]
        else:
            self.d = kv_cache.shape[3] - 4
        self._cache: dict[tuple[int, int], tuple[list[float], float]] = {}

    def token(self, page_id: int, slot: int) -> tuple[list[float], float]:
        """(values, scale) of the token in `slot` of page `page_id`."""
        key = (page_id, slot)
        if key in self._cache:
            return self._cache[key]
        if not 0 <= page_id < self.num_pages:
            raise IndexError(f"oracle: page id {page_id} out of range [0, {self.num_pages})")
        start = self.base + page_id * self.page_stride_bytes
        d = self.d
        if self.layout == "none":
            off = start + 2 * d * slot
            values, scale = bf16_bytes_to_floats(self.raw[off : off + 2 * d]), 1.0
        elif self.layout == "page_blocked":
            off = start + d * slot
            values = fp8_bytes_to_floats(self.raw[off : off + d])
            soff = start + self.page * d + 4 * slot
            scale = fp32_bytes_to_float(self.raw[soff : soff + 4])
        elif self.layout == "token_interleaved":
            off = start + (d + 4) * slot
            values = fp8_bytes_to_floats(self.raw[off : off + d])
            scale = fp32_bytes_to_float(self.raw[off + d : off + d + 4])
        else:
            raise ValueError(f"oracle: unknown layout {self.layout!r}")
        self._cache[key] = (values, scale)
        return values, scale


def _logit(q_heads: list[list[float]], w_row: list[float], k: list[float], scale: float) -> float:
    acc = 0.0
    for qh, wh in zip(q_heads, w_row):
        dot = 0.0
        for a, b in zip(qh, k):
            dot += a * b
        if dot > 0.0:
            acc += wh * dot
    return scale * acc


def decode_row_limit(context_lens: list, b: int, j: int, next_n: int) -> int:
    """Exclusive valid limit of row b*N + j per SPEC.md (may be <= 0)."""
    lens_b = context_lens[b]
    if isinstance(lens_b, list):  # 2-D: t < context_lens[b, j]
        return lens_b[j]
    return lens_b - next_n + j + 1  # 1-D: t <= context_lens[b] - N + j


def paged_logits(q, kv_cache, weights, context_lens, block_table, max_context_len: int,
                 scale_layout: str = "page_blocked") -> torch.Tensor:
    """float64 [B*N, max_context_len]; -inf where invalid."""
    b_count, n, h, d = q.shape
    qv = tensor_floats(q)
    wv = tensor_floats(weights)
    lens = context_lens.cpu().tolist()
    table = block_table.cpu().tolist()
    reader = PagedCacheReader(kv_cache, scale_layout)
    page = reader.page
    out = [[NEG_INF] * max_context_len for _ in range(b_count * n)]
    for b in range(b_count):
        for j in range(n):
            r = b * n + j
            q_heads = [qv[((b * n + j) * h + hh) * d : ((b * n + j) * h + hh + 1) * d] for hh in range(h)]
            w_row = wv[r * h : (r + 1) * h]
            limit = decode_row_limit(lens, b, j, n)
            for t in range(max_context_len):
                if t >= limit:
                    continue
                k, scale = reader.token(table[b][t // page], t % page)
                out[r][t] = _logit(q_heads, w_row, k, scale)
    return torch.tensor(out, dtype=torch.float64).reshape(b_count * n, max_context_len)


def ragged_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke) -> torch.Tensor:
    """float64 [M, Nk]; row i valid for ks[i] <= t < ke[i], -inf elsewhere."""
    m, h, d = q.shape
    if q.dtype == torch.float8_e4m3fn:
        k, k_scale = kv
        scales = tensor_floats(k_scale.reshape(-1).float())
    else:
        k = kv[0] if isinstance(kv, (tuple, list)) else kv
        scales = [1.0] * k.shape[0]
    nk = k.shape[0]
    kvals = tensor_floats(k)
    qv = tensor_floats(q)
    wv = tensor_floats(weights)
    ks, ke = cu_seqlen_ks.cpu().tolist(), cu_seqlen_ke.cpu().tolist()
    out = [[NEG_INF] * nk for _ in range(m)]
    for i in range(m):
        q_heads = [qv[(i * h + hh) * d : (i * h + hh + 1) * d] for hh in range(h)]
        w_row = wv[i * h : (i + 1) * h]
        for t in range(nk):
            if ks[i] <= t < ke[i]:
                out[i][t] = _logit(q_heads, w_row, kvals[t * d : (t + 1) * d], scales[t])
    return torch.tensor(out, dtype=torch.float64).reshape(m, nk)
