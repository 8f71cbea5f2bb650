"""forward_ad.make_dual: the primal must be floating point and the tangent must match its dtype."""
import pytest

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
