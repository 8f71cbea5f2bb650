"""The seed's tiny network (seeds/002: 3 inputs, 4 tanh hidden units, 1 output, squared error on
one example, random.seed(0) draws): one forward + backward, in microseconds.

micrograd is not a dependency: ``Value`` below is a faithful ~40-line micrograd-style scalar
engine (Karpathy's micrograd/engine.py structure: per-node ``_backward`` closures, a recursive
topological sort), written here as the reference point for scalar autodiff in pure Python.
"""
from __future__ import annotations

import math
import random

import _harness as H
import numpy as np

import chainrule as cr


class Value:
    """micrograd-style scalar: data, grad, and a closure that pushes grad to its children."""

    def __init__(self, data, _children=(), _op=""):
        self.data, self.grad = data, 0.0
        self._backward = lambda: None
        self._prev, self._op = set(_children), _op

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    __radd__, __rmul__ = __add__, __mul__

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward():
            self.grad += (1 - t * t) * out.grad
        out._backward = _backward
        return out

    def backward(self):
        topo, visited = [], set()

        def build(v):
            if v not in visited:
                visited.add(v)
                for child in v._prev:
                    build(child)
                topo.append(v)
        build(self)
        self.grad = 1.0
        for v in reversed(topo):
            v._backward()


X, TARGET = [0.5, -1.2, 2.0], 0.3


def _draws() -> tuple[list, list]:
    random.seed(0)
    w1 = [[random.uniform(-1, 1) for _ in range(3)] for _ in range(4)]
    w2 = [random.uniform(-1, 1) for _ in range(4)]
    return w1, w2


def _chainrule():
    w1, w2 = _draws()
    W1, W2 = cr.tensor(np.array(w1), requires_grad=True), cr.tensor(np.array(w2), requires_grad=True)
    x = np.array(X)

    def step():
        W1.grad = W2.grad = None
        d = W2 @ cr.tanh(W1 @ x) - TARGET
        (d * d).backward()
        return W1.grad, W2.grad
    return step, step()


def _numpy():
    w1, w2 = _draws()
    W1, W2, x = np.array(w1), np.array(w2), np.array(X)

    def step():
        h = np.tanh(W1 @ x)
        d = W2 @ h - TARGET
        gh = 2 * d * W2 * (1 - h * h)
        return np.outer(gh, x), 2 * d * h
    return step, step()


def _floats():
    w1, w2 = _draws()

    def step():
        h = [math.tanh(sum(w * xi for w, xi in zip(row, X))) for row in w1]
        d = sum(w * hi for w, hi in zip(w2, h)) - TARGET
        gh = [2 * d * w * (1 - hi * hi) for w, hi in zip(w2, h)]
        return [[g * xi for xi in X] for g in gh], [2 * d * hi for hi in h]
    return step, [np.array(a) for a in step()]


def _micrograd():
    w1, w2 = _draws()
    W1 = [[Value(w) for w in row] for row in w1]
    W2 = [Value(w) for w in w2]

    def step():
        for v in [v for row in W1 for v in row] + W2:
            v.grad = 0.0
        h = [sum((w * xi for w, xi in zip(row, X)), Value(0.0)).tanh() for row in W1]
        d = sum((w * hi for w, hi in zip(W2, h)), Value(0.0)) + (-TARGET)
        (d * d).backward()
        return [[v.grad for v in row] for row in W1], [v.grad for v in W2]
    return step, [np.array(a) for a in step()]


def _torch(torch):
    def setup():
        w1, w2 = _draws()
        W1 = torch.tensor(w1, dtype=torch.float64, requires_grad=True)
        W2 = torch.tensor(w2, dtype=torch.float64, requires_grad=True)
        x = torch.tensor(X, dtype=torch.float64)

        def step():
            W1.grad = W2.grad = None
            d = W2 @ torch.tanh(W1 @ x) - TARGET
            (d * d).backward()
            return W1.grad, W2.grad
        return step, step()
    return setup


def _autograd(ag):
    import autograd.numpy as anp

    def setup():
        w1, w2 = _draws()
        x = np.array(X)
        g = ag.grad(lambda W1, W2: (W2 @ anp.tanh(W1 @ x) - TARGET) ** 2, argnum=(0, 1))
        W1, W2 = np.array(w1), np.array(w2)

        def step():
            return g(W1, W2)
        return step, step()
    return setup


def jax_grads(jax):
    """Both weight gradients as one JAX function (float64), for the eager and the jit row."""
    jnp = jax.numpy
    w1, w2 = _draws()
    f = lambda W1, W2, x: (W2 @ jnp.tanh(W1 @ x) - TARGET) ** 2  # noqa: E731
    return jax.grad(f, argnums=(0, 1)), (np.array(w1), np.array(w2), np.array(X))


def cases(quick: bool = False) -> list[H.Case]:
    rows = [H.Contender("chainrule", "chainrule", _chainrule),
            H.Contender("NumPy (hand-written)", "numpy", _numpy),
            H.Contender("Python floats (hand-written)", "python", _floats),
            H.Contender("micrograd-style Value (in this file)", "micrograd", _micrograd)]
    torch, ag = H.peer("torch"), H.hips_autograd()
    targets = [H.Target("tiny 3-4-1 net vs micrograd-style scalars", "chainrule",
                        "micrograd-style Value (in this file)", 0.8)]
    if torch is not None:
        rows.append(H.Contender("PyTorch eager", "torch", _torch(torch)))
        targets.append(H.Target("tiny 3-4-1 net vs PyTorch eager", "chainrule", "PyTorch eager", 0.8))
    if ag is not None:
        rows.append(H.Contender("HIPS autograd", "autograd", _autograd(ag)))
    rows += H.jax_rows(jax_grads)
    return [H.Case("tiny_net", "the seed's tiny 3-4-1 tanh network, fwd+bwd", rows, unit="us",
                   targets=targets, rtol=1e-10, atol=1e-12,
                   notes=["micrograd-style Value: written in bench_tiny_net.py (micrograd itself is "
                          "not a dependency)"] + H.skip_note(["torch", "autograd", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
