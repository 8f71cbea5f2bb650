"""Function transforms: grad, value_and_grad, vjp, jvp, jacfwd, jacrev, jacobian, hessian, hvp.

Every transform is a thin composition over two cores: ``_Pullback`` (reverse mode: run ``f`` once
recording the graph, then pull cotangents back as often as needed) and ``_push`` (true forward mode:
one ``dual_level`` per call, tangents ride along with the primals). ``argnums`` is handled once, by
``_nary`` (autograd's ``unary_to_nary``); the cores see a single pytree argument.

Arguments may be Tensors, NumPy arrays or Python floats (which become float64 arrays, as in NumPy),
nested in tuples, lists and dicts. Results are Tensors when any argument is a Tensor, NumPy arrays
otherwise, except that a result which an enclosing transform still differentiates stays a Tensor.

Nesting: a primal that requires grad in an outer graph enters through ``alias`` (a differentiable
identity), and the backward is recorded (``create_graph``) only when something outside can see it:
an outer graph reaches the inputs or the output (a closure over an outer variable). Forward-mode
levels are fresh per ``jvp`` call, so perturbations of different calls never mix.

Complex numbers follow PyTorch's convention: for a real ``L`` of ``z = x + iy`` the gradient is
dL/dx + i dL/dy, a VJP is ``J^H v`` and a JVP is ``J t``. ``grad`` takes complex inputs of a real
output; a complex output, or a complex input to a Jacobian transform, needs ``holomorphic=True``
(JAX's rule), which returns f'(z) and requires every input and output to be complex.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from chainrule import numpy as _ops
from chainrule.autograd import engine
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from chainrule.core import _dtypes
from chainrule.core import _pytree as tree
from chainrule.core._backend import np
from chainrule.core.errors import DTypeError, ShapeError, VmapError
from chainrule.core.grad_mode import STATE, enable_grad, no_grad
from chainrule.core.graph import walk
from chainrule.core.tensor import Tensor
from chainrule.func.batching import levels_of, lift_result, lower, physical, rewrap, vmap, with_levels
from chainrule.numpy import alias as _alias

Fn = Callable[..., Any]
MODES = ("auto", "forward", "reverse")


# ----- arguments and results -----

def _nary(core: Callable, f: Fn, argnums: int | Sequence[int], who: str, **kw: Any) -> Fn:
    """Lift ``core(fun, primal, labels, tensor_out, who, **kw)`` (one pytree argument) to argnums."""
    single = isinstance(argnums, int)
    _positions(argnums, None, who)

    def transformed(*args: Any, **kwargs: Any) -> Any:
        pos = _positions(argnums, args, who)

        def fun(primal: Any) -> Any:
            new = list(args)
            for i, value in zip(pos, (primal,) if single else primal):
                new[i] = value
            return f(*new, **kwargs)        # keyword arguments pass through, undifferentiated

        primal = args[pos[0]] if single else tuple(args[i] for i in pos)
        labels = _Labels(primal, None if single else pos, pos[0])
        if STATE.vmap_levels:
            labels.levels = _batched_levels((args, kwargs))
        tensor_out = _any_tensor(args)
        return core(fun, primal, labels, tensor_out, who, **kw)

    transformed.__name__ = f"{who}({getattr(f, '__name__', 'f')})"
    transformed.__doc__ = f"{who} of {getattr(f, '__name__', 'f')} (see chainrule.{who})."
    return transformed


def _positions(argnums: int | Sequence[int], args: tuple | None, who: str) -> list[int]:
    """Check ``argnums`` (against ``args`` if given) and return the argument positions."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(i, int) for i in nums):
        raise TypeError(f"{who}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    if args is None:
        return list(nums)
    if any(not -len(args) <= i < len(args) for i in nums):
        raise TypeError(f"{who}: argnums={argnums!r} but the function was called with "
                        f"{len(args)} positional argument(s)")
    return [i % len(args) for i in nums]


class _Labels:
    """Names of a tree's leaves for messages (``argument 1['w']``, ``output[0]``), made on demand.

    ``nums`` maps the first key to an argument number; ``num`` names a single argument; with
    neither, the leaves are outputs.
    """

    def __init__(self, value: Any, nums: Sequence[int] | None = None, num: int | None = None) -> None:
        self.value, self.nums, self.num = value, nums, num
        self.levels: set = set()        # inside vmap: the levels some argument is batched at

    def __getitem__(self, k: int) -> str:
        path = tree.paths(tree.flatten(self.value)[1])[k]
        if self.nums is not None:
            head, path = f"argument {self.nums[path[0]]}", path[1:]
        else:
            head = "output" if self.num is None else f"argument {self.num}"
        return head + "".join(f"[{key!r}]" for key in path)


def _batched_levels(value: Any) -> set:
    return {j for x in tree.flatten(value)[0] for j in levels_of(x)}


def _any_tensor(value: Any) -> bool:
    return any(isinstance(x, Tensor) for x in tree.flatten(value)[0])


def _inputs(leaves: list, who: str, labels: _Labels) -> list[Tensor]:
    return [_input(x, who, labels, k) for k, x in enumerate(leaves)]


def _input(x: Any, who: str, labels: _Labels, k: int) -> Tensor:
    """A floating Tensor for a differentiated leaf (Python floats become float64)."""
    t = x if isinstance(x, Tensor) else None
    data = x.data if t is not None else np.asarray(x)
    if not _dtypes.is_floating(data.dtype):
        raise DTypeError(f"{who}: {labels[k]} has dtype {data.dtype} (shape {data.shape}); only floating "
                         f"inputs can be differentiated. Pass float data (e.g. "
                         f"np.asarray(x, dtype=np.float64)) or leave it out of argnums")
    return t if t is not None else Tensor(data)


def _direction(v: Any, like: Tensor, who: str, labels: _Labels, k: int, kind: str) -> Any:
    """Check a tangent or cotangent against its primal: same shape, same floating dtype."""
    if isinstance(v, (Tensor, np.ndarray, np.generic)):
        if v.dtype != like.dtype:
            raise DTypeError(f"{who}: the {kind} for {labels[k]} has dtype {v.dtype} but the primal is "
                             f"{like.dtype}; cast it with .astype({like.dtype})")
    else:
        v = np.asarray(v, dtype=like.dtype)
    if tuple(v.shape) != like.shape:
        raise ShapeError(f"{who}: the {kind} for {labels[k]} has shape {tuple(v.shape)} but the primal "
                         f"has shape {like.shape}; they must match")
    return v


def _directions(vs: Any, structure: Any, likes: list, labels: _Labels, who: str, kind: str) -> list:
    leaves, got = tree.flatten(vs)
    if got != structure:
        raise ShapeError(f"{who}: the {kind}s must have the same structure as the "
                         f"{'primals' if kind == 'tangent' else 'outputs'} (tuples, lists, dicts "
                         f"with the same keys and lengths); got {len(leaves)} leaves for "
                         f"{len(likes)}")
    return [_direction(v, x, who, labels, k, kind) for k, (v, x) in enumerate(zip(leaves, likes))]


def _live_tangents(t: Tensor) -> bool:
    return bool(t._tangents) and any(level in STATE.fw_levels for level in t._tangents)


def _needs_graph(t: Any) -> bool:
    """Does ``t`` or one of its tangents require grad?"""
    return isinstance(t, Tensor) and (t.requires_grad or any(map(_needs_graph, (t._tangents or {}).values())))


def _cut(t: Any) -> Any:
    """``t`` detached, with its tangents (detached likewise) kept."""
    if not isinstance(t, Tensor) or not _needs_graph(t):
        return t
    tangents, t = t._tangents, t.detach()
    t._tangents = tangents and {level: _cut(v) for level, v in tangents.items()}
    return t


def _export(value: Any, tensor_out: bool, keep_graph: bool) -> Any:
    """A result for the caller: detached unless an outer graph needs it; NumPy if NumPy came in."""
    if isinstance(value, Tensor):
        if value.requires_grad and not keep_graph:
            tangents, value = value._tangents, value.detach()
            value._tangents = tangents
        if tensor_out or value.requires_grad or value._level or _live_tangents(value):
            return value            # (a vmap-batched result stays a tensor: vmap unwraps it)
        return value.data
    if isinstance(value, (np.ndarray, np.generic, float, int)):
        arr = np.asarray(value)
        return Tensor(arr) if tensor_out else arr
    return value


def _export_tree(value: Any, tensor_out: bool, keep_graph: bool) -> Any:
    return tree.tree_map(lambda x: _export(x, tensor_out, keep_graph), value)


def _split_aux(res: Any, has_aux: bool, who: str) -> tuple[Any, Any]:
    if not has_aux:
        return res, None
    if not (isinstance(res, (tuple, list)) and len(res) == 2):
        raise TypeError(f"{who}: has_aux=True needs f to return a pair (output, aux), got "
                        f"{type(res).__name__}")
    return res[0], res[1]


def _outputs(out: Any, who: str) -> tuple[list, Any]:
    leaves, structure = tree.flatten(out)
    result = []
    for k, o in enumerate(leaves):
        data = o.data if isinstance(o, Tensor) else np.asarray(o)
        if not _dtypes.is_floating(data.dtype):
            raise DTypeError(f"{who}: {_Labels(out)[k]} has dtype {data.dtype} (shape {data.shape}); f must "
                             f"return floating arrays or Tensors to be differentiated")
        result.append(o if isinstance(o, Tensor) else data)
    return result, structure


class _Complex:
    """Which complex inputs and outputs a transform accepts (the checks; the caller conjugates).

    Without holomorphic: ``grad`` (``jacobian=False``) takes complex inputs of a real output, with
    PyTorch's gradient dL/dx + i dL/dy; a complex output, and for the Jacobian transforms a complex
    input too, is an error (a complex derivative exists only for holomorphic f). With it: every
    input and output must be complex (JAX's rule).
    """

    def __init__(self, who: str, holomorphic: bool, jacobian: bool) -> None:
        self.who, self.holomorphic, self.jacobian = who, bool(holomorphic), jacobian

    def inputs(self, xs: list, labels: _Labels) -> None:
        who = self.who
        for k, x in enumerate(xs):
            is_c = x.dtype.kind == "c"
            if self.holomorphic and not is_c:
                raise DTypeError(f"{who}: holomorphic=True requires complex inputs, but {labels[k]} is "
                                 f"{x.dtype} (shape {x.shape}); pass complex data (e.g. "
                                 f"x.astype(np.complex128)) or drop holomorphic=True")
            if is_c and self.jacobian and not self.holomorphic:
                raise DTypeError(f"{who}: {labels[k]} is complex ({x.dtype}, shape {x.shape}); a complex "
                                 f"derivative exists only for holomorphic f: pass holomorphic=True to "
                                 f"get f'(z), or split z into real and imaginary parts (two real "
                                 f"arguments x, y with z = x + 1j * y) for the real Jacobian")

    def outputs(self, outs: list, out_tree: Any) -> bool:
        """Check the outputs; True when they pass."""
        who, names = self.who, _Labels(tree.unflatten(out_tree, outs))
        for k, o in enumerate(outs):
            is_c = o.dtype.kind == "c"
            if self.holomorphic and not is_c:
                raise DTypeError(f"{who}: holomorphic=True requires complex outputs, but {names[k]} is "
                                 f"{o.dtype}; return a complex value or drop holomorphic=True")
            if is_c and not self.holomorphic:
                split = ("differentiate a real function of it (out.real, out.imag, abs(out) ** 2)"
                         if not self.jacobian else
                         "split it into real and imaginary parts (return out.real and out.imag)")
                raise DTypeError(f"{who}: {names[k]} is complex ({o.dtype}); a complex derivative "
                                 f"exists only for holomorphic f: pass holomorphic=True to get "
                                 f"f'(z), or {split}")
        return True


def _conj(g: Any) -> Any:
    """conj(g), differentiable for Tensors (a holomorphic VJP of e_i is conj of a row of f'(z))."""
    return _ops.conj(g) if isinstance(g, Tensor) else np.conj(g)


def _zeros(x: Any) -> np.ndarray:
    z = np.zeros(x.shape, dtype=x.dtype)
    if STATE.recorder is not None:          # a capture (cr.compile): a replay makes it too
        STATE.recorder.on_kernel(np.zeros, (), {"shape": z.shape, "dtype": z.dtype}, z)
    return z


# ----- reverse mode core -----

class _Pullback:
    """One recorded run of ``fun``; ``pull`` maps output cotangents to input cotangents, repeatably."""

    def __init__(self, fun: Fn, primal: Any, labels: _Labels, has_aux: bool, who: str,
                 rule: _Complex | None = None) -> None:
        leaves, self.in_tree = tree.flatten(primal)
        self.xs = _inputs(leaves, who, labels)
        self.who = who
        if rule is not None:
            rule.inputs(self.xs, labels)
        outer = STATE.grad_enabled
        levels = labels.levels | _batched_levels(self.xs) if STATE.vmap_levels else set()
        self.inputs = [_reverse_input(x, levels) for x in self.xs]
        with enable_grad():
            res = fun(tree.unflatten(self.in_tree, self.inputs))
        if STATE.vmap_levels and _batched_levels(res) - levels:
            # the output is batched where no argument is (a closure over a batched value): record
            # again with the inputs copied per example there, so each example gets its own gradient
            levels |= _batched_levels(res)
            self.inputs = [_reverse_input(x, levels) for x in self.xs]
            with enable_grad():
                res = fun(tree.unflatten(self.in_tree, self.inputs))
        out, self.aux = _split_aux(res, has_aux, who)
        self.outs, self.out_tree = _outputs(out, who)
        if rule is not None:
            rule.outputs(self.outs, self.out_tree)
        self.connected = outer and (any(x.requires_grad for x in self.xs) or self._reaches_outside())

    def _reaches_outside(self) -> bool:
        """Does the outputs' graph reach a leaf that requires grad other than our inputs? (A leaf
        nobody holds any more, an inner solver's scratch leaf, takes no gradient: it does not count.)"""
        inputs = {physical(x)._edge()[0] for x in self.inputs}
        outs = [physical(o)._edge()[0] for o in self.outs if isinstance(o, Tensor) and o.requires_grad]
        return any(node.is_accumulator and node.variable() is not None for node in walk(outs, stop=inputs))

    def pull(self, cots: list) -> list:
        """Cotangents of the inputs (a list) for ``cots`` (one per output; None for zero)."""
        active = [(o, c) for o, c in zip(self.outs, cots)
                  if c is not None and isinstance(o, Tensor) and o.requires_grad]
        grads: Sequence[Any] = [None] * len(self.inputs)
        if active:
            inputs = self.inputs
            if STATE.vmap_levels:           # inside vmap: the graph is on the physical arrays
                active = [(physical(o), lower(c, levels_of(o))) for o, c in active]
                inputs = [physical(x) for x in inputs]
            create = self.connected or any(isinstance(c, Tensor) and
                                           (c.requires_grad or _live_tangents(c)) for _, c in active)
            grads = engine.grad([o for o, _ in active], inputs, [c for _, c in active],
                                retain_graph=True, create_graph=create, allow_unused=True)
            if create and not self.connected and not any(_needs_graph(c) for _, c in active):
                # recorded only so that the cotangents' tangents flow: the graph ends at our own leaves
                grads = [_cut(g) for g in grads]
            if STATE.vmap_levels:
                grads = [lift_result(g, levels_of(x)) for g, x in zip(grads, self.inputs)]
        return [g if g is not None else _zeros(x) for g, x in zip(grads, self.xs)]

    def cotangents(self, value: Any) -> list:
        """Validate a user's cotangent pytree against the outputs."""
        likes = [o if isinstance(o, Tensor) else Tensor(o) for o in self.outs]
        names = _Labels(tree.unflatten(self.out_tree, likes))
        return _directions(value, self.out_tree, likes, names, self.who, "cotangent")


def _reverse_input(x: Tensor, levels: set) -> Tensor:
    """The inner input: an alias (stays connected) or a fresh leaf carrying x's forward tangents.
    Inside vmap the leaf is the physical array, batched at ``levels`` (an input shared by the
    examples is copied per example, so that each example gets its own gradient)."""
    if STATE.vmap_levels:
        x = with_levels(x, levels)
        inner = physical(x)
        return rewrap(_leaf_input(inner if isinstance(inner, Tensor) else Tensor(inner)), levels_of(x))
    return _leaf_input(x)


def _leaf_input(x: Tensor) -> Tensor:
    if x.requires_grad:
        with enable_grad():
            return _alias(x)
    leaf = Tensor(x.data, requires_grad=True)
    leaf._tangents = x._tangents
    return leaf


# ----- forward mode core -----

def _push(fun: Fn, in_tree: Any, xs: list, ts: list, has_aux: bool, who: str) -> tuple:
    """Run ``fun`` once in a fresh dual level: (out leaves, out tree, tangent-out leaves, aux).

    A tangent of None means "no perturbation" for that input.
    """
    with dual_level() as level:
        duals = [x if t is None else _dual(x, t, level) for x, t in zip(xs, ts)]
        res = fun(tree.unflatten(in_tree, duals))
        out, aux = _split_aux(res, has_aux, who)
        outs, out_tree = _outputs(out, who)
        primals, touts = [], []
        for o in outs:
            p, t = _unpack(o, level) if isinstance(o, Tensor) else (o, None)
            primals.append(p)
            touts.append(t if t is not None else _zeros(o))
    return primals, out_tree, touts, aux


def _dual(x: Any, t: Any, level: int) -> Any:
    """make_dual; inside vmap on the physical array of ``x``, with ``t`` moved there."""
    levels = levels_of(x)
    if not levels:
        return make_dual(x, t, level)
    inner = physical(x)
    return rewrap(make_dual(inner if isinstance(inner, Tensor) else Tensor(inner), lower(t, levels), level), levels)


def _unpack(o: Tensor, level: int) -> tuple:
    levels = levels_of(o)
    if not levels:
        return unpack_dual(o, level)
    p, t = unpack_dual(physical(o), level)
    return rewrap(p, levels), lift_result(t, levels)


# ----- the transforms -----

def vjp(f: Fn, *primals: Any, has_aux: bool = False) -> tuple:
    """Return ``(f(*primals), vjp_fn)``; ``vjp_fn(v)`` gives vᵀJ, one cotangent per primal.

    With ``has_aux=True``, ``f`` returns ``(out, aux)`` and vjp returns ``(out, vjp_fn, aux)``.
    Complex primals follow PyTorch's convention: ``vjp_fn(v)`` is ``J^H v`` (conj(f'(z)) v for
    holomorphic f); for a real output it is dL/dx + i dL/dy.

    >>> import chainrule as cr, numpy as np
    >>> out, vjp_fn = cr.vjp(lambda x, y: x * y, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> vjp_fn(np.array([1.0, 10.0]))
    (array([ 3., 40.]), array([ 1., 20.]))
    >>> cr.vjp(lambda z: z ** 2, np.array(1 + 2j))[1](np.array(1 + 0j))     # conj(2z)
    (array(2.-4.j),)
    """
    who = "vjp"
    labels = _Labels(primals, range(len(primals)))
    pb = _Pullback(lambda p: f(*p), primals, labels, has_aux, who)
    tensor_out = _any_tensor(primals)

    def vjp_fn(cotangent: Any) -> tuple:
        gs = pb.pull(pb.cotangents(cotangent))
        return tree.unflatten(pb.in_tree, [_export(g, tensor_out, pb.connected) for g in gs])

    out = tree.unflatten(pb.out_tree, [_export(o, tensor_out, pb.connected) for o in pb.outs])
    if has_aux:
        return out, vjp_fn, _export_tree(pb.aux, tensor_out, pb.connected)
    return out, vjp_fn


def jvp(f: Fn, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple:
    """Return ``(f(*primals), J @ tangents)`` in one forward pass (true forward mode).

    ``primals`` and ``tangents`` are tuples (or lists) of the same structure; a tangent must have
    its primal's shape and dtype (Python numbers take the primal's dtype). With ``has_aux=True``
    the result is ``(out, tangent_out, aux)``. Complex tangents are pushed as ``J t``: a tangent
    of 1 gives f'(z) for holomorphic f.

    >>> import chainrule as cr, numpy as np
    >>> cr.jvp(lambda x: x ** 3, (np.array(2.0),), (np.array(1.0),))
    (array(8.), array(12.))
    >>> cr.jvp(lambda z: z ** 2, (np.array(1 + 2j),), (np.array(1 + 0j),))[1]   # 2z
    array(2.+4.j)
    """
    who = "jvp"
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"{who}: primals and tangents must be tuples (or lists), e.g. "
                        f"cr.jvp(f, (x,), (v,)); got {type(primals).__name__} and "
                        f"{type(tangents).__name__}")
    primals = tuple(primals)
    leaves, in_tree = tree.flatten(primals)
    labels = _Labels(primals, range(len(primals)))
    xs = _inputs(leaves, who, labels)
    ts = _directions(tuple(tangents), in_tree, xs, labels, who, "tangent")
    outs, out_tree, touts, aux = _push(lambda p: f(*p), in_tree, xs, ts, has_aux, who)
    tensor_out = _any_tensor((primals, tangents))
    out = tree.unflatten(out_tree, [_export(o, tensor_out, True) for o in outs])
    tout = tree.unflatten(out_tree, [_export(t, tensor_out, True) for t in touts])
    return (out, tout, _export_tree(aux, tensor_out, True)) if has_aux else (out, tout)


def value_and_grad(f: Fn, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Fn:
    """Return a function computing ``(f(*args), grad)``; ``((value, aux), grad)`` with has_aux.

    Complex inputs and ``holomorphic`` as in ``cr.grad``.

    >>> import chainrule as cr
    >>> cr.value_and_grad(lambda x: x ** 2)(3.0)
    (array(9.), array(6.))
    """
    return _nary(_value_and_grad, f, argnums, "value_and_grad", has_aux=has_aux,
                 holomorphic=holomorphic)


def _value_and_grad(fun: Fn, primal: Any, labels: _Labels, tensor_out: bool, who: str,
                    has_aux: bool, holomorphic: bool) -> tuple:
    pb = _Pullback(fun, primal, labels, has_aux, who, _Complex(who, holomorphic, jacobian=False))
    if pb.out_tree is not tree.LEAF or pb.outs[0].size != 1:
        got = (f"shape {tuple(pb.outs[0].shape)}" if pb.out_tree is tree.LEAF
               else f"{len(pb.outs)} outputs in a {pb.out_tree[0].__name__}")
        raise ShapeError(f"{who}: f must return a scalar, but it returned {got}. For a non-scalar "
                         f"function use cr.jacobian (the full Jacobian) or cr.vjp (a vector-Jacobian "
                         f"product); with has_aux=True f returns (scalar, aux)")
    out = pb.outs[0]
    seed = np.ones(out.shape, dtype=out.dtype)
    if STATE.recorder is not None:
        STATE.recorder.on_seed(seed)
    gs = pb.pull([seed])
    if holomorphic:                         # the VJP of 1 is conj(f'(z))
        gs = [_conj(g) for g in gs]
    grads = tree.unflatten(pb.in_tree, [_export(g, tensor_out, pb.connected) for g in gs])
    value = _export(out, tensor_out, pb.connected)
    if has_aux:
        value = (value, _export_tree(pb.aux, tensor_out, pb.connected))
    return value, grads


def grad(f: Fn, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Fn:
    """Return a function computing the gradient of scalar ``f`` with respect to ``args[argnums]``.

    A tuple ``argnums`` gives a tuple of gradients; ``has_aux=True`` gives ``(grad, aux)``.
    For a real ``f`` of complex ``z = x + iy`` the gradient is dL/dx + i dL/dy (PyTorch's
    ``z.grad``; JAX returns its conjugate). A complex output needs ``holomorphic=True``, which
    gives f'(z) (inputs and output must then be complex).

    >>> import chainrule as cr, numpy as np
    >>> cr.grad(lambda x, y: x * y ** 2, argnums=(0, 1))(3.0, 2.0)
    (array(4.), array(12.))
    >>> cr.grad(lambda z: cr.abs(z) ** 2)(np.array(3 + 4j))
    array(6.+8.j)
    >>> cr.grad(lambda z: z ** 3, holomorphic=True)(np.array(1j))
    array(-3.+0.j)
    """
    value_grad = _nary(_value_and_grad, f, argnums, "grad", has_aux=has_aux, holomorphic=holomorphic)

    def gradient(*args: Any, **kwargs: Any) -> Any:
        value, g = value_grad(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    gradient.__name__ = value_grad.__name__
    return gradient


def jacrev(f: Fn, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, *, chunk_size: int | None = None) -> Fn:
    """Jacobian by reverse mode: ``vmap`` of the VJP over the output basis, one batched backward
    pass over one recorded graph (``chunk_size`` rows at a time, if given, to bound memory).

    The result has shape ``out.shape + in.shape`` (an output tree of input trees for pytrees).
    Complex inputs or outputs need ``holomorphic=True`` (all complex; rows are conj(J^H e_i)),
    which gives f'(z), exactly as ``cr.jacfwd`` does.

    >>> import chainrule as cr, numpy as np
    >>> cr.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    return _nary(_jacrev, f, argnums, "jacrev", has_aux=has_aux, holomorphic=holomorphic,
                 chunk_size=chunk_size)


def _jacrev(fun: Fn, primal: Any, labels: _Labels, tensor_out: bool, who: str, has_aux: bool,
            holomorphic: bool, chunk_size: int | None = None) -> Any:
    pb = _Pullback(fun, primal, labels, has_aux, who, _Complex(who, holomorphic, jacobian=True))
    blocks = []
    for k, o in enumerate(pb.outs):
        def rows(basis: Any, k: int = k) -> list:
            cots: list = [None] * len(pb.outs)
            cots[k] = basis
            return [_conj(g) if holomorphic else g for g in pb.pull(cots)]
        if o.size == 0:
            blocks.append([np.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype) for x in pb.xs])
            continue
        parts = _over_basis(rows, o, chunk_size, who)       # per input: (o.size, *x.shape)
        blocks.append([_ops.reshape(p, tuple(o.shape) + tuple(x.shape)) for p, x in zip(parts, pb.xs)])
    jac = _jacobian_result(blocks, pb.out_tree, pb.in_tree, tensor_out, pb.connected)
    return (jac, _export_tree(pb.aux, tensor_out, pb.connected)) if has_aux else jac


def jacfwd(f: Fn, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, *, chunk_size: int | None = None) -> Fn:
    """Jacobian by forward mode: ``vmap`` of the JVP over the input basis, one batched forward pass
    per input (``chunk_size`` columns at a time, if given); nothing is saved.

    The result has shape ``out.shape + in.shape`` (an output tree of input trees for pytrees).
    Complex inputs or outputs need ``holomorphic=True`` (all complex; columns are J e_j), which
    gives f'(z).

    >>> import chainrule as cr, numpy as np
    >>> cr.jacfwd(lambda x: x[0] * x)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [2., 1.]])
    >>> cr.jacfwd(lambda z: z ** 2, holomorphic=True)(np.array([1j, 2.0]))
    array([[0.+2.j, 0.+0.j],
           [0.+0.j, 4.+0.j]])
    """
    return _nary(_jacfwd, f, argnums, "jacfwd", has_aux=has_aux, holomorphic=holomorphic,
                 chunk_size=chunk_size)


def _jacfwd(fun: Fn, primal: Any, labels: _Labels, tensor_out: bool, who: str, has_aux: bool,
            holomorphic: bool, chunk_size: int | None = None) -> Any:
    leaves, in_tree = tree.flatten(primal)
    xs = _inputs(leaves, who, labels)
    rule = _Complex(who, holomorphic, jacobian=True)
    rule.inputs(xs, labels)
    seen: dict = {}                     # the primal outputs (the same in every pass)
    cols = []                           # cols[j][k]: (x_j.size, *out_k.shape)
    for j, x in enumerate(xs):
        if x.size == 0:
            cols.append(None)
            continue

        def push(basis: Any, j: int = j) -> list:
            ts: list = [None] * len(xs)
            ts[j] = basis
            seen["outs"], seen["tree"], touts, seen["aux"] = _push(fun, in_tree, xs, ts, has_aux, who)
            return touts
        cols.append(_over_basis(push, x, chunk_size, who))
    if "outs" not in seen:              # no input elements at all: one plain call for the outputs
        seen["outs"], seen["tree"], _, seen["aux"] = _push(fun, in_tree, xs, [None] * len(xs), has_aux, who)
    outs, out_tree, aux = seen["outs"], seen["tree"], seen["aux"]
    rule.outputs(outs, out_tree)
    blocks = [[_column_block(None if c is None else c[k], o, x) for c, x in zip(cols, xs)]
              for k, o in enumerate(outs)]
    jac = _jacobian_result(blocks, out_tree, in_tree, tensor_out, True)
    return (jac, _export_tree(aux, tensor_out, True)) if has_aux else jac


def _column_block(col: Any, o: Any, x: Any) -> Any:
    shape = tuple(o.shape) + tuple(x.shape)
    if col is None:
        return np.zeros(shape, dtype=x.dtype)
    return _ops.reshape(_ops.moveaxis(col, 0, -1), shape)


def _over_basis(fn: Callable, like: Any, chunk_size: int | None, who: str) -> list:
    """``vmap(fn)`` over the standard basis of ``like``'s elements (one batched pass): a list of
    results, each with the basis index first. A function that cannot be batched (a custom
    Function's backward written in NumPy, say) runs once per basis vector, with a warning."""
    basis = np.eye(like.size, dtype=like.dtype).reshape((like.size,) + tuple(like.shape))
    try:
        return list(vmap(fn, chunk_size=chunk_size)(basis))
    except VmapError as e:
        warnings.warn(f"{who}: the function cannot be batched ({e}); computing the Jacobian one "
                      f"basis vector at a time instead (slower)", stacklevel=5)
    parts = [fn(b) for b in basis]
    return [_ops.stack([p[i] for p in parts]) for i in range(len(parts[0]))]


def _jacobian_result(blocks: list, out_tree: Any, in_tree: Any, tensor_out: bool, keep: bool) -> Any:
    """An output tree of input trees of blocks."""
    rows = [tree.unflatten(in_tree, [_export(b, tensor_out, keep) for b in row]) for row in blocks]
    return tree.unflatten(out_tree, rows)


class Jacobian:
    """The callable returned by ``cr.jacobian``; it says which mode it uses.

    ``mode_for(*args)`` returns ``"forward"`` or ``"reverse"`` for those arguments and
    ``last_mode`` is the mode of the latest call. In ``"auto"`` mode the rule is: forward when the
    differentiated inputs have fewer elements than the outputs (n < m), reverse otherwise. The
    output size m is learned from one evaluation of ``f`` under ``no_grad`` the first time an
    argument signature (shapes, dtypes) is seen, then cached.
    """

    def __init__(self, f: Fn, argnums: int | Sequence[int], mode: str, has_aux: bool,
                 holomorphic: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"jacobian: mode must be one of {MODES}, got {mode!r}")
        self.f, self.argnums, self.mode, self.has_aux = f, argnums, mode, has_aux
        self.holomorphic = holomorphic
        self.last_mode: str | None = None
        self._fwd = _nary(_jacfwd, f, argnums, "jacobian", has_aux=has_aux, holomorphic=holomorphic)
        self._rev = _nary(_jacrev, f, argnums, "jacobian", has_aux=has_aux, holomorphic=holomorphic)
        self._modes: dict = {}

    def mode_for(self, *args: Any, **kwargs: Any) -> str:
        """The mode a call with these arguments uses: ``"forward"`` if n < m else ``"reverse"``."""
        if self.mode != "auto":
            return self.mode
        key = _signature((args, kwargs) if kwargs else args)
        mode = self._modes.get(key) if key is not None else None
        if mode is not None:                # seen this signature: the sizes, hence the mode, are known
            return mode
        n = sum(np.size(x.data if isinstance(x, Tensor) else x)
                for i in _positions(self.argnums, args, "jacobian") for x in tree.flatten(args[i])[0])
        with no_grad():
            res = self.f(*args, **kwargs)
        out, _ = _split_aux(res, self.has_aux, "jacobian")
        m = sum(np.size(o.data if isinstance(o, Tensor) else o) for o in tree.flatten(out)[0])
        mode = "forward" if n < m else "reverse"
        if key is not None:
            self._modes[key] = mode
        return mode

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        mode = self.mode
        if mode == "auto":
            mode = self._modes.get(_signature(args)) if not kwargs else None   # (the cache, inlined)
            if mode is None:
                mode = self.mode_for(*args, **kwargs)
        self.last_mode = mode
        return self._fwd(*args, **kwargs) if mode == "forward" else self._rev(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<jacobian of {getattr(self.f, '__name__', 'f')}, mode={self.mode!r}>"


def _signature(args: Any) -> Any:
    """A hashable key of the arguments' shapes and dtypes (and other leaves' values); None if none."""
    if len(args) == 1 and isinstance(args[0], (Tensor, np.ndarray)):   # the commonest case, cheaply
        return args[0].shape, args[0].dtype
    if all(isinstance(x, (Tensor, np.ndarray)) for x in args):     # the common case, cheaply
        return tuple((x.shape, x.dtype) for x in args)
    leaves, structure = tree.flatten(args)
    key = []
    for x in leaves:
        if isinstance(x, (Tensor, np.ndarray, np.generic)):
            key.append((tuple(x.shape), str(x.dtype)))
        else:
            key.append((type(x).__name__, x))
    try:
        hash(tuple(key))
    except TypeError:
        return None
    return (structure, tuple(key))


def jacobian(f: Fn, argnums: int | Sequence[int] = 0, mode: str = "auto",
             has_aux: bool = False, holomorphic: bool = False) -> Jacobian:
    """Jacobian of ``f``, by forward mode when n_inputs < n_outputs and by reverse mode otherwise.

    ``mode="forward"`` / ``"reverse"`` forces a mode. The returned object tells its choice.
    Complex inputs or outputs need ``holomorphic=True`` (f'(z); both modes agree exactly).

    >>> import chainrule as cr, numpy as np
    >>> J = cr.jacobian(lambda x: cr.tanh(x).sum())
    >>> J(np.zeros(3)), J.last_mode
    (array([1., 1., 1.]), 'reverse')
    >>> J.mode_for(np.zeros(1)) == cr.jacobian(lambda x: x * np.ones(4)).mode_for(np.zeros(1))
    False
    """
    return Jacobian(f, argnums, mode, has_aux, holomorphic)


def hessian(f: Fn, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Fn:
    """Hessian of scalar ``f`` as ``jacfwd(jacrev(f))`` (forward-over-reverse, as in JAX).

    ``holomorphic=True`` gives f''(z) for holomorphic ``f`` of complex inputs. For the Hessian of a
    real ``f`` of complex ``z``, split z into real and imaginary parts (or use ``cr.hvp``).

    >>> import chainrule as cr, numpy as np
    >>> cr.hessian(lambda x: (x ** 3).sum())(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    >>> cr.hessian(lambda z: z ** 4, holomorphic=True)(np.array(1j))     # 12 z^2
    array(-12.+0.j)
    """
    inner = _nary(_jacrev, f, argnums, "hessian", has_aux=False, holomorphic=holomorphic)
    outer = _nary(_jacfwd, inner, argnums, "hessian", has_aux=False, holomorphic=holomorphic)
    outer.__name__ = f"hessian({getattr(f, '__name__', 'f')})"
    outer.__doc__ = f"hessian of {getattr(f, '__name__', 'f')} (see chainrule.hessian)."
    return outer


def hvp(f: Fn, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple:
    """Hessian-vector product H·v of scalar ``f`` as the JVP of its gradient (forward-over-reverse).

    Costs a small multiple of one gradient, never forms H. Returns a tuple, one entry per primal.
    For a real ``f`` of complex primals, H acts on (Re v, Im v) and the result is packed as
    ``(H v)_x + i (H v)_y``, the convention of ``cr.grad``.

    >>> import chainrule as cr, numpy as np
    >>> cr.hvp(lambda x: (x ** 3).sum(), (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),))
    (array([ 6., 12.]),)
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"hvp: primals and tangents must be tuples, e.g. cr.hvp(f, (x,), (v,)); got "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    gradient = grad(f, argnums=tuple(range(len(primals))))
    return jvp(gradient, tuple(primals), tuple(tangents))[1]

