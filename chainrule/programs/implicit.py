"""Implicit differentiation: solutions of z = f(z, p) and g(z, p) = 0, differentiated unrolled-free.

The solver runs under ``no_grad`` (its iterations are not recorded, so memory does not grow with
their number). Derivatives come from the implicit function theorem at the solution z*: with
r(z, p) = 0 (r = f - z for a fixed point) and R_z, R_p its partial Jacobians,

    VJP:  solve R_zᵀ w = ḡ,          then  ḡ_p = -R_pᵀ w     (VJPs of r at z*)
    JVP:  solve R_z t_z = -R_p t_p                            (JVPs of r at z*)

with a matrix-free Krylov method (GMRES) or, for fixed points, the fixed-point iteration
u = ḡ + (∂f/∂z)ᵀ u. The gradient does not depend on z0. Higher derivatives: each linear solve is
itself an implicit solve (of r_adj(w) = R_zᵀ w - ḡ or r_tan(t) = R_z t + R_p t_p) whose residual
is recorded, so its derivatives are again solves. Tensors that require grad must reach ``f`` as
params: a backward through an ``f`` that closes over one raises.
"""
from __future__ import annotations

from typing import Any, Callable

from chainrule.autograd import engine
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from chainrule.autograd.function import Function
from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating
from chainrule.core._registry import raw
from chainrule.core.errors import ChainruleError, GraphError, ShapeError
from chainrule.core.grad_mode import STATE, enable_grad, no_grad
from chainrule.core.graph import closure_leaves
from chainrule.core.tensor import Tensor, wrap
from chainrule.numpy import alias


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
        rot = np.zeros((restart, 2))            # Givens rotations: the residual norm per step
        res = beta
        for j in range(restart):
            w = matvec(basis[j])
            iters += 1
            for i in range(j + 1):              # modified Gram-Schmidt
                hess[i, j] = float(w @ basis[i])
                w = w - hess[i, j] * basis[i]
            hess[j + 1, j] = float(np.linalg.norm(w))
            h = hess[:j + 2, j].copy()
            for i in range(j):
                c, s = rot[i]
                h[i], h[i + 1] = c * h[i] + s * h[i + 1], c * h[i + 1] - s * h[i]
            d = float(np.hypot(h[j], h[j + 1]))
            rot[j] = (h[j] / d, h[j + 1] / d) if d > 0 else (1.0, 0.0)
            res *= abs(float(rot[j, 1]))
            if res / bnorm <= tol or hess[j + 1, j] <= 1e-14 * beta or iters >= max_iter:
                break
            basis.append(w / hess[j + 1, j])
        e1 = np.zeros(j + 2)
        e1[0] = beta
        y = np.linalg.lstsq(hess[:j + 2, :j + 1], e1, rcond=None)[0]   # robust if singular
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


# ----- the problem r(z, params) = 0 and its linearisations -----
class _Problem:
    """r(z, *params) = 0 plus the forward solver that finds z*.

    ``base``, for the adjoint and tangent systems built below: (base problem, transposed, point),
    where the system's R_w is the base's R_z (R_zᵀ if transposed) at ``point(params)``. Their
    residuals differentiate internally, so they skip the closure checks (done on the base).
    """

    def __init__(self, name: str, residual: Callable, solve: Callable, backward_solver: str,
                 tol: float | None, max_iter: int, base: tuple | None = None) -> None:
        self.name, self.residual, self.solve = name, residual, solve
        self.backward_solver, self.tol, self.max_iter = backward_solver, tol, max_iter
        self.base, self.checks = base, base is None
        self.tangents: dict | None = None     # a known solution's tangents per level, if computed

    def derived(self, name: str, residual: Callable, solve: Callable,
                base: tuple | None) -> _Problem:
        return _Problem(name, residual, solve, self.backward_solver, self.tol, self.max_iter, base)

    def operator(self, z: np.ndarray, params: list, transpose: bool,
                 graph: tuple | None = None) -> Callable[[np.ndarray], np.ndarray]:
        """v ↦ R_z v (R_zᵀ v with ``transpose``) on flat float64 vectors, at tangent-free params.

        ``graph``: r already recorded at this point, as returned by ``_linearise``. A derived
        system applies its base's R_z directly, which is cheaper than differentiating its residual.
        """
        if self.base is not None:
            base, transposed, point = self.base
            zb, pb = point(params)
            return base.operator(raw(zb), _fixed(pb), transpose != transposed)
        if transpose:
            r, zt, _ = graph or _linearise(self, z, params, [False] * len(params))
            return _vjp_operator(r, zt)
        nones = [None] * len(params)
        return lambda v: self.jvp(z, params, v.reshape(z.shape).astype(z.dtype), nones).ravel()

    def value(self, z: np.ndarray, params: list) -> np.ndarray:
        with no_grad():
            return np.asarray(raw(self.residual(wrap(z), *params)))

    def jvp(self, z: np.ndarray, params: list, tz: np.ndarray | None, tps: list) -> np.ndarray:
        """R_z tz + Σ R_p tp at numpy points (params are tangent-free copies), as float64."""
        ts = [None if t is None else wrap(np.asarray(raw(t), dtype=raw(p).dtype))
              for p, t in zip(params, tps)]
        with no_grad():
            tout = _residual_jvp(self, wrap(z), params, None if tz is None else wrap(tz), ts)
        return np.asarray(raw(tout), dtype=np.float64)


