"""Bad input gets a clear error that names the transform, the argument and the fix."""
import numpy as np
import pytest

import chainrule as cr


def test_grad_of_non_scalar_points_to_jacobian_and_vjp():
    with pytest.raises(cr.ShapeError, match=r"grad: f must return a scalar.*shape \(3,\).*jacobian.*vjp"):
        cr.grad(lambda x: x * 2)(np.ones(3))
    with pytest.raises(cr.ShapeError, match="2 outputs in a tuple"):
        cr.grad(lambda x: (x.sum(), x.sum()))(np.ones(3))


def test_integer_inputs_are_rejected():
    with pytest.raises(cr.DTypeError, match=r"grad: argument 0 has dtype int64.*only floating"):
        cr.grad(lambda x: x * 2)(np.array(3))
    with pytest.raises(cr.DTypeError, match=r"argument 1\['n'\] has dtype"):
        cr.grad(lambda x, p: x * p["n"], argnums=(0, 1))(1.0, {"n": 2})
    with pytest.raises(cr.DTypeError, match="jvp: argument 0"):
        cr.jvp(lambda x: x, (2,), (1,))
    # an integer argument outside argnums is fine
    assert cr.grad(lambda x, n: x ** n)(2.0, 3) == 12.0


def test_tangent_of_wrong_shape_or_dtype_names_the_argument():
    msg = r"jvp: the tangent for argument 1 has shape \(2,\) but the primal has shape \(3,\)"
    with pytest.raises(cr.ShapeError, match=msg):
        cr.jvp(lambda x, y: x * y, (np.ones(3), np.ones(3)), (np.ones(3), np.ones(2)))
    msg = r"tangent for argument 0 has dtype float32 but the primal is float64.*astype"
    with pytest.raises(cr.DTypeError, match=msg):
        cr.jvp(lambda x: x, (np.ones(2),), (np.ones(2, dtype=np.float32),))
    with pytest.raises(cr.ShapeError, match="same structure as the primals"):
        cr.jvp(lambda x, y: x * y, (1.0, 2.0), (1.0,))
    with pytest.raises(TypeError, match=r"cr.jvp\(f, \(x,\), \(v,\)\)"):
        cr.jvp(lambda x: x, np.ones(2), np.ones(2))


def test_cotangent_checked_against_the_output():
    _, vjp_fn = cr.vjp(lambda x: {"a": x * 2}, np.ones(3))
    with pytest.raises(cr.ShapeError, match=r"vjp: the cotangent for output\['a'\] has shape \(2,\)"):
        vjp_fn({"a": np.ones(2)})
    with pytest.raises(cr.ShapeError, match="same structure as the outputs"):
        vjp_fn(np.ones(3))


def test_argnums_and_has_aux_misuse():
    with pytest.raises(TypeError, match=r"grad: argnums=2 but the function was called with 1"):
        cr.grad(lambda x: x, argnums=2)(1.0)
    with pytest.raises(TypeError, match="argnums must be an int or a non-empty tuple"):
        cr.grad(lambda x: x, argnums=())
    with pytest.raises(TypeError, match=r"has_aux=True needs f to return a pair"):
        cr.grad(lambda x: x * 2, has_aux=True)(1.0)


def test_integer_output_is_rejected():
    with pytest.raises(cr.DTypeError, match=r"jacrev: output has dtype int64"):
        cr.jacrev(lambda x: np.arange(3))(np.ones(2))


def test_jacobian_mode_for_checks_argnums():
    with pytest.raises(TypeError, match=r"jacobian: argnums=3 but the function was called with 1"):
        cr.jacobian(lambda x: x, argnums=3).mode_for(np.ones(2))
    with pytest.raises(TypeError, match=r"hvp: primals and tangents must be tuples"):
        cr.hvp(lambda x: x.sum(), (np.ones(2),), np.ones(2))
