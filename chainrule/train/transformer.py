"""``python -m chainrule train --model transformer``: a character-level GPT on *The Devil's Dictionary*.

The model is GPT-2's shape at toy size, built from ``cr.nn``: token and position embeddings,
``n_layer`` pre-norm blocks (causal self-attention through ``F.scaled_dot_product_attention``, then
an MLP with GPT-2's tanh GELU), a final LayerNorm and an output layer tied to the token embedding. Training is
AdamW with linear warm-up and cosine decay, gradients clipped to norm 1. After training the run
measures the seeds' claims on this model (``figures``): FLOPs per token against 6N, backward/forward
time, saved-activation bytes with and without checkpointing and as batch, context and depth double.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable

from chainrule import data, nn
from chainrule import numpy as ops
from chainrule.autograd.checkpoint import CheckpointPlan, checkpoint_sequential
from chainrule.core._backend import np
from chainrule.core.grad_mode import no_grad
from chainrule.core.random import get_generator
from chainrule.core.tensor import Tensor, tensor
from chainrule.nn import functional as F

CHECKPOINTS = ("none", "block", "sqrt")


@dataclass(frozen=True)
class GPTConfig:
    """The model's sizes. ``dropout`` applies to the embeddings, the attention weights and each
    block's two residual branches, as in GPT-2.

    >>> from chainrule.train.transformer import GPTConfig
    >>> GPTConfig(vocab_size=81).d_model
    96
    """

    vocab_size: int
    n_ctx: int = 64
    d_model: int = 96
    n_head: int = 4
    n_layer: int = 4
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"GPTConfig: d_model ({self.d_model}) must be a multiple of n_head "
                             f"({self.n_head})")


class CausalSelfAttention(nn.Module):
    """One projection to queries, keys and values for all heads, causal attention, an output projection."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        # one unbind, not three getitems: each getitem's backward would zero-fill the packed array
        q, k, v = ops.unbind(self.qkv(x).reshape(b, t, 3, self.n_head, d // self.n_head).transpose(2, 0, 3, 1, 4))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.drop(self.proj(y.transpose(0, 2, 1, 3).reshape(b, t, d)))


class Block(nn.Module):
    """``x + attn(ln1(x))``, then ``x + mlp(ln2(x))`` (pre-norm)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A decoder-only transformer over characters: ``model(ids)`` gives logits (batch, n_ctx, vocab).

    ``checkpoint``: ``"none"``, ``"block"`` (every block recomputed in backward, the last kept) or
    ``"sqrt"`` (√n_layer segments, the planner's uniform plan), through ``checkpoint_sequential``.

    >>> import chainrule as cr
    >>> from chainrule.train.transformer import GPT, GPTConfig
    >>> _ = cr.random.manual_seed(0)
    >>> model = GPT(GPTConfig(vocab_size=10, n_ctx=8, d_model=16, n_head=2, n_layer=2))
    >>> model(cr.tensor([[1, 2, 3]])).shape, model.num_parameters()
    ((1, 3, 10), 6880)
    """

    def __init__(self, cfg: GPTConfig, checkpoint: str = "none") -> None:
        super().__init__()
        if checkpoint not in CHECKPOINTS:
            raise ValueError(f"GPT: checkpoint must be one of {CHECKPOINTS}, got {checkpoint!r}")
        self.cfg, self.checkpoint = cfg, checkpoint
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.n_ctx, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.register_buffer("positions", tensor(np.arange(cfg.n_ctx)), persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's: N(0, 0.02) weights, zero biases, residual projections scaled by 1/sqrt(2 n_layer)."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" not in name.split(".")[-2]:
                std = 0.02 / math.sqrt(2 * self.cfg.n_layer) if name.endswith(("proj.weight", "mlp.2.weight")) \
                    else 0.02
                nn.init.normal_(p, 0.0, std)

    def num_parameters(self, matmul_only: bool = False) -> int:
        """Parameters; ``matmul_only``: those a token multiplies through (blocks' linear layers and the
        tied output layer), the N of C ≈ 6N per token."""
        if not matmul_only:
            return sum(p.size for p in self.parameters())
        blocks = sum(m.weight.size for m in self.blocks.modules() if isinstance(m, nn.Linear))
        return blocks + self.wte.weight.size

    def forward(self, ids: Any) -> Tensor:
        t = ids.shape[-1]
        if t > self.cfg.n_ctx:
            raise ValueError(f"GPT: a sequence of {t} tokens is longer than n_ctx={self.cfg.n_ctx}; "
                             f"crop it to the last {self.cfg.n_ctx}")
        x = self.drop(self.wte(ids) + self.wpe(self.positions[:t]))
        blocks = list(self.blocks)
        if self.checkpoint == "none" or not self.training:
            for block in blocks:
                x = block(x)
        else:
            plan = CheckpointPlan.uniform(len(blocks), len(blocks) if self.checkpoint == "block" else None)
            x = checkpoint_sequential(blocks, plan, x)
        return F.linear(self.ln_f(x), self.wte.weight)

    def loss(self, ids: Any, targets: Any) -> Tensor:
        """Mean cross-entropy (nats per character) of the next character."""
        return lm_loss(self(ids), targets)

    @no_grad()
    def generate(self, ids: Any, n: int, temperature: float = 1.0, top_k: int | None = None,
                 generator: Any = None) -> np.ndarray:
        """``n`` more characters after the prompt ``ids`` (1-d), sampled at ``temperature`` from the
        ``top_k`` most likely (all if None); draws from ``generator`` (default: chainrule's)."""
        if temperature <= 0:
            raise ValueError(f"GPT.generate: temperature must be > 0, got {temperature}")
        rng = get_generator(generator)
        out = [int(i) for i in np.asarray(getattr(ids, "data", ids)).reshape(-1)]
        was = self.training
        self.eval()
        try:
            for _ in range(n):
                logits = self(tensor(np.array([out[-self.cfg.n_ctx:]]))).data[0, -1].astype(np.float64)
                logits = logits / temperature
                if top_k is not None and top_k < logits.size:
                    logits[logits < np.partition(logits, -top_k)[-top_k]] = -np.inf
                p = np.exp(logits - logits.max())
                out.append(int(rng.choice(p.size, p=p / p.sum())))
        finally:
            self.train(was)
        return np.array(out[-n:] if n else [], dtype=np.int64)


def lm_loss(logits: Tensor, targets: Any) -> Tensor:
    """Mean cross-entropy of logits (batch, n_ctx, vocab) against the next characters (batch, n_ctx)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _replayable(net: Any) -> Any:
    """The fp32 forward+backward as a closure over the model alone, for cr.compile: a bound method of
    lm's Trainer would reach its history too (``grad_norms`` grows every step, and cr.compile guards
    a list's length)."""
    def forward_backward(x: Tensor, y: Tensor) -> Tensor:
        net.zero_grad()
        loss = lm_loss(net(x), y)
        loss.backward()
        return loss.detach()
    return forward_backward


def param_groups(model: GPT, weight_decay: float) -> list[dict]:
    """AdamW groups: weight decay on the matrices, none on biases, LayerNorms and embeddings' rows
    of position (GPT-2's split: decay what multiplies)."""
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and not n.startswith("wpe")]
    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and not n.startswith("wpe"))]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def warmup_cosine(warmup: int, total: int, floor: float = 0.1) -> Callable[[int], float]:
    """The learning-rate factor at step s: linear warm-up over ``warmup`` steps, then cosine decay to
    ``floor`` at ``total``."""
    def factor(s: int) -> float:
        if s < warmup:
            return (s + 1) / warmup
        progress = min(1.0, (s - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def evaluate(model: GPT, corpus: data.CharCorpus, batch_size: int = 64, max_batches: int | None = None) -> float:
    """Mean validation cross-entropy, nats per character, over the validation split's windows."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with no_grad():
            for i, (x, y) in enumerate(corpus.windows("val", batch_size, model.cfg.n_ctx)):
                if max_batches is not None and i >= max_batches:
                    break
                total += float(model.loss(x, y).item()) * y.size
                count += y.size
    finally:
        model.train(was)
    return total / count


def bits(nats: float) -> float:
    return nats / math.log(2)


def config_dict(cfg: GPTConfig) -> dict:
    return asdict(cfg)