def _tol(problem: _Problem, dtype: np.dtype) -> float:
    return problem.tol if problem.tol is not None else _DEFAULT_TOL.get(np.dtype(dtype), 1e-3)


def _residual_jvp(problem: _Problem, z: Tensor, params: Any, tz: Tensor | None,
                  tps: Any) -> Tensor:
    """R_z tz + Σ R_p tp at (z, params) by forward mode in a fresh level. Recorded like any op when
    grad is on, and carrying the tangents of outer levels, so it can be differentiated again."""
    visible = STATE.fw_visible
    STATE.fw_visible = 1 << 62           # our level must be seen even inside an outer JVP rule
    try:
        with dual_level() as level:
            zd = z if tz is None else make_dual(z, tz, level)
            ps = [make_dual(p, t, level) if t is not None and is_floating(p.dtype) else p
                  for p, t in zip(params, tps)]     # an integer param has a zero tangent
            tout = unpack_dual(problem.residual(zd, *ps), level).tangent
    finally:
        STATE.fw_visible = visible
    return wrap(np.zeros(z.shape, z.dtype)) if tout is None else tout


def _residual_vjp(problem: _Problem, z: Tensor, params: Any, w: Tensor, need: Any) -> list:
    """[R_zᵀ w, R_pᵀ w for each needed p] at (z, params), as recorded tensors when grad is on.

    Zero leaves added to z and the params select the partial derivatives: z may itself depend on
    the params (z = z*(params)), and a VJP with respect to the params would follow that path too.
    """
    create = STATE.grad_enabled or _live_tangents(w)     # else the engine drops w's tangents
    with enable_grad():
        leaves = [Tensor(np.zeros(z.shape, z.dtype), requires_grad=True)]
        leaves += [Tensor(np.zeros(p.shape, p.dtype), requires_grad=True) for p, n in
                   zip(params, need) if n]
        d = iter(leaves[1:])
        r = problem.residual(z + leaves[0], *[p + next(d) if n else p for p, n in
                                              zip(params, need)])
    grads = engine.grad([r], leaves, [w], create_graph=create, allow_unused=True) \
        if isinstance(r, Tensor) and r.requires_grad else [None] * len(leaves)
    return [wrap(np.zeros(x.shape, x.dtype)) if g is None else g for g, x in zip(grads, leaves)]


def _linearise(problem: _Problem, z: np.ndarray, params: list, need: Any) -> tuple:
    """r recorded at (z, params) from fresh leaves for z and the needed params: (r, zt, pts)."""
    with enable_grad():
        zt = Tensor(np.array(z), requires_grad=True)
        pts = [Tensor(np.array(raw(p)), requires_grad=True) if n else p
               for p, n in zip(params, need)]
        r = problem.residual(zt, *pts)
    if problem.checks and isinstance(r, Tensor) and r.requires_grad:
        hidden = closure_leaves([r], [zt] + [p for p in pts if isinstance(p, Tensor)])
        if hidden:
            shapes = ", ".join(str(tuple(t.shape)) for t in hidden)
            raise GraphError(f"{problem.name}: the function closes over {len(hidden)} tensor(s) that "
                             f"require grad (shapes {shapes}); their gradients would be silently "
                             f"lost, because the implicit backward differentiates only with respect "
                             f"to params. Pass them as params: {problem.name}(f, z0, *params) with f "
                             f"taking (z, *params)")
    return r, zt, pts


