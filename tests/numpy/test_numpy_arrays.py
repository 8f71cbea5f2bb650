"""The array chapters of chainrule/numpy (manipulation, indexing, functional, sorting, setops,
creation_more, math_more) against NumPy: values, dtypes and shapes for every argument form
(ndarrays in, ndarrays out; tensors in, tensors out), stated gradients, in-place semantics, errors,
and dispatch through ``np.<name>(tensor)``. The op-table rows (tests/op_specs/numpy_arrays.py) check
the derivatives against differences, duality, second order and PyTorch."""
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule.errors import GraphError

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4))
XC = X + 1j * RNG.standard_normal((3, 4))
R = np.round(RNG.uniform(-2, 2, (3, 4)))          # repeated values
NAN = np.array([2.0, np.nan, 1.0, np.nan, 2.0, -0.0, 0.0])


def _where(m, c, a, b):
    return np.where(c, a, b) if m is np else cr.where(c, a, b)


# (id, function of (module, array), input)
CASES = [
    ("append", lambda m, a: m.append(a, [[1.0, 2, 3, 4]], axis=0), X),
    ("append-flat", lambda m, a: m.append(a, 5.0), X),
    ("append-int-float", lambda m, a: m.append(np.arange(3), a[0]), X),
    ("insert", lambda m, a: m.insert(a, [1, 1, 3], [7, 8, 9]), X[0]),
    ("insert-flat", lambda m, a: m.insert(a, 5, [7.0, 8.0]), X),
    ("insert-axis-scalar", lambda m, a: m.insert(a, 1, 5.0, axis=1), X),
    ("insert-axis-columns", lambda m, a: m.insert(a, [0, 2], [[1.0], [2.0], [3.0]], axis=1), X),
    ("insert-slice", lambda m, a: m.insert(a, slice(0, 3), 0.5), X[0]),
    ("insert-negative", lambda m, a: m.insert(a, -1, a[0], axis=0), X),
    ("insert-int-array", lambda m, a: m.insert(a, 1, 2.7), np.arange(4)),
    ("delete", lambda m, a: m.delete(a, [0, 2], axis=1), X),
    ("delete-flat", lambda m, a: m.delete(a, 3), X),
    ("delete-slice", lambda m, a: m.delete(a, slice(None, None, 2), axis=0), X),
    ("delete-mask", lambda m, a: m.delete(a, np.array([True, False, True, False]), axis=1), X),
    ("atleast_3d-0", lambda m, a: m.atleast_3d(a[0, 0]), X),
    ("atleast_3d-1", lambda m, a: m.atleast_3d(a[0]), X),
    ("atleast_3d-2", lambda m, a: m.atleast_3d(a), X),
    ("atleast_3d-many", lambda m, a: m.atleast_3d(a, a[0]), X),
    ("column_stack", lambda m, a: m.column_stack([a[0], a[1], a[2, :4]]), X),
    ("column_stack-2d", lambda m, a: m.column_stack([a, a[:, :1]]), X),
    ("column_stack-0d", lambda m, a: m.column_stack([a[0, 0], a[1, 1]]), X),
    ("dstack", lambda m, a: m.dstack([a, a]), X),
    ("dstack-1d", lambda m, a: m.dstack([a[0], a[1]]), X),
    ("hsplit", lambda m, a: m.hsplit(a, 2), X),
    ("hsplit-indices", lambda m, a: m.hsplit(a, [1, 3, 9]), X),
    ("hsplit-1d", lambda m, a: m.hsplit(a[0], 2), X),
    ("vsplit", lambda m, a: m.vsplit(a, [1]), X),
    ("dsplit", lambda m, a: m.dsplit(a.reshape(1, 3, 4), 2), X),
    ("unstack", lambda m, a: m.unstack(a, axis=1), X),
    ("unstack-0", lambda m, a: m.unstack(a), X),
    ("block-2d", lambda m, a: m.block([[a, a[:, :1]], [a[:1], a[:1, :1]]]), X),
    ("block-1d", lambda m, a: m.block([a[0], a[1]]), X),
    ("block-deep", lambda m, a: m.block([[[a]]]), X),
    ("block-scalars", lambda m, a: m.block([[a[0, 0], a[0, 1]], [a[1, 0], a[1, 1]]]), X),
    ("block-array", lambda m, a: m.block(a), X),
    ("broadcast_arrays", lambda m, a: m.broadcast_arrays(a, a[:1], a[0, 0]), X),
    ("meshgrid", lambda m, a: m.meshgrid(a[0], a[1, :3]), X),
    ("meshgrid-ij", lambda m, a: m.meshgrid(a[0], a[1, :3], a[2, :2], indexing="ij"), X),
    ("meshgrid-xy-3", lambda m, a: m.meshgrid(a[0], a[1, :3], a[2, :2]), X),
    ("meshgrid-sparse", lambda m, a: m.meshgrid(a[0], a[1, :3], sparse=True), X),
    ("meshgrid-one", lambda m, a: m.meshgrid(a[0]), X),
    ("choose-wrap", lambda m, a: m.choose(np.array([0, 2, 1, 5]), [a[0], a[1], a[2]], mode="wrap"), X),
    ("choose-clip", lambda m, a: m.choose(np.array([[0], [2], [-1]]), a, mode="clip"), X),
    ("choose-broadcast", lambda m, a: m.choose(np.array([[0], [2], [1]]), [a, a[0], 3.0]), X),
    ("select", lambda m, a: m.select([a > 0.5, a < -0.5], [a * 2, a[0]], default=a[1]), X),
    ("select-scalars", lambda m, a: m.select([a > 0.5], [1.0]), X),
    ("select-float32", lambda m, a: m.select([a > 0], [a.astype(np.float32)]), X),
    ("compress", lambda m, a: m.compress([True, False, True], a, axis=0), X),
    ("compress-short", lambda m, a: m.compress([False, True], a, axis=1), X),
    ("compress-flat", lambda m, a: m.compress([True, False, True, True], a), X),
    ("extract", lambda m, a: m.extract(a > 0, a), X),
    ("extract-int-condition", lambda m, a: m.extract(np.arange(12) % 3, a), X),
    ("diag-vector", lambda m, a: m.diag(a[0], -2), X),
    ("diag-vector-k", lambda m, a: m.diag(a[0], 3), X),
    ("diag-matrix", lambda m, a: m.diag(a, 1), X),
    ("diag-matrix-negative", lambda m, a: m.diag(a, -2), X),
    ("diag-matrix-out-of-range", lambda m, a: m.diag(a, 7), X),
    ("diagflat", lambda m, a: m.diagflat(a[:2], 1), X),
    ("diff", lambda m, a: m.diff(a), X),
    ("diff-0", lambda m, a: m.diff(a, 0), X),
    ("diff-n-axis", lambda m, a: m.diff(a, 2, axis=0), X),
    ("diff-prepend-append", lambda m, a: m.diff(a, 1, axis=1, prepend=0.0, append=a[:, :2]), X),
    ("diff-high-order", lambda m, a: m.diff(a, 5), X),
    ("diff-bool", lambda m, a: m.diff(a > 0), X),
    ("diff-int", lambda m, a: m.diff(a), np.array([1, 4, 9], np.uint8)),
    ("ediff1d", lambda m, a: m.ediff1d(a, to_end=[1.0, 2.0], to_begin=-3), X),
    ("ediff1d-plain", lambda m, a: m.ediff1d(a), X),
    ("ediff1d-int", lambda m, a: m.ediff1d(a, to_begin=np.int8(4)), np.array([1, 5, 2], np.int16)),
    ("gradient", lambda m, a: m.gradient(a), X),
    ("gradient-1d", lambda m, a: m.gradient(a[0]), X),
    ("gradient-scalars", lambda m, a: m.gradient(a, 0.5, 2.0), X),
    ("gradient-one-scalar", lambda m, a: m.gradient(a, 0.25), X),
    ("gradient-coords", lambda m, a: m.gradient(a, np.array([0.0, 1.0, 3.0]), np.array([0, 1, 2, 4])), X),
    ("gradient-uniform-coords", lambda m, a: m.gradient(a[0], np.array([0.0, 1.0, 2.0, 3.0])), X),
    ("gradient-edge2", lambda m, a: m.gradient(a, np.array([0.0, 1.0, 3.0]), 2.0, edge_order=2), X),
    ("gradient-axis", lambda m, a: m.gradient(a, 3.0, axis=-1, edge_order=2), X),
    ("gradient-axes-order", lambda m, a: m.gradient(a, axis=(1, 0)), X),
    ("gradient-int", lambda m, a: m.gradient(a), np.array([1, 4, 9, 16])),
    ("gradient-float32", lambda m, a: m.gradient(a.astype(np.float32), np.array([0.0, 1.0, 3.0]), 1.0), X),
    ("kron", lambda m, a: m.kron(a, a[:2, :2]), X),
    ("kron-1d-2d", lambda m, a: m.kron(a[0], a), X),
    ("kron-scalar", lambda m, a: m.kron(a[0, 0], a), X),
    ("kron-3d", lambda m, a: m.kron(a.reshape(3, 2, 2), a[:2, :1]), X),
    ("cross", lambda m, a: m.cross(a[:, :3], a[1:2, 1:]), X),
    ("cross-axis", lambda m, a: m.cross(a[:, :3].T, a[:, 1:].T, axis=0), X),
    ("cross-axisa-b-c", lambda m, a: m.cross(a[:, :3], a[:, 1:].T, axisb=0, axisc=0), X),
    ("cross-2-2", lambda m, a: m.cross(a[:, :2], a[:, 2:]), X),
    ("cross-2-3", lambda m, a: m.cross(a[:, :2], a[:, 1:]), X),
    ("cross-3-2", lambda m, a: m.cross(a[:, :3], a[:, 2:]), X),
    ("cross-vectors", lambda m, a: m.cross(a[0, :3], a[1, :3]), X),
    ("fliplr", lambda m, a: m.fliplr(a), X),
    ("flipud", lambda m, a: m.flipud(a), X),
    ("rot90", lambda m, a: m.rot90(a), X),
    ("rot90-2", lambda m, a: m.rot90(a, 2), X),
    ("rot90-negative-axes", lambda m, a: m.rot90(a, -1, axes=(1, 0)), X),
    ("rot90-4", lambda m, a: m.rot90(a, 4), X),
    ("rot90-3d", lambda m, a: m.rot90(a.reshape(2, 3, 2), 1, axes=(0, 2)), X),
    ("rot90-3", lambda m, a: m.rot90(a.reshape(2, 3, 2), 3, axes=(-1, 1)), X),
    ("rollaxis", lambda m, a: m.rollaxis(a.reshape(2, 3, 2), 2), X),
    ("rollaxis-start", lambda m, a: m.rollaxis(a.reshape(2, 3, 2), 0, 3), X),
    ("rollaxis-same", lambda m, a: m.rollaxis(a.reshape(2, 3, 2), 1, 2), X),
    ("resize", lambda m, a: m.resize(a, (5, 5)), X),
    ("resize-small", lambda m, a: m.resize(a, 3), X),
    ("resize-empty", lambda m, a: m.resize(a[:0], (2, 2)), X),
    ("resize-to-empty", lambda m, a: m.resize(a, (0, 3)), X),
    ("trim_zeros", lambda m, a: m.trim_zeros(m.append(m.append(0.0 * a[0, :2], a[0]), 0.0 * a[0, :2])), X),
    ("trim_zeros-f", lambda m, a: m.trim_zeros(m.append(0.0 * a[0, :2], m.append(a[0], 0.0)), "f"), X),
    ("trim_zeros-B", lambda m, a: m.trim_zeros(m.append(0.0 * a[0, :2], m.append(a[0], 0.0)), "B"), X),
    ("trim_zeros-all-zero", lambda m, a: m.trim_zeros(0.0 * a), X),
    ("trim_zeros-2d", lambda m, a: m.trim_zeros(_where(m, a > 0, a, 0.0)), X),
    ("trim_zeros-axis", lambda m, a: m.trim_zeros(_where(m, a > 0, a, 0.0), axis=1), X),
    ("trim_zeros-no-axes", lambda m, a: m.trim_zeros(_where(m, a > 0, a, 0.0), axis=()), X),
    ("vander", lambda m, a: m.vander(a[0]), X),
    ("vander-increasing", lambda m, a: m.vander(a[0], 6, increasing=True), X),
    ("vander-1", lambda m, a: m.vander(a[0], 1), X),
    ("vander-0", lambda m, a: m.vander(a[0], 0), X),
    ("vander-int", lambda m, a: m.vander(a), np.array([1, 2, 3], np.int32)),
    ("vander-bool", lambda m, a: m.vander(a), np.array([True, False])),
    ("matrix_transpose", lambda m, a: m.matrix_transpose(a.reshape(3, 2, 2)), X),
    ("matvec", lambda m, a: m.matvec(a.reshape(1, 3, 4), a[:2].reshape(2, 1, 4)), X),
    ("vecmat", lambda m, a: m.vecmat(a[:, :3], a.reshape(1, 3, 4)), X),
    ("cumulative_sum", lambda m, a: m.cumulative_sum(a, axis=1, include_initial=True), X),
    ("cumulative_sum-1d", lambda m, a: m.cumulative_sum(a[0]), X),
    ("cumulative_sum-0d", lambda m, a: m.cumulative_sum(a[0, 0]), X),
    ("cumulative_sum-dtype", lambda m, a: m.cumulative_sum(a[0], dtype=np.float32), X),
    ("cumulative_sum-int8", lambda m, a: m.cumulative_sum(a, include_initial=True), np.array([1, 2], np.int8)),
    ("cumulative_sum-bool", lambda m, a: m.cumulative_sum(a[0] > 0), X),
    ("cumulative_prod", lambda m, a: m.cumulative_prod(a, axis=0, include_initial=True), X),
    ("cumulative_prod-negative-axis", lambda m, a: m.cumulative_prod(a, axis=-1), X),
    ("partition", lambda m, a: m.partition(a, 1), X),
    ("partition-axis0", lambda m, a: m.partition(a, (0, 2), axis=0), X),
    ("partition-flat", lambda m, a: m.partition(a, 5, axis=None), X),
    ("partition-ties-nan", lambda m, a: m.partition(a, 2), np.array([2.0, np.nan, 1.0, 2.0, -1.0, np.nan])),
    ("unique", lambda m, a: m.unique(m.round(a)), X),
    ("unique-all-flags", lambda m, a: m.unique(m.round(a), True, True, True), X),
    ("unique-unsorted", lambda m, a: m.unique(m.round(a), sorted=False), X),
    ("unique-nan", lambda m, a: m.unique(a, return_index=True), NAN),
    ("unique-nan-distinct", lambda m, a: m.unique(a, return_counts=True, equal_nan=False), NAN),
    ("unique-duplicates", lambda m, a: m.unique(m.concatenate([a, a[:1]]), True, True, True), X),
    ("unique-axis0", lambda m, a: m.unique(m.concatenate([a, a[:1]]), return_inverse=True, axis=0), X),
    ("unique-axis1", lambda m, a: m.unique(m.concatenate([a, a[:, :1]], axis=1), True, True, True, axis=1), X),
    ("unique-1d-axis", lambda m, a: m.unique(m.round(a[0]), axis=0), X),
    ("unique-empty", lambda m, a: m.unique(a[:0]), X),
    ("unique_counts", lambda m, a: m.unique_counts(m.round(a)), X),
    ("unique_inverse", lambda m, a: m.unique_inverse(m.round(a)), X),
    ("unique_all", lambda m, a: m.unique_all(m.round(a)), X),
    ("unique_all-nan", lambda m, a: m.unique_all(a), NAN),
    ("unique_all-duplicates", lambda m, a: m.unique_all(m.concatenate([a, a[1:]])), X),
    ("unique_values", lambda m, a: m.unique_values(m.round(a)), X),
    ("piecewise", lambda m, a: m.piecewise(a, [a < 0, a > 1], [lambda t: t * t, lambda t: -t, 0.5]), X),
    ("piecewise-overlap", lambda m, a: m.piecewise(a, [a < 1, a > -1], [lambda t: t * 3, lambda t: -t]), X),
    ("piecewise-single-condition", lambda m, a: m.piecewise(a[0], a[0] < 0, [lambda t: t * t, 1.0]), X),
    ("piecewise-args", lambda m, a: m.piecewise(a, [a < 0], [lambda t, k, s=1: t * k + s, 2.0], 3.0, s=2), X),
    ("piecewise-0d", lambda m, a: m.piecewise(a[0, 1], [True], [lambda t: t * 4]), X),
    ("apply_along_axis", lambda m, a: m.apply_along_axis(lambda t: t[:2] * t[1], 1, a), X),
    ("apply_along_axis-scalar", lambda m, a: m.apply_along_axis(lambda t: (t * t).sum(), 0, a), X),
    ("apply_along_axis-matrix",
     lambda m, a: m.apply_along_axis(lambda t: m.outer(t, t), 1, a.reshape(2, 3, 2)), X),
    ("apply_along_axis-args", lambda m, a: m.apply_along_axis(lambda t, k: t * k, -1, a, 2.0), X),
    ("apply_over_axes", lambda m, a: m.apply_over_axes(m.sum, a.reshape(2, 3, 2), [0, 2]), X),
    ("apply_over_axes-negative", lambda m, a: m.apply_over_axes(m.sum, a, -1), X),
]
COMPLEX_CASES = [c for c in CASES if c[0].split("-")[0] in {
    "append", "insert", "delete", "block", "choose", "select", "diag", "diff", "gradient", "kron", "cross",
    "rot90", "resize", "vander", "matvec", "vecmat", "cumulative_sum", "cumulative_prod", "partition",
    "unique", "unique_all", "piecewise", "apply_along_axis"}
    and c[0] not in {"diff-bool", "select-float32", "gradient-float32", "unique-nan", "unique-nan-distinct",
                     "unique_all-nan", "unique-empty", "unique", "unique-all-flags", "unique-unsorted",
                     "unique-1d-axis", "unique_all", "gradient-int", "insert-int-array", "diff-int",
                     "ediff1d-int", "cumulative_sum-dtype", "vander-int", "vander-bool", "cumulative_sum-int8",
                     "partition-ties-nan",
                     "piecewise", "piecewise-overlap", "piecewise-single-condition",
                     "piecewise-args", "trim_zeros-2d", "trim_zeros-axis", "cumulative_sum-bool"}]


