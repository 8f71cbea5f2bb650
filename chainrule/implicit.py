"""Implicit differentiation: solutions of z = f(z, p) and g(z, p) = 0, differentiated unrolled-free.

The solver runs under ``no_grad`` (its iterations are not recorded, so memory does not grow with
their number). Derivatives come from the implicit function theorem at the solution z*: with
r(z, p) = 0 (r = f - z for a fixed point) and R_z, R_p its partial Jacobians,

    VJP:  solve R_zᵀ w = ḡ,          then  ḡ_p = -R_pᵀ w     (VJPs of r at z*)
    JVP:  solve R_z t_z = -R_p t_p                            (JVPs of r at z*)

with a matrix-free Krylov method (GMRES) or, for fixed points, the fixed-point iteration
u = ḡ + (∂f/∂z)ᵀ u. The gradient does not depend on z0. Derivatives are first order: a
``create_graph`` backward through the solve raises instead of returning a wrong zero, and so does
a backward when ``f`` closes over tensors that require grad (pass them as params instead).
"""
from __future__ import annotations

from typing import Any, Callable

from ._backend import np
from .autograd import engine
from .autograd.forward import dual_level, make_dual, unpack_dual
from .autograd.function import Function
from .checkpoint import _closure_leaves
from .errors import ChainruleError, GraphError, ShapeError
from .grad_mode import STATE, enable_grad, no_grad
from .ops._registry import raw
from .tensor import Tensor, wrap


class ConvergenceError(ChainruleError, RuntimeError):
    """An iterative solve (forward or in the implicit backward) did not reach its tolerance."""


_DEFAULT_TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-5}


# ----- small dense-free linear algebra -----
def gmres(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray, tol: float = 1e-10,
          max_iter: int = 200, restart: int = 50, who: str = "gmres",
          check: bool = True) -> np.ndarray:
    """Solve ``A x = b`` given ``matvec(v) = A v`` (restarted GMRES on flat float64 vectors).

    With ``check=False`` a system that does not reach ``tol`` returns its least-squares iterate.

    >>> import numpy as np
    >>> A = np.array([[3.0, 1.0], [1.0, 2.0]])
    >>> np.round(gmres(lambda v: A @ v, np.array([1.0, 0.0])), 6)
    array([ 0.4, -0.2])
    """
    b = np.asarray(b, dtype=np.float64).ravel()
    x = np.zeros_like(b)
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0.0:
        return x
    iters, rel = 0, 1.0
    while iters < max_iter:
        r = b - matvec(x)
        beta = float(np.linalg.norm(r))
        rel = beta / bnorm
        if rel <= tol:
            return x
        basis = [r / beta]
        hess = np.zeros((restart + 1, restart))
        for j in range(restart):
            w = matvec(basis[j])
            iters += 1
            for i in range(j + 1):              # modified Gram-Schmidt
                hess[i, j] = float(w @ basis[i])
                w = w - hess[i, j] * basis[i]
            hess[j + 1, j] = float(np.linalg.norm(w))
            e1 = np.zeros(j + 2)
            e1[0] = beta
            y = np.linalg.lstsq(hess[:j + 2, :j + 1], e1, rcond=None)[0]
            rel = float(np.linalg.norm(hess[:j + 2, :j + 1] @ y - e1)) / bnorm
            if rel <= tol or hess[j + 1, j] <= 1e-14 * beta or iters >= max_iter:
                break
            basis.append(w / hess[j + 1, j])
        x = x + np.stack(basis[:len(y)], axis=1) @ y
    rel = float(np.linalg.norm(b - matvec(x))) / bnorm
    if rel > tol and check:
        raise ConvergenceError(f"{who}: the linear solve did not converge after {iters} "
                               f"iterations: relative residual {rel:.3g} > tol {tol:.3g}; the "
                               f"linearised system is singular or ill-conditioned at the solution "
                               f"(check that the solution is isolated), or raise max_iter")
    return x


