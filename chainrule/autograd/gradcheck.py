"""Gradient checking against central finite differences, in float64 (complex128 for complex data).

``gradcheck`` compares full Jacobians element by element and, on a failure inside a composite,
replays each recorded op alone to name the first op whose rule is wrong. When ±eps flips a
comparison, a ``where`` mask or an argmax, it reports a non-differentiable point instead.

Complex data is checked as the real map it is (PyTorch's convention): the real and imaginary parts
of each complex input are perturbed separately, and the real and imaginary parts of each complex
output are separate rows of the Jacobian. In reverse mode the row of Re(out_k) is the gradient for
the cotangent e_k, the row of Im(out_k) the one for 1j * e_k (z.grad = dL/dx + i dL/dy splits into
the two columns); in forward mode the columns come from the tangents e_j and 1j * e_j.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from chainrule.autograd import engine as _engine
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from chainrule.core._backend import np
from chainrule.core._registry import OpObserver, apply
from chainrule.core.errors import ChainruleError, GradcheckError
from chainrule.core.grad_mode import add_to, enable_grad, no_grad, remove_from
from chainrule.core.tensor import Tensor

# dtype-keyed tolerances, starting from JAX's default_gradient_tolerance
GRAD_TOL = {np.dtype(np.float64): 1e-5, np.dtype(np.float32): 2e-3, np.dtype(np.float16): 1e-2,
            np.dtype("bfloat16"): 1e-1}


class NonDifferentiablePointError(ChainruleError, ValueError):
    """gradcheck's point is at a kink/branch: ±eps changes a discrete decision inside the function."""


_PARTS = {1.0: "", 1j: " (imaginary part)"}


def _steps(a: Any) -> tuple:
    """The perturbations of one element: 1 for real data; 1 and 1j (the real and imaginary parts)."""
    return (1.0, 1j) if np.asarray(a).dtype.kind == "c" else (1.0,)


def _real_parts(a: Any) -> np.ndarray:
    """A flat real vector: the data (real), or its real parts followed by its imaginary parts."""
    a = np.ravel(a)
    if a.dtype.kind == "c":
        return np.concatenate([a.real, a.imag]).astype(np.float64)
    return a.astype(np.float64)


def _checked_copy(x: Any, requires_grad: bool) -> Any:
    """A float64 (complex128) copy of a floating (complex) Tensor; anything else as it is."""
    if isinstance(x, Tensor) and x.dtype.kind in "fc":
        dtype = np.complex128 if x.dtype.kind == "c" else np.float64
        return Tensor(np.array(x.data, dtype=dtype), requires_grad=requires_grad)
    return x


def _discrete(a: Any) -> np.ndarray:
    """A decision, copied; a complex one (abs's sign(z) = z / |z|) varies smoothly: only its zeros
    are discrete."""
    a = np.array(a, copy=True)
    return a == 0 if a.dtype.kind == "c" else a


class _Tracer(OpObserver):
    """Observer that records every op run (for replay) and discrete decisions (for kink detection)."""

    def __init__(self, keep_ops: bool) -> None:
        self.keep_ops = keep_ops
        self.ops: list = []
        self.decisions: list = []

    def on_op(self, prim: Any, datas: list, params: dict, out: Any) -> None:
        if prim.kind == "discrete":
            self.decisions.append((prim.name, _discrete(out)))
        elif prim.decide is not None:
            self.decisions.append((prim.name, _discrete(prim.decide(*datas, **params))))
        if self.keep_ops and prim.vjps is not None:
            self.ops.append((prim, [np.array(d, copy=True) if isinstance(d, np.ndarray) else d
                                    for d in datas], dict(params)))

    def __enter__(self) -> _Tracer:
        add_to("observers", self)
        return self

    def __exit__(self, *exc: object) -> None:
        remove_from("observers", self)


def _as_inputs(inputs: Any) -> tuple:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _outputs(fn: Callable, xs: Sequence[Any]) -> list:
    out = fn(*xs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if isinstance(o, Tensor) and o.dtype.kind in "fc"]


def _flat_outputs(fn: Callable, xs: Sequence[Any]) -> np.ndarray:
    with no_grad():
        outs = _outputs(fn, xs)
    return np.concatenate([_real_parts(o.data) for o in outs]) if outs else np.zeros(0)