def _flat(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _check(got, want, tensor):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if tensor and isinstance(w, np.ndarray) and w.dtype.kind in "fc":
            assert isinstance(g, cr.Tensor), type(g)
        if not tensor:
            assert not isinstance(g, cr.Tensor)
        g = np.asarray(g.data if isinstance(g, cr.Tensor) else g)
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, equal_nan=True)


def _run(fn, a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        want = fn(np, a)
        _check(fn(cr, a), want, tensor=False)
        _check(fn(cr, cr.tensor(a, requires_grad=a.dtype.kind in "fc")), want, tensor=True)


@pytest.mark.parametrize("fn, a", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_numpy(fn, a):
    _run(fn, a)


@pytest.mark.parametrize("fn", [c[1] for c in COMPLEX_CASES], ids=[c[0] for c in COMPLEX_CASES])
def test_matches_numpy_on_complex_data(fn):
    _run(fn, XC)


# ----- gradients where rows cannot say it -----
def _grad(fn, a):
    x = cr.tensor(a, requires_grad=True)
    fn(x).sum().backward()
    return x.grad.data


def test_unique_values_send_their_gradient_to_one_occurrence():
    a = np.array([2.0, 1.0, 2.0, 3.0, 1.0])
    g = _grad(lambda x: cr.unique(x) * np.array([1.0, 10.0, 100.0]), a)
    assert g.sum() == 111.0 and np.count_nonzero(g) == 3
    assert g[3] == 100.0 and g[[1, 4]].sum() == 1.0 and g[[0, 2]].sum() == 10.0


def test_partition_is_a_permutation_of_the_input_with_a_permutation_gradient():
    a = np.array([3.0, 1.0, 2.0, 1.0, 5.0])
    w = np.arange(1.0, 6.0)
    g = _grad(lambda x: cr.partition(x, 2) * w, a)
    p = np.partition(a, 2)
    assert sorted(g.tolist()) == w.tolist()
    # each input receives the weight of the output slot holding its value
    for i, v in enumerate(a):
        assert p[int(g[i]) - 1] == v


def test_diff_of_bool_and_integer_inputs_carry_no_gradient():
    x = cr.tensor([1.0, -1.0, 2.0], requires_grad=True)
    assert not cr.diff(x > 0).requires_grad
    assert cr.diff(x, prepend=cr.tensor([0.5], requires_grad=True)).requires_grad


def test_gradient_with_tensor_coordinates_is_differentiable_in_the_coordinates():
    f = cr.tensor([0.0, 1.0, 4.0, 9.0], requires_grad=True)
    xs = cr.tensor([0.0, 1.0, 2.5, 3.0], requires_grad=True)
    cr.gradient(f, xs).sum().backward()
    assert xs.grad is not None and np.all(np.isfinite(xs.grad.data))
    assert cr.gradcheck(lambda f, xs: cr.gradient(f, xs), [cr.tensor(f.data, requires_grad=True),
                                                         cr.tensor(xs.data, requires_grad=True)])


def test_vander_gradient_at_zero_is_finite():
    g = _grad(lambda x: cr.vander(x, 4), np.array([0.0, 2.0]))
    np.testing.assert_allclose(g, [1.0, 3 * 4.0 + 2 * 2.0 + 1.0])      # d/dx (x^3 + x^2 + x + 1)


def test_select_and_piecewise_gradients_follow_the_chosen_branch():
    a = np.array([-2.0, 0.5, 3.0])
    g = _grad(lambda x: cr.select([x < 0, x > 1], [x * x, 3 * x], default=x), a)
    np.testing.assert_array_equal(g, [-4.0, 1.0, 3.0])
    g = _grad(lambda x: cr.piecewise(x, [x < 0, x > 1], [cr.sin, lambda v: v ** 3, 7.0]), a)
    np.testing.assert_allclose(g, [np.cos(-2.0), 0.0, 27.0])


def test_choose_accumulates_the_gradient_of_a_broadcast_choice():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    cr.choose(np.array([[0, 1], [0, 0]]), [x, np.zeros((2, 2))]).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 1.0])


