"""chainrule: PyTorch's autograd semantics and JAX's function transforms, on NumPy.

>>> import chainrule as cr
>>> x = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (cr.tanh(x) * x).sum()
>>> y.backward()
>>> x.grad.shape
(3,)
"""
import sys

# the chapters and areas, as modules: cr.linalg, cr.nn, cr.precision, ...
from chainrule import amp, autograd, data, distributed, func, nn, ops, optim
from chainrule import numpy as _numpy
from chainrule.amp import fp8, precision
from chainrule.amp.mixed_precision import GradScaler, autocast
from chainrule.autograd import forward as forward_ad
from chainrule.autograd.accounting import profile
from chainrule.autograd.anomaly import AnomalyError, detect_anomaly, set_safe_zero_cotangents
from chainrule.autograd.checkpoint import CheckpointPlan, checkpoint, checkpoint_sequential, plan_checkpoints
from chainrule.autograd.function import Function, FunctionCtx
from chainrule.autograd.gradcheck import NonDifferentiablePointError, gradcheck, gradgradcheck
from chainrule.autograd.saved_hooks import save_as, saved_tensors_hooks
from chainrule.core import errors as errors
from chainrule.core import random
from chainrule.core._dtypes import (
    bfloat16,
    bool_,
    complex64,
    complex128,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    get_default_dtype,
    int32,
    int64,
    set_default_dtype,
)
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import (
    ChainruleError,
    ConversionError,
    DTypeError,
    GradcheckError,
    GraphError,
    ShapeError,
    UnsupportedArgument,
    VmapConversionError,
    VmapError,
)
from chainrule.core.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from chainrule.core.tensor import Tensor, tensor
from chainrule.distributed import optim as _distributed_optim  # noqa: F401  (cr.distributed.optim)
from chainrule.func.batching import vmap
from chainrule.func.transforms import (
    Jacobian,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    value_and_grad,
    vjp,
)
from chainrule.numpy import (
    PRIMITIVES,
    abs,
    absolute,
    add,
    amax,
    amin,
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    argmax,
    argmin,
    argsort,
    around,
    array_split,
    as_tensor,
    astype,
    atleast_1d,
    atleast_2d,
    average,
    broadcast_to,
    cbrt,
    ceil,
    cholesky,
    clip,
    concatenate,
    conj,
    conjugate,
    copy,
    cos,
    cosh,
    cumprod,
    cumsum,
    det,
    diagonal,
    diagonal_scatter,
    divide,
    divmod,
    dot,
    einsum,
    equal,
    erf,
    exp,
    exp2,
    expand_dims,
    expm1,
    fft,
    flatten,
    flip,
    floor,
    floor_divide,
    fmax,
    fmin,
    gelu,
    greater,
    greater_equal,
    hstack,
    hypot,
    imag,
    inner,
    inv,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    linalg,
    log,
    log1p,
    log2,
    log10,
    log_softmax,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mod,
    moveaxis,
    multiply,
    negative,
    nonzero,
    norm,
    not_equal,
    ones_like,
    outer,
    pad,
    permute_dims,
    pow,
    power,
    prod,
    ravel,
    real,
    reciprocal,
    relu,
    remainder,
    repeat,
    reshape,
    roll,
    round,
    sigmoid,
    sign,
    sin,
    sinh,
    slogdet,
    softmax,
    softplus,
    solve,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    subtract,
    sum,
    swapaxes,
    take,
    take_along_axis,
    tan,
    tanh,
    tensordot,
    tile,
    trace,
    transpose,
    tril,
    triu,
    true_divide,
    unbind,
    var,
    vdot,
    view_as_complex,
    view_as_real,
    vstack,
    where,
    zeros_like,
)
from chainrule.numpy.creation import arange, empty, eye, ones, zeros
from chainrule.programs import distributions, estimators
from chainrule.programs.implicit import ConvergenceError, fixed_point, root_solve
from chainrule.scipy import integrate, special, stats
from chainrule.utils import serialization as serialization
from chainrule.utils import viz
from chainrule.utils.serialization import SerializationError, load, save

