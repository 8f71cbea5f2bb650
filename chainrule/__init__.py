"""chainrule: PyTorch's autograd semantics and JAX's function transforms, on NumPy.

>>> import chainrule as cr
>>> x = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (cr.tanh(x) * x).sum()
>>> y.backward()
>>> x.grad.shape
(3,)
"""
import sys

# the chapters and areas, as modules (cr.linalg, cr.nn, cr.precision, ...), and each area's public names
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
from chainrule.core._registry import PRIMITIVES
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import (
    ChainruleError,
    CompileError,
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
from chainrule.func.compile import compile
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

# NumPy's namespace, differentiable: chainrule/numpy's __all__, which is its chapters' lists (a star import,
# so that type checkers and `from chainrule import *` see the same names as the package)
from chainrule.numpy import *  # noqa: F403
from chainrule.numpy.creation import arange, empty, eye, ones, zeros

# each chapter again, as type checkers read only a literal __all__ (tests/test_public_api.py checks that
# these are chainrule.numpy.CHAPTERS)
from chainrule.numpy.creation_more import *  # noqa: F403
from chainrule.numpy.functional import *  # noqa: F403
from chainrule.numpy.indexing import *  # noqa: F403
from chainrule.numpy.manipulation import *  # noqa: F403
from chainrule.numpy.math import *  # noqa: F403
from chainrule.numpy.math_more import *  # noqa: F403
from chainrule.numpy.order_statistics import *  # noqa: F403
from chainrule.numpy.setops import *  # noqa: F403
from chainrule.numpy.sorting import *  # noqa: F403
from chainrule.numpy.statistics import *  # noqa: F403
from chainrule.programs import distributions, estimators
from chainrule.programs.implicit import ConvergenceError, fixed_point, root_solve
from chainrule.scipy import integrate, special, stats
from chainrule.utils import serialization as serialization
from chainrule.utils import viz
from chainrule.utils.serialization import SerializationError, load, save

__version__ = "0.1.0"

# The public API: NumPy's namespace (above) and what each area publishes (imported above); the
# extension API is chainrule.extend. tests/public_api.txt holds the list, so a change shows in review.
__all__ = ["amp", "AnomalyError", "arange", "autocast", "autograd", "BatchedTensor", "bfloat16", "bool_",
    "ChainruleError", "checkpoint", "checkpoint_sequential", "CheckpointPlan", "compile", "CompileError",
    "complex128", "complex64",
    "ConvergenceError", "ConversionError", "data", "detect_anomaly", "distributed", "distributions", "DTypeError",
    "empty", "enable_grad", "estimators", "eye", "fixed_point", "float16", "float32", "float64", "float8_e4m3fn",
    "float8_e5m2", "forward_ad", "fp8", "func", "Function", "FunctionCtx", "get_default_dtype", "grad", "gradcheck",
    "GradcheckError", "gradgradcheck", "GradScaler", "GraphError", "hessian", "hvp", "int32", "int64", "integrate",
    "is_grad_enabled", "jacfwd", "Jacobian", "jacobian", "jacrev", "jvp", "load", "nn", "no_grad",
    "NonDifferentiablePointError", "ones", "ops", "optim", "plan_checkpoints", "precision", "PRIMITIVES", "profile",
    "random", "root_solve", "save", "save_as", "saved_tensors_hooks", "SerializationError", "set_default_dtype",
    "set_grad_enabled", "set_safe_zero_cotangents", "ShapeError", "special", "stats", "tensor", "Tensor",
    "UnsupportedArgument", "value_and_grad", "viz", "vjp", "vmap", "VmapConversionError", "VmapError", "zeros"]
__all__ += _numpy.__all__

# `import chainrule.linalg` (and the other chapters' short names) finds the module, as `import os.path`
for _name in ("linalg", "fft", "special", "stats", "integrate", "precision", "fp8", "random", "errors", "viz",
              "serialization", "distributions", "estimators"):
    sys.modules[f"{__name__}.{_name}"] = globals()[_name]
