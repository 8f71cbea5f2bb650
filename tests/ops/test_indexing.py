"""NumPy indexing on tensors: boolean masks are checked against the dimensions they select from;
an empty list selects nothing."""
import numpy as np
import pytest

import chainrule as cr

X = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("index", [
    np.array([True, False]),
    (Ellipsis, np.array([True, False])),
    np.ones((3, 3), bool),
    (slice(None), np.array([True, False, True])),
    (None, np.array([True, False])),
], ids=["short", "ellipsis", "2d", "after-slice", "after-newaxis"])
def test_a_mask_of_the_wrong_shape_raises_as_numpy(index):
    with pytest.raises(IndexError):
        X[index]
    with pytest.raises(IndexError, match="boolean index of shape"):
        cr.tensor(X)[index]


@pytest.mark.parametrize("index", [
    np.array([True, False, True]),
    (Ellipsis, np.array([True, False, True, True])),
    X > 4,
    (1, np.array([False, True, True, False])),
    (None, np.array([True, False, True]), slice(1, 3)),
    (True, np.array([True, False, True])),
    np.array(True),
], ids=["rows", "ellipsis", "2d", "after-int", "newaxis", "bool-scalar", "0d-mask"])
def test_masks_select_as_numpy_and_scatter_back(index):
    x = cr.tensor(X, requires_grad=True)
    y = x[index]
    np.testing.assert_array_equal(y.data, X[index])
    y.sum().backward()
    want = np.zeros_like(X)
    want[index] = 1.0                    # a mask selects each element at most once
    np.testing.assert_array_equal(x.grad.data, want)


@pytest.mark.parametrize("repeats", [-1, 1.5, [1, 2, 3, 4]])
def test_repeat_refuses_bad_counts_clearly(repeats):
    with pytest.raises(cr.ShapeError, match="repeat: repeats must be a non-negative int"):
        cr.repeat(cr.tensor([1.0, 2.0]), repeats)


def test_empty_list_index_selects_nothing():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = x[[]]
    assert y.shape == (0,)
    (y.sum() + x.sum()).backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])
