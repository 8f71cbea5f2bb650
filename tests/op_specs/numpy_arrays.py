"""Op-table rows of the array chapters of chainrule/numpy (manipulation, indexing, functional, sorting,
setops, creation_more, math_more): one per differentiable function (all composites: ``name`` is the
primitive each mainly runs on, ``id`` the function), real and complex."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import chainrule as cr
from tests.op_specs.spec import OpSpec, _tl

_PICK = np.array([[0, 2, 1, 1], [2, 0, 0, 1], [1, 1, 2, 0]])     # choose's index array
_C1 = np.random.default_rng(11).uniform(size=(3, 4)) > 0.6
_C2 = np.random.default_rng(12).uniform(size=(3, 4)) > 0.5
_ROWS = np.array([True, False, True])
_PAD = np.zeros(2)
_COORD = np.array([0.0, 0.5, 1.5, 3.0])


def _cat(parts: Any, axis: int = 0) -> Any:
    return cr.concatenate([cr.ravel(p) if axis is None else p for p in parts], axis=0 if axis is None else axis)


def _tcat(t: Any, parts: Any) -> Any:
    return t.cat([p.flatten() for p in parts])


def _quiet(fn: Any) -> Any:
    """A call whose (expected) NumPy deprecation warning (cross of 2-vectors) is silenced."""
    def call(*xs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return fn(*xs)
    return call


def _put_rows(x: Any) -> Any:
    y = x * 1.0
    cr.put(y, [1, 5, 5, 11], [x[0, 0] * 3, x[2, 3], x[1, 1]])      # repeated index: the last write wins
    return y


def _put_along(x: Any, v: Any) -> Any:
    y = x * 1.0
    cr.put_along_axis(y, np.array([[1], [3], [0]]), v, axis=1)
    return y


def _putmask(x: Any, v: Any) -> Any:
    y = x * 1.0
    cr.putmask(y, _C1, v)
    return y


def _place(x: Any, v: Any) -> Any:
    y = x * 1.0
    cr.place(y, _C1, v)
    return y


def _fill_diagonal(x: Any, v: Any) -> Any:
    y = x * 1.0
    cr.fill_diagonal(y, v)
    return y


def _copyto(x: Any, v: Any) -> Any:
    y = x * 1.0
    cr.copyto(y, v, where=_C1)
    return y


def _t_put(t: Any, x: Any) -> Any:
    y = x.clone()
    y.view(-1)[t.tensor([1, 5, 11])] = t.stack([x[0, 0] * 3, x[1, 1], x[0, 0] * 3])
    return y


def _t_put_along(t: Any, x: Any, v: Any) -> Any:
    return x.scatter(1, t.tensor([[1], [3], [0]]), v.expand(3, 1))


def _t_masked(t: Any, x: Any, v: Any, flat_positions: bool) -> Any:
    mask = t.tensor(_C1)
    pos = t.tensor(np.flatnonzero(_C1) % v.numel() if flat_positions else np.arange(_C1.sum()) % v.numel())
    return x.masked_scatter(mask, v.flatten()[pos])


# (primitive, id, fn, shapes, torch_fn or None, complex?, extra OpSpec fields)
_ROWS_SPEC: list = [
    ("concatenate", "append", lambda x, y: cr.append(x, y), ((3, 4), (2, 2)),
     _tl(lambda t, x, y: _tcat(t, [x, y])), True, {}),
    ("concatenate", "append-axis", lambda x, y: cr.append(x, y, axis=0), ((3, 4), (1, 4)),
     _tl(lambda t, x, y: t.cat([x, y], 0)), True, {}),
    ("getitem", "insert", lambda x, y: cr.insert(x, [1, 1, 3], y, axis=1), ((3, 4), (3, 3)), None, True, {}),
    ("getitem", "insert-scalar", lambda x, y: cr.insert(x, 2, y), ((3, 4), ()), None, True, {}),
    ("getitem", "delete", lambda x: cr.delete(x, [0, 2], axis=1), ((3, 4),),
     _tl(lambda t, x: x[:, [1, 3]]), True, {}),
    ("reshape", "atleast_3d", lambda x: cr.atleast_3d(x), ((4,),), _tl(lambda t, x: t.atleast_3d(x)), True, {}),
    ("concatenate", "column_stack", lambda x, y: cr.column_stack([x, y]), ((3,), (3, 2)),
     _tl(lambda t, x, y: t.column_stack([x, y])), True, {}),
    ("concatenate", "row_stack", lambda x, y: cr.row_stack([x, y]), ((4,), (2, 4)),
     _tl(lambda t, x, y: t.vstack([x, y])), True, {}),
    ("concatenate", "dstack", lambda x, y: cr.dstack([x, y]), ((3, 4), (3, 4)),
     _tl(lambda t, x, y: t.dstack([x, y])), True, {}),
    ("getitem", "hsplit", lambda x: _cat(cr.hsplit(x, [1, 3])[::-1], 1), ((3, 4),),
     _tl(lambda t, x: t.cat(t.hsplit(x, [1, 3])[::-1], 1)), True, {}),
    ("getitem", "vsplit", lambda x: _cat(cr.vsplit(x, 2)[::-1], 0), ((4, 3),),
     _tl(lambda t, x: t.cat(t.vsplit(x, 2)[::-1], 0)), True, {}),
    ("getitem", "dsplit", lambda x: _cat(cr.dsplit(x, [1])[::-1], 2), ((2, 2, 3),),
     _tl(lambda t, x: t.cat(t.dsplit(x, [1])[::-1], 2)), True, {}),
    ("getitem", "unstack", lambda x: cr.unstack(x, axis=1)[2] * cr.unstack(x)[1][2], ((3, 4),),
     _tl(lambda t, x: t.unbind(x, 1)[2] * t.unbind(x)[1][2]), True, {}),
    ("concatenate", "block", lambda x, y: cr.block([[x, y], [y.T[:1], x[:1, :2]]]), ((3, 2), (3, 3)),
     _tl(lambda t, x, y: t.cat([t.cat([x, y], 1), t.cat([y.T[:1], x[:1, :2]], 1)], 0)), True, {}),
    ("broadcast_to", "broadcast_arrays", lambda x, y: cr.stack(cr.broadcast_arrays(x, y)), ((3, 1), (4,)),
     _tl(lambda t, x, y: t.stack(t.broadcast_tensors(x, y))), True, {}),
    ("broadcast_to", "meshgrid", lambda x, y: cr.stack(cr.meshgrid(x, y)), ((3,), (2,)),
     _tl(lambda t, x, y: t.stack(t.meshgrid(x, y, indexing="xy"))), True, {}),
    ("getitem", "choose", lambda x, y: cr.choose(_PICK, [x, y, x[0] * 2]), ((3, 4), (3, 1)),
     _tl(lambda t, x, y: t.stack(t.broadcast_tensors(x, y, x[0] * 2)).gather(0, t.tensor(_PICK)[None])[0]),
     True, {}),
    ("where", "select", lambda x, y: cr.select([_C1, _C2], [x, y * 2], default=x * x), ((3, 4), (4,)),
     _tl(lambda t, x, y: t.where(t.tensor(_C1), x, t.where(t.tensor(_C2), y * 2, x * x))), True, {}),
    ("getitem", "compress", lambda x: cr.compress(_ROWS, x, axis=0), ((3, 4),),
     _tl(lambda t, x: x[t.tensor(_ROWS)]), True, {}),
    ("getitem", "extract", lambda x: cr.extract(_C1, x), ((3, 4),),
     _tl(lambda t, x: t.masked_select(x, t.tensor(_C1))), True, {}),
    ("index_put", "piecewise", lambda x: cr.piecewise(x, [_C1, _C2], [lambda v: v * v, cr.sin, 0.5]), ((3, 4),),
     # NumPy's later conditions overwrite earlier ones
     _tl(lambda t, x: t.where(t.tensor(_C2), t.sin(x), t.where(t.tensor(_C1), x * x,
                                                              t.tensor(0.5, dtype=x.dtype)))), False, {}),
    ("index_put", "piecewise-c", lambda x: cr.piecewise(x, [_C1], [lambda v: v * v, lambda v: v * 2]), ((3, 4),),
     _tl(lambda t, x: t.where(t.tensor(_C1), x * x, x * 2)), True, {}),
    ("concatenate", "apply_along_axis", lambda x: cr.apply_along_axis(lambda v: v[:2] * v[1], 1, x), ((3, 4),),
     _tl(lambda t, x: x[:, :2] * x[:, 1:2]), True, {}),
    ("sum", "apply_over_axes", lambda x: cr.apply_over_axes(cr.sum, x, [0, 2]), ((2, 3, 2),),
     _tl(lambda t, x: x.sum(dim=(0, 2), keepdim=True)), True, {}),
    ("diagonal_scatter", "diag", lambda x: cr.diag(x, -1), ((3,),), _tl(lambda t, x: t.diag(x, -1)), True, {}),
    ("diagonal", "diag-2d", lambda x: cr.diag(x, 1), ((3, 4),), _tl(lambda t, x: t.diag(x, 1)), True, {}),
    ("diagonal_scatter", "diagflat", lambda x: cr.diagflat(x, 1), ((2, 2),),
     _tl(lambda t, x: t.diagflat(x, 1)), True, {}),
    ("subtract", "diff", lambda x: cr.diff(x, 2, axis=0), ((4, 3),), _tl(lambda t, x: t.diff(x, 2, dim=0)), True, {}),
    ("subtract", "diff-prepend-append", lambda x, y: cr.diff(x, prepend=y, append=y), ((3, 4), (3, 1)),
     _tl(lambda t, x, y: t.diff(x, prepend=y, append=y)), True, {}),
    ("subtract", "ediff1d", lambda x, y: cr.ediff1d(x, to_end=y, to_begin=y[:1]), ((2, 3), (2,)),
     _tl(lambda t, x, y: t.cat([y[:1], t.diff(x.flatten()), y])), True, {}),
    ("divide", "gradient", lambda x: cr.stack(cr.gradient(x, 0.5, 2.0)), ((3, 4),),
     _tl(lambda t, x: t.stack(t.gradient(x, spacing=[0.5, 2.0]))), True, {}),
    ("multiply", "gradient-coords", lambda x: cr.gradient(x, _COORD, axis=1), ((3, 4),),
     _tl(lambda t, x: t.gradient(x, spacing=(t.tensor(_COORD),), dim=1)[0]), True, {}),
    ("multiply", "gradient-edge2", lambda x: cr.gradient(x, _COORD, axis=1, edge_order=2), ((3, 4),),
     _tl(lambda t, x: t.gradient(x, spacing=(t.tensor(_COORD),), dim=1, edge_order=2)[0]), True, {}),
    ("divide", "gradient-edge2-uniform", lambda x: cr.gradient(x, 0.5, edge_order=2), ((4,),),
     _tl(lambda t, x: t.gradient(x, spacing=0.5, edge_order=2)[0]), True, {}),
    ("multiply", "gradient-spacing-tensor", lambda x, h: cr.gradient(x, h[0] + 1.5), ((4,), (1,)), None, False, {}),
    ("multiply", "kron", lambda x, y: cr.kron(x, y), ((2, 3), (3,)), _tl(lambda t, x, y: t.kron(x, y)), True, {}),
    ("multiply", "cross", lambda x, y: cr.cross(x, y), ((4, 3), (3,)),
     _tl(lambda t, x, y: t.linalg.cross(x, y.expand(4, 3))), True, {}),
    ("multiply", "cross-axes", lambda x, y: cr.cross(x, y, axisa=0, axisb=1, axisc=0), ((3, 2), (2, 3)),
     _tl(lambda t, x, y: t.linalg.cross(x.T, y, dim=1).T), True, {}),
    ("multiply", "cross-2d", _quiet(lambda x, y: cr.cross(x, y)), ((3, 2), (3, 2)),
     _tl(lambda t, x, y: x[:, 0] * y[:, 1] - x[:, 1] * y[:, 0]), True, {}),
    ("multiply", "cross-2-3", _quiet(lambda x, y: cr.cross(x, y)), ((2,), (3, 3)),
     _tl(lambda t, x, y: t.linalg.cross(t.cat([x, t.zeros(1, dtype=x.dtype)]).expand(3, 3), y)), True, {}),
    ("flip", "fliplr", lambda x: cr.fliplr(x), ((3, 4),), _tl(lambda t, x: t.fliplr(x)), True, {}),
    ("flip", "flipud", lambda x: cr.flipud(x), ((3, 4),), _tl(lambda t, x: t.flipud(x)), True, {}),
    ("transpose", "rot90", lambda x: cr.rot90(x, 3, axes=(2, 0)), ((2, 3, 4),),
     _tl(lambda t, x: t.rot90(x, 3, (2, 0))), True, {}),
    ("transpose", "rollaxis", lambda x: cr.rollaxis(x, 2, 1), ((2, 3, 4),),
     _tl(lambda t, x: t.movedim(x, 2, 1)), True, {}),
    ("getitem", "resize", lambda x: cr.resize(x, (3, 3)), ((2, 2),),
     _tl(lambda t, x: t.cat([x.flatten()] * 3)[:9].reshape(3, 3)), True, {}),
    ("getitem", "trim_zeros", lambda x: cr.trim_zeros(cr.concatenate([_PAD, x, _PAD])), ((4,),),
     _tl(lambda t, x: x * 1), True, {}),
    ("cumprod", "vander", lambda x: cr.vander(x, 4), ((3,),),
     _tl(lambda t, x: x[:, None] ** t.arange(3, -1, -1)), True, {}),        # (torch.vander's backward fails)
    ("transpose", "matrix_transpose", lambda x: cr.matrix_transpose(x), ((2, 3, 4),),
     _tl(lambda t, x: x.mT), True, {}),
    ("matmul", "matvec", lambda x, y: cr.matvec(x, y), ((2, 3, 4), (4,)),
     _tl(lambda t, x, y: (x @ y[:, None])[..., 0]), True, {}),
    ("matmul", "vecmat", lambda x, y: cr.vecmat(x, y), ((2, 3), (3, 4)),
     _tl(lambda t, x, y: x.conj() @ y), True, {}),
    ("cumsum", "cumulative_sum", lambda x: cr.cumulative_sum(x, axis=1, include_initial=True), ((3, 4),),
     _tl(lambda t, x: t.cat([t.zeros(3, 1, dtype=x.dtype), t.cumsum(x, 1)], 1)), True, {}),
    ("cumprod", "cumulative_prod", lambda x: cr.cumulative_prod(x, axis=0), ((3, 4),),
     _tl(lambda t, x: t.cumprod(x, 0)), True, {"domain": (0.5, 1.5)}),
    ("getitem", "partition", lambda x: cr.partition(x, 1, axis=0), ((4, 3),),
     _tl(lambda t, x: t.sort(x, 0).values), False, {}),
    ("getitem", "partition-c", lambda x: cr.partition(x, (0, 2), axis=None), ((2, 2),), None, True, {}),
    ("getitem", "unique", lambda x: cr.unique(x), ((3, 4),), _tl(lambda t, x: t.sort(x.flatten()).values),
     False, {}),
    ("getitem", "unique-axis", lambda x: cr.unique(x, axis=0), ((3, 2),), None, True, {}),
    ("getitem", "unique_all", lambda x: cr.unique_all(x).values, ((5,),), None, True, {}),
    ("getitem", "unique_values", lambda x: cr.sort(cr.unique_values(x)), ((5,),),
     _tl(lambda t, x: t.sort(x).values), False, {}),
    ("index_put", "put", _put_rows, ((3, 4),), _tl(_t_put), True, {}),
    ("index_put", "put_along_axis", _put_along, ((3, 4), (1,)), _tl(_t_put_along), True, {}),
    ("index_put", "putmask", _putmask, ((3, 4), (4,)), _tl(lambda t, x, v: _t_masked(t, x, v, True)), True, {}),
    ("index_put", "place", _place, ((3, 4), (4,)), _tl(lambda t, x, v: _t_masked(t, x, v, False)), True, {}),
    ("index_put", "fill_diagonal", _fill_diagonal, ((3, 4), (2,)),
     _tl(lambda t, x, v: t.diagonal_scatter(x, v[t.tensor([0, 1, 0])])), True, {}),
    ("index_put", "copyto", _copyto, ((3, 4), (4,)),
     _tl(lambda t, x, v: t.where(t.tensor(_C1), v, x)), True, {}),
    ("copy", "copy-np", lambda x: np.copy(x), ((3, 4),), _tl(lambda t, x: x.clone()), True, {}),
    ("astype", "astype-np", lambda x: np.astype(x, np.longdouble), ((3, 4),),
     None, False, {"order": 1}),
]

SPECS: list = [OpSpec(name, fn, shapes=shapes, torch_fn=torch_fn, id=id, **kw)
               for name, id, fn, shapes, torch_fn, _, kw in _ROWS_SPEC]
COMPLEX_SPECS: list = [OpSpec(name, fn, shapes=shapes, torch_fn=torch_fn, id=id, kinds="c" * len(shapes),
                              **{k: v for k, v in kw.items() if k != "order"})
                       for name, id, fn, shapes, torch_fn, cplx, kw in _ROWS_SPEC if cplx]

# the set functions: gathers from the inputs (distinct random values keep their order under the
# perturbations of the checks)
SPECS += [
    OpSpec("getitem", lambda x, y: cr.intersect1d(x, cr.concatenate([y, x[1:3]])) * y.mean(), id="intersect1d",
           shapes=((4,), (3,))),
    OpSpec("getitem", lambda x, y: cr.setdiff1d(x, y[0:1] * 0 + x[1:2]) * y.mean(), id="setdiff1d",
           shapes=((4,), (3,))),
    OpSpec("getitem", cr.union1d, id="union1d", shapes=((4,), (3,))),
    OpSpec("getitem", lambda x, y: cr.setxor1d(x, cr.concatenate([y, x[0:1]])), id="setxor1d",
           shapes=((4,), (3,))),
]
