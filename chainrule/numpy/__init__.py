"""The NumPy-named op surface (``cr.exp``, ``cr.matmul``, ...) and NumPy dispatch for Tensors."""
from __future__ import annotations

import builtins
import inspect
from typing import Any, Callable

from chainrule.core._backend import np

# the extension API's old home (its home is chainrule.extend): kept importable
from chainrule.core._registry import (  # noqa: F401
    PRIMITIVES,
    Primitive,
    apply,
    constant_arg,
    defprim,
    linear_jvps,
    no_out,
    raw,
    unary,
)
from chainrule.core._registry import complex_error as complex_error  # (for forward mode)
from chainrule.core.errors import UnsupportedArgument, VmapError
from chainrule.core.grad_mode import STATE, no_grad
from chainrule.core.tensor import Tensor, graph_role
from chainrule.numpy import (
    _methods,
    creation_more,
    fft,
    functional,
    indexing,
    linalg,
    linalg_more,
    manipulation,
    math_more,
    order_statistics,
    setops,
    sorting,
)
from chainrule.numpy import (
    math as numpy_math,
)
from chainrule.numpy import (
    statistics as numpy_stats,
)
from chainrule.numpy._methods import _commit, _operand, _write_batched
from chainrule.numpy._methods import after_write as after_write  # (these three: for cr.Function.mark_dirty)
from chainrule.numpy._methods import check_in_place as check_in_place
from chainrule.numpy._methods import fresh as fresh
from chainrule.numpy.creation_more import *  # noqa: F403  (each chapter's __all__, NumPy's names)
from chainrule.numpy.functional import *  # noqa: F403
from chainrule.numpy.indexing import *  # noqa: F403
from chainrule.numpy.manipulation import *  # noqa: F403
from chainrule.numpy.math import *  # noqa: F403
from chainrule.numpy.math_more import *  # noqa: F403
from chainrule.numpy.order_statistics import *  # noqa: F403
from chainrule.numpy.setops import *  # noqa: F403
from chainrule.numpy.sorting import *  # noqa: F403
from chainrule.numpy.spectral_functions import norm
from chainrule.numpy.statistics import *  # noqa: F403
from chainrule.ops import special
from chainrule.ops.elementwise import (
    abs,
    absolute,
    add,
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    as_tensor,
    astype,
    cbrt,
    ceil,
    clip,
    conj,
    conjugate,
    copy,
    cos,
    cosh,
    divide,
    divmod,
    equal,
    erf,
    exp,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmax,
    fmin,
    gelu,
    greater,
    greater_equal,
    hypot,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    nonzero,
    not_equal,
    ones_like,
    pow,
    power,
    reciprocal,
    relu,
    remainder,
    round,
    sigmoid,
    sign,
    sin,
    sinh,
    softplus,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
    zeros_like,
)
from chainrule.ops.elementwise import alias as alias
from chainrule.ops.elementwise import tanh_backward as tanh_backward
from chainrule.ops.linalg import (
    cholesky,
    det,
    dot,
    einsum,
    inner,
    inv,
    matmul,
    outer,
    slogdet,
    solve,
    tensordot,
    vdot,
)
from chainrule.ops.linalg import linear as linear
from chainrule.ops.nn import log_softmax, softmax
from chainrule.ops.nn import softmax_cross_entropy as softmax_cross_entropy
from chainrule.ops.reduction import (
    amax,
    amin,
    argmax,
    argmin,
    argsort,
    average,
    cumprod,
    cumsum,
    logsumexp,
    max,
    mean,
    min,
    pad,
    prod,
    sort,
    std,
    sum,
    trace,
    var,
)
from chainrule.ops.shape import (
    _normalize_index,
    array_split,
    atleast_1d,
    atleast_2d,
    broadcast_to,
    concatenate,
    diagonal,
    diagonal_scatter,
    expand_dims,
    flatten,
    flip,
    hstack,
    imag,
    moveaxis,
    permute_dims,
    ravel,
    real,
    repeat,
    reshape,
    roll,
    split,
    squeeze,
    stack,
    swapaxes,
    take,
    take_along_axis,
    tile,
    transpose,
    tril,
    triu,
    unbind,
    view_as_complex,
    view_as_real,
    vstack,
)
from chainrule.ops.shape import getitem as getitem
from chainrule.ops.shape import index_put as index_put
from chainrule.ops.shape import scatter_add as scatter_add


