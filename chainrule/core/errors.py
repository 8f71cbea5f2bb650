"""Error classes. Messages name the op, the shapes/dtypes and the fix."""
from __future__ import annotations

import inspect
import sys
import sysconfig
from typing import Any

import numpy  # (np.linalg.LinAlgError: the base of chainrule's LinAlgError)


class ChainruleError(Exception):
    """Base class of chainrule's errors."""


class ShapeError(ChainruleError, ValueError):
    """Shapes that do not fit an op (raised at forward time)."""


class LinAlgError(ChainruleError, numpy.linalg.LinAlgError):
    """A matrix whose values a linear-algebra op cannot take: singular, not positive definite,
    containing NaN or inf, or an iteration that did not converge. It is NumPy's
    ``np.linalg.LinAlgError`` (``except np.linalg.LinAlgError:`` catches it; also a ValueError)."""


class DTypeError(ChainruleError, TypeError):
    """A dtype an op or a gradient cannot take."""


class GraphError(ChainruleError, RuntimeError):
    """Misuse of the graph: backward twice, freed buffers, in-place modification of saved values."""


class UnsupportedArgument(ChainruleError, TypeError):
    """A NumPy function or argument form that chainrule refuses on Tensors (``out=``, a keyword it
    does not take); the message names it."""


class VmapError(ChainruleError, RuntimeError):
    """Something ``cr.vmap`` cannot batch: Python control flow on a batched value, an op whose output
    shape depends on the values, mismatched batch sizes; the message says why and what to use."""


class ConversionError(GraphError):
    """A tensor that is part of a graph (it requires grad or carries a forward-mode tangent)
    converted to a NumPy array (``np.asarray``, ``.numpy()``, a library's NumPy code), which would
    drop its derivative silently; the message names the function and the chainrule equivalent."""


class VmapConversionError(ConversionError, VmapError):
    """ConversionError of a tensor batched by ``cr.vmap`` (also a VmapError)."""


class GradcheckError(ChainruleError, AssertionError):
    """Raised by gradcheck when analytic and numerical derivatives disagree."""


def describe(values: object) -> str:
    """Shapes and dtypes of op inputs, for messages: ``(3, 4) float32, (5,) float64``."""
    parts = []
    for v in values:  # type: ignore[attr-defined]
        shape = getattr(v, "shape", None)
        if shape is None:
            parts.append(type(v).__name__)
        else:
            parts.append(f"{tuple(shape)} {getattr(v, 'dtype', '')}".strip())
    return ", ".join(parts)


def linalg_error(op: str, xs: tuple, e: Exception) -> LinAlgError:
    """The LinAlgError for NumPy's (or SciPy's) error ``e`` raised by ``op`` on the inputs ``xs``:
    what is wrong with the values, the shapes, and what to do.

    >>> str(linalg_error("inv", (numpy.zeros((2, 2)),), numpy.linalg.LinAlgError("Singular matrix")))[:71]
    'inv: the matrix is singular (Singular matrix) for inputs (2, 2) float64'
    """
    text, shapes = str(e).rstrip("."), describe(xs)
    nonfinite = []
    for i, x in enumerate(xs):
        try:
            values = numpy.asarray(getattr(x, "data", x))
            if values.dtype.kind in "fc" and not numpy.isfinite(values).all():
                nonfinite.append(f"input {i} contains {'NaN' if numpy.isnan(values).any() else 'inf'}")
        except Exception:            # (a vmap example stands in for the values: nothing to look at)
            continue
    if nonfinite:
        msg = (f"{'; '.join(nonfinite)} ({text}) for inputs {shapes}: {op} needs finite values; find "
               f"where the NaN or inf comes from (cr.detect_anomaly()) or replace it (cr.nan_to_num)")
    else:
        advice = next((a for word, a in _LINALG_ADVICE.items() if word in text), "{text} for inputs {shapes}")
        msg = advice.format(text=text, shapes=shapes, op=op)
    return LinAlgError(f"{op}: {msg}")


# linalg_error's advice for NumPy's (or SciPy's) message, by a word in it
_LINALG_ADVICE = {
    "positive definite": "the matrix is not positive definite ({text}) for inputs {shapes}: {op} needs a symmetric "
                         "(Hermitian) positive-definite matrix; symmetrize it ((a + a.T) / 2) or add jitter to the "
                         "diagonal (a + eps * I)",
    "ingular": "the matrix is singular ({text}) for inputs {shapes}: it has no inverse; use cr.linalg.lstsq or "
               "cr.linalg.pinv, or regularize it (a + eps * I)",
    "converge": "{text} for inputs {shapes}: the values are too extreme or too ill-conditioned for the iteration; "
                "rescale the matrix",
}