def _vjp_operator(r: Any, zt: Tensor) -> Callable[[np.ndarray], np.ndarray]:
    """w ↦ R_zᵀ w on flat float64 vectors, by VJPs of r recorded from the leaf zt."""
    shape, dtype = zt.shape, zt.dtype
    live = isinstance(r, Tensor) and r.requires_grad

    def rzt(w: np.ndarray) -> np.ndarray:
        (gw,) = engine.grad([r], [zt], [w.reshape(shape).astype(dtype)], retain_graph=True,
                            allow_unused=True) if live else (None,)
        return np.zeros_like(w) if gw is None else np.asarray(gw.data, np.float64).ravel()
    return rzt


def _solve_adjoint(problem: _Problem, z: np.ndarray, params: list, g: Any,
                   graph: tuple | None = None) -> np.ndarray:
    """w with R_zᵀ w = g (flat float64) at tangent-free params."""
    rzt = problem.operator(z, params, True, graph)
    g = np.asarray(raw(g), dtype=np.float64).ravel()
    tol = _tol(problem, z.dtype)
    if problem.backward_solver == "iteration":      # w <- w - (ḡ - R_zᵀ w) is u = ḡ + J_fᵀ u
        return _richardson(rzt, g, tol, problem.max_iter, f"{problem.name} backward")
    return gmres(rzt, g, tol=tol, max_iter=problem.max_iter, who=f"{problem.name} backward")


def _solve_tangent(problem: _Problem, z: np.ndarray, params: list, tps: list) -> np.ndarray:
    """t_z with R_z t_z = -Σ R_p t_p (flat float64) at tangent-free params."""
    rhs = -problem.jvp(z, params, None, [None if t is None else raw(t) for t in tps]).ravel()
    return gmres(problem.operator(z, params, False), rhs, tol=_tol(problem, z.dtype),
                 max_iter=problem.max_iter, who=f"{problem.name} jvp")


def _fixed(params: Any) -> list:
    """Tangent-free, graph-free copies of the params (they share the data)."""
    return [wrap(raw(p)) if isinstance(p, Tensor) else p for p in params]


# ----- the derivatives of the solve as solves (for second and higher derivatives) -----
def _at_solution(ctx: Any, z: Tensor, params: list) -> Tensor:
    """The saved z* again as an ImplicitSolve of params (it is stored detached), so the terms of
    a second derivative that move z* are differentiated too. The solve starts at z* and is skipped,
    and so are the tangent solves that the first solve's JVP already did (same params and level).
    """
    problem = ctx.problem
    known = _Problem(problem.name, problem.residual, lambda z0, ps, tol: z0,
                     problem.backward_solver, problem.tol, problem.max_iter)
    known.tangents = ctx.tangents
    return ImplicitSolve.apply(known, z, *params)


def _adjoint(problem: _Problem) -> _Problem:
    """w with R_z(z, p)ᵀ w = g, as the root of r_adj(w; g, z, *p) = R_zᵀ w - g. Its derivatives come
    from the implicit function theorem again: the derivative of a linear solve is a linear solve."""
    def residual(w: Tensor, g: Tensor, z: Tensor, *params: Any) -> Tensor:
        return _residual_vjp(problem, z, params, w, [False] * len(params))[0] - g

    def solve(w0: np.ndarray, fixed: list, tol: float) -> np.ndarray:
        g, z, *params = fixed
        return _solve_adjoint(problem, raw(z), params, g)

    return problem.derived(f"{problem.name} (adjoint)", residual, solve,
                           (problem, True, lambda ps: (ps[1], ps[2:])))


def _tangent(problem: _Problem, n: int) -> _Problem:
    """t with R_z(z, p) t = -R_p(z, p) t_p: the root of r_tan(t; z, *p, *t_p) = R_z t + R_p t_p."""
    def residual(t: Tensor, z: Tensor, *rest: Any) -> Tensor:
        return _residual_jvp(problem, z, rest[:n], t, rest[n:])

    def solve(t0: np.ndarray, fixed: list, tol: float) -> np.ndarray:
        return _solve_tangent(problem, raw(fixed[0]), fixed[1:n + 1], fixed[n + 1:])

    return problem.derived(f"{problem.name} (tangent)", residual, solve,
                           (problem, False, lambda ps: (ps[0], ps[1:n + 1])))


def _zeros(z: Tensor) -> Tensor:
    return wrap(np.zeros(z.shape, z.dtype))


def _outer_only(v: Any) -> Any:
    """``v`` without the tangents of the levels hidden here (in level L's JVP rule: L and up)."""
    if not isinstance(v, Tensor) or not v._tangents:
        return v
    keep = {lv: t for lv, t in v._tangents.items() if lv <= STATE.fw_visible}
    if len(keep) == len(v._tangents):
        return v
    out = alias(v)
    out._tangents = keep or None
    return out


