"""scipy.optimize.minimize with chainrule's derivatives: L2-regularised logistic regression.

    fun(x) -> (loss, gradient)     from cr.value_and_grad, for jac=True      (L-BFGS-B)
    hessp(x, v) -> H v             from cr.hvp (forward over reverse)         (Newton-CG)

Both methods get NumPy in and NumPy out; chainrule builds and differentiates the graph inside.

    python examples/scipy_minimize.py
"""
import time

import numpy as np
import scipy.optimize

import chainrule as cr


def data(seed=0, n=400, d=20):
    """A synthetic binary classification problem (fixed seed): labels from a logistic model."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w_true))).astype(np.float64)
    return X, y


def make_loss(X, y, l2=1e-2):
    def loss(w):                              # mean logistic loss + L2, written with chainrule ops
        z = X @ w
        return cr.mean(cr.logaddexp(0.0, z) - y * z) + 0.5 * l2 * cr.sum(w * w)
    return loss


def fit(loss, x0, method):
    value_and_grad = cr.value_and_grad(loss)

    def fun(x):
        value, g = value_and_grad(x)
        return float(value), np.asarray(g, dtype=np.float64)

    def hessp(x, v):
        return np.asarray(cr.hvp(loss, (x,), (v,))[0], dtype=np.float64)

    if method == "Newton-CG":
        kw = {"hessp": hessp, "options": {"xtol": 1e-12}}
    else:
        kw = {"options": {"gtol": 1e-12, "ftol": 1e-15}}
    begin = time.perf_counter()
    res = scipy.optimize.minimize(fun, x0, jac=True, method=method, **kw)
    return res, time.perf_counter() - begin


def main():
    X, y = data()
    loss = make_loss(X, y)
    x0 = np.zeros(X.shape[1])
    results = {}
    for method in ("L-BFGS-B", "Newton-CG"):
        res, seconds = fit(loss, x0, method)
        results[method] = res
        gnorm = np.linalg.norm(cr.grad(loss)(res.x))
        print(f"{method:<10} iterations {res.nit:>3}  loss {res.fun:.12f}  |grad| {gnorm:.2e}  "
              f"success {res.success}  {seconds:.2f} s")
    a, b = results["L-BFGS-B"].x, results["Newton-CG"].x
    print(f"max |x_L-BFGS-B - x_Newton-CG| {np.max(np.abs(a - b)):.2e}")
    acc = np.mean((X @ b > 0) == (y > 0.5))
    print(f"training accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
