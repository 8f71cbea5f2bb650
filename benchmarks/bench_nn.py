"""The ``cr.nn`` toolbox against PyTorch eager, float32, forward + backward of ``mean(out**2)`` with all
parameter gradients (zeroed each step): a Conv2d+BatchNorm2d+ReLU block, a 2-layer LSTM (seq 64, batch 32,
hidden 256), MultiheadAttention (seq 128, d 256, 8 heads) and one TransformerEncoderLayer step
(d 256, 8 heads, feed-forward 1024, dropout 0). Both libraries run the same weights: the chainrule module
is built first and its ``state_dict`` copied into the torch module. ``--only nn_conv_bn`` (keys comma-separated)
runs just those cases.
"""
from __future__ import annotations

import sys

import _harness as H
import numpy as np

import chainrule as cr

TORCH = "PyTorch eager"


def _input(shape: tuple) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# ----- the four models, (chainrule builder, torch builder, forward) per case -----
def _conv_block(quick: bool):
    cin, cout, n, hw = (8, 16, 4, 16) if quick else (32, 64, 16, 32)

    def build_cr():
        return cr.nn.Sequential(cr.nn.Conv2d(cin, cout, 3, padding=1, generator=np.random.default_rng(1)),
                                cr.nn.BatchNorm2d(cout), cr.nn.ReLU())

    def build_torch(torch):
        return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout),
                                   torch.nn.ReLU())

    title = f"Conv2d({cin}->{cout}, 3x3, pad 1) + BatchNorm2d + ReLU, input {n}x{cin}x{hw}x{hw}"
    return title, (n, cin, hw, hw), build_cr, build_torch, lambda m, x: m(x)


def _lstm(quick: bool):
    seq, batch, hidden = (8, 4, 32) if quick else (64, 32, 256)

    def build_cr():
        return cr.nn.LSTM(hidden, hidden, num_layers=2, batch_first=True, generator=np.random.default_rng(2))

    def build_torch(torch):
        return torch.nn.LSTM(hidden, hidden, num_layers=2, batch_first=True)

    title = f"2-layer LSTM, seq {seq}, batch {batch}, input = hidden {hidden}"
    return title, (batch, seq, hidden), build_cr, build_torch, lambda m, x: m(x)[0]


def _mha(quick: bool):
    seq, d, heads, batch = (16, 32, 4, 2) if quick else (128, 256, 8, 8)

    def build_cr():
        return cr.nn.MultiheadAttention(d, heads, batch_first=True, generator=np.random.default_rng(3))

    def build_torch(torch):
        return torch.nn.MultiheadAttention(d, heads, batch_first=True)

    title = f"MultiheadAttention self-attention, seq {seq}, d {d}, {heads} heads, batch {batch}"
    return title, (batch, seq, d), build_cr, build_torch, lambda m, x: m(x, x, x, need_weights=False)[0]


def _encoder(quick: bool):
    seq, d, heads, ff, batch = (16, 32, 4, 64, 2) if quick else (128, 256, 8, 1024, 8)

    def build_cr():
        return cr.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True,
                                             generator=np.random.default_rng(4))

    def build_torch(torch):
        return torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)

    title = f"TransformerEncoderLayer step, seq {seq}, d {d}, {heads} heads, ff {ff}, batch {batch}"
    return title, (batch, seq, d), build_cr, build_torch, lambda m, x: m(x)


# ----- contenders -----
def _chainrule(spec):
    _, shape, build_cr, _, forward = spec

    def setup():
        model, x = build_cr(), cr.tensor(_input(shape))
        model.train()
        params = [p for _, p in model.named_parameters()]

        def step():
            model.zero_grad()
            out = forward(model, x)
            cr.mean(out * out).backward()
            return [p.grad for p in params]
        return step, step()
    return setup


def _torch(torch, spec):
    _, shape, build_cr, build_torch, forward = spec

    def setup():
        state = build_cr().state_dict()                      # the same weights as the chainrule row
        model = build_torch(torch)
        model.load_state_dict({k: torch.tensor(np.array(v.data)) for k, v in state.items()})
        model.train()
        x = torch.tensor(_input(shape))
        params = [p for _, p in model.named_parameters()]
        names = [k for k, _ in build_cr().named_parameters()]
        if names != [k for k, _ in model.named_parameters()]:
            raise AssertionError(f"parameter names differ: {names} vs {[k for k, _ in model.named_parameters()]}")

        def step():
            model.zero_grad()
            out = forward(model, x)
            torch.mean(out * out).backward()
            return [p.grad for p in params]
        return step, step()
    return setup


def cases(quick: bool = False) -> list[H.Case]:
    torch = H.peer("torch")
    out = []
    for key, make, label in (("nn_conv_bn", _conv_block, "Conv2d+BatchNorm2d block"),
                             ("nn_lstm", _lstm, "2-layer LSTM"),
                             ("nn_mha", _mha, "MultiheadAttention"),
                             ("nn_encoder", _encoder, "TransformerEncoderLayer step")):
        spec = make(quick)
        rows = [H.Contender("chainrule", "chainrule", _chainrule(spec))]
        if torch is not None:
            rows.append(H.Contender(TORCH, "torch", (lambda s: _torch(torch, s))(spec)))
        out.append(H.Case(key, spec[0] + ", float32, fwd+bwd", rows, baseline=TORCH,
                          targets=[H.Target(f"{label} vs PyTorch eager", "chainrule", TORCH, 1.5)],
                          rtol=2e-3, atol=1e-5, notes=H.skip_note(["torch"])))
    return out


def _only(argv: list[str]) -> tuple:
    """``--only KEY[,KEY]``: run just those cases (their keys: nn_conv_bn, nn_lstm, nn_mha, nn_encoder)."""
    if "--only" not in argv:
        return argv, None
    i = argv.index("--only")
    if i + 1 >= len(argv):
        raise SystemExit("bench_nn.py: --only needs case keys, e.g. --only nn_conv_bn")
    return argv[:i] + argv[i + 2:], set(argv[i + 1].split(","))


if __name__ == "__main__":
    ARGV, KEYS = _only(sys.argv[1:])
    raise SystemExit(H.main(lambda quick: [c for c in cases(quick) if KEYS is None or c.key in KEYS], ARGV))