def rule_error(e: Exception, where: str) -> Exception:
    """The error to raise for ``e``, raised inside a derivative rule: its message prefixed with
    ``where`` ("backward of 'log'", "forward-mode derivative of 'log'"). chainrule's errors keep
    their class; NumPy's ValueError/TypeError become ShapeError/DTypeError (still ValueError/
    TypeError, as at forward time), IndexError stays; anything else becomes a GraphError.

    >>> rule_error(ValueError("singular matrix"), "backward of 'inv'")
    ShapeError("backward of 'inv': singular matrix")
    """
    msg = f"{where}: {e}"
    if isinstance(e, ChainruleError):
        cls = type(e)
    elif isinstance(e, numpy.linalg.LinAlgError):
        cls = LinAlgError
    elif isinstance(e, ValueError):
        cls = ShapeError
    elif isinstance(e, TypeError):
        cls = DTypeError
    elif isinstance(e, IndexError):
        cls = IndexError
    else:
        cls, msg = GraphError, f"{where}: {type(e).__name__}: {e}"
    try:
        return cls(msg)
    except Exception:                         # a class whose constructor takes more than a message
        return GraphError(msg)


# ----- who asked NumPy for a tensor's values (error path only) -----
_LIBRARY_DIRS = tuple(sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}))
_RENAMED = {"scipy.linalg.expm": "linalg.matrix_exp"}     # SciPy names chainrule spells otherwise


_MACHINERY = ("chainrule.core.tensor", "chainrule.core.batched", "chainrule.core.errors")     # the conversion itself
# chainrule functions that take an argument as a constant (they refuse it in a graph) and whose
# NumPy namesake converts it itself (no dispatch): the advice must not send the user there for it
_CONSTANT = {"cr.kaiser": ("beta",)}


def numpy_caller(value: Any = None) -> tuple[str, str]:
    """For an error raised as NumPy converts a tensor (``value``, if known): the public name of the
    function that asked for it (the outermost installed-library frame outside chainrule, e.g.
    ``scipy.special.logsumexp``, or chainrule's own function where chainrule's code asked; "" when
    the user's own code called NumPy) and the chainrule function that would differentiate it
    ("cr.special.logsumexp"; "" if there is none). Best effort: it only words a message, so whatever
    goes wrong in it gives ("", "") rather than hide the error."""
    return conversion_source(value)[:2]


def conversion_source(value: Any = None) -> tuple[str, str, str]:
    """``numpy_caller``'s two names and, where no chainrule function would differentiate ``value``
    (chainrule's code asked, or chainrule's version takes that argument as a constant too), the
    advice that says so and names the argument; else ""."""
    try:
        return _source(sys._getframe(1), value)
    except Exception:
        return "", "", ""


def _source(frame: Any, value: Any) -> tuple[str, str, str]:
    inner = []                      # chainrule's frames under the library's (not the conversion's own)
    while frame is not None and _package(frame) == "chainrule":
        if frame.f_globals.get("__name__") not in _MACHINERY:
            inner.append(frame)
        frame = frame.f_back
    stack = []
    while frame is not None and _package(frame) != "chainrule" and \
            frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        stack.append(frame)
        frame = frame.f_back
    if stack and frame is not None and _package(frame) == "chainrule" and not _given(frame, stack):
        return _chainrule_asked(frame, value)           # chainrule's code called the library
    if not stack and inner:
        return _chainrule_asked(inner[0], value)        # chainrule's code converted it itself
    # the outermost frame that has a public name (a decorator's wrapper has none: the next one in)
    caller, name = next(((f, n) for f in reversed(stack) for n in [_public_name(f)] if n), (None, ""))
    if not name:
        return "", "", ""
    ours = _RENAMED.get(name, name.partition(".")[2])
    obj = sys.modules["chainrule"]          # the package itself, loaded by now (not an import)
    for part in ours.split("."):
        obj = getattr(obj, part, None)
    ours = "cr." + ours if callable(obj) else ""
    arg = _local_name(caller, value)
    if ours in _CONSTANT and (arg in _CONSTANT[ours] or value is None):
        return name, "", (f"chainrule's {ours} does not differentiate {arg or 'it'} either (it takes "
                          f"{arg or 'it'} as a constant); pass {arg or 't'}.detach() if you mean the "
                          f"result to be a constant")
    return name, ours, ""