def anderson(fn: Callable[[np.ndarray], np.ndarray], z0: np.ndarray, tol: float, max_iter: int,
             memory: int = 5, who: str = "anderson") -> tuple[np.ndarray, int]:
    """Fixed point of ``fn`` by Anderson acceleration (type II); returns (z, iterations)."""
    x = np.asarray(z0, dtype=np.float64).ravel()
    xs, gs = [], []
    res = np.inf
    for k in range(1, max_iter + 1):
        fx = fn(x)
        g = fx - x
        res = float(np.max(np.abs(g))) if g.size else 0.0
        if res <= tol * max(1.0, float(np.max(np.abs(fx), initial=0.0))):
            return fx, k
        xs.append(x)
        gs.append(g)
        if len(xs) > memory + 1:
            xs.pop(0)
            gs.pop(0)
        if len(xs) == 1:
            x = fx
            continue
        dg = np.stack([gs[i + 1] - gs[i] for i in range(len(gs) - 1)], axis=1)
        dx = np.stack([xs[i + 1] - xs[i] for i in range(len(xs) - 1)], axis=1)
        gamma = np.linalg.lstsq(dg, g, rcond=None)[0]
        x = x + g - (dx + dg) @ gamma
    raise _no_convergence(who, max_iter, res, tol)


def _no_convergence(who: str, iters: int, res: float, tol: float) -> ConvergenceError:
    return ConvergenceError(f"{who}: no convergence after {iters} iterations: residual {res:.3g} "
                            f"> tol {tol:.3g}. Raise max_iter, try another solver=, or check that "
                            f"the problem has a solution near z0 (a fixed-point map must be a "
                            f"contraction near it)")


# ----- evaluating r and its linearisations at numpy points -----
class _Problem:
    """r(z, *params) = 0 plus the forward solver that finds z*."""

    def __init__(self, name: str, residual: Callable, solve: Callable, backward_solver: str,
                 tol: float | None, max_iter: int) -> None:
        self.name, self.residual, self.solve = name, residual, solve
        self.backward_solver, self.tol, self.max_iter = backward_solver, tol, max_iter

    def value(self, z: np.ndarray, params: list) -> np.ndarray:
        with no_grad():
            return np.asarray(raw(self.residual(wrap(z), *params)))

    def jvp(self, z: np.ndarray, params: list, tz: np.ndarray | None, tps: list) -> np.ndarray:
        """R_z tz + Σ R_p tp, by forward mode on fresh copies (no outer tangents leak in)."""
        visible = STATE.fw_visible
        STATE.fw_visible = 1 << 62
        try:
            with dual_level(), no_grad():
                zd = make_dual(wrap(z), wrap(tz)) if tz is not None else wrap(z)
                ps = [make_dual(wrap(raw(p)), wrap(np.asarray(raw(t), dtype=raw(p).dtype)))
                      if t is not None else p for p, t in zip(params, tps)]
                tout = unpack_dual(self.residual(zd, *ps)).tangent
        finally:
            STATE.fw_visible = visible
        shape = np.shape(z)
        return np.zeros(shape) if tout is None else np.asarray(raw(tout), dtype=np.float64)


def _tol(problem: _Problem, dtype: np.dtype) -> float:
    return problem.tol if problem.tol is not None else _DEFAULT_TOL.get(np.dtype(dtype), 1e-3)


