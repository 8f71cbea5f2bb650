"""The op table: every primitive is declared once, with its forward, VJP and JVP rules side by side.

Nomenclature (shared by rules, engine, docs and tests):

    x, y, z, xs   forward inputs (primals)           out     forward output
    g             cotangent flowing backward         gx, gy  per-input cotangents
    t             tangent flowing forward            tout    output tangent

    VJP rule for input i:  vjp(g, out, *xs, **params) -> cotangent for input i
    JVP rule for input i:  jvp(t, out, *xs, **params) -> input i's contribution to tout

Rules are written with chainrule ops. In a plain backward the engine hands them ndarrays and every
op computes directly in NumPy (fast); under ``create_graph`` or forward-over-reverse it hands them
Tensors, so the rule itself is recorded and differentiable. Inputs and the output reach a rule only
if the primitive declares them in ``saves``; the others arrive as None. Broadcasting in a rule's
result is undone by the engine (cotangents) and by ``apply`` (tangents), never by the rule.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION, default_for, is_floating
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import (
    ConversionError,
    DTypeError,
    LinAlgError,
    ShapeError,
    UnsupportedArgument,
    VmapConversionError,
    VmapError,
    describe,
    linalg_error,
)
from chainrule.core.grad_mode import STATE
from chainrule.core.graph import Node
from chainrule.core.tensor import Tensor, _new, graph_role

VjpRule = Callable[..., Any]
JvpRule = Callable[..., Any]
FlopRule = Callable[..., int]


class Primitive:
    """One entry of the op table."""

    __slots__ = ("name", "forward", "vjps", "jvps", "save_idx", "save_out", "flops", "variadic",
                 "differentiable_out", "kind", "hint", "decide", "needs", "keep", "passthrough",
                 "accumulate", "autocast", "out_for", "complex", "on_complex", "batch")

    def __init__(self, name: str, forward: Callable, vjps: Sequence[VjpRule | None] | None,
                 jvps: Sequence[JvpRule | None] | str | None, saves: str, flops: FlopRule | None,
                 variadic: bool, kind: str, hint: str, decide: Callable | None = None,
                 needs: dict | None = None, accumulate: bool = False, autocast: str = "input",
                 out_for: tuple | None = None, complex: str | None = None,
                 batch: Callable | None = None) -> None:
        self.name = name
        self.forward = forward
        self.vjps = tuple(vjps) if vjps is not None else None
        self.variadic = variadic
        if jvps == "linear":          # the op itself, applied to the tangent
            jvps = linear_jvps(lambda *args, **params: apply(self, args, params), None if variadic else len(vjps))
        self.jvps = tuple(jvps) if jvps is not None else None
        tokens = saves.split()
        # ascending input indices; "xs": every input, however many (variadic ops), as an open range
        # that Node cuts at the call's last input
        self.save_idx = (_EVERY_INPUT if "xs" in tokens
                         else tuple(sorted(_POSITIONS[s] for s in tokens if s in _POSITIONS)))
        self.save_out = "out" in tokens
        self.flops = flops or _flops_elementwise
        self.differentiable_out = vjps is not None
        # every VJP rule is the identity (add, alias, copy, astype): the engine hands the cotangent
        # straight to the inputs without calling the rules
        self.passthrough = bool(self.vjps) and all(r is passthrough for r in self.vjps)
        self.kind = kind
        self.hint = hint
        self.decide = decide        # where the op branches (kinks, ties): for gradcheck's kink detection
        # needs[i]: the saved inputs that input i's rule reads; only those of inputs that need a
        # gradient are kept (x * const keeps the constant, not x), as PyTorch does
        self.needs = needs
        # keep[bits]: the input indices to save when bit i of ``bits`` says input i needs a gradient
        # (precomputed for every mask, so recording does no set arithmetic)
        self.keep = None if needs is None else {
            bits: tuple(sorted({j for i in range(max(needs) + 1) if bits >> i & 1 for j in needs.get(i, ())}))
            for bits in range(1 << (max(needs) + 1))}
        # 16-bit and FP8 inputs are computed in ``_dtypes.accum_dtype`` (float32) and rounded once:
        # sums, products, softmax (``_reduce``/``_along`` read this), matmul, linear, einsum (their forwards)
        self.accumulate = accumulate
        # the dtype autocast runs the op in: "low" (autocast's dtype), "float32" or "input" (unchanged)
        self.autocast = autocast
        # the inputs whose rules read the saved output (None: all): an in-place change of the output
        # is an error only when one of them needs a gradient (x / const keeps out for const's rule)
        self.out_for = out_for
        # complex inputs (PyTorch's convention: a real loss's z.grad is dL/dx + i dL/dy, a VJP is
        # J^H g): "holomorphic" (the rules are analytic formulas: the JVP holds as written and the
        # VJP is conj(rule(conj(g)))), "linear" (real coefficients: the rules hold as written),
        # "own" (the rules treat complex themselves: abs, real, conj, ...) or None (no complex
        # derivative: relu, maximum, ... refuse to record one)
        if complex not in (None, "holomorphic", "linear", "own"):
            raise ValueError(f"primitive {name!r}: complex must be 'holomorphic', 'linear', 'own' or None")
        self.complex = complex
        # cr.vmap's batching rule: batch(prim, xs, batched, params, size) runs the op once on the
        # whole batch (batched inputs carry it on axis 0) and returns the batched result (batch on
        # axis 0). Elementwise ops share one; the others declare theirs (ops/_batching.py).
        self.batch = batch if batch is not None else (
            batch_elementwise if kind in ("elementwise", "discrete") else None)
        # the entry a node of a complex result records: this one, or one with conjugated VJP rules
        self.on_complex = _holomorphic_variant(self) if complex == "holomorphic" and vjps else (
            self if complex else None)

    def __repr__(self) -> str:
        return f"Primitive({self.name!r})"


def _holomorphic_variant(prim: Primitive) -> Primitive:
    """A copy of ``prim`` whose VJP rules are conj(rule(conj(g))): for an analytic rule computing
    J^T g, that is J^H g, PyTorch's complex VJP (multiply: g * conj(y); matmul: g @ y^H)."""
    variant = object.__new__(Primitive)
    for slot in Primitive.__slots__:
        if slot != "on_complex":
            setattr(variant, slot, getattr(prim, slot))
    variant.vjps = tuple(None if r is None else _conjugated(r) for r in prim.vjps)
    variant.passthrough = False
    variant.on_complex = variant
    return variant


