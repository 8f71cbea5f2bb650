"""Review fixes for forward_ad and custom Functions."""
import pytest
from custom_functions import Square

import chainrule as cr
from chainrule import forward_ad as fwAD


def test_make_dual_rejects_integer_primal():
    with fwAD.dual_level():
        with pytest.raises(cr.DTypeError, match=r"make_dual: the primal has dtype int64.*floating"):
            fwAD.make_dual(cr.tensor([1, 2]), cr.tensor([1, 1]))   # was accepted: integer tangents


def test_make_dual_dtype_mismatch_is_a_dtype_error():
    with fwAD.dual_level():
        with pytest.raises(cr.DTypeError, match="tangent dtype float64 does not match primal dtype "
                                                "float32"):
            fwAD.make_dual(cr.tensor(1.0), cr.tensor(1.0, dtype=cr.float64))


def test_saved_tensor_modified_in_place_error_names_the_function():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    y = Square.apply(h)
    h += 1
    with pytest.raises(cr.GraphError, match=r"SquareBackward: saved tensor 0 \(shape \(2,\)\) was "
                                            r"modified in place"):
        y.sum().backward()


def test_second_backward_error_names_the_function():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x).sum()
    y.backward()
    with pytest.raises(cr.GraphError, match="SquareBackward: the saved values were freed"):
        y.backward()
