"""Per-example gradients of the 784-512-512-10 ReLU MLP (a ``cr.nn`` model), batch 64, float32,
softmax cross-entropy: ``cr.vmap(cr.grad(loss))`` with ``cr.func.functional_call`` against a Python
loop of ``cr.grad``, one batched (mean) gradient, hand-written NumPy (batched outer products: the
floor, 64 copies of 669k gradients), ``torch.func.vmap(torch.func.grad)`` and the per-example
gradient *norms* of ``cr.func.per_example_grad_norms`` (no per-example gradients formed).
"""
from __future__ import annotations

import _harness as H
import _models as M
import numpy as np

import chainrule as cr

VMAP = "chainrule vmap(grad)"
PLAIN = "chainrule batched gradient (one step)"


def _model(ps: list) -> cr.nn.Module:
    """The cr.nn MLP holding the shared weights (Linear stores W transposed: (out, in))."""
    layers = []
    for i in range(0, len(ps), 2):
        lin = cr.nn.Linear(*ps[i].shape)
        lin.weight = cr.nn.Parameter(np.ascontiguousarray(ps[i].T))
        lin.bias = cr.nn.Parameter(ps[i + 1])
        layers += [lin, cr.nn.ReLU()]
    return cr.nn.Sequential(*layers[:-1])


def _setup_cr():
    ps, x, y = M.mlp_data()
    model = _model(ps)
    params = {k: v.detach() for k, v in model.named_parameters()}
    return model, params, cr.tensor(x), cr.tensor(y)


def _example_loss(model):
    def loss(params, x, y):
        return cr.nn.functional.cross_entropy(cr.func.functional_call(model, params, (x[None],)), y[None])
    return loss


def _vmap():
    model, params, x, y = _setup_cr()
    per_example = cr.vmap(cr.grad(_example_loss(model)), in_axes=(None, 0, 0))

    def step():
        return list(per_example(params, x, y).values())
    return step, step()


def _loop():
    model, params, x, y = _setup_cr()
    one = cr.grad(_example_loss(model))

    def step():
        gs = [one(params, x[i], y[i]) for i in range(len(x))]
        return [np.stack([g[k].data for g in gs]) for k in params]
    return step, step()


def _plain():
    model, _, x, y = _setup_cr()

    def step():
        model.zero_grad()
        cr.nn.functional.cross_entropy(model(x), y).backward()
        return [p.grad for p in model.parameters()]
    return step, step()


def _norms():
    model, _, x, y = _setup_cr()

    def loss(out, y):
        return cr.nn.functional.cross_entropy(out, y, reduction="none")

    def step():
        return cr.func.per_example_grad_norms(loss, model, x, y)
    return step, step()


def numpy_per_example(ps: list, x: np.ndarray, y: np.ndarray) -> list:
    """Per-example gradients by hand, in Linear's (out, in) layout: one backward of the batch, then
    per layer the batched outer products g_i a_i^T."""
    hs, g = M.mlp_numpy_forward(ps, x, y)
    grads = [None] * len(ps)
    for i in range(len(ps) - 2, -1, -2):
        h = hs.pop()
        grads[i], grads[i + 1] = g[:, :, None] * h[:, None, :], g
        if i:
            g = (g @ ps[i].T) * (h > 0)
    return grads


def _numpy():
    ps, x, y = M.mlp_data()

    def step():
        return numpy_per_example(ps, x, y)
    return step, step()


def _torch(torch):
    def setup():
        ps, x0, y0 = M.mlp_data()
        layers = []
        for i in range(0, len(ps), 2):
            lin = torch.nn.Linear(*ps[i].shape)
            with torch.no_grad():
                lin.weight.copy_(torch.tensor(ps[i].T))
                lin.bias.copy_(torch.tensor(ps[i + 1]))
            layers += [lin, torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1])
        params = {k: v.detach() for k, v in model.named_parameters()}
        x, y = torch.tensor(x0), torch.tensor(y0)

        def loss(params, x, y):
            out = torch.func.functional_call(model, params, (x[None],))
            return torch.nn.functional.cross_entropy(out, y[None])
        per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))

        def step():
            return list(per_example(params, x, y).values())
        return step, step()
    return setup


def _jax(jax):
    """jax.vmap(jax.grad) of one example's loss, weights in Linear's (out, in) layout like the
    chainrule and torch rows."""
    jnp = jax.numpy
    ps, x, y = M.mlp_data()
    ps = [np.ascontiguousarray(p.T) if p.ndim == 2 else p for p in ps]

    def loss(ps, x, y):
        return M.mlp_autograd(jnp, [p.T if p.ndim == 2 else p for p in ps], x[None], y[None])
    return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)), (ps, x, y)


def _norms_check() -> dict:
    """The norms row agrees with the norms of the vmap row's per-example gradients."""
    grads = _vmap()[1]
    ref = np.sqrt(sum((np.asarray(g.data, np.float64).reshape(len(g.data), -1) ** 2).sum(1) for g in grads))
    got = _norms()[1]
    err = float(np.max(np.abs(got - ref) / ref))
    if err > 1e-4:
        raise AssertionError(f"per_example: per_example_grad_norms differs from the vmap norms by {err:.2g}")
    return {"per_example_grad_norms vs norms of vmap(grad), max relative difference": f"{err:.1e}"}


def cases(quick: bool = False) -> list[H.Case]:
    rows = [H.Contender(VMAP, "chainrule", _vmap, check=VMAP),
            H.Contender("chainrule Python loop of grad", "chainrule", _loop),
            H.Contender(PLAIN, "chainrule", _plain, check=None),
            H.Contender("chainrule per_example_grad_norms", "chainrule", _norms, check=None),
            H.Contender("NumPy (hand-written)", "numpy", _numpy)]
    torch = H.peer("torch")
    if torch is not None and hasattr(torch, "func"):
        rows.append(H.Contender("torch.func.vmap(grad)", "torch", _torch(torch)))
    rows += H.jax_rows(_jax, what="vmap(grad)")
    for r in rows:
        if r.check == "chainrule":
            r.check = VMAP
    return [H.Case("per_example", "per-example gradients of the 784-512-512-10 MLP, batch 64, float32",
                   rows, targets=[H.Target("per-example grads: vmap(grad) vs hand-written NumPy", VMAP,
                                           "NumPy (hand-written)", 1.3),
                                  H.Target("per-example grad norms vs one plain gradient step",
                                           "chainrule per_example_grad_norms", PLAIN, 1.5)],
                   extras=_norms_check, rtol=1e-3, atol=1e-5, notes=H.skip_note(["torch", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