def _conjugated(rule: VjpRule) -> VjpRule:
    def conjugated(g: Any, out: Any, *xs: Any, **params: Any) -> Any:
        return _conj(rule(_conj(g), out, *xs, **params))
    conjugated.keeps_zero = getattr(rule, "keeps_zero", False)
    return conjugated


def _conj(a: Any) -> Any:
    return apply(PRIMITIVES["conj"], (a,)) if isinstance(a, Tensor) else np.conj(a)


_C64, _C128, _CLD = np.dtype(np.complex64), np.dtype(np.complex128), np.dtype(np.clongdouble)


def no_out(name: str, out: Any) -> None:
    """Refuse NumPy's ``out=`` (every chainrule function that takes it calls this one)."""
    if out is not None:
        raise UnsupportedArgument(f"{name}: out= is not supported (chainrule ops return new tensors); assign "
                                  f"the result instead")


def real_only(name: str, x: Any) -> Any:
    """``x``, refused if complex: for the forwards of the few ops with no complex derivative whose
    result is real even for complex input (so the complex-result check in ``apply`` misses them)."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.kind == "c":
        raise DTypeError(f"{name}: complex input ({dtype}, shape {x.shape}) is not supported: {name} has "
                         f"no complex derivative in chainrule (as in PyTorch); use abs(z) or z.real")
    return x


def complex_error(prim: Primitive, dtype: Any, mode: str) -> DTypeError:
    """The error of an op without a complex derivative, asked for one."""
    return DTypeError(f"{prim.name}: no complex derivative ({mode}, {dtype} result of complex data): "
                      f"{prim.name} is not differentiable for complex inputs in chainrule (as in "
                      f"PyTorch). Apply it to the real and imaginary parts (z.real, z.imag) or to "
                      f"abs(z), or detach the input if no gradient is needed")


_POSITIONS = {"x": 0, "y": 1, "z": 2}
_EVERY_INPUT = range(1 << 62)
PRIMITIVES: dict[str, Primitive] = {}


def _flops_elementwise(out: Any, *xs: Any, **params: Any) -> int:
    return int(np.size(out))


def defprim(name: str, forward: Callable, vjps: Sequence[VjpRule | None] | None = None,
            jvps: Sequence[JvpRule | None] | str | None = None, saves: str = "",
            flops: FlopRule | None = None, variadic: bool = False, kind: str = "elementwise",
            hint: str = "", decide: Callable | None = None, needs: dict | None = None,
            rules: Sequence[VjpRule | None] | None = None, accumulate: bool = False,
            autocast: str = "input", out_for: tuple | None = None, complex: str | None = None,
            batch: Callable | None = None) -> Primitive:
    """Declare a primitive. ``vjps=None`` marks a non-differentiable op (comparisons, argmax).

    ``rules``: one rule per input that serves as both its VJP and its JVP, for ops whose Jacobian
    is symmetric (elementwise ops: ``g * d``; softmax). ``jvps="linear"``: the op is linear in each
    input separately (reshape, getitem, multiply, matmul), so its JVP is the op itself applied to the
    tangent; ``vjps`` then states its transposes. ``accumulate``: 16-bit and FP8 inputs are computed
    in float32 and rounded once. ``autocast``: the dtype ``cr.autocast`` runs the op in.
    ``complex``: how the rules treat complex inputs (see ``Primitive``; None: not at all).
    ``batch``: the batching rule of ``cr.vmap`` (elementwise ops have one by default).

    >>> PRIMITIVES["reshape"].jvps[0](np.ones(4), None, np.zeros(4), shape=(2, 2), in_shape=(4,))
    array([[1., 1.],
           [1., 1.]])
    """
    if name in PRIMITIVES:
        raise ValueError(f"primitive {name!r} is declared twice")
    if autocast not in ("low", "float32", "input"):
        raise ValueError(f"primitive {name!r}: autocast must be 'low', 'float32' or 'input', got {autocast!r}")
    if rules is not None:
        if vjps is not None or jvps is not None:
            raise ValueError(f"primitive {name!r}: give rules= (both modes) or vjps=/jvps=, not both")
        vjps = jvps = rules
    prim = Primitive(name, forward, vjps, jvps, saves, flops, variadic, kind, hint, decide, needs,
                     accumulate, autocast, out_for, complex, batch)
    PRIMITIVES[name] = prim
    return prim


def passthrough(g: Any, out: Any, *xs: Any, **params: Any) -> Any:
    """The rule of an op whose derivative is the identity in that input: the (co)tangent itself."""
    return g


def unary(name: str, forward: Callable, deriv: Callable[[Any, Any], Any] | None = None,
          saves: str = "x", over: Callable[[Any, Any], Any] | None = None, keep_zero: bool = False,
          **kw: Any) -> Primitive:
    """Declare an elementwise op from its derivative: the one rule ``g * deriv(out, x)``, or
    ``g / over(out, x)`` where the derivative is a reciprocal (exact: no rounded ``1 / over``),
    serves both modes. ``keep_zero``: guard the rule with ``keeping_zero``, for derivatives that can
    be infinite (log'(0), sqrt'(0)).

    >>> log_rule = PRIMITIVES["log"].vjps[0]          # unary("log", np.log, over=lambda out, x: x, ...)
    >>> with np.errstate(invalid="ignore"):
    ...     log_rule(np.array([1.0, 0.0]), None, np.array([2.0, 0.0]))    # 0 / 0 kept 0
    array([0.5, 0. ])
    """
    if over is None:
        rule = lambda g, out, x: g * deriv(out, x)  # noqa: E731
    else:
        rule = lambda g, out, x: g / over(out, x)  # noqa: E731
    return defprim(name, forward, rules=(keeping_zero(rule) if keep_zero else rule,),
                   saves=saves, **kw)


def keeping_zero(rule: VjpRule) -> VjpRule:
    """Guard a rule whose local derivative can be inf/NaN (sqrt'(0), log'(0), x/0, ...): an exactly
    zero cotangent (or tangent) gives exactly zero, not 0 * inf = NaN, so ``where(x > 0, sqrt(x), 0.)``
    has gradient 0 at x <= 0. ``cr.set_safe_zero_cotangents(False)`` restores 0 * inf = NaN.

    Only the points where the rule is not finite are replaced: where the local derivative is finite
    the rule is returned untouched, so its derivative with respect to ``g`` (second and higher
    derivatives, forward-over-reverse) stays the unguarded one. Guarded rules carry ``keeps_zero``.

    >>> with np.errstate(divide="ignore", invalid="ignore"):
    ...     keeping_zero(lambda g, out, x: g / x)(np.array([0.0, 1.0]), None, np.array([0.0, 0.0]))
    array([ 0., inf])
    """
    def rule_keeping_zero(g: Any, out: Any, *xs: Any, **params: Any) -> Any:
        r = rule(g, out, *xs, **params)
        if not STATE.safe_zero:
            return r
        if isinstance(g, Tensor):                     # raw(g), inlined: the hot path
            if g._level:
                return _keep_zero_batched(g, r)
            if STATE.recorder is not None and isinstance(r, Tensor) and not r._level:
                return _keep_zero_recorded(STATE.recorder, g, r)
            zero = g.data == 0
        else:
            zero = g == 0
        if not zero.any():
            return r
        with np.errstate(invalid="ignore"):
            bad = zero & ~np.isfinite(raw(r))     # 0 * inf, 0 / 0: the local derivative is not finite
        if not bad.any():
            return r
        return apply(PRIMITIVES["where"], (bad, 0.0, r)) if isinstance(r, Tensor) else np.where(bad, 0, r)
    rule_keeping_zero.keeps_zero = True
    return rule_keeping_zero


def _zero_meets_inf(g: Any, r: Any) -> Any:
    with np.errstate(invalid="ignore"):
        return np.asarray((g == 0) & ~np.isfinite(r))       # (an array for 0-d g too: taped by id)


def _keep_zero_recorded(rec: Any, g: Any, r: Any) -> Any:
    """``keeping_zero`` while ``cr.compile`` captures: the test is a taped kernel, and whether it
    found a point to replace a value guard (a replay that would branch the other way misses)."""
    bad = _zero_meets_inf(g.data, r.data)
    rec.on_kernel(_zero_meets_inf, (g.data, r.data), None, bad)
    if not rec.on_condition(bad, "a zero cotangent meeting an infinite derivative (keeping_zero)"):
        return r
    return apply(PRIMITIVES["where"], (bad, 0.0, r))


def _keep_zero_batched(g: Any, r: Any) -> Any:
    """``keeping_zero`` for a cotangent batched by cr.vmap: the same replacement, with ops."""
    op = PRIMITIVES
    bad = apply(op["logical_and"], (apply(op["equal"], (g, 0.0)),
                                    apply(op["logical_not"], (apply(op["isfinite"], (r,)),))))
    return apply(op["where"], (bad, 0.0, r))


def linear_jvps(prim_fn: Callable, n: int | None) -> tuple:
    """JVP rules of an op that is linear in each of its ``n`` inputs separately (None: a variadic
    op's one rule): the op applied with the tangent in place of that input, ``multiply(t, y)``.
    ``defprim(..., jvps="linear")`` builds them from the primitive itself."""
    def rule(i: int) -> JvpRule:
        def jvp(t: Any, out: Any, *xs: Any, argnum: int = i, **params: Any) -> Any:
            args = list(xs)
            args[argnum] = t
            return prim_fn(*args, **params)
        return jvp
    return (rule(0),) if n is None else tuple(rule(i) for i in range(n))


class OpObserver:
    """A base for the members of ``STATE.observers`` that watch only the ops run (``on_op``, called
    by ``apply``): the saves of a node's values (``on_save``) and of a cr.Function's
    (``on_save_function``) they let pass."""

    def on_save(self, node: Any) -> None:
        """A node saved its values: nothing to do."""

    def on_save_function(self, ctx: Any) -> None:
        """A cr.Function saved its values: nothing to do."""


def apply(prim: Primitive, xs: tuple, params: dict | None = None) -> Any:
    """Run ``prim`` on ``xs``: plain ndarrays in, ndarray out; any Tensor in, Tensor out (recorded)."""
    st = STATE.__dict__               # this thread's switches: one thread-local lookup, then dict reads
    rare = st["rare"]                 # autocast, observers, forward mode, hooks or anomaly active
    if rare:
        if st["vmap_levels"]:
            level = batch_level(xs, params)
            if level:
                return batched_apply(prim, xs, params or _NO_PARAMS, level)
        if st["autocast"] is not None:
            xs = st["autocast"].cast_inputs(prim, xs)
    datas = []
    edges = []                        # per input: the edge its gradient flows to, or None
    has_tensor = record = False
    bits = 0                          # bit i: input i needs a gradient
    for x in xs:                      # one plain loop: cheaper than comprehensions on 3.11
        if isinstance(x, Tensor):
            has_tensor = True
            datas.append(x.data)
            if x._requires_grad:
                record = True
                fn = x.grad_fn
                bits |= 1 << len(edges)
                edges.append((fn, x._nr) if fn is not None else (x._leaf_edge or x._edge()))
                continue
        elif type(x) is list or type(x) is tuple:
            datas.append(_python_array(x))
        else:
            datas.append(x)
        edges.append(None)
    try:
        out_data = prim.forward(*datas, **params) if params else prim.forward(*datas)
    except (ValueError, TypeError, IndexError, np.linalg.LinAlgError) as e:
        raise forward_error(prim, xs, e) from None
    if rare:
        for ob in st["observers"]:
            ob.on_op(prim, datas, params or {}, out_data)
        if st["recorder"] is not None:    # cr.compile: it finishes the result as below, and tapes it
            out_data = st["recorder"].on_op(prim, xs, datas, params, out_data)
    if not has_tensor:
        if type(out_data) in _PY_RESULTS and type(datas[0]) in _PY_NUMBERS and _python_scalars(xs):
            return out_data.astype(default_for(out_data.dtype))   # cr.exp(1.0): the default dtype, as lists
        return out_data
    if type(out_data) is not ndarray:
        out_data = np.asarray(out_data)
    out_dtype = out_data.dtype
    x0 = datas[0]
    if (type(x0) is not ndarray or out_dtype is not x0.dtype) and out_dtype in _WIDE \
            and out_dtype != getattr(x0, "dtype", None) and not (params and "dtype" in params):
        out_data = _keep_low_precision(datas, out_data)   # (cheap tests first: the hot path skips it)
    out = _new(Tensor)                # wrap(), inlined: the hot path
    out.data = out_data
    if record and st["grad_enabled"] and prim.vjps is not None:
        if out_dtype is _C128 or out_dtype is _C64 or out_dtype is _CLD:    # (identity: the hot path)
            if prim.on_complex is None:           # complex: the conjugated rules, or a clear refusal
                raise complex_error(prim, out_dtype, "backward")
            prim = prim.on_complex
        if rare and st["fw_levels"]:
            out._tangents = {}        # before the node is built: it keeps the dict if it saves out
        node = Node(prim, params or _NO_PARAMS, tuple(edges), xs, out,
                    prim.save_idx if prim.keep is None else prim.keep[bits], rare)
        if rare and st["anomaly"]:
            st["anomaly"].remember(node)
        out.grad_fn = node
        out._requires_grad = True
    else:
        out.grad_fn = None
        out._requires_grad = False
    if rare and st["fw_levels"] and prim.jvps is not None:
        st["fw_push"](prim, xs, params or _NO_PARAMS, out)
    return out


_NO_PARAMS: dict = {}
_WIDE = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})


def _keep_low_precision(datas: list, out_data: Any) -> Any:
    """Round a result back to its 16/8-bit inputs' dtype: NumPy upcasts bfloat16 and FP8 with Python
    scalars (``x * 2.0``) and computes linalg/erf in float64, but a bfloat16 tensor stays bfloat16."""
    dtypes, low = [], False
    for d in datas:
        dt = getattr(d, "dtype", None)
        if dt is not None and is_floating(dt):
            dtypes.append(dt)
            low = low or dt in LOW_PRECISION
    if not low:
        return out_data
    try:
        want = np.result_type(*dtypes)
    except TypeError:               # e.g. bfloat16 with float16: NumPy has no common type; keep its choice
        return out_data
    return out_data if want == out_data.dtype else out_data.astype(want)


_PY_RESULTS = (np.float64, np.complex128)
_PY_NUMBERS = (float, int, bool, complex)


def _python_scalars(xs: tuple) -> bool:
    """Only Python numbers (at least one float or complex) among ``xs``."""
    kinds = {type(x) for x in xs}
    return bool(kinds & {float, complex}) and kinds <= {float, int, bool, complex}


def _python_array(x: Any) -> Any:
    """A list/tuple operand as an array: Python floats take the default dtype, as in cr.tensor."""
    arr = np.asarray(x)
    return arr.astype(default_for(arr.dtype)) if arr.dtype in _PY_DTYPES else arr


_PY_DTYPES = (np.dtype(np.float64), np.dtype(np.complex128))


# ----- cr.vmap: batching rules -----
def batch_level(xs: tuple, params: dict | None) -> int:
    """The innermost vmap level among the inputs (and index-like params): 0 if none is batched."""
    level = 0
    for x in xs:
        if isinstance(x, Tensor) and x._level > level:
            level = x._level
    if params:
        for v in params.values():
            if isinstance(v, Tensor) and v._level > level:
                level = v._level
            elif type(v) is tuple:
                for w in v:
                    if isinstance(w, Tensor) and w._level > level:
                        level = w._level
    return level


def batched_apply(prim: Primitive, xs: tuple, params: dict, level: int) -> Any:
    """Run ``prim``'s batching rule on the inputs batched at ``level`` (their whole batches; the
    others as they are) and wrap the result, batched at ``level``."""
    rule = prim.batch
    if rule is None:
        raise VmapError(f"{prim.name}: no batching rule, so it cannot run inside cr.vmap; this is a "
                        f"bug in chainrule (every primitive should have one): please report it")
    values, batched, size = [], [], 0
    for x in xs:
        if isinstance(x, Tensor) and x._level == level:
            values.append(x.value)
            batched.append(True)
            size = x.bsize
        else:
            values.append(x)
            batched.append(False)
    if not size:
        size = STATE.vmap_levels[level - 1].size
    for i, x in enumerate(xs):
        if not batched[i] and isinstance(x, Tensor) and x._tangents:
            lifted = _lift_dual(x, level, size)
            if lifted is not None:
                values[i], batched[i] = lifted, True
    if params and batch_level((), params) == level:
        params = {k: _marked(v, level) for k, v in params.items()}
    return BatchedTensor(rule(prim, tuple(values), tuple(batched), params, size), level, size)


def _lift_dual(x: Tensor, level: int, size: int) -> Any:
    """A dual shared by the examples whose tangent differs per example (batched at ``level``), as
    the batch of its copies, each with its own tangent; None if no tangent of ``x`` is batched so."""
    per_example = {k: t for k, t in x._tangents.items() if isinstance(t, Tensor) and t._level == level}
    if not per_example:
        return None
    shape = tuple(x.data.shape)
    one = apply(PRIMITIVES["reshape"], (x,), {"shape": (1,) + shape, "in_shape": shape})
    copies = apply(PRIMITIVES["broadcast_to"], (one,), {"shape": (size,) + shape})
    copies._tangents = dict(copies._tangents or {})
    for k, t in per_example.items():     # (the push above broadcast the batched tangent: replaced)
        copies._tangents[k] = t.value if isinstance(t.value, Tensor) else _wrap_tangent(t.value)
    return copies


def _wrap_tangent(v: Any) -> Tensor:
    t = _new(Tensor)
    t.data, t.grad_fn, t._requires_grad = np.asarray(v), None, False
    return t


class Batch:
    """A parameter batched at the level a rule is batching (an index array, a target): its whole
    batch, batch on axis 0. ``batched_apply`` hands rules these in place of BatchedTensors."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _marked(v: Any, level: int) -> Any:
    if isinstance(v, Tensor) and v._level == level:
        return Batch(v.value)
    if type(v) is tuple:
        return tuple(_marked(w, level) for w in v)
    return v