def _decisions(fn: Callable, xs: Sequence[Any]) -> list:
    with _Tracer(keep_ops=False) as tr, no_grad():
        fn(*xs)
    return tr.decisions


def _same_decisions(a: list, b: list) -> str | None:
    if len(a) != len(b):
        return "the number of discrete decisions"
    for (name, x), (_, y) in zip(a, b):
        if x.shape != y.shape or not np.array_equal(x, y):
            return name
    return None


def _central(flat: np.ndarray, eps: float, run: Callable) -> Iterator[tuple]:
    """``(step, j, run() at flat[j] + step * eps, run() at flat[j] - step * eps)`` for each element j of
    ``flat`` (a view of an input, restored after each pair) and each part ``step`` of its dtype."""
    for step in _steps(flat):
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + step * eps
            up = run()
            flat[j] = orig - step * eps
            down = run()
            flat[j] = orig
            yield step, j, up, down


def _numerical_columns(fn: Callable, xs: list, i: int, eps: float, base: list) -> tuple:
    """Central-difference Jacobian columns for input i (for complex input: all real parts, then all
    imaginary parts), and the columns where ±eps flips a decision."""
    cols, flips = [], {}
    run = lambda: (_flat_outputs(fn, xs), _decisions(fn, xs) if base else [])
    for _, _, (up, dec_up), (down, dec_down) in _central(xs[i].data.reshape(-1), eps, run):
        if base:
            flipped = _same_decisions(base, dec_up) or _same_decisions(base, dec_down)
            if flipped:
                flips[len(cols)] = flipped
        cols.append((up - down) / (2 * eps))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0)), flips


def _analytic_rows(fn: Callable, xs: list, checked: list) -> list:
    """Reverse-mode Jacobian, one backward pass per real output coordinate: one (m, n_i) block per
    input. A complex output's Im(out_k) row is the gradient for the cotangent 1j * e_k."""
    with enable_grad():
        outs = _outputs(fn, xs)
    m = sum(o.data.size * len(_steps(o.data)) for o in outs)
    blocks = [np.zeros((m, xs[i].data.size * len(_steps(xs[i].data)))) for i in checked]
    row = 0
    for o in outs:
        for step in _steps(o.data):
            for k in range(o.data.size):
                seed = np.zeros(o.data.size, dtype=o.dtype)
                seed[k] = step
                if o.requires_grad:
                    grads = _engine.grad([o], [xs[i] for i in checked], [seed.reshape(o.shape)],
                                         retain_graph=True, allow_unused=True)
                    for b, g in zip(blocks, grads):
                        if g is not None:
                            b[row] = _real_parts(g.data)
                row += 1
    return blocks


def _forward_columns(fn: Callable, xs: list, i: int) -> np.ndarray:
    """Forward-mode Jacobian columns for input i (one JVP per input element)."""
    cols = []
    for step in _steps(xs[i].data):
        for j in range(xs[i].data.size):
            tangent = np.zeros(xs[i].data.size, dtype=xs[i].dtype)
            tangent[j] = step
            with dual_level(), no_grad():
                args = list(xs)
                args[i] = make_dual(xs[i], tangent.reshape(xs[i].shape))
                outs = _outputs(fn, args)
                parts = []
                for o in outs:
                    t = unpack_dual(o).tangent
                    parts.append(_real_parts(np.zeros(o.data.shape, o.dtype) if t is None else t.data))
            cols.append(np.concatenate(parts) if parts else np.zeros(0))
    return np.stack(cols, axis=1)


def _coordinates(arrays: list) -> list:
    """(flat element, part) of each real coordinate of ``arrays`` in _real_parts order; elements
    are numbered across the arrays."""
    coords, first = [], 0
    for a in arrays:
        size = int(np.size(a))
        coords += [(first + k, _PARTS[step]) for step in _steps(a) for k in range(size)]
        first += size
    return coords