class ImplicitSolve(Function):
    """z* with r(z*, params) = 0; VJP and JVP by the implicit function theorem."""

    @staticmethod
    def forward(ctx: Any, problem: _Problem, z0: Any, *params: Any) -> Tensor:
        z0d = np.asarray(raw(z0))
        dtype = z0d.dtype if z0d.dtype.kind == "f" else np.dtype(np.float64)
        fixed = [wrap(raw(p)) if isinstance(p, Tensor) else p for p in params]   # no tangents
        z = problem.solve(z0d.astype(dtype), fixed, _tol(problem, dtype))
        out = wrap(np.asarray(z, dtype=dtype).reshape(z0d.shape))
        if STATE.fw_levels:
            _check_closure_tangents(problem, out, fixed)
        ctx.problem = problem
        ctx.save_for_backward(out, *params)
        return out

    @staticmethod
    def backward(ctx: Any, gz: Any) -> tuple:
        problem = ctx.problem
        if STATE.grad_enabled:
            raise GraphError(f"{problem.name}: higher-order derivatives through the implicit solve "
                             f"are not supported (backward was called with create_graph=True); "
                             f"differentiate the unrolled iterations instead")
        z, *params = ctx.saved_tensors
        if any(_live_tangents(v) for v in (gz, *params)):
            raise GraphError(f"{problem.name}: {_NO_SECOND_ORDER} (here: forward over reverse, "
                             f"e.g. hvp, hessian or jvp of grad)")
        need = ctx.needs_input_grad[2:]
        with enable_grad():
            zt = Tensor(np.array(z.data), requires_grad=True)
            pts = [Tensor(np.array(raw(p)), requires_grad=True) if n else p
                   for p, n in zip(params, need)]
            r = problem.residual(zt, *pts)
        if not isinstance(r, Tensor) or not r.requires_grad:
            return (None, None) + tuple(None for _ in params)
        hidden = _closure_leaves([r], [zt] + [p for p in pts if isinstance(p, Tensor)])
        if hidden:
            shapes = ", ".join(str(tuple(t.shape)) for t in hidden)
            raise GraphError(f"{problem.name}: the function closes over {len(hidden)} tensor(s) that "
                             f"require grad (shapes {shapes}); their gradients would be silently "
                             f"lost, because the implicit backward differentiates only with respect "
                             f"to params. Pass them as params: {problem.name}(f, z0, *params) with f "
                             f"taking (z, *params)")
        shape, dtype = z.shape, z.dtype
        g = np.asarray(raw(gz), dtype=np.float64).ravel()

        def rzt(w: np.ndarray) -> np.ndarray:           # R_zᵀ w
            (gw,) = engine.grad([r], [zt], [w.reshape(shape).astype(dtype)], retain_graph=True,
                                allow_unused=True)
            return np.zeros_like(w) if gw is None else np.asarray(gw.data, np.float64).ravel()

        tol = _tol(problem, dtype)
        if problem.backward_solver == "iteration":      # w <- w - (ḡ - R_zᵀ w) is u = ḡ + J_fᵀ u
            w = _richardson(rzt, g, tol, problem.max_iter, f"{problem.name} backward")
        else:
            w = gmres(rzt, g, tol=tol, max_iter=problem.max_iter, who=f"{problem.name} backward")
        wanted = [p for p, n in zip(pts, need) if n]
        seed = (-w).reshape(shape).astype(dtype)
        grads = iter(engine.grad([r], wanted, [seed], allow_unused=True) if wanted else ())
        out = [next(grads) if n else None for n in need]
        return (None, None) + tuple(out)

    @staticmethod
    def jvp(ctx: Any, t_problem: Any, tz0: Any, *tps: Any) -> Tensor:
        problem = ctx.problem
        z, *params = ctx.saved_tensors
        if any(_live_tangents(v, visible=True) for v in (*params, *tps)):
            raise GraphError(f"{problem.name}: {_NO_SECOND_ORDER} (here: forward over forward, "
                             f"e.g. jvp of jvp or jacfwd of jacfwd)")
        zd = np.asarray(z.data)
        fixed = [wrap(raw(p)) if isinstance(p, Tensor) else p for p in params]
        rhs = -problem.jvp(zd, fixed, None, [None if t is None else raw(t) for t in tps]).ravel()
        nones = [None] * len(fixed)

        def rz(v: np.ndarray) -> np.ndarray:            # R_z v
            return problem.jvp(zd, fixed, v.reshape(zd.shape).astype(zd.dtype), nones).ravel()

        tol = _tol(problem, zd.dtype)
        tz = gmres(rz, rhs, tol=tol, max_iter=problem.max_iter, who=f"{problem.name} jvp")
        out = wrap(tz.reshape(zd.shape).astype(zd.dtype))
        graph = [v for v in (*params, *tps) if isinstance(v, Tensor) and v.requires_grad]
        if graph and STATE.grad_enabled:     # a backward through this tangent must not give zero
            out = _FirstOrderOnly.apply(problem.name, out, *graph)
        return out