def test_resize_of_an_empty_tensor_gives_zeros_without_gradient():
    out = cr.resize(cr.tensor(np.zeros(0), requires_grad=True), (2, 2))
    assert isinstance(out, cr.Tensor) and not out.requires_grad and out.shape == (2, 2)


def test_forward_mode_through_a_composite():
    from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
    with dual_level():
        x = make_dual(cr.tensor(X), cr.tensor(np.ones_like(X)))
        t = unpack_dual(cr.kron(x, cr.tensor(np.eye(2)))).tangent
    np.testing.assert_array_equal(t.data, np.kron(np.ones_like(X), np.eye(2)))


# ----- in place -----
IN_PLACE = [
    ("put", lambda m, a: m.put(a, [0, -1, 5, 5], [9.0, 8.0, 7.0])),
    ("put-wrap", lambda m, a: m.put(a, [13, -15], [1.0, 2.0], mode="wrap")),
    ("put-clip", lambda m, a: m.put(a, [40, -3], 4.0, mode="clip")),
    ("put_along_axis", lambda m, a: m.put_along_axis(a, np.array([[1], [-1], [0]]), 5.0, axis=1)),
    ("put_along_axis-none", lambda m, a: m.put_along_axis(a, np.array([0, 11, 0]), [1.0, 2.0, 3.0], None)),
    ("put_along_axis-axis0", lambda m, a: m.put_along_axis(a, np.array([[2, 0, 1, 1]]), X[:1], axis=0)),
    ("putmask", lambda m, a: m.putmask(a, X > 0, [1.0, 2.0, 3.0])),
    ("putmask-array", lambda m, a: m.putmask(a, X > 0, -X)),
    ("place", lambda m, a: m.place(a, X > 0, [1.0, 2.0, 3.0])),
    ("fill_diagonal", lambda m, a: m.fill_diagonal(a, [1.0, 2.0])),
    ("fill_diagonal-tall-wrap", lambda m, a: m.fill_diagonal(a.reshape(6, 2), 3.0, wrap=True)),
    ("fill_diagonal-tall", lambda m, a: m.fill_diagonal(a.reshape(6, 2), 3.0)),
    ("fill_diagonal-view", lambda m, a: m.fill_diagonal(a[1:, 1:], 5.0)),
    ("copyto", lambda m, a: m.copyto(a, X[0] * 2)),
    ("copyto-where", lambda m, a: m.copyto(a, X[:, :1], where=X > 0)),
    ("copyto-scalar", lambda m, a: m.copyto(a, 3, where=X < 0)),
]