class ImplicitSolve(Function):
    """z* with r(z*, params) = 0; VJP and JVP by the implicit function theorem.

    A plain backward or JVP solves its linear system on ndarrays. When the derivative itself is to
    be differentiated (create_graph, forward over reverse, nested jvp, grad of jvp), the linear
    system becomes another ImplicitSolve (``_adjoint``, ``_tangent``), as in JAX's custom_root.
    """

    @staticmethod
    def forward(ctx: Any, problem: _Problem, z0: Any, *params: Any) -> Tensor:
        z0d = np.asarray(raw(z0))
        dtype = z0d.dtype if z0d.dtype.kind == "f" else np.dtype(np.float64)
        fixed = _fixed(params)
        z = problem.solve(z0d.astype(dtype), fixed, _tol(problem, dtype))
        out = wrap(np.asarray(z, dtype=dtype).reshape(z0d.shape))
        if STATE.fw_levels and problem.checks:
            _check_closure_tangents(problem, out, fixed)
        ctx.problem, ctx.tangents = problem, {}
        ctx.save_for_backward(out, *params)
        return out

    @staticmethod
    def backward(ctx: Any, gz: Any) -> tuple:
        problem = ctx.problem
        z, *params = ctx.saved_tensors
        need = ctx.needs_input_grad[2:]
        if STATE.grad_enabled or any(_live_tangents(v) for v in (gz, *params)):
            zs = _at_solution(ctx, z, params)
            w = ImplicitSolve.apply(_adjoint(problem), _zeros(z), gz, zs, *params)
            grads = iter(_residual_vjp(problem, zs, params, w, need)[1:])
            return (None, None) + tuple(-next(grads) if n else None for n in need)
        r, zt, pts = _linearise(problem, z.data, params, need)
        if not isinstance(r, Tensor) or not r.requires_grad:
            return (None, None) + tuple(None for _ in params)
        w = _solve_adjoint(problem, z.data, params, gz, (r, zt, pts))
        wanted = [p for p, n in zip(pts, need) if n]
        seed = (-w).reshape(z.shape).astype(z.dtype)
        grads = iter(engine.grad([r], wanted, [seed], allow_unused=True) if wanted else ())
        return (None, None) + tuple(next(grads) if n else None for n in need)

    @staticmethod
    def jvp(ctx: Any, t_problem: Any, tz0: Any, *tps: Any) -> Tensor:
        problem = ctx.problem
        z, *params = ctx.saved_tensors
        vs = (*params, *tps)
        level = STATE.fw_visible + 1              # Function.apply hides the level it pushes
        if any(_live_tangents(v, visible=True) for v in vs) or (STATE.grad_enabled and any(
                isinstance(v, Tensor) and v.requires_grad for v in vs)):
            ps, ts = [_outer_only(p) for p in params], [_outer_only(t) for t in tps]
            zs = _at_solution(ctx, z, ps)
            out = ImplicitSolve.apply(_tangent(problem, len(ps)), _zeros(z), zs, *ps, *ts)
        elif problem.tangents and level in problem.tangents:
            return problem.tangents[level]
        else:
            tz = _solve_tangent(problem, np.asarray(z.data), _fixed(params), list(tps))
            out = wrap(tz.reshape(z.shape).astype(z.dtype))
        ctx.tangents[level] = wrap(out.data)      # its value only: no graph, no reference cycle
        return out


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

    The iterations run under no_grad; VJP and JVP solve (I - ∂f/∂z) systems at z*, and those
    solves are differentiable again (hessian, hvp, create_graph, jvp of jvp: any order).
    ``solver``: "anderson" (default) or "iteration"; ``backward_solver``: "gmres" or "iteration".
    ``tol``: max-norm residual (relative to max(1, |z|)); default 1e-10 (float64), 1e-5 (float32).

    >>> import chainrule as cr
    >>> a = cr.tensor(0.5, dtype=cr.float64, requires_grad=True)
    >>> z = cr.fixed_point(lambda z, a: a * cr.cos(z), cr.tensor(0.0, dtype=cr.float64), a)
    >>> z.backward(); round(a.grad.item(), 6)     # dz/da = cos z / (1 + a sin z)
    0.739482
    >>> solve = lambda x: cr.fixed_point(lambda z, x: 0.5 * cr.cos(z) + x, 0.0, x)
    >>> round(float(cr.grad(cr.grad(solve))(0.3)), 6)    # -a cos z / (1 + a sin z)³
    -0.16928
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

        def jv(v: np.ndarray, zc: np.ndarray = zc) -> np.ndarray:
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