_NO_SECOND_ORDER = ("second derivatives through the implicit solve are not supported; the result "
                    "would silently miss the solve's second-order terms. Differentiate the unrolled "
                    "iterations instead")


class _FirstOrderOnly(Function):
    """Identity on an implicit JVP's tangent whose backward raises (reverse over forward)."""

    @staticmethod
    def forward(ctx: Any, name: str, t: Tensor, *graph: Any) -> Tensor:
        ctx.name = name
        return t

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError(f"{ctx.name}: {_NO_SECOND_ORDER} (here: reverse over forward, e.g. grad "
                         f"of jvp or jacrev of jacfwd)")


def _live_tangents(v: Any, visible: bool = False) -> bool:
    """Does ``v`` carry a forward-mode tangent of an active level (and, with ``visible``, of a level
    not hidden while a JVP rule runs, i.e. of an enclosing forward pass)?"""
    st = STATE
    return isinstance(v, Tensor) and bool(v._tangents) and any(
        lv in st.fw_levels and (not visible or lv <= st.fw_visible) for lv in v._tangents)


def _check_closure_tangents(problem: _Problem, z: Tensor, params: list) -> None:
    """Under forward mode: tangents may enter only through params, never through a closure."""
    with no_grad():
        r = problem.residual(z, *params)      # z and params carry no tangents here
    if _live_tangents(r):
        raise GraphError(f"{problem.name}: the function closes over a tensor that carries a "
                         f"forward-mode tangent (jvp / jacfwd / forward_ad); its effect on the "
                         f"solution would be silently lost. Pass it as a param: "
                         f"{problem.name}(f, z0, *params) with f taking (z, *params)")


def _richardson(matvec: Callable, g: np.ndarray, tol: float, max_iter: int, who: str) -> np.ndarray:
    w = -g
    gnorm = max(float(np.max(np.abs(g), initial=0.0)), 1e-300)
    res = np.inf
    for _ in range(max_iter):
        step = g - matvec(w)
        res = float(np.max(np.abs(step), initial=0.0)) / gnorm
        if res <= tol:
            return w
        w = w - step
    raise _no_convergence(who + " (fixed-point iteration on the adjoint)", max_iter, res, tol)


def fixed_point(f: Callable, z0: Any, *params: Any, tol: float | None = None, max_iter: int = 1000,
                solver: str = "anderson", backward_solver: str = "gmres") -> Tensor:
    """Return z* = f(z*, *params), differentiable in ``params`` by implicit differentiation.

    The iterations run under no_grad; VJP and JVP solve (I - ∂f/∂z) systems at z*.
    ``solver``: "anderson" (default) or "iteration"; ``backward_solver``: "gmres" or "iteration".
    ``tol``: max-norm residual (relative to max(1, |z|)); default 1e-10 (float64), 1e-5 (float32).

    >>> import chainrule as cr
    >>> a = cr.tensor(0.5, dtype=cr.float64, requires_grad=True)
    >>> z = cr.fixed_point(lambda z, a: a * cr.cos(z), cr.tensor(0.0, dtype=cr.float64), a)
    >>> z.backward(); round(a.grad.item(), 6)     # dz/da = cos z / (1 + a sin z)
    0.739482
    """
    if solver not in ("anderson", "iteration"):
        raise ValueError(f"fixed_point: unknown solver={solver!r}; use 'anderson' or 'iteration'")
    if backward_solver not in ("gmres", "iteration"):
        raise ValueError(f"fixed_point: unknown backward_solver={backward_solver!r}; use 'gmres' "
                         f"or 'iteration'")
    shape = np.shape(raw(z0))

    def step(z: np.ndarray, ps: list) -> np.ndarray:
        with no_grad():
            fz = np.asarray(raw(f(wrap(z.reshape(shape).astype(dtype_of(z0))), *ps)), np.float64)
        if fz.shape != shape:
            raise ShapeError(f"fixed_point: f(z, *params) returned shape {fz.shape} for z of shape "
                             f"{shape}; f must map z to an array of the same shape")
        return fz.ravel()

    def solve(z: np.ndarray, ps: list, tol_: float) -> np.ndarray:
        if solver == "anderson":
            return anderson(lambda v: step(v, ps), z, tol_, max_iter, who="fixed_point")[0]
        return _iterate(lambda v: step(v, ps), z.ravel().astype(np.float64), tol_, max_iter)

    problem = _Problem("fixed_point", lambda z, *ps: f(z, *ps) - z, solve, backward_solver, tol,
                       max_iter)
    return ImplicitSolve.apply(problem, z0, *params)


