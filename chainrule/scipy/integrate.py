"""``cr.integrate``: SciPy's ``odeint``, differentiable by the adjoint method.

The forward solve is ``scipy.integrate.odeint`` (LSODA) on NumPy data: nothing is recorded, and
what the backward keeps is the output itself (the checkpoints), y0, t and args. The reverse mode
is the adjoint method (Pontryagin; HIPS autograd's ``odeint``, torchdiffeq's ``odeint_adjoint``):
for outputs y_i = y(t_i) and cotangents ḡ_i, the adjoint a(t) = ∂L/∂y(t) solves

    da/dt = -aᵀ ∂f/∂y,            a jumps by ḡ_i at each t_i,
    ∂L/∂args = ∫ aᵀ ∂f/∂args dt,   ∂L/∂t_i = ḡ_i · f(y_i, t_i) (i ≥ 1),   ∂L/∂t_0 = -a(t_0⁺) · f(y_0, t_0),

backwards from t_N to t_0, one LSODA solve per interval. y is never integrated backwards (a
decaying mode would blow up): per interval it is re-solved forwards from the saved y_{i-1} by
LSODA (``solve_ivp``'s, dense output) and interpolated; the products aᵀ ∂f/∂(y, args) are VJPs of
``func``. A backward that is itself differentiated (create_graph, grad of grad, hessian) computes
the same gradients as Σ_i S_iᵀ ḡ_i from the forward sensitivity system of [y, S = ∂y/∂(y0, args)],
an ``odeint`` of chainrule ops, so differentiable again. Forward mode (``cr.jvp``, ``jacfwd``)
solves the forward sensitivity equations dS/dt = ∂f/∂y S + ∂f/∂args ṫ_args with
S(t_0) = ẏ_0 - f(y_0, t_0) ṫ_0. Under ``cr.vmap`` each example is solved on its own.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import scipy.integrate

from chainrule.autograd import engine
from chainrule.autograd.forward import levels_of
from chainrule.autograd.function import Function
from chainrule.core._backend import np
from chainrule.core._registry import raw
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import DTypeError, GraphError, ShapeError, VmapError
from chainrule.core.grad_mode import STATE, enable_grad, no_grad, state_scope
from chainrule.core.graph import closure_leaves
from chainrule.core.tensor import Tensor, wrap
from chainrule.func.transforms import jvp as _jvp
from chainrule.numpy import concatenate, stack

__all__ = ["odeint"]

_SCIPY_OPTIONS = ("Dfun", "col_deriv", "ml", "mu", "tcrit", "h0", "hmax", "hmin", "ixpr", "mxstep",
                  "mxhnil", "mxordn", "mxords", "printmessg")


# options that describe the user's system (its Jacobian, its first step): not for derived systems
_SYSTEM_OPTIONS = ("Dfun", "col_deriv", "ml", "mu", "h0")


def _derived(options: dict) -> dict:
    return {k: v for k, v in options.items() if k not in _SYSTEM_OPTIONS}


class _Problem:
    """dy/dt = func(y, t, *args) for y of ``shape``; ``diff`` marks the args that are differentiated
    (passed to odeint's Function), the others are fixed values held here."""

    def __init__(self, name: str, func: Callable, shape: tuple, args: tuple, diff: list, rtol: Any,
                 atol: Any, options: dict) -> None:
        self.name, self.func, self.shape = name, func, shape
        self.args, self.diff = args, diff
        self.rtol, self.atol, self.options = rtol, atol, options
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
                out = self.call(wrap(y.reshape(shape)), float(t), dargs)
                if isinstance(out, Tensor) and out._level:
                    _batched_closure(self.name)
                out = np.asarray(raw(out))
            if out.shape != shape:
                raise ShapeError(f"{self.name}: func(y, t, *args) returned shape {out.shape} for y of "
                                 f"shape {shape}; it must return dy/dt, an array of y's shape")
            if out.dtype.kind == "c":
                raise DTypeError(f"{self.name}: func returned complex values ({out.dtype}); odeint "
                                 f"integrates real systems: split z into (Re z, Im z)")
            return out.reshape(n).astype(np.float64, copy=False)
        return f

    def solve(self, y0: np.ndarray, t: np.ndarray, dargs: list, rhs: Callable | None = None,
              end: float | None = None, what: str = "") -> np.ndarray:
        """SciPy's odeint of this problem (or of ``rhs``, a system derived from it, named ``what``:
        then without the options that describe this one; ``end``: a time not to step past)."""
        f = rhs if rhs is not None else self.rhs(dargs)
        options, rtol, atol = self.options, self.rtol, self.atol
        if rhs is not None:      # per-component tolerances are y's: the strictest for every component
            options, rtol, atol = _derived(options), _strictest(rtol), _strictest(atol)
        if end is not None:
            crit = options.get("tcrit")
            options = dict(options, tcrit=np.r_[np.ravel([] if crit is None else crit), end])
        with warnings.catch_warnings():          # a failure is raised below, with advice
            warnings.simplefilter("ignore", scipy.integrate.ODEintWarning)
            ys, info = scipy.integrate.odeint(f, np.asarray(y0, np.float64).ravel(), t, rtol=rtol,
                                              atol=atol, full_output=True, **options)
        if info["message"] != "Integration successful.":
            raise RuntimeError(f"{self.name}{what}: scipy.integrate.odeint failed: {info.get('message')} "
                               f"(raise mxstep=, loosen rtol/atol, or check func)")
        if rhs is None:
            self.info = info
        return ys


def _strictest(tol: Any) -> Any:
    return tol if tol is None or np.ndim(tol) == 0 else float(np.min(tol))


def _batched_closure(name: str) -> None:
    raise VmapError(f"{name}: func closes over a tensor batched by cr.vmap, so each example would "
                    f"need its own func; pass that tensor in args=(...) and take it as "
                    f"func(y, t, *args): odeint then solves each example separately")


def _fixed(v: Any) -> Any:
    """A graph-free, tangent-free view of a Tensor (the same data); other values as they are."""
    return wrap(raw(v)) if isinstance(v, Tensor) else v


def _with_args(args: list, at: list, values: tuple) -> list:
    """A copy of ``args`` with ``values`` in the places ``at`` (the arguments a derivative moves)."""
    full = list(args)
    for i, v in zip(at, values):
        full[i] = v
    return full


def _live(v: Any) -> bool:
    """Does ``v`` take part in a derivative being recorded or pushed (grad or visible tangents)?"""
    return isinstance(v, Tensor) and (STATE.grad_enabled and v.requires_grad or bool(levels_of((v,))))


class Odeint(Function):
    """ys = odeint(problem.func, y0, t, *diff_args): the cr.Function behind ``odeint``."""

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
            gy0, gt, gargs = _adjoint_recorded(problem, y0, t, dargs, g, need_y0, need_t, need_args)
        else:
            with no_grad():
                gy0, gt, gargs = _adjoint(problem, raw(ys), np.asarray(raw(t), np.float64),
                                          [_fixed(a) for a in dargs], np.asarray(raw(g), np.float64),
                                          need_t, need_args)
                gy0, gt = wrap(gy0), None if gt is None else wrap(gt)
                gargs = [None if v is None else wrap(v) for v in gargs]
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
    def vmap(info: Any, in_dims: tuple, *args: Any) -> tuple:
        """A batch of tangents (jacfwd): one sensitivity solve each, as a Python loop (no warning:
        a loop is what this batching is)."""
        return stack([_Tangent.apply(*[a[k] if d == 0 else a for a, d in zip(args, in_dims)])
                      for k in range(info.batch_size)]), 0

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError(f"{ctx.problem.name}: reverse mode through a forward-mode tangent of odeint "
                         f"(grad of jvp, jacrev of jacfwd) is not supported; use jacfwd of jacrev "
                         f"(cr.hessian) or reverse over reverse (grad of grad)")


def _adjoint(problem: _Problem, ys: np.ndarray, t: np.ndarray, dargs: list, g: np.ndarray, need_t: bool,
             need_args: list) -> tuple:
    """(∂L/∂y0, ∂L/∂t, [∂L/∂arg]) on ndarrays by the backward sweep. Per interval, y comes from a
    forward re-solve from the saved y_{i-1} (dense output); only a and the quadratures run backwards."""
    n, shape = problem.n, problem.shape
    f = problem.rhs(dargs)
    live = [i for i, need in enumerate(need_args) if need]
    sizes = [int(np.size(raw(dargs[i]))) for i in live]
    a, lam = g[-1].reshape(n).astype(np.float64), np.zeros(sum(sizes))
    for i in range(len(t) - 1, 0, -1):
        if t[i] != t[i - 1]:
            y_at = _trajectory(problem, f, ys[i - 1].reshape(n), t[i - 1], t[i])
            s = problem.solve(np.concatenate([a, lam]), np.array([t[i], t[i - 1]]), [],
                              rhs=_adjoint_rhs(problem, y_at, dargs, live), end=t[i - 1], what=" (adjoint)")[-1]
            a, lam = s[:n], s[n:]
        a = a + g[i - 1].reshape(n)
    gt = None
    if need_t:      # t_i (i ≥ 1) only says where y is read; t_0 moves the start: -a(t_0⁺) · f(y_0, t_0)
        fs = [f(ys[i].reshape(n), float(t[i])) for i in range(len(t))]
        gt = np.array([-(a - g[0].reshape(n)) @ fs[0]] + [g[i].reshape(n) @ fs[i] for i in range(1, len(t))])
    gargs, k = [None] * len(dargs), 0
    for i, size in zip(live, sizes):
        gargs[i] = lam[k:k + size].reshape(np.shape(raw(dargs[i]))).astype(raw(dargs[i]).dtype)
        k += size
    return a.reshape(shape), gt, gargs


def _trajectory(problem: _Problem, f: Callable, y: np.ndarray, t0: float, t1: float) -> Callable:
    """y(τ) on [t0, t1]: LSODA (solve_ivp's, the forward's method) from y(t0), as dense output."""
    opts = problem.options
    steps = {k: float(opts[o]) for o, k in (("hmax", "max_step"), ("hmin", "min_step")) if opts.get(o)}
    rtol = 1.49012e-8 if problem.rtol is None else problem.rtol
    atol = 1.49012e-8 if problem.atol is None else problem.atol
    sol = scipy.integrate.solve_ivp(lambda tt, yy: f(yy, tt), (float(t0), float(t1)), y, method="LSODA",
                                    rtol=rtol, atol=atol, dense_output=True, **steps)
    if not sol.success:
        raise RuntimeError(f"{problem.name} (adjoint): re-solving the forward on [{t0}, {t1}] for the "
                           f"backward failed: {sol.message} (loosen rtol/atol, or check func)")
    return sol.sol


def _adjoint_rhs(problem: _Problem, y_at: Callable, dargs: list, live: list) -> Callable:
    """d/dτ [a, λ] = [-aᵀ ∂f/∂y, -aᵀ ∂f/∂args] at y = y_at(τ): one VJP of func per evaluation."""
    n, shape = problem.n, problem.shape

    def call(tau: float) -> Callable:
        def fn(y: Any, *ps: Any) -> Any:
            return problem.call(y, tau, _with_args(dargs, live, ps))
        return fn

    def rhs(s: np.ndarray, tau: float) -> np.ndarray:
        y = y_at(float(tau)).reshape(shape)
        _, pull = _plain_vjp(call(float(tau)), y, *[dargs[i] for i in live])
        return np.concatenate([np.asarray(raw(v), np.float64).reshape(-1)
                               for v in pull(wrap(-s[:n].reshape(shape)))])
    return rhs


def _adjoint_recorded(problem: _Problem, y0: Any, t: Any, dargs: list, g: Any, need_y0: bool,
                      need_t: bool, need_args: list) -> tuple:
    """The same gradients as chainrule ops of the inputs, for a backward that is differentiated
    again: Σ_i S_iᵀ ḡ_i with S = ∂y/∂(y0, args) from the forward sensitivity system, an odeint of
    [y, S] (stable wherever the forward is, and differentiable again)."""
    n, shape = problem.n, problem.shape
    cols = [(None, j) for j in range(n)] if need_y0 or need_t else []
    for i, need in enumerate(need_args):
        if need:
            cols += [(i, j) for j in range(int(np.size(raw(dargs[i]))))]
    m = len(cols)

    def func(z: Any, tt: Any, *ps: Any) -> Any:
        y, S = z[:n].reshape(shape), z[n:].reshape(n, m)
        fn = lambda y, *ps: problem.call(y, tt, ps)  # noqa: E731
        out, dz = None, []
        for c, (i, j) in enumerate(cols):
            dps = [np.zeros(np.shape(raw(p)), raw(p).dtype) for p in ps]
            if i is not None:
                dps[i].reshape(-1)[j] = 1.0
            out, d = _jvp(fn, (y, *ps), (S[:, c].reshape(shape), *dps))
            dz.append(d.reshape(-1))
        if out is None:
            out = fn(y, *ps)
        return concatenate([out.reshape(-1)] + ([stack(dz, axis=1).reshape(-1)] if m else []))

    s0 = np.zeros((n, m))
    if cols and cols[0][0] is None:
        s0[:, :n] = np.eye(n)
    sens = _Problem(f"{problem.name} (sensitivities)", func, (n * (1 + m),), (None,) * len(dargs),
                    [True] * len(dargs), _strictest(problem.rtol), _strictest(problem.atol),
                    _derived(problem.options))
    z = Odeint.apply(sens, concatenate([y0.reshape(-1) if isinstance(y0, Tensor) else wrap(np.ravel(y0)),
                                        wrap(s0.reshape(-1))]), t, *dargs)
    N = z.shape[0]
    ys, gm = z[:, :n], g.reshape((N, n))
    total = (z[:, n:].reshape((N, n, m)) * gm.reshape((N, n, 1))).sum(axis=(0, 1))
    gy0 = total[:n].reshape(shape) if cols and cols[0][0] is None else None
    gt = None
    if need_t:
        fs = [problem.call(ys[i].reshape(shape), t[i], dargs).reshape(-1) for i in range(N)]
        gt = stack([-((gy0.reshape(-1) - gm[0]) * fs[0]).sum()] + [(gm[i] * fs[i]).sum() for i in range(1, N)])
    gargs, k = [None] * len(dargs), n if cols and cols[0][0] is None else 0
    for i, need in enumerate(need_args):
        if need:
            size = int(np.size(raw(dargs[i])))
            gargs[i] = total[k:k + size].reshape(np.shape(raw(dargs[i]))).astype(raw(dargs[i]).dtype)
            k += size
    return gy0, gt, gargs


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
        return problem.call(y, now[0], _with_args(fixed, moving, mp))

    def rhs(z: np.ndarray, tv: float) -> np.ndarray:
        now[0] = float(tv)
        y, sv = z[:n].reshape(shape), z[n:].reshape(shape)
        with state_scope(fw_visible=1 << 62), no_grad():     # our level is seen inside a JVP rule
            out, tout = _jvp(call, (y, *ps), (sv, *tps))
        return np.concatenate([np.asarray(raw(out), np.float64).reshape(-1),
                               np.asarray(raw(tout), np.float64).reshape(-1)])

    sens = problem.solve(np.concatenate([ys[0].reshape(-1), s0]), t, [], rhs=rhs, what=" (sensitivities)")[:, n:]
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
    scalar y0 gives ``(len(t), 1)``, as in SciPy), float64. Reverse mode: the adjoint method (y
    re-solved forwards per interval, so stable on stiff systems; memory independent of the number
    of solver steps); forward mode: sensitivity equations. Tensors that require grad must reach
    ``func`` through ``args``; under ``cr.vmap`` each example is its own solve.

    >>> import chainrule as cr
    >>> k = cr.tensor(0.5, dtype=cr.float64, requires_grad=True)
    >>> ys = cr.integrate.odeint(lambda y, t, k: -k * y, cr.tensor([1.0]), [0.0, 2.0], args=(k,))
    >>> ys[-1, 0].backward(); round(ys[-1, 0].item(), 6), round(k.grad.item(), 6)   # e^-1, -2 e^-1
    (0.367879, -0.735759)
    """
    name = "odeint"
    if not isinstance(args, tuple):
        args = (args,)
    if STATE.vmap_levels:
        level = max((v._level for v in (y0, t, *args) if isinstance(v, Tensor)), default=0)
        if level:
            return _per_example(level, func, y0, t, args, dict(rtol=rtol, atol=atol, full_output=full_output,
                                                               tfirst=tfirst, **options))
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
    problem = _Problem(name, func, tuple(y0d.shape), tuple(_fixed(a) for a in args), diff, rtol, atol,
                       options)
    if STATE.grad_enabled or STATE.fw_levels:
        _check_closure(problem, y0d, float(td[0]), dargs)
    ys = Odeint.apply(problem, y0, t, *dargs)
    return (ys, problem.info) if full_output else ys


def _per_example(level: int, func: Callable, y0: Any, t: Any, args: tuple, kw: dict) -> Any:
    """odeint inside ``cr.vmap``: one solve per example (each its own adaptive steps, so the results
    and their derivatives are a Python loop's), stacked into a batch of ``level``."""
    size = STATE.vmap_levels[level - 1].size

    def pick(v: Any, k: int) -> Any:
        return v.value[k] if isinstance(v, Tensor) and v._level == level else v

    outs = [odeint(func, pick(y0, k), pick(t, k), tuple(pick(a, k) for a in args), **kw) for k in range(size)]
    if kw["full_output"]:
        return BatchedTensor(stack([o[0] for o in outs]), level, size), [o[1] for o in outs]
    return BatchedTensor(stack(outs), level, size)


def _check_closure(problem: _Problem, y0: np.ndarray, t0: float, dargs: list) -> None:
    """func must not close over a tensor that requires grad (or carries a tangent): its derivative
    would be lost. One evaluation at (y0, t0), recorded from fresh leaves."""
    with enable_grad():
        yl = Tensor(np.asarray(y0, np.float64), requires_grad=True)
        pl = [Tensor(np.array(raw(a)), requires_grad=True) for a in dargs]
        out = problem.call(yl, t0, pl)
    if not isinstance(out, Tensor):
        return
    if out._level:
        _batched_closure(problem.name)
    hidden = closure_leaves([out], [yl, *pl]) if out.requires_grad else []
    if hidden or (out._tangents and any(lv in STATE.fw_levels for lv in out._tangents)):
        shapes = ", ".join(str(tuple(h.shape)) for h in hidden) or "a tangent"
        raise GraphError(f"{problem.name}: func closes over tensor(s) that require grad or carry a "
                         f"tangent ({shapes}); their derivatives would be silently lost, because "
                         f"odeint differentiates only with respect to y0, t and args. Pass them in "
                         f"args=(...) and take them as func(y, t, *args)")
