"""Shape and indexing ops. Primitives: reshape, transpose, broadcast_to, concatenate, flip, roll, pad,
getitem, scatter_add, index_put, diagonal, diagonal_scatter. Everything else here is a composite and needs no rule.

Indexing follows NumPy: integer-array indices that repeat an element accumulate its gradient.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, Sequence

from chainrule.core._backend import np
from chainrule.core._registry import apply, defprim, in_graph, no_out, raw
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import batch_chain, on_physical, physical
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor
from chainrule.ops._batching import (
    batch_axes,
    batch_index,
    batch_unary,
    expand,
    inverse,
    lift,
    region_shape,
    set_batch,
)
from chainrule.ops._batching import reshape as _breshape
from chainrule.ops._batching import transpose as _btranspose
from chainrule.ops.elementwise import IMAG, REAL, astype, multiply, where, zeros_like

_NOFLOP = lambda out, *xs, **p: 0  # noqa: E731  (data movement is not counted as FLOPs)


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(raw(x)))


def _axis(a: Any, ndim: int, op: str) -> int:
    """One axis as a non-negative int; out of range raises (NumPy's AxisError), never wraps."""
    a = operator.index(a)
    if not -ndim <= a < ndim:
        raise ShapeError(f"{op}: axis {a} is out of bounds for an array of dimension {ndim}")
    return a % ndim


RESHAPE = defprim("reshape", lambda x, shape, in_shape: np.reshape(x, shape),
                  vjps=(lambda g, out, x, shape, in_shape: reshape(g, in_shape),), jvps="linear",
                  flops=_NOFLOP, kind="shape", complex="linear")


TRANSPOSE = defprim("transpose", lambda x, axes: np.transpose(x, axes),
                    vjps=(lambda g, out, x, axes: transpose(g, inverse(axes)),), jvps="linear",
                    flops=_NOFLOP, kind="shape", complex="linear")
# The engine sums a cotangent back to the input's shape, so broadcast_to's rule is the identity.
BROADCAST_TO = defprim("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                       vjps=(lambda g, out, x, shape: g,), jvps="linear", flops=_NOFLOP, kind="shape", complex="linear")


def _view_as_real_forward(x: Any) -> Any:
    x = np.asarray(x)                   # (a NumPy scalar has no memory to view)
    if x.dtype.kind != "c":
        raise TypeError(f"view_as_real needs a complex input, got {x.dtype}")
    part = x.real                       # a float view with x's strides; the imaginary part follows
    return np.lib.stride_tricks.as_strided(part, x.shape + (2,), part.strides + (part.itemsize,),
                                           writeable=x.flags.writeable)


def _view_as_complex_forward(x: Any) -> Any:
    if x.dtype not in (np.float32, np.float64) or x.ndim == 0 or x.shape[-1] != 2:
        raise TypeError(f"view_as_complex needs a float32/float64 input whose last axis has size 2, "
                        f"got {x.dtype} of shape {x.shape}")
    if x.strides[-1] != x.itemsize or any(s % (2 * x.itemsize) for s in x.strides[:-1]):
        x = np.ascontiguousarray(x)     # (a copy, not a view: the pairs are not adjacent in memory)
    return x.view(np.complex64 if x.dtype == np.float32 else np.complex128)[..., 0]


# R-linear maps between C and R^2, each the other's transpose under PyTorch's convention
VIEW_AS_REAL = defprim("view_as_real", _view_as_real_forward,
                       vjps=(lambda g, out, x: view_as_complex(g),), jvps="linear", flops=_NOFLOP,
                       kind="shape", complex="own")
VIEW_AS_COMPLEX = defprim("view_as_complex", _view_as_complex_forward,
                          vjps=(lambda g, out, x: view_as_real(g),), jvps="linear", flops=_NOFLOP,
                          kind="shape", complex="own")


def _diagonal_forward(x: Any, offset: int, axis1: int, axis2: int, shape: tuple) -> Any:
    d = np.diagonal(x, offset, axis1, axis2)
    if x.flags.writeable:
        d.flags.writeable = True     # a writable view, as PyTorch's (NumPy's is read-only)
    return d


def _diagonal_scatter_forward(g: Any, offset: int, axis1: int, axis2: int, shape: tuple) -> Any:
    out = np.zeros(shape, dtype=g.dtype)
    _diagonal_forward(out, offset, axis1, axis2, shape)[...] = g
    return out


# diagonal and diagonal_scatter (zeros of ``shape`` with the diagonal set) are each other's transpose
DIAGONAL = defprim("diagonal", _diagonal_forward,
                   vjps=(lambda g, out, x, **p: apply(DIAGONAL_SCATTER, (g,), p),), jvps="linear",
                   flops=_NOFLOP, kind="shape", complex="linear")
DIAGONAL_SCATTER = defprim("diagonal_scatter", _diagonal_scatter_forward,
                           vjps=(lambda g, out, x, **p: apply(DIAGONAL, (g,), p),), jvps="linear",
                           flops=_NOFLOP, kind="shape", complex="linear")


def _concat_vjp(g: Any, out: Any, *xs: Any, axis: int, bounds: tuple, argnum: int) -> Any:
    index = (slice(None),) * axis + (slice(bounds[argnum], bounds[argnum + 1]),)
    return getitem(g, index)


def _concat_jvp(t: Any, out: Any, *xs: Any, axis: int, bounds: tuple, argnum: int) -> Any:
    parts = [t if i == argnum else zeros_like(x) for i, x in enumerate(xs)]
    return concatenate(parts, axis=axis)


CONCATENATE = defprim("concatenate", lambda *xs, axis, bounds: np.concatenate(xs, axis=axis),
                      vjps=(_concat_vjp,), jvps=(_concat_jvp,), variadic=True, flops=_NOFLOP,
                      kind="shape", hint="All inputs must have the same shape except along `axis`.", complex="linear")
FLIP = defprim("flip", lambda x, axis: np.flip(x, axis), vjps=(lambda g, out, x, axis: flip(g, axis),),
               jvps="linear", flops=_NOFLOP, kind="shape", complex="linear")
ROLL = defprim("roll", lambda x, shift, axis: np.roll(x, shift, axis),
               vjps=(lambda g, out, x, shift, axis: roll(g, _negate(shift), axis),), jvps="linear",
               flops=_NOFLOP, kind="shape", complex="linear")


def _negate(shift: Any) -> Any:
    return tuple(-s for s in shift) if isinstance(shift, tuple) else -shift


def _pad_forward(x: Any, pad_width: tuple, constant_values: Any) -> Any:
    return np.pad(x, pad_width, mode="constant", constant_values=constant_values)


def _unpad(g: Any, pad_width: tuple) -> Any:
    return getitem(g, tuple(slice(lo, g.shape[i] - hi) for i, (lo, hi) in enumerate(pad_width)))


PAD = defprim("pad", _pad_forward,
              vjps=(lambda g, out, x, pad_width, constant_values: _unpad(g, pad_width),),
              jvps=(lambda t, out, x, pad_width, constant_values: pad(t, pad_width),),
              flops=_NOFLOP, kind="shape", complex="linear")


def _is_basic(index: tuple) -> bool:
    return all(isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis for i in index)


def _scatter_forward(g: Any, index: tuple, shape: tuple, dtype: Any) -> Any:
    out = np.zeros(shape, dtype=dtype)
    if _is_basic(index):
        out[index] = g
    else:
        np.add.at(out, index, g)
    return out


def _getitem_forward(x: Any, index: tuple, shape: tuple) -> Any:
    out = x[index]
    if type(out) is not np.ndarray and not any(i is Ellipsis for i in index):
        out = x[index + (Ellipsis,)]     # x[2]: a 0-d view, as PyTorch (NumPy gives a copy)
    return out


GETITEM = defprim("getitem", _getitem_forward,
                  vjps=(lambda g, out, x, index, shape: scatter_add(g, index, shape),), jvps="linear",
                  flops=_NOFLOP, kind="shape", complex="linear")
# zeros(shape) with g added at index (repeated indices accumulate); the transpose of getitem
SCATTER_ADD = defprim("scatter_add", _scatter_forward,
                      vjps=(lambda g, out, x, index, shape, dtype: getitem(g, index),), jvps="linear",
                      flops=_NOFLOP, kind="shape", complex="linear")


def _index_put_forward(x: Any, v: Any, index: tuple) -> Any:
    out = np.array(x, copy=True)
    out[index] = v
    return out


INDEX_PUT = defprim("index_put", _index_put_forward,
                    vjps=(lambda g, out, x, v, index: index_put(g, index, 0.0),
                          lambda g, out, x, v, index: getitem(g, index)),
                    jvps=(lambda t, out, x, v, index: index_put(t, index, 0.0),
                          lambda t, out, x, v, index: index_put(zeros_like(out), index, t)),
                    flops=_NOFLOP, kind="shape", complex="linear")


# ----- batching rules (cr.vmap) -----
def _batch_reshape(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    return apply(prim, xs, {"shape": (size,) + tuple(params["shape"]), "in_shape": (size,) + tuple(params["in_shape"])})


def _batch_transpose(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    return apply(prim, xs, {"axes": (0,) + tuple(a + 1 for a in params["axes"])})


def _batch_broadcast_to(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    shape = tuple(params["shape"])
    return apply(prim, (lift(xs[0], len(shape), size),), {"shape": (size,) + shape})


def _batch_concatenate(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    xs = tuple(x if b else expand(x, size) for x, b in zip(xs, batched))
    return apply(prim, xs, {"axis": params["axis"] + 1, "bounds": params["bounds"]})


def _batch_roll(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    x, axis = xs[0], params["axis"]
    if axis is None:                    # NumPy rolls the flattened array
        shape = np.shape(x)
        flat = apply(prim, (_breshape(x, (size, -1)),), {"shift": params["shift"], "axis": 1})
        return _breshape(flat, shape)
    ndim = np.ndim(x) - 1
    axis = tuple(a % ndim + 1 for a in axis) if isinstance(axis, tuple) else axis % ndim + 1
    return apply(prim, xs, {"shift": params["shift"], "axis": axis})


def _batch_pad(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    return apply(prim, xs, {"pad_width": ((0, 0),) + tuple(params["pad_width"]),
                            "constant_values": params["constant_values"]})


def _batch_diagonal(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    ndim = len(params["shape"])
    return apply(prim, xs, {"offset": params["offset"], "axis1": params["axis1"] % ndim + 1,
                            "axis2": params["axis2"] % ndim + 1, "shape": (size,) + tuple(params["shape"])})


def _batch_getitem(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    x = xs[0] if batched[0] else expand(xs[0], size)
    shape = tuple(params["shape"])
    index, perm = batch_index(params["index"], len(shape), size)
    out = apply(prim, (x,), {"index": index, "shape": (size,) + shape})
    return _btranspose(out, perm) if perm else out


def _batch_scatter_add(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    shape = tuple(params["shape"])
    index, perm = batch_index(params["index"], len(shape), size)
    g = xs[0] if batched[0] else expand(xs[0], size)
    if perm:
        g = _btranspose(g, inverse(perm))
    return apply(prim, (g,), {"index": index, "shape": (size,) + shape, "dtype": params["dtype"]})


def _batch_index_put(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    x = xs[0] if batched[0] else expand(xs[0], size)
    shape = tuple(np.shape(x))
    index, perm = batch_index(params["index"], len(shape) - 1, size)
    v = xs[1]
    if batched[1] or perm:
        region = region_shape(shape, index)                     # the batch's, laid out as NumPy does
        full = tuple(region[p] for p in perm) if perm else region        # (size,) + the example's
        if not batched[1]:
            v = expand(v, size)
        v = apply(BROADCAST_TO, (lift(v, len(full) - 1, size),), {"shape": full})
        if perm:
            v = _btranspose(v, inverse(perm))
    return apply(prim, (x, v), {"index": index})


for _prim, _rule in ((RESHAPE, _batch_reshape), (TRANSPOSE, _batch_transpose), (BROADCAST_TO, _batch_broadcast_to),
                     (CONCATENATE, _batch_concatenate), (FLIP, batch_axes("axis")), (ROLL, _batch_roll),
                     (PAD, _batch_pad), (DIAGONAL, _batch_diagonal), (DIAGONAL_SCATTER, _batch_diagonal),
                     (GETITEM, _batch_getitem), (SCATTER_ADD, _batch_scatter_add), (INDEX_PUT, _batch_index_put),
                     (VIEW_AS_REAL, batch_unary), (VIEW_AS_COMPLEX, batch_unary)):
    set_batch(_prim, _rule)


def _normalize_index(index: Any, shape: tuple) -> tuple:
    """Plain-array index tuple; Tensors unwrapped, boolean masks checked against the dimensions they
    select from (as NumPy does) and turned into integer arrays."""
    if not isinstance(index, tuple):
        index = (index,)
    index = [i if isinstance(i, Tensor) and i._level else _index_array(raw(i)) for i in index]   # (vmap: kept)
    # dimensions each entry consumes: a mask its ndim, None and Ellipsis none (Ellipsis: the rest)
    used = [np.ndim(i) if _is_mask(i) else 0 if i is None or i is Ellipsis else 1 for i in index]
    out: list = []
    dim = 0                                   # the dimension of x the next index entry applies to
    for i, n in zip(index, used):
        if i is Ellipsis:
            n = max(len(shape) - builtins.sum(used), 0)
        elif _is_mask(i) and n:
            want = tuple(shape[dim:dim + n])
            if i.shape != want:
                raise IndexError(f"getitem: a boolean index of shape {i.shape} does not match the "
                                 f"dimensions {want} it selects from (dimension {dim} on, of an "
                                 f"array of shape {tuple(shape)}); a mask must have exactly their shape")
            out.extend(np.nonzero(i))
            dim += n
            continue
        elif isinstance(i, np.ndarray) and i.dtype.kind not in "iub":
            raise IndexError(f"getitem: index arrays must be integer or boolean, got {i.dtype}")
        out.append(i)
        dim += n
    return tuple(out)


def _is_mask(i: Any) -> bool:
    return isinstance(i, (bool, np.bool_)) or (isinstance(i, np.ndarray) and i.dtype == np.bool_)


def _index_array(i: Any) -> Any:
    if isinstance(i, list):
        return np.asarray(i) if i else np.zeros(0, dtype=np.intp)   # x[[]]: an empty selection
    return i


def _as_view(out: Any, x: Any, regenerate: Any, put_back: Any, reshaped: bool = False,
             batch: int = 0) -> Any:
    """``out``, a view of ``x``'s memory (basic indexing, reshape, transpose, ...), shares ``x``'s
    version counter, as a PyTorch view does: an in-place change through either is seen by both.
    ``regenerate(base)`` makes the view again and ``put_back(base, view)`` is the base with the
    view's region replaced: an in-place op on the view rewrites the base's history with them.
    Inside cr.vmap the physical arrays (where the graph and tangents live, ``batch`` leading batch
    axes) are linked so; a ``reshaped`` one also where the batch's reshape had to copy."""
    if isinstance(out, Tensor) and out._level:
        po, px, chain = physical(out), physical(x), batch_chain(x)
        if isinstance(po, Tensor) and isinstance(px, Tensor) and batch_chain(out) == chain:
            _as_view(po, px, regenerate and on_physical(regenerate, x),
                     put_back and on_physical(put_back, x), reshaped, len(chain))
        return out
    if not (isinstance(x, Tensor) and isinstance(out, Tensor)):
        return out
    if np.may_share_memory(out.data, x.data):
        out._shares_memory_with(x)
    elif reshaped and batch and _example_reshape_is_view(x.data, out.data.shape, batch):
        # a reshape that one example makes as a view copied the batch, whose memory is laid out
        # otherwise (batch axis not outermost): the copy is kept equal to x (after_write), as a view
        out._shares_memory_with(x)._copy_link = True
    else:
        return out
    out._view = (x, regenerate, put_back)
    if not STATE.grad_enabled:
        out._view_meta = "no_grad"
        if x._requires_grad:                   # as in PyTorch: a leaf that requires grad
            out._requires_grad = True
    elif x._view_meta is not None:             # a view of a split output, or of a no_grad view
        out._view_meta = x._view_meta
    return out


def _example_reshape_is_view(a: Any, shape: tuple, batch: int) -> bool:
    """Whether reshaping one example of ``a`` (its ``batch`` leading axes are the batch) to
    ``shape[batch:]`` is a view, by NumPy's rule, with the batch laid out outermost in memory:
    an example axis's stride loses the factor of each batch axis that sits inside it."""
    inner = [(abs(s), n) for s, n in zip(a.strides[:batch], a.shape[:batch]) if s and n > 1]
    strides = []
    for s in a.strides[batch:]:
        for sb, n in inner:
            if sb < abs(s):
                if s % n:
                    return False
                s //= n
        strides.append(s)
    one = np.lib.stride_tricks.as_strided(np.empty(1, a.dtype), a.shape[batch:], strides)
    try:
        np.reshape(one, shape[batch:], copy=False)     # (strides only: no element is read)
    except ValueError:
        return False
    return True


# ----- public functions -----
def reshape(x: Any, shape: Any, *more: int) -> Any:
    """Reshape (one dimension may be -1), as ``numpy.reshape``."""
    if more:
        shape = (shape, *more)
    elif isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    in_shape = _shape_of(x)
    shape = tuple(int(s) for s in shape)
    return _as_view(apply(RESHAPE, (x,), {"shape": shape, "in_shape": in_shape}), x,
                    lambda b: reshape(b, shape), lambda b, v: reshape(v, in_shape), reshaped=True)


def transpose(x: Any, axes: Any = None) -> Any:
    """Permute axes (reverse them when ``axes`` is None)."""
    ndim = len(_shape_of(x))
    axes = tuple(reversed(range(ndim))) if axes is None else tuple(_axis(a, ndim, "transpose") for a in axes)
    if sorted(axes) != list(range(ndim)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of 0..{ndim - 1}")
    inverse = tuple(int(a) for a in np.argsort(axes))
    return _as_view(apply(TRANSPOSE, (x,), {"axes": axes}), x,
                    lambda b: transpose(b, axes), lambda b, v: transpose(v, inverse))


permute_dims = transpose      # the array API's name (np.permute_dims is np.transpose)


def moveaxis(x: Any, source: Any, destination: Any) -> Any:
    """Move axes to new positions (composite of transpose); out-of-range axes raise.

    >>> import chainrule as cr
    >>> cr.moveaxis(cr.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    ndim = len(_shape_of(x))
    src = [_axis(a, ndim, "moveaxis") for a in np.atleast_1d(source)]
    dst = [_axis(a, ndim, "moveaxis") for a in np.atleast_1d(destination)]
    order = [a for a in range(ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    """Swap two axes (composite of transpose)."""
    ndim = len(_shape_of(x))
    axes = list(range(ndim))
    a, b = _axis(axis1, ndim, "swapaxes"), _axis(axis2, ndim, "swapaxes")
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, axes)


def broadcast_to(x: Any, shape: Any) -> Any:
    """Broadcast to ``shape``; the gradient is summed back."""
    shape = tuple(shape)
    return _as_view(apply(BROADCAST_TO, (x,), {"shape": shape}), x,      # read-only: no put_back
                    lambda b: broadcast_to(b, shape), None)


def expand_dims(x: Any, axis: Any) -> Any:
    """Insert size-1 axes (composite of reshape)."""
    shape = list(_shape_of(x))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = len(shape) + len(axes)
    for a in sorted(_axis(a, ndim, "expand_dims") for a in axes):
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


def squeeze(x: Any, axis: Any = None) -> Any:
    """Remove size-1 axes (composite of reshape)."""
    shape = _shape_of(x)
    axes = normalize_axis(axis, len(shape), "squeeze")
    if axes is None:
        axes = tuple(i for i, n in enumerate(shape) if n == 1)
    for a in axes:
        if shape[a] != 1:
            raise ShapeError(f"squeeze: cannot remove axis {a} of size {shape[a]} from shape {shape}")
    return reshape(x, tuple(n for i, n in enumerate(shape) if i not in axes))


def ravel(x: Any) -> Any:
    """Flatten to 1-D (composite of reshape)."""
    return reshape(x, (-1,))


def flatten(x: Any, start_axis: int = 0, end_axis: int = -1) -> Any:
    """Merge axes ``start_axis..end_axis`` into one (torch.flatten's semantics)."""
    shape = _shape_of(x)
    if not shape:
        return reshape(x, (1,))
    s, e = _axis(start_axis, len(shape), "flatten"), _axis(end_axis, len(shape), "flatten")
    return reshape(x, shape[:s] + (-1,) + shape[e + 1:])


def _cast_all(xs: list, dtype: Any, casting: str, op: str) -> list:
    """NumPy's ``dtype=``/``casting=`` of the joining functions: every input cast to ``dtype`` (by
    default the inputs' common type), refused as NumPy does when ``casting`` does not allow it."""
    dtypes = [np.asarray(raw(x)).dtype if not hasattr(x, "dtype") else np.dtype(x.dtype) for x in xs]
    target = np.dtype(dtype) if dtype is not None else np.result_type(*dtypes)
    for d in dtypes:
        if not np.can_cast(d, target, casting):
            raise DTypeError(f"{op}: cannot cast an input of dtype {d} to {target} under casting={casting!r}")
    return xs if dtype is None else [x if d == target else astype(x, target) for x, d in zip(xs, dtypes)]


def concatenate(xs: Sequence[Any], axis: int | None = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> Any:
    """Join along an existing axis (``axis=None`` flattens first), as ``numpy.concatenate``; ``dtype``
    casts the inputs first (as NumPy, within ``casting``)."""
    no_out("concatenate", out)
    xs = list(xs)
    if not xs:
        raise ShapeError("concatenate: need at least one array")
    if dtype is not None or casting != "same_kind":
        xs = _cast_all(xs, dtype, casting, "concatenate")
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    ndim = len(_shape_of(xs[0]))
    if ndim == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated; use stack")
    axis = normalize_axis(axis, ndim, "concatenate")[0]
    bounds = [0]
    for x in xs:
        shape = _shape_of(x)
        if len(shape) != ndim:
            raise ShapeError(f"concatenate: all inputs must have {ndim} dimensions, got shapes "
                             f"{[_shape_of(v) for v in xs]}")
        bounds.append(bounds[-1] + shape[axis])
    return apply(CONCATENATE, tuple(xs), {"axis": axis, "bounds": tuple(bounds)})


def stack(xs: Sequence[Any], axis: int = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Join along a new axis (composite of expand_dims + concatenate).

    >>> import chainrule as cr
    >>> cr.stack([cr.ones(2), cr.zeros(2)], axis=1).shape
    (2, 2)
    """
    no_out("stack", out)
    xs = list(xs)
    if not xs:
        raise ShapeError("stack: need at least one array to stack")
    shapes = {_shape_of(x) for x in xs}
    if len(shapes) > 1:
        raise ShapeError(f"stack: all inputs must have the same shape, got {sorted(shapes)}")
    ndim = len(shapes.pop()) + 1
    axis = _axis(axis, ndim, "stack")
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis, dtype=dtype, casting=casting)


def hstack(xs: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Stack horizontally (composite)."""
    xs = [atleast_1d(x) for x in xs]
    return concatenate(xs, axis=0 if xs and len(_shape_of(xs[0])) == 1 else 1, dtype=dtype, casting=casting)


def vstack(xs: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Stack vertically (composite)."""
    return concatenate([atleast_2d(x) for x in xs], axis=0, dtype=dtype, casting=casting)


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split into pieces along ``axis`` (composite of getitem), as ``numpy.split``."""
    axis = _axis(axis, len(_shape_of(x)), "split")
    n = _shape_of(x)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if n % k:
            raise ShapeError(f"split: axis of size {n} cannot be split into {k} equal sections; "
                             f"use array_split or pass indices")
        cuts = [i * (n // k) for i in range(1, k)]
    else:
        cuts = list(indices_or_sections)
    edges = [0, *cuts, n]
    return _multi([getitem(x, (slice(None),) * axis + (slice(a, b),)) for a, b in zip(edges[:-1], edges[1:])])


def unbind(x: Any, axis: int = 0) -> list:
    """The slices along ``axis``, each a view (PyTorch's ``unbind``).

    >>> import chainrule as cr
    >>> [t.tolist() for t in cr.unbind(cr.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1)]
    [[1.0, 3.0], [2.0, 4.0]]
    """
    axis = _axis(axis, len(_shape_of(x)), "unbind")
    return _multi([getitem(x, (slice(None),) * axis + (i,)) for i in range(_shape_of(x)[axis])])


def _multi(views: list) -> list:
    """Outputs of a multi-output view op: as in PyTorch, in-place on one while grad is recorded raises."""
    for v in map(physical, views):       # (inside cr.vmap the physical arrays are the views)
        if isinstance(v, Tensor) and v._view is not None and v._view_meta is None:
            v._view_meta = "multi"
    return views


def array_split(x: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split into ``indices_or_sections`` nearly equal pieces, or at the given indices (composite)."""
    if not isinstance(indices_or_sections, (int, np.integer)):
        return split(x, indices_or_sections, axis)
    n = _shape_of(x)[axis]
    sections = int(indices_or_sections)
    if sections <= 0:
        raise ValueError(f"array_split: the number of sections must be larger than 0, got {sections}")
    q, r = divmod(n, sections)
    sizes = [q + 1] * r + [q] * (sections - r)
    return split(x, list(np.cumsum(sizes)[:-1]), axis)


def flip(x: Any, axis: Any = None) -> Any:
    """Reverse the order of elements along ``axis`` (all axes when None)."""
    ndim = len(_shape_of(x))
    axis = normalize_axis(axis, ndim, "flip") if axis is not None else tuple(range(ndim))
    return apply(FLIP, (x,), {"axis": axis})


def roll(x: Any, shift: Any, axis: Any = None) -> Any:
    """Roll elements along ``axis`` (flattened when None)."""
    if isinstance(shift, (list, tuple)):
        shift = tuple(int(s) for s in shift)
    if isinstance(axis, list):
        axis = tuple(axis)
    return apply(ROLL, (x,), {"shift": shift, "axis": axis})


def tile(x: Any, reps: Any) -> Any:
    """Repeat the whole array ``reps`` times per axis (composite of reshape + broadcast_to)."""
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    shape = _shape_of(x)
    ndim = max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + shape
    reps = (1,) * (ndim - len(reps)) + reps
    spread = reshape(x, tuple(v for n in shape for v in (1, n)))
    big = broadcast_to(spread, tuple(v for r, n in zip(reps, shape) for v in (r, n)))
    return reshape(big, tuple(r * n for r, n in zip(reps, shape)))


def repeat(x: Any, repeats: Any, axis: int | None = None) -> Any:
    """Repeat each element (composite of take with repeated indices, which accumulate)."""
    if axis is None:
        x, axis = ravel(x), 0
    n = _shape_of(x)[axis]
    counts = np.asarray(raw(repeats))
    if counts.dtype.kind not in "iu" or np.any(counts < 0) or counts.ndim > 1 or counts.size not in (1, n):
        raise ShapeError(f"repeat: repeats must be a non-negative int or one per element ({n} along "
                         f"axis {axis}), got {repeats!r}; pass e.g. repeats=2")
    return take(x, np.repeat(np.arange(n), counts), axis=axis)


_PAD_KEYWORDS = {"constant": ("constant_values",), "edge": (), "wrap": (), "reflect": ("reflect_type",),
                 "symmetric": ("reflect_type",), "linear_ramp": ("end_values",),
                 "maximum": ("stat_length",), "minimum": ("stat_length",), "mean": ("stat_length",),
                 "median": ("stat_length",)}


def pad_widths(x: Any, pad_width: Any, mode: Any, kwargs: dict) -> tuple:
    """``numpy.pad``'s checks: the mode, its keywords (others refused, as NumPy), widths per axis."""
    if not isinstance(mode, str) or mode not in _PAD_KEYWORDS:
        raise ValueError(f"pad: mode {mode!r} is not supported; use one of {sorted(_PAD_KEYWORDS)} "
                         f"(mode='empty' and callable modes have no chainrule version)")
    extra = {k for k, v in kwargs.items() if v is not None} - set(_PAD_KEYWORDS[mode])
    if extra:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(extra)}")
    ndim = len(_shape_of(x))
    width = np.broadcast_to(np.asarray(pad_width, dtype=int), (ndim, 2))
    if (width < 0).any():
        raise ValueError(f"pad: index can't contain negative values, got pad_width={pad_width!r}")
    return tuple(map(tuple, width.tolist()))


def pad(x: Any, pad_width: Any, mode: str = "constant", *, constant_values: Any = None, end_values: Any = None,
        reflect_type: Any = None) -> Any:
    """``numpy.pad`` with the modes 'constant', 'edge', 'reflect', 'symmetric' (``reflect_type`` 'even'
    or 'odd'), 'wrap' and 'linear_ramp': each padded value is a fixed linear combination of ``x``'s,
    so the result is differentiable (composites of take, multiply and concatenate beyond 'constant').

    >>> import chainrule as cr
    >>> cr.pad(cr.tensor([1.0, 2.0, 4.0]), 2, mode="reflect", reflect_type="odd")
    tensor([-2.,  0.,  1.,  2.,  4.,  6.,  7.])
    """
    kw = {"constant_values": constant_values, "end_values": end_values, "reflect_type": reflect_type}
    widths = pad_widths(x, pad_width, mode, kw)
    if mode == "constant":
        if in_graph(constant_values):
            return _pad_with_tensor_constants(x, widths, constant_values)
        return apply(PAD, (x,), {"pad_width": widths,
                                 "constant_values": 0.0 if constant_values is None else raw(constant_values)})
    if mode not in ("edge", "reflect", "symmetric", "wrap", "linear_ramp"):
        raise ValueError(f"pad: mode {mode!r} needs a reduction; call cr.pad (numpy.pad on a Tensor)")
    if reflect_type not in (None, "even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if in_graph(end_values):                # the ramp is linear in its end values: they stay tensors
        ends = broadcast_to(astype(end_values, np.float64), (len(widths), 2))
    else:
        ends = np.broadcast_to(np.asarray(0.0 if end_values is None else end_values, dtype=float), (len(widths), 2))
    for axis, (lo, hi) in enumerate(widths):
        if lo == hi == 0:
            continue
        n = _shape_of(x)[axis]
        if n == 0:
            raise ValueError(f"pad: can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
        extra = {"reflect_type": reflect_type or "even"} if mode in ("reflect", "symmetric") else {}
        # row i of `rows`: the coefficients of x's entries in the padded entry i (np.pad of the identity)
        rows = np.pad(np.eye(n), ((lo, hi), (0, 0)), mode=mode, **extra)
        shift = None
        if mode == "linear_ramp" and isinstance(ends, Tensor):
            shift = sum(ends[axis, j] * np.pad(np.zeros(n), (lo, hi), mode=mode, end_values=(1.0 - j, float(j)))
                        for j in (0, 1))
        elif mode == "linear_ramp":
            shift = np.pad(np.zeros(n), (lo, hi), mode=mode, end_values=tuple(ends[axis]))
        left = _combine(x, rows[:lo], None if shift is None else shift[:lo], axis)
        right = _combine(x, rows[lo + n:], None if shift is None else shift[lo + n:], axis)
        x = concatenate([p for p in (left, x, right) if p is not None], axis=axis)
    return x


def _pad_with_tensor_constants(x: Any, widths: tuple, values: Any) -> Any:
    """Mode 'constant' with tensor ``constant_values`` (broadcast to (ndim, 2), NumPy's pairs): the
    zero padding plus each value times the entries it fills, so the values get their gradient."""
    shape, dtype = _shape_of(x), np.dtype(getattr(x, "dtype", None) or np.asarray(raw(x)).dtype)
    values = broadcast_to(astype(values, dtype), (len(shape), 2))
    out = apply(PAD, (x,), {"pad_width": widths, "constant_values": 0.0})
    for k in np.ndindex(len(shape), 2):
        unit = np.zeros((len(shape), 2))
        unit[k] = 1.0
        filled = np.pad(np.zeros(shape, dtype), widths, constant_values=unit)
        if filled.any():
            out = out + filled * values[k]
    return out


def _combine(x: Any, rows: Any, shift: Any, axis: int) -> Any:
    """``rows @ x`` along ``axis`` (+ ``shift``), as a few takes: rows have few non-zero entries."""
    if not len(rows):
        return None
    dtype = np.dtype(getattr(x, "dtype", None) or np.asarray(raw(x)).dtype)
    k = builtins.max(int((rows != 0).sum(axis=1).max()), 1)
    order = np.argsort(rows == 0, axis=1, kind="stable")[:, :k]    # each row's non-zero columns first
    coefs = np.take_along_axis(rows, order, axis=1)
    ndim = len(_shape_of(x))
    along = tuple(-1 if i == axis else 1 for i in range(ndim))
    out = None
    for r in range(k):
        term = take(x, order[:, r], axis=axis)
        if not (coefs[:, r] == 1).all():
            term = multiply(term, coefs[:, r].astype(dtype).reshape(along))
        out = term if out is None else out + term
    if isinstance(shift, Tensor):
        out = out + reshape(astype(shift, dtype), along)
    elif shift is not None and shift.any():
        out = out + shift.astype(dtype).reshape(along)
    if np.dtype(raw(out).dtype) != dtype:
        out = astype(out, dtype)
    return out


def getitem(x: Any, index: Any) -> Any:
    """``x[index]`` with NumPy semantics: slices, ints, None, Ellipsis, integer and boolean arrays."""
    shape = _shape_of(x)
    index = _normalize_index(index, shape)
    return _as_view(apply(GETITEM, (x,), {"index": index, "shape": shape}), x,
                    lambda b: getitem(b, index), lambda b, v: index_put(b, index, v))


def scatter_add(g: Any, index: Any, shape: tuple) -> Any:
    """zeros(shape) with ``g`` added at ``index`` (the transpose of getitem)."""
    index = _normalize_index(index, shape)
    return apply(SCATTER_ADD, (g,), {"index": index, "shape": tuple(shape), "dtype": raw(g).dtype})


def index_put(x: Any, index: Any, values: Any) -> Any:
    """Out-of-place ``x[index] = values``; ``Tensor.__setitem__`` uses it and rebases in place."""
    index = _normalize_index(index, _shape_of(x))
    return apply(INDEX_PUT, (x, values), {"index": index})


def _indices(indices: Any) -> Any:
    """An index argument as an array; inside cr.vmap a batched one stays a (batched) tensor."""
    return indices if isinstance(indices, Tensor) and indices._level else np.asarray(raw(indices))


def take(x: Any, indices: Any, axis: int | None = None, out: Any = None, mode: str = "raise") -> Any:
    """Take elements by integer indices along ``axis`` (composite of getitem); ``mode`` 'wrap' or
    'clip' handles out-of-range indices as ``numpy.take``."""
    no_out("take", out)
    indices = _indices(indices)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _axis(axis, len(_shape_of(x)), "take")
    n = _shape_of(x)[axis]
    if mode == "wrap" and n:
        indices = indices % n
    elif mode == "clip":
        indices = np.clip(indices, 0, max(n - 1, 0))
    elif mode not in ("raise", "wrap"):
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    return getitem(x, (slice(None),) * axis + (indices,))


def take_along_axis(x: Any, indices: Any, axis: int | None = -1) -> Any:
    """``numpy.take_along_axis`` (composite of getitem with broadcast index grids); ``axis=None``
    takes from the flattened ``x``."""
    indices = _indices(indices)
    if axis is None:
        if indices.ndim != 1:
            raise ShapeError(f"take_along_axis: with axis=None the indices must be 1-D, got shape {indices.shape}")
        return getitem(ravel(x), indices)
    shape = _shape_of(x)
    axis = _axis(axis, len(shape), "take_along_axis")
    if indices.ndim != len(shape):
        raise ShapeError(f"take_along_axis: the indices ({indices.ndim}-D) must have as many dimensions "
                         f"as the array ({len(shape)}-D)")
    grids = list(np.ogrid[tuple(slice(n) for n in indices.shape)])
    grids[axis] = indices
    return getitem(x, tuple(grids))


def real(x: Any) -> Any:
    """The real part, a view (as ``Tensor.real`` in PyTorch); of a real tensor, the tensor's data.

    >>> import chainrule as cr
    >>> cr.real(cr.tensor([1 + 2j]))
    tensor([1.])
    """
    return _as_view(apply(REAL, (x,)), x, real, _put_real)


def imag(x: Any) -> Any:
    """The imaginary part, a view for complex input (zeros, read-only, for a real one).

    >>> import chainrule as cr
    >>> cr.imag(cr.tensor([1 + 2j]))
    tensor([2.])
    """
    return _as_view(apply(IMAG, (x,)), x, imag, _put_imag)


def _put_real(base: Any, v: Any) -> Any:
    if base.dtype.kind != "c":
        return v
    return view_as_complex(stack([v, apply(IMAG, (base,))], axis=-1))


def _put_imag(base: Any, v: Any) -> Any:
    return view_as_complex(stack([apply(REAL, (base,)), v], axis=-1))


def view_as_real(x: Any) -> Any:
    """A complex tensor's memory as real pairs (shape + (2,)), a view, as PyTorch's.

    >>> import chainrule as cr
    >>> cr.view_as_real(cr.tensor([1 + 2j, 3 - 4j]))
    tensor([[ 1.,  2.],
            [ 3., -4.]])
    """
    return _as_view(apply(VIEW_AS_REAL, (x,)), x, view_as_real, lambda b, v: view_as_complex(v))


def view_as_complex(x: Any) -> Any:
    """Real pairs (last axis of size 2) as complex numbers, a view where the memory allows.

    >>> import chainrule as cr
    >>> cr.view_as_complex(cr.tensor([[1.0, 2.0]]))
    tensor([1.+2.j])
    """
    return _as_view(apply(VIEW_AS_COMPLEX, (x,)), x, view_as_complex, lambda b, v: view_as_real(v))


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """Diagonal of the (axis1, axis2) planes, on the last axis: a writable view, as PyTorch's.

    >>> import chainrule as cr
    >>> cr.diagonal(cr.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([1., 4.])
    """
    shape = _shape_of(x)
    if len(shape) < 2:
        raise ShapeError(f"diagonal: needs at least 2 dimensions, got shape {shape}")
    a1, a2 = _axis(axis1, len(shape), "diagonal"), _axis(axis2, len(shape), "diagonal")
    if a1 == a2:
        raise ShapeError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    params = {"offset": int(offset), "axis1": a1, "axis2": a2, "shape": shape}
    return _as_view(apply(DIAGONAL, (x,), params), x, lambda b: apply(DIAGONAL, (b,), params),
                    lambda b, v: diagonal_scatter(b, v, offset, a1, a2))


def diagonal_scatter(x: Any, values: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """``x`` with its diagonal replaced by ``values``, out of place (PyTorch's ``diagonal_scatter``).

    >>> import chainrule as cr
    >>> cr.diagonal_scatter(cr.zeros((2, 2)), cr.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    shape = _shape_of(x)
    a1, a2 = _axis(axis1, len(shape), "diagonal_scatter"), _axis(axis2, len(shape), "diagonal_scatter")
    params = {"offset": int(offset), "axis1": a1, "axis2": a2, "shape": shape}
    mask = np.zeros(shape, dtype=bool)
    _diagonal_forward(mask, **params)[...] = True
    return where(mask, apply(DIAGONAL_SCATTER, (values,), params), x)


def tril(x: Any, k: int = 0) -> Any:
    """Lower triangle (composite: multiply by a constant mask); a 1-D ``x`` gives a square, as NumPy."""
    return where(_tri(x, "tril", k), x, 0)


def triu(x: Any, k: int = 0) -> Any:
    """Upper triangle (composite: multiply by a constant mask); a 1-D ``x`` gives a square, as NumPy."""
    return where(_tri(x, "triu", k - 1), 0, x)


def _tri(x: Any, name: str, k: int) -> Any:
    shape = _shape_of(x)
    if not shape:
        raise ShapeError(f"{name}: needs an array of at least 1 dimension, got a 0-d one")
    n, m = shape[-2:] if len(shape) > 1 else (shape[0], shape[0])
    return np.tri(n, m, k, dtype=bool)


def atleast_1d(x: Any) -> Any:
    """View with at least one dimension."""
    return reshape(x, (1,)) if not _shape_of(x) else x


def atleast_2d(x: Any) -> Any:
    """View with at least two dimensions."""
    shape = _shape_of(x)
    return reshape(x, (1,) * (2 - len(shape)) + shape) if len(shape) < 2 else x