@pytest.mark.parametrize("fn", [c[1] for c in IN_PLACE], ids=[c[0] for c in IN_PLACE])
def test_in_place_matches_numpy(fn):
    want, arr, t = X.copy(), X.copy(), cr.tensor(X.copy())
    assert fn(np, want) is None
    assert fn(cr, arr) is None                           # an ndarray target: NumPy's function itself
    np.testing.assert_array_equal(arr, want)
    version = t._version
    assert fn(cr, t) is None
    np.testing.assert_array_equal(t.data, want)
    assert t._version > version or np.array_equal(want, X)


def test_fill_diagonal_of_a_cube():
    want, t = np.zeros((3, 3, 3)), cr.zeros((3, 3, 3), dtype=cr.float64)
    np.fill_diagonal(want, [1.0, 2.0])
    cr.fill_diagonal(t, [1.0, 2.0])
    np.testing.assert_array_equal(t.data, want)


def test_in_place_writes_are_recorded_with_last_write_wins_gradients():
    x = cr.tensor(X, requires_grad=True)
    v = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    cr.put(y, [0, 5, 5, 6], v)          # 5 gets v[1] then v[2]; 6 gets v[0] again
    (y * y).sum().backward()
    expected_x = 2 * X
    expected_x.flat[[0, 5, 6]] = 0.0
    np.testing.assert_allclose(x.grad.data, expected_x)
    np.testing.assert_allclose(v.grad.data, [2 * 1.0 + 2 * 1.0, 0.0, 2 * 3.0])


