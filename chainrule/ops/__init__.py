"""The NumPy-named op surface (``cr.exp``, ``cr.matmul``, ...) and NumPy dispatch for Tensors."""
from __future__ import annotations

import types
from typing import Any

from .._backend import np
from ..tensor import Tensor
from . import _methods, decompositions, fft, linalg_more, numpy_arrays, numpy_math, numpy_stats, special, spectral
from ._methods import after_write as after_write  # (these three: for cr.Function.mark_dirty)
from ._methods import check_in_place as check_in_place
from ._methods import fresh as fresh

# the extension API's old home (its home is chainrule.extend): kept importable
from ._registry import PRIMITIVES, Primitive, apply, defprim, linear_jvps, raw, unary  # noqa: F401
from ._registry import complex_error as complex_error  # (for forward mode)
from .elementwise import (
    abs,
    absolute,
    add,
    alias,
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
    tanh_backward,
    true_divide,
    where,
    zeros_like,
)
from .linalg import (
    cholesky,
    det,
    dot,
    einsum,
    inner,
    inv,
    linear,
    matmul,
    norm,
    outer,
    slogdet,
    solve,
    tensordot,
    vdot,
)
from .nn import log_softmax, softmax, softmax_cross_entropy
from .reduction import (
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
    prod,
    sort,
    std,
    sum,
    trace,
    var,
)
from .shape import (
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
    getitem,
    hstack,
    imag,
    index_put,
    moveaxis,
    pad,
    permute_dims,
    ravel,
    real,
    repeat,
    reshape,
    roll,
    scatter_add,
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

_LINALG_MORE = ("matrix_power", "multi_dot", "tensorsolve", "tensorinv", "matrix_transpose", "outer", "cross",
                "vecdot", "trace", "diagonal", "tensordot")
_SPECTRAL = ("eigh", "eigvalsh", "svd", "svdvals", "pinv", "lstsq", "cond", "matrix_rank", "matrix_norm",
             "vector_norm", "norm")
_DECOMPOSITIONS = ("eig", "eigvals", "qr", "matrix_exp", "solve_triangular", "cho_solve", "slogdet", "cholesky")
# cr.linalg: NumPy's np.linalg (and SciPy's solve_triangular/cho_solve, torch's matrix_exp)
linalg = types.SimpleNamespace(
    inv=inv, solve=solve, det=det, matmul=matmul, LinAlgError=np.linalg.LinAlgError,
    **{name: getattr(linalg_more, name) for name in _LINALG_MORE},
    **{name: getattr(spectral, name) for name in _SPECTRAL},
    **{name: getattr(decompositions, name) for name in _DECOMPOSITIONS})

_UFUNCS = {np.conjugate: conj, np.add: add, np.subtract: subtract, np.multiply: multiply, np.divide: divide,
           np.true_divide: divide, np.power: power, np.negative: negative, np.exp: exp,
           np.exp2: exp2, np.log: log, np.log2: log2, np.log10: log10, np.log1p: log1p,
           np.expm1: expm1, np.sqrt: sqrt, np.cbrt: cbrt, np.sin: sin, np.cos: cos, np.tan: tan,
           np.arcsin: arcsin, np.arccos: arccos, np.arctan: arctan, np.sinh: sinh, np.cosh: cosh,
           np.tanh: tanh, np.arcsinh: arcsinh, np.arccosh: arccosh, np.arctanh: arctanh,
           np.absolute: abs, np.fabs: abs, np.sign: sign, np.floor: floor, np.ceil: ceil,
           np.rint: round, np.reciprocal: reciprocal, np.square: square, np.maximum: maximum,
           np.minimum: minimum, np.fmax: fmax, np.fmin: fmin, np.arctan2: arctan2,
           np.hypot: hypot, np.logaddexp: logaddexp, np.remainder: mod, np.floor_divide: floor_divide,
           np.divmod: divmod, np.matmul: matmul,
           np.less: less, np.less_equal: less_equal, np.greater: greater,
           np.greater_equal: greater_equal, np.equal: equal, np.not_equal: not_equal,
           np.logical_and: logical_and, np.logical_or: logical_or, np.logical_not: logical_not,
           np.isnan: isnan, np.isfinite: isfinite, np.isinf: isinf}

_FUNCTIONS = {np.sum: sum, np.mean: mean, np.prod: prod, np.max: amax, np.amax: amax, np.min: amin,
              np.amin: amin, np.var: var, np.std: std, np.cumsum: cumsum, np.cumprod: cumprod,
              np.argmax: argmax, np.argmin: argmin, np.argsort: argsort, np.sort: sort,
              np.average: average, np.dot: dot, np.vdot: vdot, np.inner: inner, np.outer: outer,
              np.tensordot: tensordot, np.einsum: einsum, np.trace: trace, np.diagonal: diagonal,
              np.real: real, np.imag: imag, np.angle: angle,
              np.reshape: reshape, np.transpose: transpose, np.moveaxis: moveaxis,
              np.swapaxes: swapaxes, np.expand_dims: expand_dims, np.squeeze: squeeze,
              np.ravel: ravel, np.broadcast_to: broadcast_to, np.concatenate: concatenate,
              np.stack: stack, np.hstack: hstack, np.vstack: vstack, np.split: split,
              np.array_split: array_split, np.flip: flip, np.roll: roll, np.tile: tile,
              np.repeat: repeat, np.pad: pad, np.take: take, np.take_along_axis: take_along_axis,
              np.where: where, np.clip: clip, np.round: round, np.around: round,
              np.zeros_like: zeros_like, np.ones_like: ones_like, np.tril: tril, np.triu: triu,
              np.atleast_1d: atleast_1d, np.atleast_2d: atleast_2d, np.nonzero: nonzero,
              np.linalg.inv: inv, np.linalg.solve: solve, np.linalg.det: det, np.linalg.matmul: matmul}
_FUNCTIONS.update({getattr(np.linalg, name): getattr(linalg, name)
                   for name in _LINALG_MORE + _SPECTRAL + _DECOMPOSITIONS if hasattr(np.linalg, name)})


_FUNCTIONS.update({getattr(np.fft, name): getattr(fft, name) for name in fft.NAMES})


# the rest of NumPy's namespace (and scipy.special's ufuncs): each module lists its functions
_MORE = (numpy_math, numpy_arrays, numpy_stats)
for _module in _MORE:
    globals().update({name: getattr(_module, name) for name in _module.NAMES})
    _FUNCTIONS.update({f: fn for f, fn in _module.NUMPY.items() if not isinstance(f, np.ufunc)})
    _UFUNCS.update({f: fn for f, fn in _module.NUMPY.items() if isinstance(f, np.ufunc)})
_UFUNCS.update(special.NUMPY)
MORE_NAMES = tuple(name for module in _MORE for name in module.NAMES)


def dispatch_ufunc(ufunc: Any, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``np.exp(tensor)`` and friends: run the chainrule op so the result stays differentiable."""
    fn = _UFUNCS.get(ufunc)
    if fn is None or method != "__call__" or kwargs.get("out") is not None:
        return _fallback(f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"),
                         lambda *xs: getattr(ufunc, method)(*xs, **kwargs), inputs)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if kwargs:
        raise TypeError(f"numpy.{ufunc.__name__} on a Tensor: keyword arguments {sorted(kwargs)} are "
                        f"not supported; call cr.{fn.__name__} and cast with .astype() instead")
    return fn(*inputs)


def dispatch_function(func: Any, args: tuple, kwargs: dict) -> Any:
    """``np.sum(tensor)``, ``np.concatenate([...])``, ...: the chainrule op of the same name."""
    fn = _FUNCTIONS.get(func)
    if fn is None:
        return _fallback(_numpy_name(func), lambda *xs: func(*xs, **kwargs), args)
    names = _NUMPY_ORDER.get(func)
    if names is not None:
        args, kwargs = _numpy_keywords(func, fn, names, args, kwargs)
    return fn(*args, **kwargs)


# NumPy's positional order for reductions whose chainrule signature is (x, axis, keepdims, ...)
_REDUCE_ORDER = ("axis", "dtype", "out", "keepdims")
_NUMPY_ORDER = {np.sum: _REDUCE_ORDER, np.mean: _REDUCE_ORDER, np.prod: _REDUCE_ORDER,
                np.var: ("axis", "dtype", "out", "ddof", "keepdims"),
                np.std: ("axis", "dtype", "out", "ddof", "keepdims"),
                np.max: ("axis", "out", "keepdims"), np.amax: ("axis", "out", "keepdims"),
                np.min: ("axis", "out", "keepdims"), np.amin: ("axis", "out", "keepdims"),
                np.cumsum: ("axis", "dtype", "out"), np.cumprod: ("axis", "dtype", "out")}


def _numpy_keywords(func: Any, fn: Any, names: tuple, args: tuple, kwargs: dict) -> tuple:
    """Bind NumPy's positional arguments by name; refuse ``out=``; apply ``dtype`` by a cast."""
    kwargs = {**dict(zip(names, args[1:])), **kwargs}
    if kwargs.pop("out", None) is not None:
        raise TypeError(f"numpy.{func.__name__} on a Tensor: out= is not supported (chainrule ops "
                        f"return new tensors); assign the result instead")
    x = args[0]
    dtype = kwargs.pop("dtype", None) if fn not in (sum, mean) else kwargs.get("dtype")
    if dtype is not None and fn not in (sum, mean):
        x = astype(x, dtype)
    return (x,), kwargs


def _numpy_name(func: Any) -> str:
    """The name the user wrote: ``numpy.linalg.eigh``, ``numpy.sum``."""
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module if module.startswith('numpy') else 'numpy'}.{func.__name__}"


def _fallback(name: str, call: Any, args: tuple) -> Any:
    """No differentiable version: allowed only when no input requires grad (returns an ndarray)."""
    def unwrap(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(unwrap(v) for v in a)
        if isinstance(a, Tensor):
            if a.requires_grad:
                raise TypeError(f"{name} has no differentiable chainrule version and an input requires "
                                f"grad; use the cr.* op, or call it on .detach().numpy() if you do not "
                                f"need its gradient")
            return a.data
        return a
    return call(*unwrap(args))


_methods.attach(dispatch_ufunc, dispatch_function)

# The op surface: NumPy's names (plus the fused ops); the extension API is in chainrule.extend.
__all__ = [
    "abs", "absolute", "add", "alias", "amax", "amin", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort", "around", "array_split",
    "as_tensor", "astype", "atleast_1d", "atleast_2d", "average", "broadcast_to", "cbrt",
    "ceil", "cholesky", "clip", "concatenate", "copy", "cos", "cosh", "cumprod", "cumsum",
    "det", "diagonal", "diagonal_scatter", "fft", "real", "imag", "conj", "conjugate", "angle", "view_as_real",
    "view_as_complex", "divide", "divmod", "dot", "einsum", "equal", "erf", "exp", "exp2",
    "expand_dims", "expm1", "flatten", "flip", "floor", "floor_divide", "fmax", "fmin", "gelu",
    "getitem", "greater", "greater_equal", "hstack", "hypot", "index_put", "inner", "inv",
    "isfinite", "isinf", "isnan", "less", "less_equal", "linalg", "linear", "log", "log10",
    "log1p", "log2", "log_softmax", "logaddexp", "logical_and", "logical_not", "logical_or",
    "logsumexp", "matmul", "max", "maximum", "mean", "min", "minimum", "mod", "moveaxis",
    "multiply", "negative", "nonzero", "norm", "not_equal", "ones_like", "outer", "pad",
    "permute_dims", "pow", "power", "prod", "ravel", "reciprocal", "relu", "remainder",
    "repeat", "reshape", "roll", "round", "scatter_add", "sigmoid", "sign", "sin", "sinh",
    "slogdet", "softmax", "softmax_cross_entropy", "softplus", "solve", "sort", "split", "sqrt", "unbind",
    "square", "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "take",
    "take_along_axis", "tan", "tanh", "tanh_backward", "tensordot", "tile", "trace",
    "transpose", "tril", "triu", "true_divide", "var", "vdot", "vstack", "where", "zeros_like",
]
