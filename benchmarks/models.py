"""Models shared by the benchmarks and the tests, in plain torch ops."""

from __future__ import annotations

import math

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class DecoderBlock(nn.Module):
    """A Llama-style block in plain torch ops: RMSNorm, rotary embedding,
    causal attention with softmax, SiLU-gated MLP, residuals."""

    def __init__(self, dim: int = 64, heads: int = 4, hidden: int = 172, max_seq: int = 32) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        freqs = torch.outer(torch.arange(max_seq).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        mask = torch.full((s, s), float("-inf"), device=x.device, dtype=x.dtype).triu(1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim) + mask
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(y)
        h = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class GPT2Block(nn.Module):
    """GPT-2's block (pre-LayerNorm causal attention and a tanh-GELU MLP,
    residuals), in plain torch ops: the GPU check's model runs without
    transformers, which its machine lacks."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.attn_proj = nn.Linear(dim, dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads) + mask
        x = x + self.attn_proj((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class TinyGPT2(nn.Module):
    """GPT-2 (learned positions, tied input and output embeddings, final
    LayerNorm) from a tiny configuration with random weights; returns the
    logits. The causal mask is additive (0 and -inf), as GPT-2's eager
    attention applies it."""

    def __init__(self, vocab: int = 512, dim: int = 64, layers: int = 2, heads: int = 4, max_seq: int = 64) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_seq, dim)
        self.blocks = nn.ModuleList(GPT2Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        for p in self.parameters():  # GPT-2's initializer range
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        positions = torch.arange(s, device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        mask = torch.full((s, s), float("-inf"), device=tokens.device, dtype=x.dtype).triu(1)
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_f(x) @ self.wte.weight.t()
