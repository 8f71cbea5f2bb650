"""The seeds' claims measured on the transformer of ``train/transformer.py``.

Each function measures one claim on a model and a batch and returns numbers; ``report`` prints
them after ``python -m chainrule train --model transformer``. Activation bytes are the peak of what
the graph holds for backward (``cr.profile``'s saved bytes) less the parameters it holds, which a
model keeps whether or not it trains.
"""
from __future__ import annotations

import argparse
import copy
import math
import time
from typing import Any

from chainrule import data
from chainrule.autograd.accounting import profile
from chainrule.core._backend import np
from chainrule.core.grad_mode import no_grad
from chainrule.core.random import manual_seed
from chainrule.func.compile import compile as compile_step
from chainrule.optim import AdamW
from chainrule.train.transformer import GPT, GPTConfig, _replayable

MATMUL_OPS = ("linear", "matmul")


def closed_form_flops(cfg: GPTConfig, batch: int, n_ctx: int | None = None) -> dict:
    """The model's matmul FLOPs for one forward and one backward of ``batch`` sequences, in closed form:
    every linear layer and the tied output layer cost 2 FLOPs per weight per token forward (plus 1
    per bias) and 4 backward (input and weight gradients); attention's two (T x T) products cost
    2·2·T·d per token per layer forward (the causal mask does not skip the masked half), twice that
    backward. ``n_matmul`` is the N of C ≈ 6N: the weights a token multiplies through.

    >>> from chainrule.train.figures import closed_form_flops
    >>> from chainrule.train.transformer import GPTConfig
    >>> closed_form_flops(GPTConfig(vocab_size=10, n_ctx=4, d_model=8, n_head=2, n_layer=1), batch=1)
    {'forward': 7584, 'backward': 14592, 'n_matmul': 848}
    """
    t = cfg.n_ctx if n_ctx is None else n_ctx
    d, L = cfg.d_model, cfg.n_layer
    n_mm = L * 12 * d * d + cfg.vocab_size * d      # qkv 3d², proj d², mlp 8d²; the tied output layer
    tokens = batch * t
    attention = L * 4 * t * d * tokens
    biases = L * 9 * d                               # qkv 3d, proj d, mlp 4d + d
    return {"forward": (2 * n_mm + biases) * tokens + attention, "backward": 4 * n_mm * tokens + 2 * attention,
            "n_matmul": n_mm}


def counted_flops(model: GPT, x: Any, y: Any) -> dict:
    """FLOPs chainrule's accounting counts for one forward+backward: all ops, and the matmul ops."""
    with profile() as p:
        model.loss(x, y).backward()
    mm_f = sum(p.ops[k][1] for k in MATMUL_OPS if k in p.ops)
    mm_b = sum(p.ops[k][2] for k in MATMUL_OPS if k in p.ops)
    return {"forward": p.forward_flops, "backward": p.backward_flops, "matmul_forward": mm_f,
            "matmul_backward": mm_b}