def lift(v: Any, ndim: int, size: int) -> Any:
    """A batched value (batch on axis 0) with leading 1s inserted after the batch axis so that its
    example has ``ndim`` dimensions: broadcasting then lines examples up as NumPy would."""
    shape = np.shape(v)
    if len(shape) - 1 >= ndim:
        return v
    new = (shape[0],) + (1,) * (ndim - len(shape) + 1) + tuple(shape[1:])
    return apply(PRIMITIVES["reshape"], (v,), {"shape": new, "in_shape": tuple(shape)})


def example_ndim(v: Any, batched: bool) -> int:
    return np.ndim(v) - 1 if batched else np.ndim(v)


def set_batch(prim: Primitive, rule: Callable) -> None:
    """Give ``prim`` (and its complex variant) its batching rule, after it is declared."""
    prim.batch = rule
    if prim.on_complex is not None:
        prim.on_complex.batch = rule


def refuse_batched_params(prim: Primitive, params: dict) -> None:
    """A rule that maps only its inputs: a batched value among the params is an error."""
    if params and any(isinstance(v, Batch) or type(v) is tuple and any(isinstance(w, Batch) for w in v)
                      for v in params.values()):
        raise VmapError(f"{prim.name}: a batched value is given as a parameter (an index, a target or a "
                        f"shape), which this op's batching rule does not take inside cr.vmap")