def _running_extreme(x: Any, axis: int, larger: bool) -> Any:
    """``np.maximum.accumulate`` (``larger``) or ``np.minimum.accumulate`` along ``axis``: ``x`` gathered
    at the position where the running extreme was reached, so the gradient flows there alone. As
    torch.cummax/cummin, a tie or a NaN moves that position to the later element. The positions
    come from a scan of log2(n) elementwise steps (so it batches inside cr.vmap)."""
    x = moveaxis(x, axis, -1)
    shape = x.shape
    n = shape[-1] if shape else 1
    position: Any = np.broadcast_to(np.arange(n), shape)
    with no_grad():
        best, step = x, 1
        while step < n:                # each element combined with the one `step` before (Hillis-Steele)
            before, here = best[..., :-step], best[..., step:]
            beats = before > here if larger else before < here
            keep = logical_and(logical_not(isnan(here)), logical_or(isnan(before), beats))
            best = concatenate([best[..., :step], where(keep, before, here)], axis=-1)
            position = concatenate([position[..., :step], where(keep, position[..., :-step],
                                                                position[..., step:])], axis=-1)
            step *= 2
    return moveaxis(take_along_axis(x, position, -1), -1, axis)


# the ufuncs whose reduce/accumulate/reduceat methods have chainrule versions
_REDUCERS = {np.add: (sum, cumsum), np.multiply: (prod, cumprod),
             np.maximum: (amax, lambda x, axis: _running_extreme(x, axis, True)),
             np.minimum: (amin, lambda x, axis: _running_extreme(x, axis, False))}


# NumPy's chapters: each lists its functions in __all__ and their NumPy namesakes in NUMPY (dispatch)
CHAPTERS = (numpy_math, math_more, manipulation, indexing, functional, sorting, setops, creation_more,
            order_statistics, numpy_stats)


# ----- which NumPy functions are math: one table, consulted by _fallback and by tools/coverage.py -----
# (b) not differentiable by nature: integer, boolean or index results, and results that do not depend
# on the input's values; (c) not array math: creation from sizes, I/O, printing, dtype and memory
# queries, configuration. Everything else in NumPy's namespace is (a), differentiable math. On
# Tensors, a (b) or (c) function without a chainrule version runs NumPy on the data and returns
# NumPy's (plain) result; an (a) function without one refuses an input that requires grad.
NOT_DIFFERENTIABLE = frozenset("""
    all any allclose array_equal array_equiv argmax argmin argpartition argsort argwhere bitwise_and
    bitwise_count bitwise_invert bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor
    invert left_shift right_shift count_nonzero diag_indices diag_indices_from tril_indices
    tril_indices_from triu_indices triu_indices_from mask_indices digitize equal not_equal greater
    greater_equal less less_equal flatnonzero nonzero gcd lcm histogram histogram2d histogramdd
    histogram_bin_edges isclose iscomplex isreal isfinite isinf isnan isneginf isposinf isin lexsort
    logical_and logical_not logical_or logical_xor nanargmax nanargmin packbits unpackbits
    ravel_multi_index unravel_index searchsorted signbit ix_ empty_like zeros_like ones_like full_like
""".split())
NOT_MATH = frozenset("""
    array asarray asanyarray ascontiguousarray asfortranarray asarray_chkfinite asmatrix bmat require
    empty zeros ones full identity eye tri indices arange fromfunction frombuffer fromfile fromiter
    fromregex fromstring from_dlpack genfromtxt loadtxt load save savetxt savez savez_compressed
    array2string array_repr array_str base_repr binary_repr format_float_positional
    format_float_scientific get_include get_printoptions set_printoptions printoptions getbufsize
    setbufsize geterr seterr geterrcall seterrcall info show_config show_runtime test typename
    mintypecode min_scalar_type common_type result_type can_cast promote_types isdtype issubdtype
    iscomplexobj isrealobj isscalar isfortran iterable ndim shape size may_share_memory shares_memory
    datetime_as_string datetime_data busday_count busday_offset is_busday isnat nested_iters frompyfunc
    broadcast_shapes einsum_path hamming hanning bartlett blackman kaiser
""".split())