def test_in_place_on_a_view_rebases_the_base():
    x = cr.tensor(X, requires_grad=True)
    w = cr.tensor(5.0, requires_grad=True)
    base = x * 1.0
    row = base[1]
    cr.fill_diagonal(base[:2, :2], w)            # a view: written through to base
    cr.putmask(row, np.array([False, False, True, False]), w * 2)
    assert base.data[0, 0] == 5.0 and base.data[1, 1] == 5.0 and base.data[1, 2] == 10.0
    base.sum().backward()
    assert float(w.grad.data) == 4.0
    g = np.ones_like(X)
    g[0, 0] = g[1, 1] = g[1, 2] = 0.0
    np.testing.assert_array_equal(x.grad.data, g)


def test_in_place_on_a_saved_tensor_is_caught_at_backward():
    x = cr.tensor(X, requires_grad=True)
    y = x * 1.0
    z = (y * y).sum()                            # multiply saves y
    cr.copyto(y, 0.0)
    with pytest.raises(GraphError):
        z.backward()


@pytest.mark.parametrize("name, call", [
    ("put", lambda t: cr.put(t, [0], 1.0)), ("putmask", lambda t: cr.putmask(t, X > 0, 1.0)),
    ("place", lambda t: cr.place(t, X > 0, [1.0])), ("fill_diagonal", lambda t: cr.fill_diagonal(t, 1.0)),
    ("copyto", lambda t: cr.copyto(t, 1.0)),
    ("put_along_axis", lambda t: cr.put_along_axis(t, np.zeros((3, 1), int), 1.0, 1))])