def gradcheck(fn: Callable, inputs: Any, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, modes: Sequence[str] = ("rev",),
              locate: bool = True) -> bool:
    """Check ``fn``'s derivatives against central differences, in float64.

    ``modes``: ``"rev"`` checks the VJPs (reverse mode), ``"fwd"`` the JVPs (forward mode).
    Inputs that are Tensors with ``requires_grad=True`` are checked (all float inputs if none is).
    Complex inputs and outputs are checked part by part: the Jacobian of the real and imaginary
    parts of every output with respect to the real and imaginary parts of every input, in both
    modes; a failure names the parts.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.3, 0.7], dtype=cr.float64, requires_grad=True)
    >>> cr.gradcheck(lambda x: cr.tanh(x) * x, (x,))
    True
    >>> z = cr.tensor([0.3 + 0.5j, -0.7 + 0.2j], requires_grad=True)
    >>> cr.gradcheck(lambda z: z * cr.conj(z) + cr.exp(z), (z,), modes=("rev", "fwd"))
    True
    """
    xs = [_checked_copy(x, x.requires_grad) if isinstance(x, Tensor) else x for x in _as_inputs(inputs)]
    checked = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        checked = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.dtype.kind in "fc"]
        for i in checked:
            xs[i].requires_grad = True
    base = _decisions(fn, xs)
    numeric = {}
    for i in checked:
        numeric[i] = _numerical_columns(fn, xs, i, eps, base)
    analytic: dict = {}
    if "rev" in modes:
        for i, block in zip(checked, _analytic_rows(fn, xs, checked)):
            analytic[("reverse", i)] = block
    if "fwd" in modes:
        for i in checked:
            analytic[("forward", i)] = _forward_columns(fn, xs, i)
    out_coords = None
    for (mode, i), a in analytic.items():
        num, flips = numeric[i]
        if a.size == 0:
            continue
        err = np.abs(a - num)
        bad = err > atol + rtol * np.abs(num)
        if not bad.any():
            continue
        out_idx, in_idx = np.unravel_index(np.argmax(np.where(bad, err, -1)), bad.shape)
        j, in_part = _coordinates([xs[i].data])[in_idx]
        in_elem = tuple(int(v) for v in np.unravel_index(j, xs[i].shape))
        if in_idx in flips:
            raise NonDifferentiablePointError(
                f"gradcheck: input {i} element {in_elem}{in_part} is at a non-differentiable point: "
                f"±eps changes the result of '{flips[in_idx]}' inside the function, so finite "
                f"differences are meaningless here; move the point away from the kink/branch")
        if out_coords is None:
            with no_grad():
                out_coords = _coordinates([o.data for o in _outputs(fn, xs)])
        k, out_part = out_coords[out_idx]
        rel = err[out_idx, in_idx] / max(abs(num[out_idx, in_idx]), 1e-12)
        msg = (f"gradcheck ({mode} mode): Jacobian mismatch for input {i} element {in_elem}{in_part}, "
               f"output element {k}{out_part}: analytic {a[out_idx, in_idx]:.10g}, numerical "
               f"{num[out_idx, in_idx]:.10g}, relative error {rel:.3g} (atol={atol}, rtol={rtol})")
        if _conjugated_rule(a, num, out_coords, _coordinates([xs[i].data]), atol, rtol):
            msg += ("\nthe analytic derivative is the conjugate of the numerical one: a rule that "
                    "misses (or adds) a conj? PyTorch's convention: z.grad = dL/dx + i dL/dy, a VJP "
                    "is J^H v (conj(f'(z)) v for holomorphic f), a JVP is J t")
        if locate:
            culprit = locate_wrong_rule(fn, xs, mode)
            if culprit:
                msg += "\n" + culprit
        if raise_exception:
            raise GradcheckError(msg)
        return False
    return True


def _conjugated_rule(a: np.ndarray, num: np.ndarray, out_coords: list, in_coords: list,
                     atol: float, rtol: float) -> bool:
    """Does ``a`` match ``num`` once the entries mixing a real and an imaginary part change sign?
    That is the Jacobian of conj(f(conj z)): what a rule gets that forgets a conj."""
    flip = np.array([p != "" for _, p in out_coords])[:, None] != np.array([p != "" for _, p in in_coords])[None, :]
    if not flip.any():
        return False
    return not (np.abs(np.where(flip, -a, a) - num) > atol + rtol * np.abs(num)).any()


def locate_wrong_rule(fn: Callable, inputs: Sequence[Any], mode: str = "reverse",
                      eps: float = 1e-6) -> str | None:
    """Replay every op ``fn`` runs, alone on its recorded float64 inputs; name the first wrong rule.

    Returns None when every rule agrees with finite differences.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.3, 0.7], dtype=cr.float64)
    >>> locate_wrong_rule(lambda x: cr.tanh(x) * x, [x]) is None
    True
    """
    xs = [_checked_copy(x, True) for x in inputs]
    with _Tracer(keep_ops=True) as tr, enable_grad():
        fn(*xs)
    for step, (prim, datas, params) in enumerate(tr.ops):
        bad = _check_op(prim, datas, params, mode, eps)
        if bad:
            return f"first wrong rule: op #{step} '{prim.name}' ({mode} mode), {bad}"
    return None