def numpy_class(func: Any) -> str:
    """'a' (differentiable math), 'b' (not differentiable by nature) or 'c' (not array math) for a
    function or ufunc of NumPy's main namespace (or its name); anything else is 'a'."""
    name = func if isinstance(func, str) else getattr(func, "__name__", "")
    if not isinstance(func, str) and getattr(np, name, None) is not func:
        return "a"                                  # np.linalg, np.fft, scipy.special: math
    return "b" if name in NOT_DIFFERENTIABLE else "c" if name in NOT_MATH else "a"


def _some_tensor(value: Any, test: Callable[[Tensor], bool]) -> bool:
    """Does ``test`` hold for ``value``, a tensor, or for a tensor inside its lists, tuples and dicts?"""
    if isinstance(value, Tensor):
        return test(value)
    if isinstance(value, (list, tuple)):
        return builtins.any(_some_tensor(v, test) for v in value)
    if isinstance(value, dict):
        return builtins.any(_some_tensor(v, test) for v in value.values())
    return False


def _requires_grad(value: Any) -> bool:
    """Is ``value`` (or a tensor in it) part of a graph: requires grad or carries a live tangent?"""
    return _some_tensor(value, lambda t: t.requires_grad or t._tangents is not None and bool(graph_role(t)))


def _data(value: Any) -> Any:
    """Tensors (also inside lists, tuples and dicts) replaced by their ndarrays."""
    if isinstance(value, Tensor):
        return value.data
    if isinstance(value, (list, tuple)):
        return type(value)(_data(v) for v in value)
    if isinstance(value, dict):
        return {k: _data(v) for k, v in value.items()}
    return value


