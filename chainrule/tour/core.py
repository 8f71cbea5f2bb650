"""Tour sections for the core: the dynamic graph, reverse mode vs finite differences, gradcheck."""
from __future__ import annotations

import random

import numpy as np

import chainrule as cr
from chainrule.tour._sections import Context, section


def _chain(t: cr.Tensor) -> list[str]:
    names, node = [], t.grad_fn
    while node is not None:
        names.append(node.name)
        nxt = [e[0] for e in node.next_functions if e[0] is not None]
        node = nxt[0] if nxt else None
    return names


@section("graph", "The dynamic graph: grad_fn chains, leaves, control flow",
         "define-by-run: the graph is whatever ops actually ran; leaves have grad_fn = None")
def dynamic_graph(ctx: Context) -> None:
    x = cr.tensor([0.5, -1.0, 2.0], requires_grad=True)
    ctx.say(f"x = {x}   x.is_leaf={x.is_leaf}  x.grad_fn={x.grad_fn}")
    for step in range(3):
        y = x
        for _ in range(step + 1):            # the loop length changes the graph each iteration
            y = cr.tanh(y) * 2 if step % 2 == 0 else cr.exp(-y)
        loss = y.sum()
        ctx.say(f"iteration {step}: grad_fn chain of the loss: {' <- '.join(_chain(loss))} <- x")
    loss.backward()
    ctx.say(f"after backward: x.grad = {x.grad}; the graph is freed (retain_graph=False)")
    try:
        loss.backward()
    except cr.GraphError as e:
        ctx.say(f"a second backward raises: {str(e).splitlines()[0][:110]}...")


def seed_network() -> tuple[float, float, float]:
    """The seed's 3-4-1 tanh network (random.seed(0) draws): (loss, dL/dW1[2][1] by reverse mode,
    the same by a central difference)."""
    random.seed(0)
    w1 = np.array([[random.uniform(-1, 1) for _ in range(3)] for _ in range(4)])
    w2 = np.array([random.uniform(-1, 1) for _ in range(4)])
    x, target = np.array([0.5, -1.2, 2.0]), 0.3
    W1, W2 = cr.tensor(w1, requires_grad=True), cr.tensor(w2, requires_grad=True)

    def loss(W1: cr.Tensor, W2: cr.Tensor) -> cr.Tensor:
        d = W2 @ cr.tanh(W1 @ x) - target
        return d * d

    L = loss(W1, W2)
    L.backward()
    eps = 1e-6
    up, down = w1.copy(), w1.copy()
    up[2, 1] += eps
    down[2, 1] -= eps
    with cr.no_grad():
        fd = (loss(cr.tensor(up), W2).item() - loss(cr.tensor(down), W2).item()) / (2 * eps)
    return L.item(), float(W1.grad.data[2, 1]), fd


@section("reverse", "Reverse mode = the chain rule from the output back",
         "one backward pass gives the gradient w.r.t. every parameter (seed: a 3-4-1 tanh network)")
def reverse_mode(ctx: Context) -> None:
    loss, analytic, fd = seed_network()
    ctx.say(f"loss {loss:.6f}")
    ctx.say(f"dL/dW1[2][1]: reverse mode {analytic:.8f}, finite difference {fd:.8f}")
    ctx.say("one backward pass gave all 16 gradients; finite differences would need 32 loss evaluations")


class _WrongTanh(cr.Function):
    """A custom op with a deliberately wrong backward (forgets the square)."""

    @staticmethod
    def forward(ctx: cr.FunctionCtx, x: cr.Tensor) -> cr.Tensor:
        y = cr.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: cr.FunctionCtx, g: cr.Tensor) -> cr.Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y)          # should be 1 - y * y


@section("gradcheck", "Gradient checking catches a wrong backward",
         "compare AD with central differences in float64, at random points away from kinks")
def gradient_checking(ctx: Context) -> None:
    rng = np.random.default_rng(0)
    x = cr.tensor(rng.uniform(-1, 1, (3, 4)), requires_grad=True)
    w = cr.tensor(rng.uniform(-1, 1, (4, 2)), requires_grad=True)
    ok = cr.gradcheck(lambda x, w: cr.tanh(x @ w).sum(axis=0), (x, w))
    ctx.say(f"gradcheck(tanh(x @ w).sum(0)) in float64: {ok}")
    try:
        cr.gradcheck(lambda x: _WrongTanh.apply(x) * 2, (x,))
    except cr.GradcheckError as e:
        ctx.say("a custom Function with a wrong backward is caught:")
        ctx.say("    " + str(e).splitlines()[0])
