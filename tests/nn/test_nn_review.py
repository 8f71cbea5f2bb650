"""Review fixes in cr.nn: clear errors at forward time, PyTorch-style arguments."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.errors import ShapeError
from chainrule.nn import functional as F


def test_conv2d_on_unbatched_input_names_the_expected_layout():
    # a (C, H, W) input used to be read as N=1, C=8 and blamed on in_channels
    with pytest.raises(ShapeError, match=r"\(N, C, H, W\)"):
        F.conv2d(cr.ones((1, 8, 8)), cr.ones((2, 1, 3, 3)))
    with pytest.raises(ShapeError, match="in_channels=3"):
        F.conv2d(cr.ones((1, 3, 8, 8)), cr.ones((2, 1, 3, 3)))


def test_layer_norm_accepts_an_int_normalized_shape():
    x = cr.tensor([[1.0, 3.0], [2.0, 6.0]])
    np.testing.assert_allclose(F.layer_norm(x, 2).data, F.layer_norm(x, (2,)).data)


def test_zero_grad_without_set_to_none_zeroes_in_place():
    m = cr.nn.Linear(2, 2)
    opt = cr.optim.SGD(m.parameters(), lr=0.1)
    m(cr.ones((1, 2))).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and not g.data.any() and not g.requires_grad
    m(cr.ones((1, 2))).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert not m.weight.grad.data.any()
    opt.zero_grad()
    assert m.weight.grad is None


def test_sequential_slice_is_a_sequential():
    m = cr.nn.Sequential(cr.nn.Linear(2, 3), cr.nn.ReLU(), cr.nn.Linear(3, 1))
    head = m[0:2]
    assert isinstance(head, cr.nn.Sequential) and len(head) == 2
    assert head(cr.ones((1, 2))).shape == (1, 3)