def test_in_place_on_a_leaf_that_requires_grad_raises(name, call):
    with pytest.raises(GraphError, match=f"{name}: .*leaf tensor that requires grad"):
        call(cr.tensor(X, requires_grad=True))
    with cr.no_grad():
        t = cr.tensor(X, requires_grad=True)
        call(t)                                   # allowed under no_grad, as PyTorch


def test_in_place_errors_are_numpys():
    t = cr.tensor(X.copy())
    with pytest.raises(IndexError):
        cr.put(t, [12], 1.0)
    with pytest.raises(TypeError):
        cr.copyto(t, np.array([1j]))              # same_kind refuses complex into float
    with pytest.raises(ValueError):
        cr.place(t, X > 0, [])
    with pytest.raises(ValueError):
        cr.fill_diagonal(cr.tensor(np.zeros((2, 3, 3))), 1.0)
    np.testing.assert_array_equal(t.data, X)      # nothing written


def test_writing_a_tensor_that_requires_grad_into_an_ndarray_raises():
    with pytest.raises(TypeError, match="put: cannot write a tensor that requires grad"):
        cr.put(X.copy(), [0], cr.tensor([1.0], requires_grad=True))


def test_np_copy_and_astype_dispatch():
    x = cr.tensor(X, requires_grad=True)
    y = np.copy(x)
    assert isinstance(y, cr.Tensor) and y.requires_grad and y.data is not x.data
    z = np.astype(x, np.float32)
    assert z.dtype == np.float32 and z.requires_grad
    assert np.astype(x, np.float64, copy=False) is x
    assert np.astype(x, np.float64) is not x


# ----- class (b): plain NumPy results from tensors that require grad -----
INDEX_VALUED = [
    ("argwhere", lambda m, a: m.argwhere(a > 0)),
    ("flatnonzero", lambda m, a: m.flatnonzero(a > 0)),
    ("argpartition", lambda m, a: m.argpartition(a, 2, axis=None)),
    ("lexsort", lambda m, a: m.lexsort((a[0], a[1]))),
    ("lexsort-2d", lambda m, a: m.lexsort(a)),
    ("searchsorted", lambda m, a: m.searchsorted(np.sort(X[0]), a, side="right")),
    ("searchsorted-tensor-a", lambda m, a: m.searchsorted(a[0], 0.0, sorter=np.argsort(X[0]))),
    ("digitize", lambda m, a: m.digitize(a, [-1.0, 0.0, 1.0], right=True)),
    ("diag_indices_from", lambda m, a: m.diag_indices_from(a[:, :3])),
    ("tril_indices_from", lambda m, a: m.tril_indices_from(a, -1)),
    ("triu_indices_from", lambda m, a: m.triu_indices_from(a, 1)),
    ("ravel_multi_index", lambda m, a: m.ravel_multi_index((m.argwhere(a > 0).T[0], m.argwhere(a > 0).T[1]),
                                                           (3, 4))),
    ("unravel_index", lambda m, a: m.unravel_index(m.flatnonzero(a > 0), (3, 4))),
    ("ix_", lambda m, a: m.ix_(a[0] > 0, [0, 2])),
    ("shape", lambda m, a: m.shape(a)), ("ndim", lambda m, a: m.ndim(a)),
    ("size", lambda m, a: m.size(a)), ("size-axis", lambda m, a: m.size(a, 1)),
    ("may_share_memory", lambda m, a: m.may_share_memory(a, a[0])),
    ("shares_memory", lambda m, a: m.shares_memory(a[0], a[1])),
]


