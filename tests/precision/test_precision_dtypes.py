"""Low-precision dtypes: differentiable casts, and every primitive with bfloat16/float16 inputs."""
import numpy as np
import pytest

import chainrule as cr
from op_specs import NONDIFF_SPECS, OP_SPECS

LOW = [cr.bfloat16, cr.float16]
TOL = {cr.bfloat16: 0.05, cr.float16: 0.01}      # relative to 1 + max|reference|


def test_astype_gradient_is_cast_back_to_the_input_dtype():
    x = cr.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = x.astype(cr.bfloat16)
    (y * y).astype(cr.float32).sum().backward()
    assert y.dtype == cr.bfloat16 and x.grad.dtype == cr.float32
    np.testing.assert_array_equal(x.grad.data, [2.0, 4.0])


def test_gradient_of_a_low_precision_leaf_has_its_dtype():
    x = cr.tensor(np.array([0.5, 1.5]).astype(cr.float16), requires_grad=True)
    cr.exp(x.astype(cr.float32)).sum().backward()
    assert x.grad.dtype == cr.float16
    np.testing.assert_allclose(x.grad.data.astype(float), np.exp([0.5, 1.5]), rtol=1e-3)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_python_scalars_do_not_upcast_16_bit_tensors(dtype):
    x = cr.tensor(np.array([1.0, -2.0, 0.5]).astype(dtype), requires_grad=True)
    for out in (x * 2.0, 1.0 + x, 2.0 ** x, x / 3.0, cr.clip(x, -0.5, 0.7), cr.maximum(x, 0.0),
                cr.where(x > 0, x, 0.0), cr.erf(x), cr.gelu(x)):
        assert out.dtype == dtype, out
    assert (x * np.ones(3, np.float32)).dtype == cr.float32      # a float32 array still promotes


def _check_or_clear_error(spec, dtype, rng):
    xs64 = spec.sample(rng)
    xs = [cr.tensor(x.data.astype(dtype), requires_grad=True) for x in xs64]
    try:
        out = spec.fn(*xs)
    except (TypeError, ValueError) as e:
        msg = str(e)
        assert spec.name in msg and str(dtype) in msg and "float32" in msg, msg
        return "raised"
    ref = spec.fn(*[cr.tensor(x.data.astype(dtype).astype(np.float64), requires_grad=True)
                    for x in xs64])
    if spec.name != "astype":
        assert out.dtype in (dtype, cr.float64), out.dtype     # float64 only from float64 constants
    scale = 1 + np.max(np.abs(ref.data))
    np.testing.assert_allclose(out.data.astype(np.float64), ref.data, atol=TOL[dtype] * scale)
    out.astype(cr.float32).sum().backward()
    for x in xs:
        assert x.grad.dtype == dtype
        assert np.all(np.isfinite(x.grad.data.astype(np.float32)))
    return "works"


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("spec", OP_SPECS, ids=str)
def test_every_primitive_works_or_raises_a_clear_error(spec, dtype, rng):
    outcome = _check_or_clear_error(spec, dtype, rng)
    # NumPy's linalg has no float16 kernels; those ops must say so (and how to fix it)
    expect_error = dtype == cr.float16 and str(spec).startswith("solve")
    assert outcome == ("raised" if expect_error else "works")


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(set(cr.PRIMITIVES) & {"inv", "solve", "det", "logabsdet",
                                                             "cholesky"}))
def test_linalg_on_pure_16_bit_input(name, dtype):
    a = cr.tensor((np.eye(3) * 2 + 0.1).astype(dtype), requires_grad=True)
    fn = {"inv": cr.linalg.inv, "det": cr.linalg.det, "cholesky": cr.linalg.cholesky,
          "logabsdet": lambda m: cr.linalg.slogdet(m)[1],
          "solve": lambda m: cr.linalg.solve(m, m)}[name]
    if dtype == cr.float16:
        with pytest.raises(TypeError, match=f"{name}.*float16.*astype\\(cr.float32\\)"):
            fn(a)
    else:
        out = fn(a)
        assert out.dtype == cr.bfloat16
        with cr.autocast(cr.bfloat16):
            assert fn(a).dtype == cr.float32       # autocast runs linalg in float32


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(NONDIFF_SPECS))
def test_nondifferentiable_primitives_accept_16_bit(name, dtype, rng):
    x = cr.tensor(rng.uniform(-2, 2, (3, 4)))
    got = NONDIFF_SPECS[name](cr.tensor(x.data.astype(dtype)))
    want = NONDIFF_SPECS[name](cr.tensor(x.data.astype(dtype).astype(np.float64)))
    np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))


def test_every_primitive_is_covered_by_the_audit():
    covered = {s.name for s in OP_SPECS} | set(NONDIFF_SPECS)
    missing = set(cr.PRIMITIVES) - covered
    assert not missing, f"add an OpSpec for {sorted(missing)} (tests/op_specs.py)"
