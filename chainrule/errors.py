"""Error classes. Messages name the op, the shapes/dtypes and the fix."""
from __future__ import annotations


class ChainruleError(Exception):
    """Base class of chainrule's errors."""


class ShapeError(ChainruleError, ValueError):
    """Shapes that do not fit an op (raised at forward time)."""


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
