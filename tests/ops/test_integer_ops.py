"""Integer arithmetic keeps NumPy's result dtypes (clip included); %, // and divmod as NumPy's
operators."""
import numpy as np
import pytest

import chainrule as cr

A = np.array([7, -7, 5, 1, -3])
B = np.array([2, 2, -3, 4, -2])


@pytest.mark.parametrize("op", ["__mod__", "__floordiv__", "__rmod__", "__rfloordiv__"])
@pytest.mark.parametrize("other", [B, 3, 2.5, B.astype(np.float32)])
def test_operators_match_numpy_values_and_dtypes(op, other):
    got = getattr(cr.tensor(A), op)(other if not isinstance(other, np.ndarray) else cr.tensor(other))
    want = getattr(A, op)(other)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.data, want)


def test_divmod_and_in_place_forms():
    q, r = divmod(cr.tensor(A), cr.tensor(B))
    np.testing.assert_array_equal(q.data, A // B)
    np.testing.assert_array_equal(r.data, A % B)
    q, r = divmod(7, cr.tensor(B))
    np.testing.assert_array_equal(q.data, 7 // B)
    np.testing.assert_array_equal(r.data, 7 % B)
    t = cr.tensor(A.copy())
    t %= 3
    np.testing.assert_array_equal(t.data, A % 3)
    t //= 2
    np.testing.assert_array_equal(t.data, (A % 3) // 2)
    assert t.dtype == A.dtype


def test_numpy_mod_on_integer_tensors_stays_integer_and_indexes():
    i = np.mod(cr.tensor(np.arange(6)), 4)                 # periodic wrap, as in fluid simulations
    assert i.dtype == np.int64
    grid = cr.tensor(np.arange(4.0) * 10)
    np.testing.assert_array_equal(grid[i].data, [0, 10, 20, 30, 0, 10])
    q, r = np.divmod(cr.tensor(A), 3)
    np.testing.assert_array_equal(q.data, A // 3)
    np.testing.assert_array_equal(np.floor_divide(cr.tensor(A), 3).data, A // 3)


def test_gradients_of_mod_and_floor_divide():
    x = cr.tensor([5.5, -1.25], dtype=cr.float64, requires_grad=True)
    y = cr.tensor([2.0, 0.75], dtype=cr.float64, requires_grad=True)
    ((x % y) * cr.tensor([1.0, 2.0], dtype=cr.float64)).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 2.0])
    np.testing.assert_array_equal(y.grad.data, [-2.0, -2.0 * -2.0])   # -floor(x / y)
    x.grad = None
    (x // 2).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0])


def test_every_op_keeps_numpys_result_dtype_on_integers():
    a, b = np.array([[3, -4], [5, 6]]), np.array([[2, 3], [-2, 1]])
    checked = 0
    for name in sorted(set(dir(cr)) & set(dir(np))):
        fn, ref = getattr(cr, name), getattr(np, name)
        if not callable(fn) or isinstance(fn, type) or name in ("linspace", "arange", "reciprocal"):
            continue
        for args in ((a,), (a, b)):
            try:
                with np.errstate(all="ignore"):
                    want = ref(*args)
            except Exception:
                continue
            with np.errstate(all="ignore"):
                got = fn(*(cr.tensor(v) for v in args))
            want, got = (want[0], got[0]) if isinstance(want, tuple) else (want, got)
            assert np.asarray(got).dtype == np.asarray(want).dtype, name
            checked += 1
            break
    assert checked > 60


def test_reciprocal_of_integers_is_numpys():
    np.testing.assert_array_equal(cr.reciprocal(cr.tensor([2, 1, -1])).data, [0, 1, -1])


def test_clip_keeps_integer_dtype_with_one_bound():
    out = cr.clip(cr.tensor([1, 5, 9]), None, 6)
    assert out.dtype == np.int64 and out.tolist() == [1, 5, 6]
    assert cr.clip(cr.tensor([1, 5, 9]), 3, None).tolist() == [3, 5, 9]