__version__ = "0.1.0"

# The public API, written out (the extension API is in chainrule.extend).
__all__ = [
    "abs", "absolute", "add", "amax", "amin", "amp", "AnomalyError", "arange", "arccos",
    "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin",
    "argsort", "around", "array_split", "as_tensor", "astype", "atleast_1d", "atleast_2d",
    "autocast", "autograd", "average", "bfloat16", "bool_", "broadcast_to", "cbrt", "ceil",
    "ChainruleError", "checkpoint", "checkpoint_sequential", "CheckpointPlan", "cholesky",
    "clip", "concatenate", "ConvergenceError", "copy", "cos", "cosh", "cumprod", "cumsum",
    "data", "det", "detect_anomaly", "diagonal", "diagonal_scatter", "fft", "real", "imag", "conj", "conjugate",
    "angle", "view_as_real", "view_as_complex", "distributions", "divide", "divmod", "dot",
    "DTypeError", "einsum", "empty", "enable_grad", "equal", "erf", "estimators", "exp", "exp2",
    "expand_dims", "expm1", "eye", "fixed_point", "flatten", "flip", "float16", "float32",
    "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "floor", "floor_divide", "fmax", "fmin",
    "forward_ad", "fp8", "Function", "FunctionCtx", "gelu", "get_default_dtype", "grad",
    "gradcheck", "GradcheckError", "gradgradcheck", "GradScaler", "GraphError", "greater",
    "greater_equal", "hessian", "hstack", "hvp", "hypot", "inner", "int32", "int64", "inv",
    "is_grad_enabled", "isfinite", "isinf", "isnan", "jacfwd", "Jacobian", "jacobian", "jacrev",
    "jvp", "less", "less_equal", "linalg", "load", "log", "log10", "log1p", "log2",
    "log_softmax", "logaddexp", "logical_and", "logical_not", "logical_or", "logsumexp",
    "matmul", "max", "maximum", "mean", "min", "minimum", "mod", "moveaxis", "multiply",
    "negative", "nn", "no_grad", "NonDifferentiablePointError", "nonzero", "norm", "not_equal",
    "ones", "ones_like", "ops", "optim", "outer", "pad", "permute_dims", "plan_checkpoints",
    "pow", "power", "precision", "PRIMITIVES", "prod", "profile", "random", "ravel",
    "reciprocal", "relu", "remainder", "repeat", "reshape", "roll", "root_solve", "round",
    "save", "save_as", "saved_tensors_hooks", "SerializationError", "set_default_dtype",
    "set_grad_enabled", "set_safe_zero_cotangents", "ShapeError", "sigmoid", "sign", "sin",
    "sinh", "slogdet", "softmax", "softplus", "solve", "sort", "split", "sqrt", "unbind", "square",
    "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "take", "take_along_axis", "tan",
    "tanh", "Tensor", "tensor", "tensordot", "tile", "trace", "transpose", "tril", "triu",
    "true_divide", "value_and_grad", "var", "vdot", "viz", "vjp", "vstack", "where", "zeros",
    "zeros_like",
]

# the rest of NumPy's namespace (chainrule/ops/numpy_*.py list their functions) and cr.special
globals().update({_name: getattr(_numpy, _name) for _name in _numpy.MORE_NAMES})
__all__ += list(_numpy.MORE_NAMES) + ["special", "integrate", "stats", "distributed", "UnsupportedArgument",
                                   "vmap", "VmapError", "BatchedTensor", "func", "ConversionError",
                                   "VmapConversionError"]

# `import chainrule.linalg` (and the other chapters' short names) finds the module, as `import os.path`
for _name in ("linalg", "fft", "special", "stats", "integrate", "precision", "fp8", "random", "errors", "viz",
              "serialization", "distributions", "estimators"):
    sys.modules[f"{__name__}.{_name}"] = globals()[_name]