def _chainrule_asked(frame: Any, value: Any) -> tuple[str, str, str]:
    """Chainrule's function (the outermost one with a public name, from ``frame`` out) asked NumPy
    for the values of ``value``: it does not differentiate that argument."""
    frames = []
    while frame is not None and _package(frame) == "chainrule":
        frames.append(frame)
        frame = frame.f_back
    named = [(f, n) for f in frames for n in [_chainrule_name(f.f_code)] if n]
    f, name = named[-1] if named else (frames[0], f"{frames[0].f_globals['__name__']}.{frames[0].f_code.co_name}")
    arg = _local_name(f, value) or _local_name(frames[0], value)
    what = f"the argument {arg}" if arg else "this argument"
    return name, "", (f"{name} does not differentiate {what} (it takes it as a constant); pass "
                      f"{arg or 't'}.detach() if you mean the result to be a constant")


def _given(frame: Any, stack: list) -> bool:
    """Was the library function one that chainrule's ``frame`` was handed (``cr.vmap(f)``'s f)?"""
    codes = {f.f_code for f in stack}
    return any(getattr(v, "__code__", None) in codes or getattr(inspect.unwrap(v), "__code__", None) in codes
               for v in frame.f_locals.values() if callable(v))


def _chainrule_name(code: Any) -> str:
    """``cr.full``, ``cr.special.erf``: the public chainrule function whose code is ``code``, or ""."""
    cr = sys.modules["chainrule"]
    spaces = [("cr", cr)] + [(f"cr.{k}", m) for k, m in vars(cr).items() if inspect.ismodule(m) and k != "ops"
                             and not k.startswith("_") and m.__name__.startswith("chainrule.")]
    return next((f"{prefix}.{k}" for prefix, space in spaces for k, v in vars(space).items()
                 if not k.startswith("_") and callable(v) and getattr(inspect.unwrap(v), "__code__", None) is code),
                "")


def _local_name(frame: Any, value: Any) -> str:
    """The variable of ``frame`` that holds ``value`` (itself or in a list or tuple), or ""."""
    if frame is None or value is None:
        return ""
    return next((k for k, v in frame.f_locals.items() if v is value or isinstance(v, (list, tuple)) and
                 any(x is value for x in v)), "")


def _package(frame: Any) -> str:
    return frame.f_globals.get("__name__", "").partition(".")[0]


def _public_name(frame: Any) -> str:
    """``scipy.special.logsumexp`` for a frame of ``scipy.special._logsumexp.logsumexp``: the name
    under the shortest public module that reaches the frame's function; a method of a module-level
    instance is named by the instance (``scipy.stats.norm.logpdf``), a decorator's wrapper by the
    function it wraps (one of its variables); "" if none is found."""
    code, module = frame.f_code, frame.f_globals.get("__name__", "")
    if "<locals>" not in code.co_qualname:
        return _name_of(code, module, frame.f_locals.get("self"))
    return next((name for fn in frame.f_locals.values() if inspect.isfunction(fn)
                 for name in [_name_of(fn.__code__, fn.__module__, None)] if name), "")


def _name_of(code: Any, module: str, owner: Any) -> str:
    qual, parts = code.co_qualname.split("."), module.split(".")
    for i in range(1, len(parts) + 1):
        if parts[i - 1].startswith("_"):
            break
        public = obj = sys.modules.get(".".join(parts[:i]))
        for q in qual:
            obj = getattr(obj, q, None)
        if getattr(inspect.unwrap(obj), "__code__", None) is code:
            instance = next((k for k, v in vars(public).items() if v is owner), None) \
                if owner is not None and len(qual) > 1 else None
            name = parts[:i] + ([instance, qual[-1]] if instance else qual)
            return ".".join(name[:-1] if name[-1] == "__call__" else name)
    return ""


class CompileError(ChainruleError):
    """``cr.compile(fn, on_miss="error")``: a call whose guards do not match any capture (the message
    names the guard, e.g. ``argument 0: shape (32, 784) != (64, 784)``).

    >>> import chainrule as cr
    >>> def double(x):
    ...     return x * 2.0
    >>> step = cr.compile(double, on_miss="error")
    >>> _ = step(cr.ones(2)); step(cr.ones(3))
    Traceback (most recent call last):
    chainrule.core.errors.CompileError: cr.compile(double): no capture matches this call: argument 0: shape (3,) != (2,)
    """
