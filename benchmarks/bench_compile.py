"""``cr.compile``: a captured step replayed as its flat list of NumPy kernels, against eager.

Three cases, each the eager step of its benchmark file (``.grad = None``, ``backward()``, the
gradients returned) and the same step under ``cr.compile``: the 1,000-op elementwise chain
(``bench_elementwise``), the seed's 3-4-1 net (``bench_tiny_net``) and the MLP 784-512-512-10 step
(``bench_mlp_step``), with hand-written NumPy and the peers. The extras say what a capture costs
against one eager step (and the first replay, which generates the code), and what checking 100
guards costs against one replay of the chain.
"""
from __future__ import annotations

import time

import _harness as H
import _models as M
import bench_elementwise as E
import bench_mlp_step as S
import bench_tiny_net as T
import numpy as np

import chainrule as cr
from chainrule.func.compile import _flatten_call, _state
from chainrule.func.compile import compile as cr_compile


def _chain_compiled():
    x0, w0 = E._inputs()
    x, w = cr.tensor(x0, requires_grad=True), cr.tensor(w0, requires_grad=True)

    @cr_compile
    def step():                                      # bench_elementwise's eager step, compiled
        x.grad = w.grad = None
        E.chain(x, w, cr.tanh).sum().backward()
        return x.grad, w.grad
    step()                                           # the capture
    return step, step()


def _chain_grads(x, w):
    return cr.autograd.grad(E.chain(x, w, cr.tanh).sum(), (x, w))


def _tiny_compiled():
    w1, w2 = T._draws()
    W1, W2 = cr.tensor(np.array(w1), requires_grad=True), cr.tensor(np.array(w2), requires_grad=True)
    x = np.array(T.X)

    @cr_compile
    def step():                                      # bench_tiny_net's eager step, compiled
        W1.grad = W2.grad = None
        d = W2 @ cr.tanh(W1 @ x) - T.TARGET
        (d * d).backward()
        return W1.grad, W2.grad
    step()
    return step, step()


def _mlp_compiled():
    ps0, x0, y = M.mlp_data()
    ps = [cr.tensor(p, requires_grad=True) for p in ps0]
    x = cr.tensor(x0)     # (a raw ndarray input: matmul's rule would transpose it with NumPy, untaped)

    @cr_compile
    def step():                                      # bench_mlp_step's eager step, compiled
        for p in ps:
            p.grad = None
        M.mlp_chainrule(ps, x, y).backward()
        return [p.grad for p in ps]
    step()
    return step, step()


def _median_s(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _extras() -> dict:
    x0, w0 = E._inputs()
    x, w = cr.tensor(x0, requires_grad=True), cr.tensor(w0, requires_grad=True)
    eager = _median_s(lambda: _chain_grads(x, w), 7)
    captures, firsts = [], []
    for _ in range(5):
        step = cr_compile(_chain_grads)
        t = time.perf_counter()
        step(x, w)
        captures.append(time.perf_counter() - t)
        t = time.perf_counter()
        step(x, w)                                # the first replay generates the tape's code
        firsts.append(time.perf_counter() - t)
    capture, first = float(np.median(captures)), float(np.median(firsts))
    # 100 guards: the chain with 98 more tensor arguments (shape, dtype, requires_grad each)
    extra = [cr.tensor(np.ones(3)) for _ in range(98)]
    many = cr_compile(lambda x, w, *rest: _chain_grads(x, w))
    for _ in range(10):                           # captured, then past the code generation
        many(x, w, *extra)
    cap = many.captures[0]
    leaves, tree = _flatten_call((x, w, *extra), {})
    state = _state()
    guard = _median_s(lambda: cap.guard(leaves, tree, state), 201)
    replay = _median_s(lambda: many(x, w, *extra), 21)
    return {"capture of the chain": f"{capture * 1e3:.1f} ms = {capture / eager:.2f}x one eager step "
                                    f"(cr.autograd.grad, {eager * 1e3:.1f} ms)",
            "first replay of the chain": f"{first * 1e3:.1f} ms = {first / eager:.2f}x one eager step (it "
                                         f"generates the tape's code; later replays do not)",
            "guards of a cache hit": f"100 guards (shape, dtype, requires_grad of 100 tensor arguments) "
                                     f"take {guard * 1e6:.1f} us = {guard / replay * 100:.1f}% of the "
                                     f"chain's replay ({replay * 1e3:.2f} ms)"}


def _jit(make) -> list:
    """The ``jax.jit`` row of a case (the physical reference of a compiled step; eager JAX is in the
    case's own benchmark file)."""
    return [r for r in H.jax_rows(make) if r.name == "JAX jit"]


def cases(quick: bool = False) -> list[H.Case]:
    peers = H.peer_rows(E._torch, E._autograd) + _jit(E.jax_grads)
    chain = [H.Contender("chainrule", "chainrule", E._chainrule),
             H.Contender("chainrule compiled", "chainrule", _chain_compiled),
             H.Contender("NumPy (hand-written)", "numpy", E._numpy)] + peers
    tiny_peers = H.peer_rows(T._torch, T._autograd) + _jit(T.jax_grads)
    tiny = [H.Contender("chainrule", "chainrule", T._chainrule),
            H.Contender("chainrule compiled", "chainrule", _tiny_compiled),
            H.Contender("NumPy (hand-written)", "numpy", T._numpy)] + tiny_peers
    has_torch = any(r.name == "PyTorch eager" for r in peers)
    targets = [H.Target("compiled chain vs hand NumPy", "chainrule compiled", "NumPy (hand-written)", 1.3)]
    if has_torch:
        targets.append(H.Target("compiled chain vs PyTorch eager", "chainrule compiled", "PyTorch eager", 0.35))
    return [H.Case("compile_chain", f"{E.N_OPS}-op elementwise chain, fwd+bwd: eager vs cr.compile",
                   chain, unit="us/op", per=E.N_OPS, targets=targets, rtol=1e-10, atol=1e-12,
                   extras=_extras, notes=H.skip_note(["torch", "autograd", "jax"])),
            H.Case("compile_tiny_net", "the seed's 3-4-1 net, fwd+bwd: eager vs cr.compile", tiny,
                   unit="us", targets=[H.Target("compiled tiny net vs hand NumPy", "chainrule compiled",
                                                "NumPy (hand-written)", 2.0)],
                   rtol=1e-10, atol=1e-12, notes=H.skip_note(["torch", "autograd", "jax"])),
            H.Case("compile_mlp_step", "MLP 784-512-512-10 step, fwd+bwd: eager vs cr.compile",
                   [H.Contender("chainrule", "chainrule", S._chainrule),
                    H.Contender("chainrule compiled", "chainrule", _mlp_compiled),
                    H.Contender("NumPy (hand-written)", "numpy", S._numpy)] + H.peer_rows(S._torch, S._autograd)
                   + _jit(S.jax_grads),
                   targets=[H.Target("compiled MLP step vs hand NumPy", "chainrule compiled",
                                     "NumPy (hand-written)", 1.02)])]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
