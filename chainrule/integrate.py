"""``cr.integrate``: SciPy's ``odeint``, differentiable by the adjoint method.

The forward solve is ``scipy.integrate.odeint`` (LSODA) on NumPy data: nothing is recorded, so the
memory a backward needs does not grow with the number of solver steps. The reverse mode is the
adjoint method (Pontryagin; HIPS autograd's ``odeint``, torchdiffeq's ``odeint_adjoint``): for
outputs y_i = y(t_i) and cotangents ḡ_i, the adjoint a(t) = ∂L/∂y(t) solves

    da/dt = -aᵀ ∂f/∂y,            a jumps by ḡ_i at each t_i,
    ∂L/∂args = ∫ aᵀ ∂f/∂args dt,   ∂L/∂t_i = ḡ_i · f(y_i, t_i) (i ≥ 1),   ∂L/∂t_0 = -a(t_0) · f(y_0, t_0) + ...

integrated backwards from t_N to t_0 together with y (restarted at each saved y_i), one ODE solve
per interval, the products aᵀ ∂f/∂(y, t, args) being ``cr.vjp`` of ``func``. The augmented solve is
itself an ``odeint`` of a function written with chainrule ops, so it is differentiable again
(create_graph, grad of grad, hessian). Forward mode (``cr.jvp``, ``jacfwd``) solves the forward
sensitivity equations dS/dt = ∂f/∂y S + ∂f/∂args ṫ_args with S(t_0) = ẏ_0 - f(y_0, t_0) ṫ_0.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import scipy.integrate

from ._backend import np
from .autograd import engine
from .autograd.function import Function
from .errors import DTypeError, GraphError, ShapeError
from .grad_mode import STATE, enable_grad, no_grad, state_scope
from .graph import closure_leaves
from .ops import concatenate, stack
from .ops._registry import raw
from .tensor import Tensor, wrap
from .transforms import jvp as _jvp
from .transforms import vjp as _vjp

__all__ = ["odeint"]

_SCIPY_OPTIONS = ("Dfun", "col_deriv", "ml", "mu", "tcrit", "h0", "hmax", "hmin", "ixpr", "mxstep",
                  "mxhnil", "mxordn", "mxords", "printmessg")


class _Problem:
    """dy/dt = func(y, t, *args) for y of ``shape``; ``diff`` marks the args that are differentiated
    (passed to odeint's Function), the others are fixed values held here."""

    def __init__(self, name: str, func: Callable, shape: tuple, args: tuple, diff: list,
                 need_t: bool, rtol: Any, atol: Any, options: dict, check: bool = True) -> None:
        self.name, self.func, self.shape = name, func, shape
        self.args, self.diff, self.need_t = args, diff, need_t
        self.rtol, self.atol, self.options, self.check = rtol, atol, options, check
        self.n = int(np.prod(shape, dtype=np.int64))
        self.info: dict | None = None

    def call(self, y: Any, t: Any, dargs: Any) -> Any:
        """func(y, t, *args) with the differentiated args taken from ``dargs`` (in order)."""
        it = iter(dargs)
        return self.func(y, t, *[next(it) if d else a for a, d in zip(self.args, self.diff)])

    def rhs(self, dargs: list) -> Callable[[np.ndarray, float], np.ndarray]:
        """The flat float64 right-hand side SciPy integrates, at fixed (graph-free) args."""
        shape, n = self.shape, self.n

        def f(y: np.ndarray, t: float) -> np.ndarray:
            with no_grad():
                out = np.asarray(raw(self.call(wrap(y.reshape(shape)), float(t), dargs)))
            if out.shape != shape:
                raise ShapeError(f"{self.name}: func(y, t, *args) returned shape {out.shape} for y of "
                                 f"shape {shape}; it must return dy/dt, an array of y's shape")
            if out.dtype.kind == "c":
                raise DTypeError(f"{self.name}: func returned complex values ({out.dtype}); odeint "
                                 f"integrates real systems: split z into (Re z, Im z)")
            return out.reshape(n).astype(np.float64, copy=False)
        return f

    def solve(self, y0: np.ndarray, t: np.ndarray, dargs: list, rhs: Callable | None = None) -> np.ndarray:
        f = rhs if rhs is not None else self.rhs(dargs)
        with warnings.catch_warnings():          # a failure is raised below, with advice
            warnings.simplefilter("ignore", scipy.integrate.ODEintWarning)
            ys, info = scipy.integrate.odeint(f, np.asarray(y0, np.float64).ravel(), t, rtol=self.rtol,
                                              atol=self.atol, full_output=True, **self.options)
        if info["message"] != "Integration successful.":
            raise RuntimeError(f"{self.name}: scipy.integrate.odeint failed: {info.get('message')} "
                               f"(raise mxstep=, loosen rtol/atol, or check func)")
        self.info = info
        return ys


def _fixed(v: Any) -> Any:
    """A graph-free, tangent-free view of a Tensor (the same data); other values as they are."""
    return wrap(raw(v)) if isinstance(v, Tensor) else v


def _live(v: Any) -> bool:
    """Does ``v`` take part in a derivative being recorded or pushed (grad or visible tangents)?"""
    if not isinstance(v, Tensor):
        return False
    if STATE.grad_enabled and v.requires_grad:
        return True
    return bool(v._tangents) and any(lv in STATE.fw_levels and lv <= STATE.fw_visible for lv in v._tangents)


class Odeint(Function):
    """ys = odeint(problem.func, y0, t, *diff_args): the cr.Function behind :func:`odeint`."""

    @staticmethod
    def forward(ctx: Any, problem: _Problem, y0: Any, t: Any, *dargs: Any) -> Tensor:
        td = np.asarray(raw(t), np.float64)
        ys = problem.solve(raw(y0), td, [_fixed(a) for a in dargs])
        out = wrap(ys.reshape((td.shape[0],) + problem.shape))
        ctx.problem = problem
        ctx.save_for_backward(out, y0, t, *dargs)      # ys: the restart points of the adjoint
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        problem = ctx.problem
        ys, y0, t, *dargs = ctx.saved_tensors
        need_y0, need_t, *need_args = ctx.needs_input_grad[1:]
        if any(_live(v) for v in (g, y0, t, *dargs)):      # the backward itself is differentiated
            ys = Odeint.apply(problem, y0, t, *dargs)     # ys as a function of the inputs again
            gy0, gt, gargs = _adjoint(problem, ys, t, dargs, g, need_t, need_args)
        else:
            fix = [_fixed(a) for a in dargs]
            with no_grad():
                gy0, gt, gargs = _adjoint(problem, _fixed(ys), _fixed(t), fix, _fixed(g), need_t,
                                          need_args)
        return (None, gy0 if need_y0 else None, gt if need_t else None, *gargs)

    @staticmethod
    def jvp(ctx: Any, _tp: Any, ty0: Any, tt: Any, *targs: Any) -> Tensor:
        problem = ctx.problem
        ys, y0, t, *dargs = ctx.saved_tensors
        vs = (ty0, tt, *targs, y0, t, *dargs)
        if any(isinstance(v, Tensor) and v._tangents and any(lv in STATE.fw_levels and lv <= STATE.fw_visible
                                                             for lv in v._tangents) for v in vs):
            raise GraphError(f"{problem.name}: forward-mode derivatives of order two or more through "
                             f"odeint (jvp of jvp, jacfwd of jacfwd) are not supported; use reverse "
                             f"mode for the outer derivatives (grad of grad, hessian, jacfwd of jacrev)")
        return _Tangent.apply(problem, ys, y0, t, ty0, tt, *dargs, *targs)


class _Tangent(Function):
    """odeint's forward-mode tangent (forward sensitivities), computed on ndarrays. It is recorded so
    that a reverse pass through it (grad of jvp) raises instead of silently missing terms."""

    @staticmethod
    def forward(ctx: Any, problem: _Problem, ys: Any, y0: Any, t: Any, ty0: Any, tt: Any, *rest: Any) -> Tensor:
        k = len(rest) // 2
        ctx.problem = problem
        return wrap(_sensitivities(problem, raw(ys), raw(y0), raw(t), [raw(a) for a in rest[:k]],
                                   None if ty0 is None else raw(ty0), None if tt is None else raw(tt),
                                   [None if a is None else raw(a) for a in rest[k:]]))

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError(f"{ctx.problem.name}: reverse mode through a forward-mode tangent of odeint "
                         f"(grad of jvp, jacrev of jacfwd) is not supported; use jacfwd of jacrev "
                         f"(cr.hessian) or reverse over reverse (grad of grad)")


def _adjoint(problem: _Problem, ys: Any, t: Any, dargs: list, g: Any, need_t: bool,
             need_args: list) -> tuple:
    """(∂L/∂y0, ∂L/∂t, [∂L/∂arg]) by the backward sweep; chainrule ops throughout, so it records
    when its inputs require grad (the augmented solves are Odeint nodes again)."""
    aug = _augmented(problem, need_t)
    shape = problem.shape
    a = g[-1]
    tadj = wrap(np.zeros((), np.float64)) if need_t else None
    padj = [wrap(np.zeros(np.shape(raw(p)), np.float64)) for p in dargs]
    tgrads = []
    for i in range(ys.shape[0] - 1, 0, -1):
        if need_t:
            gti = (problem.call(ys[i], t[i], dargs) * g[i]).sum()
            tgrads.append(gti)
            tadj = tadj - gti
        if float(raw(t)[i]) != float(raw(t)[i - 1]):
            parts = [ys[i].reshape(-1), a.reshape(-1)] + ([tadj.reshape(1)] if need_t else []) + \
                    [p.reshape(-1) for p in padj]
            s = Odeint.apply(aug, concatenate(parts), stack([t[i], t[i - 1]]), *dargs)[1]
            a, k = s[problem.n:2 * problem.n].reshape(shape), 2 * problem.n
            if need_t:
                tadj, k = s[k], k + 1
            new = []
            for p in padj:
                new.append(s[k:k + p.size].reshape(p.shape))
                k += p.size
            padj = new
        a = a + g[i - 1]
    gt = None
    if need_t:
        tgrads.append(tadj)
        gt = stack(tgrads[::-1])
    gargs = [p.astype(raw(d).dtype) if n else None for p, d, n in zip(padj, dargs, need_args)]
    return a.astype(raw(ys).dtype), gt, gargs


def _augmented(problem: _Problem, need_t: bool) -> _Problem:
    """The adjoint system on s = [y, a, (t_adj), *args_adj]: ds/dt = [f, -aᵀf_y, (-aᵀf_t), -aᵀf_p]."""
    n, shape = problem.n, problem.shape

    def func(s: Any, tt: Any, *dargs: Any) -> Any:
        y, a = s[:n].reshape(shape), s[n:2 * n].reshape(shape)
        vjp = _vjp if any(_live(v) for v in (s, tt, *dargs)) else _plain_vjp
        if need_t:
            tt = tt if isinstance(tt, Tensor) else np.asarray(tt, np.float64)
            out, pull = vjp(lambda y, tt, *ps: problem.call(y, tt, ps), y, tt, *dargs)
            gy, gt, *gps = pull(-a)
            extra = [gt.reshape(1)]
        else:
            out, pull = vjp(lambda y, *ps: problem.call(y, tt, ps), y, *dargs)
            gy, *gps = pull(-a)
            extra = []
        return concatenate([out.reshape(-1), gy.reshape(-1)] + extra + [gp.reshape(-1) for gp in gps])

    size = 2 * n + (1 if need_t else 0) + sum(int(np.size(raw(a))) for a, d in zip(problem.args, problem.diff)
                                              if d)
    return _Problem(f"{problem.name} (adjoint)", func, (size,), (None,) * sum(problem.diff),
                    [True] * sum(problem.diff), need_t, problem.rtol, problem.atol, problem.options,
                    check=False)


def _plain_vjp(fn: Callable, *primals: Any) -> tuple:
    """``cr.vjp`` for the common case (nothing outside is differentiated): fresh leaves and one
    engine call, without the transform's bookkeeping (the adjoint calls this at every solver step)."""
    with enable_grad():
        leaves = [Tensor(np.asarray(raw(p)), requires_grad=True) for p in primals]
        out = fn(*leaves)

    def pull(cot: Any) -> list:
        gs = engine.grad([out], leaves, [raw(cot)], allow_unused=True) if isinstance(out, Tensor) and \
            out.requires_grad else [None] * len(leaves)
        return [wrap(np.zeros(x.shape, x.dtype)) if g is None else g for g, x in zip(gs, leaves)]
    return wrap(np.asarray(raw(out))), pull


def _sensitivities(problem: _Problem, ys: np.ndarray, y0: np.ndarray, t: np.ndarray, dargs: list,
                   ty0: Any, tt: Any, targs: list) -> np.ndarray:
    """The output tangent by the forward sensitivity equations, on ndarrays."""
    n, shape = problem.n, problem.shape
    fixed = [wrap(a) for a in dargs]
    f = problem.rhs(fixed)
    fy0 = f(ys[0].reshape(-1), float(t[0]))
    s0 = np.zeros(n) if ty0 is None else np.asarray(ty0, np.float64).reshape(-1)
    if tt is not None:
        s0 = s0 - fy0 * float(np.asarray(tt).reshape(-1)[0])
    moving = [i for i, ta in enumerate(targs) if ta is not None]
    ps = tuple(dargs[i] for i in moving)
    tps = tuple(np.asarray(targs[i], dtype=np.asarray(dargs[i]).dtype) for i in moving)

    now = [float(t[0])]

    def call(y: Any, *mp: Any) -> Any:
        full = list(fixed)
        for i, p in zip(moving, mp):
            full[i] = p
        return problem.call(y, now[0], full)

    def rhs(z: np.ndarray, tv: float) -> np.ndarray:
        now[0] = float(tv)
        y, sv = z[:n].reshape(shape), z[n:].reshape(shape)
        with state_scope(fw_visible=1 << 62), no_grad():     # our level is seen inside a JVP rule
            out, tout = _jvp(call, (y, *ps), (sv, *tps))
        return np.concatenate([np.asarray(raw(out), np.float64).reshape(-1),
                               np.asarray(raw(tout), np.float64).reshape(-1)])

    sens = problem.solve(np.concatenate([ys[0].reshape(-1), s0]), t, [], rhs=rhs)[:, n:]
    if tt is not None:
        ttv = np.asarray(tt, np.float64).reshape(-1)
        sens = sens + np.stack([f(ys[i].reshape(-1), float(t[i])) * ttv[i] for i in range(len(t))])
    return sens.reshape(ys.shape).astype(ys.dtype)


def odeint(func: Callable, y0: Any, t: Any, args: tuple = (), rtol: Any = None, atol: Any = None,
           full_output: bool = False, tfirst: bool = False, **options: Any) -> Any:
    """Integrate dy/dt = func(y, t, *args) (``scipy.integrate.odeint``), differentiable in y0, t, args.

    Same signature and results as SciPy (LSODA; ``rtol``/``atol`` default to SciPy's 1.49012e-8;
    ``Dfun``, ``h0``, ``hmax``, ``mxstep``, ... are passed on); ``func`` is written with chainrule
    ops. Returns the solution at the times ``t`` (monotonic), shape ``(len(t), *y0.shape)`` (a
    scalar y0 gives ``(len(t), 1)``, as in SciPy), float64. Reverse mode: the adjoint method
    (memory independent of the number of solver steps); forward mode: sensitivity equations.
    Tensors that require grad must reach ``func`` through ``args``.

    >>> import chainrule as cr
    >>> k = cr.tensor(0.5, dtype=cr.float64, requires_grad=True)
    >>> ys = cr.integrate.odeint(lambda y, t, k: -k * y, cr.tensor([1.0]), [0.0, 2.0], args=(k,))
    >>> ys[-1, 0].backward(); round(ys[-1, 0].item(), 6), round(k.grad.item(), 6)   # e^-1, -2 e^-1
    (0.367879, -0.735759)
    """
    name = "odeint"
    if not isinstance(args, tuple):
        args = (args,)
    unknown = [k for k in options if k not in _SCIPY_OPTIONS]
    if unknown:
        raise TypeError(f"{name}: unexpected keyword argument(s) {unknown}; scipy.integrate.odeint "
                        f"options are {list(_SCIPY_OPTIONS)} plus rtol, atol, full_output, tfirst")
    if tfirst:
        user = func
        func = lambda y, tt, *a: user(tt, y, *a)  # noqa: E731
    y0d = np.asarray(raw(y0))
    if y0d.dtype.kind == "c":
        raise DTypeError(f"{name}: y0 is complex ({y0d.dtype}); odeint integrates real systems: "
                         f"integrate cr.view_as_real(z) with func written on (Re, Im) pairs")
    if y0d.dtype.kind not in "biuf":
        raise DTypeError(f"{name}: y0 must be numeric, got dtype {y0d.dtype}")
    if y0d.ndim == 0:                       # SciPy treats a scalar y0 as a 1-vector
        y0 = y0.reshape(1) if isinstance(y0, Tensor) else y0d.reshape(1)
        y0d = y0d.reshape(1)
    td = np.asarray(raw(t))
    if td.ndim != 1 or td.size == 0:
        raise ShapeError(f"{name}: t must be a non-empty 1-d sequence of times, got shape {td.shape}")
    if td.dtype.kind == "c" or td.dtype.kind not in "biuf":
        raise DTypeError(f"{name}: t must be real, got dtype {td.dtype}")
    dt = np.diff(td.astype(np.float64))
    if not (np.all(dt >= 0) or np.all(dt <= 0)) or not np.all(np.isfinite(td)):
        raise ValueError(f"{name}: the values in t must be finite and monotonically increasing or "
                         f"monotonically decreasing (repeated values are allowed), as in "
                         f"scipy.integrate.odeint; got t = {td}")
    if not isinstance(t, Tensor):
        t = td.astype(np.float64)
    elif t.dtype != np.float64:
        t = t.astype(np.float64)
    diff = [isinstance(a, Tensor) and a.dtype.kind == "f" for a in args]
    dargs = [a for a, d in zip(args, diff) if d]
    need_t = isinstance(t, Tensor) and (t.requires_grad or bool(t._tangents))
    problem = _Problem(name, func, tuple(y0d.shape), tuple(_fixed(a) for a in args), diff, need_t,
                       rtol, atol, options)
    if STATE.grad_enabled or STATE.fw_levels:
        _check_closure(problem, y0d, float(td[0]), dargs)
    ys = Odeint.apply(problem, y0, t, *dargs)
    return (ys, problem.info) if full_output else ys


def _check_closure(problem: _Problem, y0: np.ndarray, t0: float, dargs: list) -> None:
    """func must not close over a tensor that requires grad (or carries a tangent): its derivative
    would be lost. One evaluation at (y0, t0), recorded from fresh leaves."""
    with enable_grad():
        yl = Tensor(np.asarray(y0, np.float64), requires_grad=True)
        pl = [Tensor(np.array(raw(a)), requires_grad=True) for a in dargs]
        out = problem.call(yl, t0, pl)
    if not isinstance(out, Tensor):
        return
    hidden = closure_leaves([out], [yl, *pl]) if out.requires_grad else []
    if hidden or (out._tangents and any(lv in STATE.fw_levels for lv in out._tangents)):
        shapes = ", ".join(str(tuple(h.shape)) for h in hidden) or "a tangent"
        raise GraphError(f"{problem.name}: func closes over tensor(s) that require grad or carry a "
                         f"tangent ({shapes}); their derivatives would be silently lost, because "
                         f"odeint differentiates only with respect to y0, t and args. Pass them in "
                         f"args=(...) and take them as func(y, t, *args)")