def _plain_equal(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _plain_equal(g, w)
        return
    assert not isinstance(got, cr.Tensor)
    assert type(got) is type(want) or np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn", [c[1] for c in INDEX_VALUED], ids=[c[0] for c in INDEX_VALUED])
def test_index_valued_functions_return_numpys_plain_results(fn):
    want = fn(np, X)
    _plain_equal(fn(cr, cr.tensor(X, requires_grad=True)), want)
    _plain_equal(fn(np, cr.tensor(X, requires_grad=True)), want)      # np.<name>(tensor) dispatches


def test_creation_functions():
    np.testing.assert_array_equal(cr.tri(3, 4, 1), np.tri(3, 4, 1))
    assert cr.tri(2, dtype=int).dtype == np.tri(2, dtype=int).dtype
    np.testing.assert_array_equal(cr.indices((2, 3)), np.indices((2, 3)))
    _plain_equal(cr.mask_indices(3, cr.triu, 1), np.mask_indices(3, np.triu, 1))


# ----- dispatch of the differentiable functions -----
DISPATCH = [
    ("append", lambda m, a: m.append(a, a)), ("insert", lambda m, a: m.insert(a, 1, 0.0)),
    ("delete", lambda m, a: m.delete(a, 1, 0)), ("atleast_3d", lambda m, a: m.atleast_3d(a)),
    ("column_stack", lambda m, a: m.column_stack([a, a])), ("dstack", lambda m, a: m.dstack([a, a])),
    ("hsplit", lambda m, a: m.hsplit(a, 2)[1]), ("vsplit", lambda m, a: m.vsplit(a, 3)[1]),
    ("dsplit", lambda m, a: m.dsplit(a[None], 2)[0]), ("unstack", lambda m, a: m.unstack(a)[1]),
    ("block", lambda m, a: m.block([[a, a]])), ("broadcast_arrays", lambda m, a: m.broadcast_arrays(a, a[0])[1]),
    ("meshgrid", lambda m, a: m.meshgrid(a[0], a[1])[0]),
    ("choose", lambda m, a: m.choose(np.array([0, 1, 1, 0]), [a[0], a[1]])),
    ("select", lambda m, a: m.select([X > 0], [a])), ("compress", lambda m, a: m.compress([0, 1], a, 0)),
    ("extract", lambda m, a: m.extract(X > 0, a)),
    ("piecewise", lambda m, a: m.piecewise(a, [X > 0], [lambda v: v * 2, 1.0])),
    ("apply_along_axis", lambda m, a: m.apply_along_axis(lambda v: v * 2, 0, a)),
    ("apply_over_axes", lambda m, a: m.apply_over_axes(m.sum, a, 0)),
    ("diag", lambda m, a: m.diag(a)), ("diagflat", lambda m, a: m.diagflat(a[0])),
    ("diff", lambda m, a: m.diff(a, axis=0)), ("ediff1d", lambda m, a: m.ediff1d(a)),
    ("gradient", lambda m, a: m.gradient(a, axis=1)), ("kron", lambda m, a: m.kron(a, a)),
    ("cross", lambda m, a: m.cross(a[:, :3], a[:, 1:])), ("fliplr", lambda m, a: m.fliplr(a)),
    ("flipud", lambda m, a: m.flipud(a)), ("rot90", lambda m, a: m.rot90(a)),
    ("rollaxis", lambda m, a: m.rollaxis(a, 1)), ("resize", lambda m, a: m.resize(a, 5)),
    ("trim_zeros", lambda m, a: m.trim_zeros(a[0])), ("vander", lambda m, a: m.vander(a[0])),
    ("matrix_transpose", lambda m, a: m.matrix_transpose(a)), ("matvec", lambda m, a: m.matvec(a, a[0])),
    ("vecmat", lambda m, a: m.vecmat(a[:, 0], a)),
    ("cumulative_sum", lambda m, a: m.cumulative_sum(a, axis=0)),
    ("cumulative_prod", lambda m, a: m.cumulative_prod(a, axis=1, include_initial=True)),
    ("partition", lambda m, a: m.partition(a, 2)), ("unique", lambda m, a: m.unique(a)),
    ("unique_values", lambda m, a: m.sort(m.unique_values(a))), ("unique_counts", lambda m, a: m.unique_counts(a)[0]),
    ("unique_inverse", lambda m, a: m.unique_inverse(a)[0]), ("unique_all", lambda m, a: m.unique_all(a)[0]),
]


@pytest.mark.parametrize("fn", [c[1] for c in DISPATCH], ids=[c[0] for c in DISPATCH])
def test_numpy_dispatches_to_chainrule(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        x = cr.tensor(X, requires_grad=True)
        out = fn(np, x)
        assert isinstance(out, cr.Tensor) and out.requires_grad
        np.testing.assert_allclose(out.data, fn(np, X), rtol=1e-12, atol=1e-14)
        out.sum().backward()
        assert x.grad is not None


def test_unique_results_are_named_tuples():
    r = cr.unique_all(cr.tensor(R, requires_grad=True))
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    assert r.inverse_indices.shape == R.shape and not isinstance(r.counts, cr.Tensor)
    assert cr.unique_inverse(R)._fields == ("values", "inverse_indices")
    assert cr.unique_counts(R)._fields == ("values", "counts")


def test_matvec_and_vecmat_are_numpy_ufuncs():
    assert isinstance(np.matvec, np.ufunc) and isinstance(np.vecmat, np.ufunc)
    a, v = cr.tensor(XC[:, :3]), cr.tensor(XC[0, :3])
    np.testing.assert_allclose(np.vecmat(v, a).data, np.vecmat(XC[0, :3], XC[:, :3]), rtol=1e-12)


def test_meshgrid_copies_unless_told_not_to():
    x, y = cr.tensor([1.0, 2.0]), cr.tensor([3.0, 4.0, 5.0])
    g = cr.meshgrid(x, y)[0]
    g[0, 0] = 9.0                                  # a copy: writable
    assert x.data[0] == 1.0
    assert not cr.meshgrid(x, y, copy=False)[0].data.flags.writeable


def test_16_bit_inputs():
    for dtype in (cr.float16, cr.bfloat16):
        x = cr.tensor(X.astype(dtype), requires_grad=True)
        for out in (cr.gradient(x, axis=0), cr.vander(x[0], 3), cr.partition(x, 1), cr.kron(x, x[:1]),
                    cr.cross(x[:, :3], x[:, 1:]), cr.cumulative_sum(x, axis=0, include_initial=True)):
            assert out.dtype == dtype, (out.dtype, dtype)
            out.astype(cr.float32).sum().backward()
        assert x.grad.dtype == dtype


# ----- errors -----
@pytest.mark.parametrize("call, match", [
    (lambda: cr.hsplit(np.float64(1.0), 2), "hsplit only works"),
    (lambda: cr.vsplit(np.ones(3), 3), "vsplit only works"),
    (lambda: cr.dsplit(np.ones((2, 2)), 2), "dsplit only works"),
    (lambda: cr.diag(np.ones((2, 2, 2))), "1- or 2-d"),
    (lambda: cr.diff(np.ones(3), -1), "order must be non-negative"),
    (lambda: cr.diff(np.float64(1.0)), "at least one dimensional"),
    (lambda: cr.gradient(np.ones(2), edge_order=2), "too small"),
    (lambda: cr.gradient(np.ones(3), edge_order=3), "greater than 2"),
    (lambda: cr.gradient(np.ones((3, 3)), 1.0, 2.0, 3.0), "invalid number of arguments"),
    (lambda: cr.gradient(np.ones(3), np.ones(4)), "must match the length"),
    (lambda: cr.cross(np.ones(4), np.ones(3)), "dimension must be 2 or 3"),
    (lambda: cr.rot90(np.ones((2, 2)), axes=(0, 0)), "Axes must be different"),
    (lambda: cr.rot90(np.ones((2, 2)), axes=(0, 3)), "out of range"),
    (lambda: cr.rot90(np.ones((2, 2)), axes=(0,)), "len\\(axes\\) must be 2"),
    (lambda: cr.fliplr(np.ones(2)), ">= 2-d"),
    (lambda: cr.resize(np.ones(2), (-1, 2)), "non-negative"),
    (lambda: cr.trim_zeros(np.ones(2), "x"), "unexpected character"),
    (lambda: cr.vander(np.ones((2, 2))), "one-dimensional"),
    (lambda: cr.matrix_transpose(np.ones(2)), "at least 2-dimensional"),
    (lambda: cr.matvec(np.ones((2, 3)), np.ones(2)), "matvec"),
    (lambda: cr.vecmat(np.ones(3), np.ones((2, 3))), "vecmat"),
    (lambda: cr.cumulative_sum(np.ones((2, 2))), "axis`` argument is required"),
    (lambda: cr.cumulative_sum(np.ones(2), out=np.ones(2)), "cumulative_sum: out= is not supported"),
    (lambda: cr.choose(np.array([0, 3]), [np.ones(2)]), "invalid entry in choice array"),
    (lambda: cr.choose(np.array([0]), [np.ones(1)], out=np.ones(1)), "choose: out="),
    (lambda: cr.choose(np.array([0]), [np.ones(1)], mode="x"), "mode"),
    (lambda: cr.select([np.ones(2)], [np.ones(2)]), "should be boolean"),
    (lambda: cr.select([], []), "empty condition list"),
    (lambda: cr.select([np.ones(2, bool)], []), "same length"),
    (lambda: cr.compress(np.ones((2, 2), bool), np.ones(2)), "1-d"),
    (lambda: cr.compress([True, False, True], np.ones(2)), "out of bounds"),
    (lambda: cr.ediff1d(np.ones(3, int), to_begin=0.5), "same_kind"),
    (lambda: cr.piecewise(np.ones(3), [np.ones(3, bool)], [1.0, 2.0, 3.0]), "functions are expected"),
    (lambda: cr.apply_along_axis(np.sum, 0, np.ones((2, 0))), "iteration dimensions are 0"),
    (lambda: cr.apply_over_axes(lambda a, ax: a.sum(), np.ones((2, 2)), 0), "correct shape"),
    (lambda: cr.block([]), "cannot be empty"),
    (lambda: cr.block([[np.ones(1)], np.ones(1)]), "depths are mismatched"),
    (lambda: cr.block((np.ones(1),)), "tuple"),
    (lambda: cr.meshgrid(np.ones(2), indexing="x"), "indexing"),
    (lambda: cr.partition(np.ones(3), 1, order="a"), "order="),
    (lambda: cr.rollaxis(np.ones((2, 2)), 0, 5), "'start' arg"),
    (lambda: cr.unstack(np.float64(1.0)), "at least 1-d"),
    (lambda: np.astype(cr.ones(2), np.float32, device="gpu"), "Device"),
])
def test_errors(call, match):
    with pytest.raises((ValueError, TypeError, IndexError), match=match):
        call()


@pytest.mark.parametrize("name", ["intersect1d", "setdiff1d", "union1d", "setxor1d"])
def test_set_functions_are_numpys_values_gathered_from_their_first_occurrence(name):
    a = cr.tensor(np.array([3.0, 1.0, 2.0, 1.0]), requires_grad=True)
    b = cr.tensor(np.array([2.0, 5.0, 3.0]), requires_grad=True)
    out = getattr(cr, name)(a, b)
    want = getattr(np, name)(a.data, b.data)
    np.testing.assert_array_equal(out.data, want)
    assert isinstance(getattr(np, name)(a, b), cr.Tensor)            # np.<name> dispatches
    (out * cr.tensor(np.arange(1.0, len(want) + 1))).sum().backward()
    grads = {"intersect1d": ([2, 0, 1, 0], None), "setdiff1d": ([0, 1, 0, 0], None),
             "union1d": ([3, 1, 2, 0], [0, 4, 0]), "setxor1d": ([0, 1, 0, 0], [0, 2, 0])}[name]
    np.testing.assert_array_equal(a.grad.data, grads[0])
    assert (b.grad is None) if grads[1] is None else np.array_equal(b.grad.data, grads[1])
