"""The peers' own indexer-test inputs and pass criteria, re-written from reading their tests
(tests/test_peer_suites.py says which file at which commit each follows).

What the peers do, and so what this module does:
- q is drawn in bf16 and cast straight to fp8 (no scale) by DeepGEMM and vLLM; SGLang quantizes
  per (token, head) with a ue8m0 scale and folds that scale into the weights.
- ragged K is drawn in bf16 and quantized per token (amax / 448; ue8m0-rounded for SGLang);
- the paged cache is drawn in bf16 [pages, page, 1, D] and packed page-blocked: each page holds
  its page * D fp8 bytes, then its page fp32 scales;
- the references compute from the UNQUANTIZED bf16 tensors (the 'simulated' references of
  DeepGEMM 54e2261 from the dequantized ones), in fp32;
- calc_diff is 1 - 2<x, y> / (|x|^2 + |y|^2) in double, on tensors whose -inf positions the
  caller has zeroed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import torch

FP8_MAX = 448.0


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return float(1 - 2 * (x * y).sum() / denominator)


def generator(device, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _ue8m0(scale: torch.Tensor) -> torch.Tensor:
    """A scale rounded up to a power of two (the ue8m0 scale format)."""
    return torch.exp2(torch.ceil(torch.log2(scale)))


def quantize_rows(x: torch.Tensor, ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row fp8 of x [..., D] (the scale over the last dim): (fp8 values, fp32 scales [...])."""
    scale = x.abs().float().amax(dim=-1, keepdim=True).clamp(min=1e-4) / FP8_MAX
    if ue8m0:
        scale = _ue8m0(scale)
    return (x.float() / scale).to(torch.float8_e4m3fn), scale.squeeze(-1)


