"""chainrule: PyTorch's autograd semantics and JAX's function transforms, on NumPy.

>>> import chainrule as cr
>>> x = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (cr.tanh(x) * x).sum()
>>> y.backward()
>>> x.grad.shape
(3,)
"""
# --- nn, optim, data, saving, viz ---
# --- precision (dtypes policy, autocast, loss scaling, FP8) ---
# --- programs (implicit differentiation, estimators, distributions) ---
from . import (
                      amp,
                      autograd,
                      data,
                      distributed,
                      distributions,
                      estimators,
                      fp8,
                      func,
                      integrate,
                      nn,
                      ops,
                      optim,
                      precision,
                      random,
                      stats,
                      viz,
)
from ._dtypes import (
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

# --- memory (profile, checkpoint, saved-tensor hooks) ---
from .accounting import profile
from .amp import GradScaler, autocast
from .autograd import forward as forward_ad
from .autograd.anomaly import AnomalyError, detect_anomaly, set_safe_zero_cotangents
from .autograd.function import Function, FunctionCtx
from .batched import BatchedTensor
from .checkpoint import CheckpointPlan, checkpoint, checkpoint_sequential, plan_checkpoints
from .creation import arange, empty, eye, ones, zeros
from .errors import (
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
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import NonDifferentiablePointError, gradcheck, gradgradcheck
from .implicit import ConvergenceError, fixed_point, root_solve
from .ops import (
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
from .saved_hooks import save_as, saved_tensors_hooks
from .serialization import SerializationError, load, save
from .tensor import Tensor, tensor

# Each area adds its public names below its own marker (explicit imports, no star imports), and
# to __all__ at the bottom.
# --- transforms (forward mode, vjp/jvp, jacobians, hessians) ---
from .transforms import Jacobian, grad, hessian, hvp, jacfwd, jacobian, jacrev, jvp, value_and_grad, vjp

# --- vmap (batching): BatchedTensor and VmapError are imported with their neighbours above ---
from .vmap import vmap

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
globals().update({_name: getattr(ops, _name) for _name in ops.MORE_NAMES})
__all__ += list(ops.MORE_NAMES) + ["special", "integrate", "stats", "distributed", "UnsupportedArgument",
                                   "vmap", "VmapError", "BatchedTensor", "func", "ConversionError",
                                   "VmapConversionError"]
special = ops.special