def batch_elementwise(prim: Primitive, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """The batching rule of elementwise (broadcasting) ops: examples lined up, then the op once."""
    refuse_batched_params(prim, params)
    if len(xs) > 1:
        ndim = max(example_ndim(x, b) for x, b in zip(xs, batched))
        xs = tuple(lift(x, ndim, size) if b else x for x, b in zip(xs, batched))
    return apply(prim, xs, params)


def raw(x: Any) -> Any:
    """The ndarray behind a Tensor; anything else unchanged. (ndarray.data is a buffer: never getattr.)"""
    return x.data if isinstance(x, Tensor) else x


def in_graph(x: Any) -> bool:
    """Whether ``x`` is a tensor whose derivative must not be dropped: it requires grad, carries a
    live forward-mode tangent or is batched by cr.vmap (plain tensors, arrays, numbers: False)."""
    return isinstance(x, Tensor) and bool(x._level or graph_role(x))


def constant_arg(x: Any, op: str, arg: str) -> Any:
    """``raw(x)`` of an argument that ``op`` takes as a constant (its derivative there is not
    implemented): a tensor in a graph is refused with an error naming the op and the argument,
    never cut off silently (a zero gradient)."""
    if not in_graph(x):
        return raw(x)
    if x._level:
        raise VmapConversionError(f"{op}(): {arg} is batched by cr.vmap, but {op} takes {arg} as one "
                                  f"constant for every example; pass an unbatched {arg}, or call {op} "
                                  f"per example")
    raise ConversionError(f"{op}(): {arg} {graph_role(x)}, but {op}'s derivative in {arg} is not "
                          f"implemented (chainrule takes {arg} as a constant); pass {arg}.detach() if a "
                          f"constant is meant")


def forward_error(prim: Primitive, xs: tuple, e: Exception) -> Exception:
    """A forward-time error that names the op, the shapes/dtypes and (if known) the fix."""
    if isinstance(e, (ShapeError, LinAlgError)):
        return e
    if isinstance(e, np.linalg.LinAlgError) or "infs or NaNs" in str(e):    # (SciPy's check_finite)
        return linalg_error(prim.name, xs, e)
    hint = f" {prim.hint}" if prim.hint else ""
    low = sorted({str(x.dtype) for x in xs if getattr(x, "dtype", None) in LOW_PRECISION})
    if low and isinstance(e, TypeError):
        hint += (f" {prim.name} does not support {'/'.join(low)} inputs: cast them with "
                 f".astype(cr.float32), or run under cr.autocast, which runs {prim.name} in float32.")
    odd = [f"input {i} is a {type(x).__name__} ({x!r:.40})" for i, x in enumerate(xs)
           if isinstance(x, (str, bytes)) or x is None]
    if odd:
        hint += f" {'; '.join(odd)}: chainrule ops take numbers, arrays and tensors."
    # chainrule's own classes: NumPy's exception types cannot always be rebuilt from a message
    cls = ShapeError if isinstance(e, ValueError) else IndexError if isinstance(e, IndexError) else DTypeError
    return cls(f"{prim.name}: cannot apply to inputs {describe(xs)}: {e}.{hint}")