def _check_op(prim: Any, datas: list, params: dict, mode: str, eps: float) -> str | None:
    """One op alone: Re<v, J e> (e a real or imaginary unit of one input element) from its rule
    against central differences, for a random cotangent v (complex for a complex output)."""
    rng = np.random.default_rng(0)
    float_idx = [k for k, d in enumerate(datas)
                 if isinstance(d, np.ndarray) and d.dtype in (np.float64, np.complex128)]
    for k in float_idx:
        x = datas[k]
        args = [Tensor(d, requires_grad=(j == k)) if isinstance(d, np.ndarray) else d
                for j, d in enumerate(datas)]
        with enable_grad():
            out = apply(prim, tuple(args), params or None)
        if not isinstance(out, Tensor) or out.dtype.kind not in "fc":
            continue
        v = rng.standard_normal(out.shape)
        if out.dtype.kind == "c":
            v = v + 1j * rng.standard_normal(out.shape)
        if mode == "reverse":
            if not out.requires_grad:
                continue
            (gx,) = _engine.grad([out], [args[k]], [v], allow_unused=True)
            analytic = np.zeros(x.size, x.dtype) if gx is None else np.ravel(gx.data)
        else:
            analytic = None
        run = lambda: np.asarray(prim.forward(*datas, **params))
        for step, j, up, down in _central(x.reshape(-1), eps, run):
            num = float(np.real(np.sum(np.conj(v) * (up - down) / (2 * eps))))
            if mode == "reverse":          # z.grad = dL/dx + i dL/dy: the part along `step`
                got = float(np.real(analytic[j] * np.conj(step)))
            else:
                tangent = np.zeros(x.size, x.dtype)
                tangent[j] = step
                with dual_level():
                    a2 = list(args)
                    a2[k] = make_dual(Tensor(x), tangent.reshape(x.shape))
                    t = unpack_dual(apply(prim, tuple(a2), params or None)).tangent
                got = 0.0 if t is None else float(np.real(np.sum(np.conj(v) * np.asarray(t.data))))
            if abs(num - got) > 1e-5 + 1e-3 * abs(num):
                elem = tuple(int(e) for e in np.unravel_index(j, x.shape))
                return (f"input {k} element {elem}{_PARTS[step]}: rule gives {got:.10g}, finite "
                        f"differences {num:.10g}")
    return None


def gradgradcheck(fn: Callable, inputs: Any, grad_outputs: Any = None, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Check second derivatives: gradcheck the (create_graph) gradient of ``fn``.

    The cotangents ``grad_outputs`` default to random ones (complex for complex outputs); the
    gradient of complex inputs is complex (dL/dx + i dL/dy), checked part by part.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.3, 0.7], dtype=cr.float64, requires_grad=True)
    >>> cr.gradgradcheck(lambda x: cr.sin(x) * x, (x,))
    True
    """
    xs = [_checked_copy(x, True) for x in _as_inputs(inputs)]
    diff = [i for i, x in enumerate(xs) if isinstance(x, Tensor)]
    with no_grad():
        outs = _outputs(fn, xs)
    rng = np.random.default_rng(1)
    if grad_outputs is None:
        grad_outputs = [rng.standard_normal(o.shape) + (1j * rng.standard_normal(o.shape)
                                                        if o.dtype.kind == "c" else 0) for o in outs]
    seeds = [np.asarray(s.data if isinstance(s, Tensor) else s) for s in _as_inputs(grad_outputs)]
    seeds = [s.astype(np.complex128 if s.dtype.kind == "c" else np.float64) for s in seeds]

    def first_order(*args: Any) -> tuple:
        with enable_grad():
            outs = _outputs(fn, args)
            pairs = [(o, s) for o, s in zip(outs, seeds) if o.requires_grad]
            grads = _engine.grad([o for o, _ in pairs], [args[i] for i in diff],
                                 [s for _, s in pairs], create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, xs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, locate=False)