def _fallback(name: str, cls: str, call: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """No chainrule version: NumPy on the data. An input in a graph (it requires grad while grad
    mode is on, is dual or is batched by cr.vmap) is never cut off silently: refused, by name, by
    math (class 'a'), wherever NumPy's result holds floats (histogram2d's weights, ...) and where
    NumPy reads a batched tensor's values; (b) and (c) functions take it where their results are
    integers, booleans or not arrays (no derivative: np.argwhere, np.result_type)."""
    kwargs = kwargs or {}
    if not (_in_graph(args) or _in_graph(kwargs)):
        return call(*_data(args), **_data(kwargs))
    graph = _graph_arguments(call, args, kwargs) or _graph_arguments(None, args, kwargs)   # (by position)
    arg, t = next(((a, v) for a, v in graph if not v._level), graph[0])
    if cls == "a" and not t._level:
        raise UnsupportedArgument(f"{name} has no differentiable chainrule version and its argument {arg} "
                                  f"{graph_role(t)}; use the cr.* op, or call it on .detach().numpy() if you "
                                  f"do not need its gradient")
    try:
        result = call(*_data(args), **_data(kwargs))
    except VmapError:                            # NumPy read the values of a batched tensor (not its dtype)
        arg, t = next(((a, v) for a, v in graph if v._level), (arg, t))
        constant_arg(t, name, arg)
        raise
    if name not in _VALUE_FREE and _floating(result):
        constant_arg(t, name, arg)
    return result


_VALUE_FREE = frozenset({"numpy.empty_like"})      # float results that do not read the input's values


def _in_graph(value: Any) -> bool:
    """Is ``value`` (or a tensor in it) part of a graph: requires grad (with grad mode on), carries a
    live forward-mode tangent, or is batched by cr.vmap?"""
    return _some_tensor(value, _tensor_in_graph)


def _tensor_in_graph(t: Tensor) -> bool:
    return bool(t._level or t._requires_grad and STATE.grad_enabled or t._tangents and
                builtins.any(level in STATE.fw_levels for level in t._tangents))


def _graph_arguments(call: Any, args: tuple, kwargs: dict) -> list:
    """``[(name, tensor)]`` of the tensors in a graph among the arguments: NumPy's parameter names,
    with an index or key inside a list, tuple or dict (``sample[1]``)."""
    try:
        sig = inspect.signature(call)
        bound = sig.bind(*args, **kwargs).arguments
        named = [kv for k, v in bound.items() for kv in
                 (v.items() if sig.parameters[k].kind is _KINDS.VAR_KEYWORD else [(k, v)])]
    except (TypeError, ValueError):             # a builtin without a signature, or arguments NumPy refuses
        named = [(f"argument {i}", v) for i, v in enumerate(args)] + list(kwargs.items())
    found: list = []
    stack = list(reversed(named))
    while stack:
        where, value = stack.pop()
        if isinstance(value, Tensor):
            if _in_graph(value):
                found.append((where, value))
        elif isinstance(value, (list, tuple, dict)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend(reversed([(f"{where}[{k!r}]", v) for k, v in items]))
    return found


def _floating(result: Any) -> bool:
    """Does ``result`` hold floating-point (or complex) arrays or numbers?"""
    if isinstance(result, (list, tuple)):
        return builtins.any(_floating(r) for r in result)
    return isinstance(result, (np.ndarray, np.generic)) and result.dtype.kind in "fc"


# ----- np.<function>(tensor): NumPy's arguments bound by name onto the chainrule function -----
_KINDS = inspect.Parameter
_ALIASES = {"min": "a_min", "max": "a_max", "correction": "ddof"}    # NumPy's newer names of old keywords
_PLANS: dict = {}


def _plan(func: Any, fn: Any) -> Any:
    """How NumPy's parameters of ``func`` reach ``fn``'s: ``(numpy signature, {numpy name: chainrule
    name or None}, chainrule signature)``; the name when equal, else NumPy's alias, else the
    parameter at the same position (NumPy's ``a`` is chainrule's ``x``). None: pass arguments through."""
    try:
        nsig, fsig = inspect.signature(func), inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    nps, fps = list(nsig.parameters.values()), list(fsig.parameters.values())
    names = set(nsig.parameters)
    target: dict = {}
    for i, p in enumerate(nps):
        if p.name in fsig.parameters:
            target[p.name] = p.name
        elif _ALIASES.get(p.name) in fsig.parameters:
            target[p.name] = _ALIASES[p.name]
        elif (i < len(fps) and fps[i].kind in (_KINDS.POSITIONAL_ONLY, _KINDS.POSITIONAL_OR_KEYWORD)
              and fps[i].name not in names and p.kind is not _KINDS.VAR_KEYWORD):
            target[p.name] = fps[i].name
        else:
            target[p.name] = None
    return nsig, target, fsig


def _is_default(value: Any, default: Any) -> bool:
    if value is default or value is np._NoValue:
        return True
    simple = (bool, int, float, str, type(None))
    return type(value) in simple and type(default) in simple and type(value) is type(default) and value == default


def _short(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"<{type(value).__name__} of shape {tuple(shape)}>" if shape is not None and len(shape) else repr(value)


def _refuse(func: Any, fn: Any, name: str, value: Any) -> None:
    where = f"{_numpy_name(func)} on a Tensor"
    if name == "out":
        no_out(where, value)
    raise UnsupportedArgument(f"{where}: the argument {name}={_short(value)} is not supported by chainrule's "
                              f"{getattr(fn, '__name__', fn)}; leave it at NumPy's default or call it on "
                              f".detach().numpy()")


def dispatch_function(func: Any, args: tuple, kwargs: dict) -> Any:
    """``np.sum(tensor)``, ``np.concatenate([...])``, ...: the chainrule op of the same name, with
    NumPy's arguments (positional or by name); one chainrule does not take is accepted at NumPy's
    default and refused, by name, otherwise."""
    fn = _FUNCTIONS.get(func)
    if fn is None:
        return _fallback(_numpy_name(func), numpy_class(func), func, args, kwargs)
    plan = _PLANS.get(func)
    if plan is None:
        plan = _PLANS[func] = _plan(func, fn) or ()
    if not plan:
        return fn(*args, **kwargs)
    nsig, target, fsig = plan
    fparams = fsig.parameters
    if builtins.any(p.kind is _KINDS.VAR_POSITIONAL for p in (*nsig.parameters.values(), *fparams.values())):
        return _call_variadic(func, fn, nsig, fsig, args, kwargs)
    bound = nsig.bind(*args, **kwargs)
    call: dict = {}
    dtype = None
    for name, value in bound.arguments.items():
        param = nsig.parameters[name]
        if param.kind is _KINDS.VAR_KEYWORD:
            for k, v in value.items():
                if k in fparams or builtins.any(p.kind is _KINDS.VAR_KEYWORD for p in fparams.values()):
                    call[k] = v
                elif v is not None and v is not np._NoValue:
                    _refuse(func, fn, k, v)
            continue
        if value is np._NoValue:
            continue
        if target[name] is not None:
            call[target[name]] = value
        elif name == "dtype" and value is not None:
            dtype = value                             # cast the input: NumPy computes in that dtype
        elif not _is_default(value, param.default):
            _refuse(func, fn, name, value)
    first = next(iter(fparams))
    if dtype is not None and first in call:
        call[first] = astype(call[first], dtype)
    positional = [call.pop(n) for n, p in fparams.items() if p.kind is _KINDS.POSITIONAL_ONLY and n in call]
    return fn(*positional, **call)


def _call_variadic(func: Any, fn: Any, nsig: Any, fsig: Any, args: tuple, kwargs: dict) -> Any:
    """NumPy functions of ``*arrays`` (einsum, atleast_1d, ...): positional arguments pass through;
    keywords by name as in dispatch_function. One array each for a chainrule function of one."""
    call = {}
    takes_any = builtins.any(p.kind is _KINDS.VAR_KEYWORD for p in fsig.parameters.values())
    for k, v in kwargs.items():
        if v is np._NoValue:
            continue
        if k in fsig.parameters or takes_any:
            call[k] = v
        elif not (k in nsig.parameters and _is_default(v, nsig.parameters[k].default)):
            _refuse(func, fn, k, v)
    if builtins.any(p.kind is _KINDS.VAR_POSITIONAL for p in fsig.parameters.values()) or len(args) == 1:
        return fn(*args, **call)
    if not builtins.any(p.kind is _KINDS.VAR_POSITIONAL for p in nsig.parameters.values()):
        return fn(*args, **call)
    return tuple(fn(a, **call) for a in args)


def _numpy_name(func: Any) -> str:
    """The name the user wrote: ``numpy.linalg.eigh``, ``numpy.sum``."""
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module if module.startswith('numpy') else 'numpy'}.{func.__name__}"


# ----- np.<ufunc>(tensor) and the ufunc methods -----
_UFUNC_DEFAULTS = {"where": True, "casting": None, "order": None, "subok": None, "signature": None,
                   "axes": None, "axis": None, "keepdims": None}


def dispatch_ufunc(ufunc: Any, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``np.exp(tensor)`` and friends: run the chainrule op so the result stays differentiable; the
    methods ``at``, ``reduce``, ``accumulate``, ``reduceat`` and ``outer`` of the differentiable ones too."""
    fn = _UFUNCS.get(ufunc)
    name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    if fn is None or numpy_class(ufunc) != "a" and method != "__call__":
        return _fallback(name, numpy_class(ufunc), getattr(ufunc, method), inputs, kwargs)
    if method == "__call__":
        return fn(*_ufunc_inputs(name, ufunc, inputs, kwargs))
    handler = _METHODS.get(method)
    if handler is None or (method != "outer" and method != "at" and ufunc not in _REDUCERS):
        what = "reduce/accumulate/reduceat" if method != "at" else method
        return _fallback(name, "a", getattr(ufunc, method), inputs, kwargs) if not _requires_grad(inputs) \
            else _no_method(name, ufunc, what)
    return handler(name, ufunc, fn, inputs, dict(kwargs))


def _no_method(name: str, ufunc: Any, what: str) -> Any:
    raise UnsupportedArgument(f"{name} on a Tensor that requires grad has no chainrule version: chainrule "
                              f"differentiates {what} of {', '.join(sorted(u.__name__ for u in _REDUCERS))} "
                              f"(at of every differentiable ufunc, outer of the binary ones); call the ufunc "
                              f"itself with cr ops")


def _ufunc_inputs(name: str, ufunc: Any, inputs: tuple, kwargs: dict) -> tuple:
    """NumPy's ufunc keywords: ``dtype`` casts the inputs; the rest are accepted at their defaults
    (``casting``, ``order`` and ``subok`` at any value: they change nothing a Tensor keeps)."""
    for k, v in kwargs.items():
        if k == "dtype" or k in ("casting", "order", "subok"):
            continue
        if k == "out" and (v is None or (isinstance(v, tuple) and builtins.all(o is None for o in v))):
            continue
        if k not in _UFUNC_DEFAULTS or not (v is None or v is np._NoValue or v is _UFUNC_DEFAULTS[k]):
            if k == "out":
                raise UnsupportedArgument(f"{name} on a Tensor: out= is not supported (chainrule ops return new "
                                          f"tensors); assign the result instead")
            raise UnsupportedArgument(f"{name} on a Tensor: the keyword {k}={_short(v)} is not supported; call "
                                      f"cr.{ufunc.__name__} and select or cast the result instead")
    dtype = kwargs.get("dtype")
    if dtype is None:
        return inputs
    return tuple(astype(x, dtype) if isinstance(x, Tensor) or isinstance(x, np.ndarray) else x for x in inputs)


def _method_keywords(name: str, kwargs: dict, allowed: tuple) -> dict:
    out = kwargs.pop("out", None)
    if out is not None and not (isinstance(out, tuple) and builtins.all(o is None for o in out)):
        raise UnsupportedArgument(f"{name} on a Tensor: out= is not supported (chainrule ops return new "
                                  f"tensors); assign the result instead")
    kwargs = {k: v for k, v in kwargs.items() if v is not np._NoValue}
    if kwargs.get("where") is True:
        del kwargs["where"]
    for k in kwargs:
        if k not in allowed:
            raise UnsupportedArgument(f"{name} on a Tensor: the keyword {k}= is not supported")
    return kwargs


def _reduce_method(name: str, ufunc: Any, fn: Any, inputs: tuple, kwargs: dict) -> Any:
    """``np.add.reduce(t, axis=0)``: sum, prod, amax or amin (NumPy's default axis is 0)."""
    kw = _method_keywords(name, kwargs, ("axis", "dtype", "keepdims", "initial", "where"))
    (x,) = inputs
    dtype = kw.pop("dtype", None)
    if dtype is not None:
        x = astype(x, dtype)
    kw.setdefault("axis", 0)
    if kw["axis"] is not None and np.ndim(raw(x)) == 0:
        kw["axis"] = None
    return _REDUCERS[ufunc][0](x, **kw)


def _accumulate_method(name: str, ufunc: Any, fn: Any, inputs: tuple, kwargs: dict) -> Any:
    """``np.add.accumulate(t, axis=0)``: cumsum; ``np.multiply.accumulate``: cumprod; maximum and
    minimum: the running extreme (torch's cummax/cummin)."""
    kw = _method_keywords(name, kwargs, ("axis", "dtype"))
    accumulate = _REDUCERS[ufunc][1]
    (x,) = inputs
    if kw.get("dtype") is not None:
        x = astype(x, kw["dtype"])
    axis = kw.get("axis", 0)
    return accumulate(x, 0 if axis is None else axis)


def _reduceat_method(name: str, ufunc: Any, fn: Any, inputs: tuple, kwargs: dict) -> Any:
    """``np.add.reduceat(t, indices, axis=0)``: the reduction of each slice ``indices[i]:indices[i+1]``
    (the single entry ``indices[i]`` where that slice is empty), concatenated (composite)."""
    kw = _method_keywords(name, kwargs, ("axis", "dtype"))
    x, indices = inputs
    if kw.get("dtype") is not None:
        x = astype(x, kw["dtype"])
    shape = np.shape(raw(x))
    axis = kw.get("axis", 0) % len(shape)
    n = shape[axis]
    idx = [int(i) for i in np.asarray(raw(indices)).ravel()]
    for i in idx:
        if not 0 <= i < n:
            raise IndexError(f"{name}: index {i} out-of-bounds in reduceat of an axis of size {n}")
    reducer = _REDUCERS[ufunc][0]
    pieces = []
    for k, i in enumerate(idx):
        j = idx[k + 1] if k + 1 < len(idx) else n
        part = getitem(x, (slice(None),) * axis + (slice(i, j if j > i else i + 1),))
        pieces.append(reducer(part, axis=axis, keepdims=True) if j > i else part)
    return concatenate(pieces, axis=axis)


def _outer_method(name: str, ufunc: Any, fn: Any, inputs: tuple, kwargs: dict) -> Any:
    """``np.multiply.outer(a, b)``: ``fn(a[..., None, ...], b)`` by broadcasting."""
    if ufunc.nin != 2:
        raise ValueError(f"{name}: outer product only supported for binary functions")
    a, b = _ufunc_inputs(name, ufunc, inputs, kwargs)
    extra = np.ndim(raw(b))
    return fn(reshape(a, np.shape(raw(a)) + (1,) * extra) if extra else a, b)


# the ufuncs whose ``at`` takes repeated indices in any order (commutative and associative): the
# reduction that combines one element with all the values aimed at it, and that reduction's identity
_AT_REDUCERS = {np.multiply: (prod, lambda dtype: 1), np.maximum: (amax, lambda dtype: _extreme(dtype, -1)),
                np.minimum: (amin, lambda dtype: _extreme(dtype, 1))}


def _extreme(dtype: Any, sign: int) -> Any:
    if dtype.kind in "fc":
        return sign * np.inf
    if dtype.kind == "b":
        return sign > 0
    info = np.iinfo(dtype)
    return info.max if sign > 0 else info.min


def _batched(value: Any) -> bool:
    return isinstance(value, Tensor) and bool(value._level)


def _at_method(name: str, ufunc: Any, fn: Any, inputs: tuple, kwargs: dict) -> None:
    """``np.add.at(t, indices, v)``: in place on ``t``, unbuffered (repeated indices accumulate), and
    differentiable as an index-add (``t.__setitem__``'s machinery: t takes the new value's history;
    a leaf that requires grad is refused as by any in-place op). Repeated indices also for multiply,
    maximum and minimum (each element reduced with all the values aimed at it: prod, amax, amin, so
    ties share the gradient evenly, as torch's scatter_reduce); other ufuncs need distinct indices.
    Inside cr.vmap the target, the indices and the values may be batched."""
    _method_keywords(name, kwargs, ())
    a, indices, *rest = inputs
    if not isinstance(a, Tensor):                   # an ndarray target cannot record a gradient
        if STATE.grad_enabled and _requires_grad(rest):
            raise UnsupportedArgument(f"{name}: the target is a NumPy array, which cannot hold the gradient "
                                      f"of a value that requires grad; make the target a Tensor")
        return ufunc.at(a, _data(indices), *_data(rest))
    parts = indices if isinstance(indices, tuple) else (indices,)
    index = tuple(i if _batched(i) else _data(i) for i in parts)
    index = index if isinstance(indices, tuple) else index[0]
    dynamic = builtins.any(_batched(i) for i in parts)     # the indices differ from example to example
    value = rest[0] if rest else None
    operand = _operand(a, name, value)
    new = _at_result(name, ufunc, fn, operand, index, dynamic, value)
    if a._level or _batched(value) or dynamic:
        _write_batched(a, new, name)
        return None
    _commit(a, new, name)
    return None


def _at_result(name: str, ufunc: Any, fn: Any, a: Any, index: Any, dynamic: bool, value: Any) -> Any:
    """The value ``a`` has after ``ufunc.at(a, index, value)``, computed out of place."""
    shape, dtype = a.shape, a.dtype
    picked = getitem(a, index).shape if dynamic else np.empty(shape, dtype=bool)[_normalize_index(index, shape)].shape
    if ufunc in (np.add, np.subtract):
        v = value if ufunc is np.add else negative(value)
        v = astype(broadcast_to(v, picked), dtype) if isinstance(v, Tensor) else np.broadcast_to(
            np.asarray(v, dtype=dtype), picked)
        return add(a, scatter_add(v, index, shape))
    if ufunc in _AT_REDUCERS:
        reducer, identity = _AT_REDUCERS[ufunc]
        v = astype(value, dtype) if isinstance(value, Tensor) else np.asarray(value, dtype=dtype)
        v = ravel(broadcast_to(v, picked))
        flat = ravel(a)
        grid = np.arange(a.size).reshape(shape)
        if dynamic:
            # which element each value reaches differs between examples: one column per value
            # (a.size x len(v) memory), the value where it lands and the identity elsewhere
            hit = equal(reshape(ravel(getitem(grid, index)), (1, -1)), grid.reshape(-1, 1))
            table = where(hit, reshape(v, (1, -1)), np.asarray(identity(dtype), dtype=dtype))
            return reshape(reducer(concatenate([reshape(flat, (-1, 1)), table], axis=1), axis=1), shape)
        return reshape(_reduce_at(flat, grid[_normalize_index(index, shape)].ravel(), v, reducer), shape)
    if dynamic:
        raise UnsupportedArgument(f"{name} inside cr.vmap with indices that differ between examples: chainrule "
                                  f"supports it for add, subtract, multiply, maximum and minimum; loop over "
                                  f"the examples, or index with the same indices for all of them")
    hits = np.zeros(shape, dtype=np.intp)
    np.add.at(hits, _normalize_index(index, shape), 1)
    if (hits > 1).any():
        raise UnsupportedArgument(f"{name} on a Tensor: repeated indices are supported for add, subtract, "
                                  f"multiply, maximum and minimum (where the order of the updates does not "
                                  f"matter); for {ufunc.__name__} make the indices distinct")
    picked_values = copy(getitem(a, index))
    return index_put(a, index, astype(fn(picked_values, *([] if value is None else [value])), dtype))


def _reduce_at(flat: Any, positions: Any, v: Any, reducer: Any) -> Any:
    """``flat`` with each position reduced together with the values ``v[j]`` aimed at it
    (``positions[j]``): one (elements x (1 + k)) table per multiplicity k, so the work is linear."""
    order = np.argsort(positions, kind="stable")
    targets, first, counts = np.unique(positions[order], return_index=True, return_counts=True)
    where_to, results = [], []
    for k in np.unique(counts):
        chosen = counts == k
        columns = order[first[chosen][:, None] + np.arange(k)]          # the values of each target
        table = concatenate([reshape(getitem(flat, targets[chosen]), (-1, 1)), getitem(v, columns)], axis=1)
        where_to.append(targets[chosen])
        results.append(reducer(table, axis=1))
    if not results:
        return flat
    return index_put(flat, np.concatenate(where_to), concatenate(results, axis=0))


_METHODS = {"reduce": _reduce_method, "accumulate": _accumulate_method, "reduceat": _reduceat_method,
            "outer": _outer_method, "at": _at_method}



# The op surface: NumPy's names (plus the fused ops); the extension API is in chainrule.extend.
__all__ = [
    "abs", "absolute", "add", "amax", "amin", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort", "around", "array_split",
    "as_tensor", "astype", "atleast_1d", "atleast_2d", "average", "broadcast_to", "cbrt",
    "ceil", "cholesky", "clip", "concatenate", "copy", "cos", "cosh", "cumprod", "cumsum",
    "det", "diagonal", "diagonal_scatter", "fft", "real", "imag", "conj", "conjugate", "angle", "view_as_real",
    "view_as_complex", "divide", "divmod", "dot", "einsum", "equal", "erf", "exp", "exp2",
    "expand_dims", "expm1", "flatten", "flip", "floor", "floor_divide", "fmax", "fmin", "gelu",
    "greater", "greater_equal", "hstack", "hypot", "inner", "inv",
    "isfinite", "isinf", "isnan", "less", "less_equal", "linalg", "log", "log10",
    "log1p", "log2", "log_softmax", "logaddexp", "logical_and", "logical_not", "logical_or",
    "logsumexp", "matmul", "max", "maximum", "mean", "min", "minimum", "mod", "moveaxis",
    "multiply", "negative", "nonzero", "norm", "not_equal", "ones_like", "outer", "pad",
    "permute_dims", "pow", "power", "prod", "ravel", "reciprocal", "relu", "remainder",
    "repeat", "reshape", "roll", "round", "sigmoid", "sign", "sin", "sinh",
    "slogdet", "softmax", "softplus", "solve", "sort", "split", "sqrt", "unbind",
    "square", "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "take",
    "take_along_axis", "tan", "tanh", "tensordot", "tile", "trace",
    "transpose", "tril", "triu", "true_divide", "var", "vdot", "vstack", "where", "zeros_like",
]

# ----- np.<name>(tensor) dispatches to chainrule's function of the same name: this namespace's, cr.linalg's
# and cr.fft's (np.linalg.<name>, np.fft.<name>), then the chapters' and cr.special's NUMPY tables (NumPy's
# own signatures where chainrule's differ: np.copy, np.astype), and the ufuncs chainrule spells otherwise -----
_UFUNCS: dict = {}
_FUNCTIONS: dict = {}
for _names, _ours, _theirs in ((__all__, globals(), np), (linalg.__all__, vars(linalg), np.linalg),
                               (fft.__all__, vars(fft), np.fft)):
    for _name in _names:
        _f = getattr(_theirs, _name, None)
        if callable(_f) and not isinstance(_f, type):
            (_UFUNCS if isinstance(_f, np.ufunc) else _FUNCTIONS)[_f] = _ours[_name]
for _table in [_module.NUMPY for _module in CHAPTERS] + [special.NUMPY]:
    _UFUNCS.update({f: fn for f, fn in _table.items() if isinstance(f, np.ufunc)})
    _FUNCTIONS.update({f: fn for f, fn in _table.items() if not isinstance(f, np.ufunc)})
_UFUNCS.update({np.fabs: abs, np.rint: round, np.vecdot: linalg_more.vecdot})

for _module in CHAPTERS:
    __all__ += _module.__all__

_methods.attach(dispatch_ufunc, dispatch_function, {name: globals()[name] for name in __all__})
