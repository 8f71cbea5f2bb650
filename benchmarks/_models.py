"""The models the cases share, each written once per library: parameters, forward, loss, backward.

``mlp``: 784-512-512-10 ReLU MLP, softmax cross-entropy (float32). ``deep``: L tanh layers of width
W with a mean-square loss (float32). Hand-written NumPy versions store exactly what backward needs.
"""
from __future__ import annotations

import numpy as np

import chainrule as cr

F32 = np.float32


# ----- the 784-512-512-10 MLP -----
def mlp_data(batch: int = 64, sizes: tuple = (784, 512, 512, 10)) -> tuple[list, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        params += [(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(F32),
                   np.zeros(n_out, F32)]
    x = rng.standard_normal((batch, sizes[0])).astype(F32)
    y = rng.integers(0, sizes[-1], batch)
    return params, x, y


def mlp_chainrule(ps: list, x, y):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = cr.relu(h @ ps[i] + ps[i + 1])
    return cr.nn.functional.cross_entropy(h @ ps[-2] + ps[-1], y)


def mlp_numpy_forward(ps: list, x: np.ndarray, y: np.ndarray) -> tuple[list, np.ndarray]:
    """The ReLU MLP's inputs to each layer, and d loss_i / d logits_i = softmax - onehot per example."""
    hs, h = [x], x
    for i in range(0, len(ps) - 2, 2):
        h = np.maximum(h @ ps[i] + ps[i + 1], 0)
        hs.append(h)
    logits = h @ ps[-2] + ps[-1]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    g = e / e.sum(axis=1, keepdims=True)
    g[np.arange(len(y)), y] -= 1
    return hs, g


def mlp_numpy_grads(ps: list, x: np.ndarray, y: np.ndarray) -> list:
    hs, g = mlp_numpy_forward(ps, x, y)
    g /= len(y)                                   # the mean loss
    grads = [None] * len(ps)
    for i in range(len(ps) - 2, -1, -2):
        h = hs.pop()
        grads[i], grads[i + 1] = h.T @ g, g.sum(axis=0)
        if i:
            g = (g @ ps[i].T) * (h > 0)
    return grads


def mlp_torch(torch, ps: list, x, y):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = torch.relu(h @ ps[i] + ps[i + 1])
    return torch.nn.functional.cross_entropy(h @ ps[-2] + ps[-1], y)


def mlp_autograd(anp, ps: list, x, y):
    """NumPy-API code: ``autograd.numpy`` and ``jax.numpy`` both run it as it is."""
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = anp.maximum(h @ ps[i] + ps[i + 1], 0)
    logits = h @ ps[-2] + ps[-1]
    m = anp.max(logits, axis=1, keepdims=True)
    logp = logits - m - anp.log(anp.sum(anp.exp(logits - m), axis=1, keepdims=True))
    return -anp.mean(logp[np.arange(len(y)), y])


# ----- the deep tanh MLP (layers x width) -----
def deep_data(layers: int, width: int, batch: int) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(1)
    params = []
    for _ in range(layers):
        params += [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(F32),
                   (0.1 * rng.standard_normal(width)).astype(F32)]
    return params, rng.standard_normal((batch, width)).astype(F32)


def deep_layers(ps: list, lib_tanh) -> list:
    """One callable per layer: h -> tanh(h @ W + b) (what checkpoint_sequential takes)."""
    return [lambda h, w=ps[i], b=ps[i + 1]: lib_tanh(h @ w + b) for i in range(0, len(ps), 2)]


def deep_forward(ps: list, x, lib_tanh):
    h = x
    for i in range(0, len(ps), 2):
        h = lib_tanh(h @ ps[i] + ps[i + 1])
    return h


def deep_numpy_forward(ps: list, x: np.ndarray) -> list:
    hs, h = [x], x
    for i in range(0, len(ps), 2):
        h = np.tanh(h @ ps[i] + ps[i + 1])
        hs.append(h)
    return hs


def deep_numpy_grads(ps: list, x: np.ndarray) -> list:
    """Gradients of mean(h_L ** 2) w.r.t. every W and b."""
    hs = deep_numpy_forward(ps, x)
    out = hs.pop()
    g = (2.0 / out.size) * out
    grads = [None] * len(ps)
    for i in range(len(ps) - 2, -1, -2):
        g = g * (1 - out * out)               # through tanh
        out = hs.pop()
        grads[i], grads[i + 1] = out.T @ g, g.sum(axis=0)
        if i:
            g = g @ ps[i].T
    return grads


def deep_numpy_jvp(ps: list, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The deep MLP's output and its JVP along ``v`` (a tangent of the input)."""
    h, t = x, v
    for i in range(0, len(ps), 2):
        h = np.tanh(h @ ps[i] + ps[i + 1])
        t = (1 - h * h) * (t @ ps[i])
    return h, t


# ----- the character-level GPT of chainrule/train/transformer.py, as a torch twin -----
def gpt_torch(torch, model, dtype=None):
    """A torch module with ``model``'s (a chainrule ``GPT``) architecture, parameter names and weights:
    ``twin(ids)`` gives the logits. ``dtype``: torch's dtype for the weights (default: the model's)."""
    nn, tF = torch.nn, torch.nn.functional
    cfg = model.cfg

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
            self.proj = nn.Linear(cfg.d_model, cfg.d_model)
            self.drop = nn.Dropout(cfg.dropout)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, cfg.n_head, d // cfg.n_head).permute(2, 0, 3, 1, 4)
            y = tF.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                dropout_p=cfg.dropout if self.training else 0.0)
            return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(cfg.d_model), CausalSelfAttention(), nn.LayerNorm(cfg.d_model)
            self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(cfg.vocab_size, cfg.d_model), nn.Embedding(cfg.n_ctx, cfg.d_model)
            self.drop = nn.Dropout(cfg.dropout)
            self.blocks = nn.ModuleList([Block() for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.d_model)

        def forward(self, ids):
            t = ids.shape[-1]
            x = self.drop(self.wte(ids) + self.wpe(torch.arange(t)))
            for block in self.blocks:
                x = block(x)
            return tF.linear(self.ln_f(x), self.wte.weight)           # tied to the token embedding

    state = {k: np.asarray(v.data) for k, v in model.state_dict().items()}
    dtype = dtype or getattr(torch, str(next(iter(state.values())).dtype))
    twin = GPT().to(dtype)
    names = [k for k, _ in twin.named_parameters()]
    if names != list(state):
        raise AssertionError(f"gpt_torch: parameter names differ: {names} vs {list(state)}")
    twin.load_state_dict({k: torch.tensor(v, dtype=dtype) for k, v in state.items()})
    return twin.train(model.training)


def gpt_torch_loss(torch, logits, targets):
    """``lm_loss``'s twin: mean next-character cross-entropy of (batch, n_ctx, vocab) logits."""
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def gpt_torch_trainer(torch, twin, args, param_groups, schedule):
    """``train/lm.py``'s ``Trainer.step`` for the twin, from the same arguments (``lm.parser()``'s) and
    chainrule's ``param_groups`` and schedule factor (``warmup_cosine(...)``): AdamW with betas
    (0.9, 0.95), then LambdaLR; clipping to ``args.clip``. ``step(x, y)`` returns the batch loss."""
    params = list(twin.parameters())
    opt = torch.optim.AdamW(param_groups(twin, args.weight_decay), lr=args.lr, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)

    def step(x, y):
        opt.zero_grad()
        loss = gpt_torch_loss(torch, twin(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.clip).item()
        opt.step()
        sched.step()
        return float(loss.item())
    return step