def dequantize_rows(values: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (values.float() * scale.unsqueeze(-1)).to(torch.bfloat16)


def pack_paged_cache(cache: torch.Tensor, ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """A bf16 cache [pages, page, 1, D] as the page-blocked fp8 cache [pages, page, 1, D + 4]
    (uint8) and its dequantized bf16 copy."""
    pages, page, heads, dim = cache.shape
    assert heads == 1
    packed = torch.empty((pages, page * (dim + 4)), dtype=torch.uint8, device=cache.device)
    back = torch.empty_like(cache, dtype=torch.bfloat16)
    # a block of pages at a time (each row's own scale: the same bytes): DeepGEMM 54e2261's 4096 x 8K case
    # quantized whole took two fp32 copies of a 8.6 GB cache and ran an H100 out of memory
    for p0 in range(0, pages, PACK_PAGES):
        p1 = min(pages, p0 + PACK_PAGES)
        values, scale = quantize_rows(cache[p0:p1], ue8m0)
        packed[p0:p1, : page * dim] = values.reshape(p1 - p0, page * dim).view(torch.uint8)
        packed[p0:p1, page * dim:] = scale.reshape(p1 - p0, page).contiguous().view(torch.uint8)
        back[p0:p1] = dequantize_rows(values, scale)
    return packed.view(pages, page, 1, dim + 4), back


PACK_PAGES = 1 << 14  # pages pack_paged_cache quantizes at once (16K pages of 64 x 128: 0.5 GiB of fp32)


# ---------------------------------------------------------------------------------------------
# Ragged prefill.


def prefill_windows(seq_len: int, seq_len_kv: int, disable_cp: bool, device) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepGEMM's / vLLM's windows: causal over the tail of K (disable_cp), or the two halves of
    one context-parallel rank's zig-zag chunks (rank cp_size // 3), all starting at key 0."""
    ks = torch.zeros(seq_len, dtype=torch.int32, device=device)
    if disable_cp:
        return ks, torch.arange(seq_len, dtype=torch.int32, device=device) + (seq_len_kv - seq_len)
    assert seq_len_kv % seq_len == 0 and seq_len % 2 == 0
    chunk, cp_size = seq_len // 2, seq_len_kv // seq_len
    rank = cp_size // 3
    i = torch.arange(chunk, dtype=torch.int32, device=device)
    ke = torch.cat([rank * chunk + i, (2 * cp_size - 1 - rank) * chunk + i])
    return ks, ke


def ragged_ref(q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor, ks: torch.Tensor,
               ke: torch.Tensor) -> torch.Tensor:
    """sum_h w[m, h] relu(q[m, h] . k[n]) on ks[m] <= n < ke[m], -inf elsewhere; [M, N] fp32,
    in key chunks so the [H, M, chunk] score stays near 256 MiB."""
    rows, heads, _ = q.shape
    keys = k.shape[0]
    qf, kf, w = q.float(), k.float(), weights.float()
    out = torch.empty((rows, keys), dtype=torch.float32, device=q.device)
    step = max(1, (256 << 20) // max(1, rows * heads * 4))
    cols = torch.arange(keys, device=q.device)
    for n0 in range(0, keys, step):
        n1 = min(keys, n0 + step)
        score = torch.einsum("mhd,nd->hmn", qf, kf[n0:n1]).relu_()
        part = torch.einsum("hmn,mh->mn", score, w)
        inside = (cols[None, n0:n1] >= ks[:, None]) & (cols[None, n0:n1] < ke[:, None])
        out[:, n0:n1] = part.masked_fill(~inside, float("-inf"))
    return out


def widen(out: torch.Tensor, ks: torch.Tensor, ke: torch.Tensor, keys: int) -> torch.Tensor:
    """A compressed output [M, W] back to [M, keys] as DeepGEMM's test does: wide[i, ks:ke] =
    out[i, :ke - ks], -inf elsewhere."""
    rows, width = out.shape
    wide = torch.full((rows, keys), float("-inf"), dtype=torch.float32, device=out.device)
    j = torch.arange(width, device=out.device)[None, :]
    inside = j < (ke - ks).long()[:, None]
    r = torch.arange(rows, device=out.device)[:, None].expand(rows, width)
    c = (ks.long()[:, None] + j).expand(rows, width)
    wide[r[inside], c[inside]] = out[inside].float()
    return wide


@dataclass
class RaggedCase:
    q: torch.Tensor  # fp8 [M, H, D]
    kv: tuple  # (fp8 [N, D], fp32 [N])
    weights: torch.Tensor
    ks: torch.Tensor
    ke: torch.Tensor
    q_bf16: torch.Tensor  # the unquantized inputs the references start from
    k_bf16: torch.Tensor
    ref_weights: torch.Tensor  # the weights without any folded q scale

    @property
    def keys(self) -> int:
        return self.kv[0].shape[0]

    # computed on first use, so that a case the runtime refuses costs no reference
    @cached_property
    def ref(self) -> torch.Tensor:
        """From the bf16 inputs; -inf outside the windows."""
        return ragged_ref(self.q_bf16, self.k_bf16, self.ref_weights, self.ks, self.ke)

    @cached_property
    def simulated(self) -> torch.Tensor:
        """DeepGEMM 54e2261's: from the dequantized fp8 inputs."""
        return ragged_ref(self.q.to(torch.bfloat16), dequantize_rows(*self.kv), self.ref_weights, self.ks, self.ke)


def deepgemm_prefill(seq_len: int, seq_len_kv: int, heads: int, head_dim: int, disable_cp: bool, device,
                     seed: int) -> RaggedCase:
    """DeepGEMM test_mqa_logits's generator (vLLM's test_deepgemm_fp8_mqa_logits is the same)."""
    g = generator(device, seed)
    q = torch.randn(seq_len, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    kv = torch.randn(seq_len_kv, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    weights = torch.randn(seq_len, heads, generator=g, device=device)
    ks, ke = prefill_windows(seq_len, seq_len_kv, disable_cp, device)
    return RaggedCase(q.to(torch.float8_e4m3fn), quantize_rows(kv), weights, ks, ke, q, kv, weights)


def sglang_q_and_weights(q: torch.Tensor, gate: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SGLang's indexer q and weights: q [T, H, D] bf16 quantized per (token, head) (one 128-wide
    block when D = 128) with a ue8m0 scale, the scale folded into the weights with the head and
    softmax factors: weights = gate * H^-0.5 * q_scale * D^-0.5."""
    heads, dim = q.shape[1], q.shape[2]
    q8, q_scale = quantize_rows(q, ue8m0=True)
    weights = gate.float() * heads ** -0.5 * q_scale * dim ** -0.5
    return q8, weights


def sglang_prefill(prefix_lens: list[int], extend_lens: list[int], heads: int, head_dim: int, device,
                   seed: int) -> RaggedCase:
    """SGLang's _get_topk_ragged: each request's K (prefix + extend tokens) gathered from the
    cache one request after another into (k_fp8 [N, D], k_scale [N]); every extend token t of
    request i sees ks = offset_i, ke = offset_i + prefix_i + t + 1."""
    g = generator(device, seed)
    seq = [p + e for p, e in zip(prefix_lens, extend_lens)]
    offsets = [sum(seq[:i]) for i in range(len(seq))]
    tokens = sum(extend_lens)
    q = torch.randn(tokens, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    gate = torch.randn(tokens, heads, generator=g, device=device, dtype=torch.bfloat16)
    k = torch.randn(sum(seq), head_dim, generator=g, device=device, dtype=torch.bfloat16)
    ks = torch.cat([torch.full((e,), o, dtype=torch.int32, device=device) for o, e in zip(offsets, extend_lens)])
    ke = torch.cat([o + p + 1 + torch.arange(e, dtype=torch.int32, device=device)
                    for o, p, e in zip(offsets, prefix_lens, extend_lens)])
    q8, weights = sglang_q_and_weights(q, gate)
    return RaggedCase(q8, quantize_rows(k, ue8m0=True), weights, ks, ke, q, k,
                      gate.float() * heads ** -0.5 * head_dim ** -0.5)


# ---------------------------------------------------------------------------------------------
# Paged decode.


def paged_ref(q: torch.Tensor, cache: torch.Tensor, weights: torch.Tensor, lens: torch.Tensor,
              block_table: torch.Tensor, max_model_len: int, two_d: bool) -> torch.Tensor:
    """The peers' paged reference, per request from its 1-D length L: row j of the next_n rows
    sees keys <= L - next_n + j (1-D), or keys < L (two_d: the caller then keeps only the
    positions below each row's own 2-D length); [B * next_n, max_model_len] fp32, -inf past."""
    batch, next_n, heads, dim = q.shape
    page = cache.shape[1]
    out = torch.full((batch * next_n, max_model_len), float("-inf"), dtype=torch.float32, device=q.device)
    for i, length in enumerate(lens.tolist()):
        pages = -(-length // page)
        if pages == 0:
            continue
        k = cache[block_table[i, :pages].long()].reshape(pages * page, dim).float()
        top = torch.full((next_n,), length - 1, device=q.device) if two_d else \
            torch.arange(length - next_n, length, device=q.device)
        pos = torch.arange(pages * page, device=q.device)
        score = torch.einsum("nhd,kd->nhk", q[i].float(), k).relu_()
        logit = torch.einsum("nhk,nh->nk", score, weights[i * next_n:(i + 1) * next_n].float())
        inside = (pos[None, :] < length) & (pos[None, :] <= top[:, None])
        width = min(pages * page, max_model_len)
        out[i * next_n:(i + 1) * next_n, :width] = logit.masked_fill(~inside, float("-inf"))[:, :width]
    return out


@dataclass
class PagedCase:
    q: torch.Tensor  # fp8 [B, next_n, H, D]
    kv_cache: torch.Tensor  # uint8 [pages, page, 1, D + 4]
    weights: torch.Tensor
    context_lens: torch.Tensor  # as passed: [B] or [B, next_n]
    block_table: torch.Tensor
    max_model_len: int
    invalid: torch.Tensor  # the peer's ref_neginf_mask: where it zeroes (and, if clean, wants -inf)
    page: int
    q_bf16: torch.Tensor  # [B, next_n, H, D], unquantized
    cache_bf16: torch.Tensor  # [pages, page, 1, D], unquantized
    cache_back: torch.Tensor  # the fp8 cache dequantized
    ref_weights: torch.Tensor
    lens_1d: torch.Tensor
    two_d: bool

    def _ref(self, q, cache) -> torch.Tensor:
        return paged_ref(q, cache, self.ref_weights, self.lens_1d, self.block_table, self.max_model_len, self.two_d)

    @cached_property
    def ref(self) -> torch.Tensor:
        return self._ref(self.q_bf16, self.cache_bf16)

    @cached_property
    def simulated(self) -> torch.Tensor:
        return self._ref(self.q.reshape(self.q_bf16.shape).to(torch.bfloat16), self.cache_back)


def _invalid(lens_1d: torch.Tensor, lens_2d: Optional[torch.Tensor], next_n: int, width: int) -> torch.Tensor:
    rows = lens_1d.shape[0] * next_n
    pos = torch.arange(width, device=lens_1d.device)[None, :].expand(rows, width)
    if lens_2d is not None:
        return ~(pos < lens_2d.reshape(-1, 1))
    r = torch.arange(rows, device=lens_1d.device)
    return ~(pos <= (lens_1d[r // next_n] - next_n + r % next_n)[:, None])


def _table(lens: torch.Tensor, page: int, columns: int, pool: int, g, device) -> torch.Tensor:
    """Each request's pages drawn without replacement from a random permutation of the pool,
    zeros past them."""
    table = torch.zeros((lens.shape[0], columns), dtype=torch.int32, device=device)
    perm = torch.randperm(pool, generator=g, device=device).to(torch.int32)
    used = 0
    for i, length in enumerate(lens.tolist()):
        n = -(-length // page)
        table[i, :n] = perm[used:used + n]
        used += n
    return table


def _lens_2d(lens: torch.Tensor, next_n: int, g) -> torch.Tensor:
    """DeepGEMM's 2-D lens: ((L + 1) * U[0, 1)) per draft token, the last one at L."""
    u = torch.rand(lens.shape[0], next_n, generator=g, device=lens.device)
    two = ((lens[:, None] + 1) * u).int()
    two[:, -1] = lens
    return two


def deepgemm_paged_0f5f266(batch: int, next_n: int, heads: int, head_dim: int, avg_kv: int, two_d: bool,
                           max_model_len: int, device, seed: int, page: int = 64,
                           pool_pages: Optional[int] = None, spread: tuple = (0.7, 1.3)) -> PagedCase:
    """DeepGEMM 0f5f266 test_paged_mqa_logits (vLLM's test the same, without the 2-D lens): a
    pool of max_model_len * 3 pages (vLLM: * 2), lens in [0.7, 1.3) * avg_kv, a block table
    ceil(max len / page) * page columns wide (a token count used as a page count: far wider than
    needed, zeros past each request's pages)."""
    g = generator(device, seed)
    pool = max_model_len * 3 if pool_pages is None else pool_pages
    q = torch.randn(batch, next_n, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    cache = torch.randn(pool, page, 1, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    weights = torch.randn(batch * next_n, heads, generator=g, device=device)
    lens = torch.randint(int(spread[0] * avg_kv), int(spread[1] * avg_kv), (batch,), generator=g,
                         device=device).to(torch.int32)
    columns = -(-int(lens.max()) // page) * page
    table = _table(lens, page, columns, pool, g, device)
    packed, back = pack_paged_cache(cache)
    two = _lens_2d(lens, next_n, g) if two_d else None
    return PagedCase(q.to(torch.float8_e4m3fn), packed, weights, two if two_d else lens, table, max_model_len,
                     _invalid(lens, two, next_n, max_model_len), page, q, cache, back, weights, lens, two_d)


def deepgemm_paged_54e2261(batch: int, next_n: int, heads: int, head_dim: int, avg_kv: int, device, seed: int,
                           page: int = 64) -> PagedCase:
    """DeepGEMM 54e2261 test_paged_mqa_logits on SM90 (not varlen, fp8): a pool of exactly the
    pages the requests use, max_model_len = the longest request's pages * page, a table exactly
    that wide, 2-D lens, the simulated reference from the dequantized q and cache."""
    g = generator(device, seed)
    q = torch.randn(batch, next_n, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    weights = torch.randn(batch * next_n, heads, generator=g, device=device)
    lens = torch.randint(int(0.7 * avg_kv), int(1.3 * avg_kv), (batch,), generator=g, device=device).to(torch.int32)
    pages = (lens.long() + page - 1) // page
    max_model_len, pool = int(pages.max()) * page, int(pages.sum())
    cache = torch.randn(pool, page, 1, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    table = _table(lens, page, int(pages.max()), pool, g, device)
    packed, back = pack_paged_cache(cache)
    two = _lens_2d(lens, next_n, g)
    return PagedCase(q.to(torch.float8_e4m3fn), packed, weights, two, table, max_model_len,
                     _invalid(lens, two, next_n, max_model_len), page, q, cache, back, weights, lens, True)


def sglang_decode(seq_lens: list[int], heads: int, head_dim: int, pool_pages: int, table_pages: int, device,
                  seed: int) -> PagedCase:
    """SGLang's _get_topk_paged (decode, next_n 1, page 64): the index-K pool is a 2-D uint8
    buffer [pages, 64 * (D + 4)] viewed as [pages, 64, 1, D + 4]; K quantized per token with a
    ue8m0 scale; q [T, H, D] quantized per (token, head) and viewed [B, 1, H, D], the weights
    [T, H, 1] carrying the q scale; max_seq_len = the page table's width * 64; 1-D seq lens."""
    page = 64
    g = generator(device, seed)
    lens = torch.tensor(seq_lens, dtype=torch.int32, device=device)
    batch = lens.shape[0]
    q = torch.randn(batch, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    gate = torch.randn(batch, heads, generator=g, device=device, dtype=torch.bfloat16)
    cache = torch.randn(pool_pages, page, 1, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    table = _table(lens, page, table_pages, pool_pages, g, device)
    packed, back = pack_paged_cache(cache, ue8m0=True)
    q8, weights = sglang_q_and_weights(q, gate)
    max_seq_len = table_pages * page
    return PagedCase(q8[:, None], packed.view(pool_pages, page * (head_dim + 4)), weights.unsqueeze(-1), lens, table,
                     max_seq_len, _invalid(lens, None, 1, max_seq_len), page, q[:, None], cache, back,
                     gate.float() * heads ** -0.5 * head_dim ** -0.5, lens, False)