def step_times(model: GPT, x: Any, y: Any, repeats: int = 5) -> tuple[float, float]:
    """Median seconds of the forward (to the loss) and of the backward, over ``repeats`` runs."""
    fwd, bwd = [], []
    for _ in range(repeats + 1):
        model.zero_grad()
        t0 = time.perf_counter()
        loss = model.loss(x, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    return float(np.median(fwd[1:])), float(np.median(bwd[1:]))


def activation_bytes(model: GPT, x: Any, y: Any, checkpoint: str = "none") -> int:
    """Peak bytes saved for backward during one forward+backward, parameters excluded."""
    was = model.checkpoint
    model.checkpoint = checkpoint
    try:
        with profile() as p:
            loss = model.loss(x, y)
            held = set(p._arrays)          # ids of the arrays held
            params = sum(q.data.nbytes for q in model.parameters() if id(q.data) in held)
            loss.backward()
    finally:
        model.checkpoint = was
    return p.peak_saved_bytes - params


def forward_saved_bytes(model: GPT, x: Any, y: Any, grad: bool = True) -> int:
    """Bytes the graph holds after a forward (parameters excluded); 0 under ``no_grad``."""
    with profile() as p:
        if grad:
            loss = model.loss(x, y)
        else:
            with no_grad():
                loss = model.loss(x, y)
        held = set(p._arrays)
        params = sum(q.data.nbytes for q in model.parameters() if id(q.data) in held)
        saved = p.saved_bytes - params
        del loss
    return saved


def scaling_table(base: GPTConfig, corpus: data.CharCorpus, batch: int, seed: int = 0) -> list[tuple]:
    """Saved activation bytes after a forward as batch, n_ctx and n_layer double one at a time:
    rows (what doubled, batch, n_ctx, n_layer, bytes, ratio to the base row)."""
    rows = []
    for what, b, t, L in (("base", batch, base.n_ctx, base.n_layer), ("batch", 2 * batch, base.n_ctx, base.n_layer),
                          ("n_ctx", batch, 2 * base.n_ctx, base.n_layer),
                          ("n_layer", batch, base.n_ctx, 2 * base.n_layer)):
        manual_seed(seed)
        model = GPT(GPTConfig(base.vocab_size, t, base.d_model, base.n_head, L, base.dropout))
        x, y = corpus.batch("train", b, t, generator=np.random.default_rng(seed))
        rows.append((what, b, t, L, forward_saved_bytes(model, x, y)))
    return [row + (row[4] / rows[0][4],) for row in rows]


def compiled_tokens_per_second(model: GPT, corpus: data.CharCorpus, batch: int, steps: int = 6,
                               seed: int = 0) -> tuple[float, float]:
    """Tokens/s of a forward+backward+AdamW step, eager and under ``cr.compile`` (on copies)."""
    rates = []
    for compiled in (False, True):
        m = copy.deepcopy(model)
        opt = AdamW(m.parameters(), lr=1e-4)
        fwd_bwd = _replayable(m)
        run = compile_step(fwd_bwd) if compiled else fwd_bwd
        rng = np.random.default_rng(seed)
        batches = [corpus.batch("train", batch, m.cfg.n_ctx, generator=rng) for _ in range(steps + 2)]
        for x, y in batches[:2]:             # (the capture, and the first replay)
            run(x, y)
            opt.step()
        start = time.perf_counter()
        for x, y in batches[2:]:
            run(x, y)
            opt.step()
        rates.append(steps * batch * m.cfg.n_ctx / (time.perf_counter() - start))
    return rates[0], rates[1]


def report(model: GPT, corpus: data.CharCorpus, args: argparse.Namespace) -> list[str]:
    """The figures' lines for ``train --model transformer``."""
    cfg, b = model.cfg, args.batch_size
    x, y = corpus.batch("train", b, cfg.n_ctx, generator=np.random.default_rng(args.seed + 7))
    model = copy.deepcopy(model)
    model.train()
    tokens = b * cfg.n_ctx
    lines = ["", "The seeds' claims, measured on this model (one batch of "
             f"{b} x {cfg.n_ctx} tokens):"]
    counted = counted_flops(model, x, y)
    closed = closed_form_flops(cfg, b)
    n = closed["n_matmul"]
    per_token = (counted["forward"] + counted["backward"]) / tokens
    mm_token = (counted["matmul_forward"] + counted["matmul_backward"]) / tokens
    with_attn = 6 * n + 6 * cfg.n_layer * cfg.n_ctx * cfg.d_model
    lines.append(f"  FLOPs per token (forward+backward, counted): {per_token:,.0f}; matmuls alone "
                 f"{mm_token:,.0f} = {mm_token / (6 * n):.3f} x 6N (N = {n:,} weights a token meets) "
                 f"and {mm_token / with_attn:.3f} x (6N + 6 n_layer n_ctx d_model); all ops "
                 f"{per_token / (6 * n):.3f} x 6N")
    lines.append(f"  counted matmul FLOPs against the closed form: forward "
                 f"{counted['matmul_forward'] / closed['forward']:.4f}, backward "
                 f"{counted['matmul_backward'] / closed['backward']:.4f}; backward/forward FLOPs "
                 f"{counted['backward'] / counted['forward']:.2f}")
    fwd, bwd = step_times(model, x, y)
    lines.append(f"  backward time / forward time: {bwd / fwd:.2f} ({1e3 * bwd:.1f} ms / {1e3 * fwd:.1f} ms)")
    plain = activation_bytes(model, x, y, "none")
    per_block = activation_bytes(model, x, y, "block")
    sqrt = activation_bytes(model, x, y, "sqrt")
    L = cfg.n_layer
    lines.append(f"  peak saved activations: plain {plain / 2**20:.2f} MiB, checkpoint per block "
                 f"{per_block / 2**20:.2f} MiB ({per_block / plain:.2f}x), checkpoint sqrt "
                 f"({max(1, round(math.sqrt(L)))} segments) {sqrt / 2**20:.2f} MiB ({sqrt / plain:.2f}x; "
                 f"the seeds' 2·sqrt(L)/L = {2 * math.sqrt(L) / L:.2f})")
    deep_layers = 16
    manual_seed(args.seed)
    deep = GPT(GPTConfig(cfg.vocab_size, cfg.n_ctx, cfg.d_model, cfg.n_head, deep_layers, cfg.dropout))
    xd, yd = x[: max(1, b // 4)], y[: max(1, b // 4)]
    deep_plain, deep_sqrt = activation_bytes(deep, xd, yd, "none"), activation_bytes(deep, xd, yd, "sqrt")
    lines.append(f"  the same on {deep_layers} blocks (batch {xd.shape[0]}): plain {deep_plain / 2**20:.2f} MiB, "
                 f"sqrt ({round(math.sqrt(deep_layers))} segments) {deep_sqrt / 2**20:.2f} MiB "
                 f"({deep_sqrt / deep_plain:.2f}x; 2·sqrt(L)/L = {2 * math.sqrt(deep_layers) / deep_layers:.2f})")
    del deep
    times = {}
    for mode in ("none", "sqrt"):
        model.checkpoint = mode
        f, bk = step_times(model, x, y, repeats=5)
        times[mode] = f + bk
    model.checkpoint = "none"
    lines.append(f"  step time with sqrt checkpointing: {times['sqrt'] / times['none']:.2f}x plain "
                 f"(one extra forward would be {(fwd + fwd + bwd) / (fwd + bwd):.2f}x)")
    table = scaling_table(GPTConfig(cfg.vocab_size, cfg.n_ctx // 2 or 1, cfg.d_model, cfg.n_head,
                                    max(1, L // 2), cfg.dropout), corpus, max(1, b // 4), args.seed)
    lines.append("  saved activation bytes after a forward as each size doubles:")
    for what, bb, t, layers, nbytes, ratio in table:
        lines.append(f"    {what:8s} batch {bb:3d}  n_ctx {t:4d}  n_layer {layers:2d}  "
                     f"{nbytes:>12,} B  x{ratio:.2f}")
    lines.append(f"  the same forward under no_grad saves {forward_saved_bytes(model, x, y, grad=False)} B")
    eager, compiled = compiled_tokens_per_second(model, corpus, b)
    lines.append(f"  tokens/s (forward+backward+AdamW): eager {eager:,.0f}, cr.compile {compiled:,.0f} "
                 f"({compiled / eager:.2f}x)")
    return lines