def dtype_of(x: Any) -> np.dtype:
    """The floating dtype a solve runs in for ``x`` (its own if floating, else float64).

    >>> dtype_of(1)
    dtype('float64')
    """
    d = np.asarray(raw(x)).dtype
    return d if d.kind == "f" else np.dtype(np.float64)


def _iterate(fn: Callable, z: np.ndarray, tol: float, max_iter: int) -> np.ndarray:
    res = np.inf
    for _ in range(max_iter):
        fz = fn(z)
        res = float(np.max(np.abs(fz - z), initial=0.0))
        z = fz
        if res <= tol * max(1.0, float(np.max(np.abs(z), initial=0.0))):
            return z
    raise _no_convergence("fixed_point (solver='iteration')", max_iter, res, tol)


def root_solve(g: Callable, z0: Any, *params: Any, tol: float | None = None, max_iter: int = 100,
               backward_solver: str = "gmres") -> Tensor:
    """Return z* with g(z*, *params) = 0 (Newton's method), differentiable in ``params`` implicitly.

    Newton steps solve J dz = -g with GMRES on forward-mode JVPs of ``g`` (no Jacobian is formed).

    >>> import chainrule as cr
    >>> c = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
    >>> z = cr.root_solve(lambda z, c: z ** 2 - c, cr.tensor(1.0, dtype=cr.float64), c)
    >>> z.backward(); round(z.item(), 8), round(c.grad.item(), 8)   # d sqrt(c)/dc = 1 / (2 sqrt c)
    (1.41421356, 0.35355339)
    """
    if backward_solver != "gmres":
        raise ValueError(f"root_solve: unknown backward_solver={backward_solver!r}; use 'gmres'")
    problem: _Problem

    def solve(z: np.ndarray, ps: list, tol_: float) -> np.ndarray:
        return _newton(problem, z, ps, tol_, max_iter)

    problem = _Problem("root_solve", g, solve, backward_solver, tol, max_iter)
    return ImplicitSolve.apply(problem, z0, *params)


def _newton(problem: _Problem, z: np.ndarray, ps: list, tol: float, max_iter: int) -> np.ndarray:
    nones = [None] * len(ps)
    r = problem.value(z, ps)
    res = float(np.max(np.abs(r), initial=0.0))
    for _ in range(max_iter):
        if res <= tol:
            return z
        zc = z

        def jv(v: np.ndarray) -> np.ndarray:
            return problem.jvp(zc, ps, v.reshape(zc.shape).astype(zc.dtype), nones).ravel()

        dz = gmres(jv, -np.asarray(r, np.float64).ravel(), tol=1e-12, max_iter=4 * max(z.size, 10),
                   who="root_solve (Newton step)", check=False).reshape(z.shape)
        step = 1.0
        for _ in range(30):                     # backtracking: never accept a worse residual
            z_new = (z + step * dz).astype(z.dtype)
            r_new = problem.value(z_new, ps)
            res_new = float(np.max(np.abs(r_new), initial=0.0))
            if res_new < res or res_new <= tol:
                break
            step *= 0.5
        z, r, res = z_new, r_new, res_new
    if res <= tol:
        return z
    raise _no_convergence("root_solve", max_iter, res, tol)
