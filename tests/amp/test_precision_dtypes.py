"""Low-precision dtypes: differentiable casts, and every primitive with bfloat16/float16 inputs."""
import numpy as np
import pytest

import chainrule as cr
from tests.op_specs import NONDIFF_SPECS, OP_SPECS

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
        # the op named: the row's primitive, or the one it is built on (lstsq's row: pinv, via svdvals)
        assert (spec.name in msg or "svdvals" in msg) and str(dtype) in msg and "float32" in msg, msg
        return "raised"
    ref = spec.fn(*[cr.tensor(x.data.astype(dtype).astype(np.float64), requires_grad=True)
                    for x in xs64])
    if spec.name in ("fftn", "rfftn", "irfftn"):   # NumPy has no complex dtype below complex64: an FFT of
        assert out.dtype in (cr.float32, cr.float64), out.dtype      # 16-bit data is complex64 (float32 parts)
    elif spec.name != "astype":
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
    # and NumPy has no complex dtype narrower than complex64: view_as_complex of 16/8-bit pairs says so
    # (SciPy's solve_triangular upcasts float16 and works)
    expect_error = (dtype == cr.float16 and spec.name in ("solve", "svd", "svdvals", "pinv")) \
        or str(spec) == "view_as_complex"
    assert outcome == ("raised" if expect_error else "works")


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(set(cr.PRIMITIVES) & {"inv", "solve", "det", "logdet",
                                                             "cholesky"}))
def test_linalg_on_pure_16_bit_input(name, dtype):
    a = cr.tensor((np.eye(3) * 2 + 0.1).astype(dtype), requires_grad=True)
    fn = {"inv": cr.linalg.inv, "det": cr.linalg.det, "cholesky": cr.linalg.cholesky,
          "logdet": lambda m: cr.linalg.slogdet(m)[1],
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
    assert not missing, f"add an OpSpec for {sorted(missing)} (tests/op_specs/)"


# ----- 16-bit reductions accumulate in float32 and round once (PyTorch's rule) -----
def _normal(n, loc=0.0, scale=1.0):
    return np.random.default_rng(1).normal(loc, scale, n)


# name -> (function, float64 values where rounding in 16 bits before the end shows)
REDUCTIONS = {
    "sum": (cr.sum, np.full(70_000, 0.5)),
    "mean_of_100s": (cr.mean, np.full(1_000, 100.0)),          # float16 sum overflowed: inf
    "mean_of_halves": (cr.mean, np.full(70_000, 0.5)),          # float16 count was inf: 0
    "var": (cr.var, _normal(1_000, 100.0)),
    "std": (lambda x: cr.std(x, ddof=1), _normal(1_000, 100.0)),
    "cumsum": (cr.cumsum, np.ones(4_096)),                      # bfloat16 stopped at 256
    "cumprod": (cr.cumprod, np.full(512, 1.01)),
    "prod": (cr.prod, np.full(512, 1.01)),
    "norm": (cr.linalg.norm, np.full(1_000, 100.0)),
    "logsumexp": (cr.logsumexp, _normal(70_000)),
    "softmax": (lambda x: cr.softmax(x.reshape(2, -1), axis=-1), _normal(140_000)),
    "log_softmax": (lambda x: cr.log_softmax(x.reshape(2, -1), axis=-1), _normal(140_000)),
}


def assert_within_ulps(got, want, dtype, ulps=2):
    """|got - want| <= ulps spacings of ``dtype`` at ``want``, both finite."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == dtype and np.isfinite(want.astype(np.float64)).all()
    assert np.isfinite(got.astype(np.float64)).all()
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    spacing = np.abs(np.spacing(want)).astype(np.float64)
    assert (err <= ulps * spacing).all(), f"max error {np.max(err / spacing):.1f} ulps"


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_16_bit_reductions_round_once_from_float32(name, dtype):
    fn, values = REDUCTIONS[name]
    x = cr.tensor(values.astype(dtype), requires_grad=True)
    x64 = cr.tensor(x.data.astype(np.float64), requires_grad=True)
    out, ref = fn(x), fn(x64)
    assert_within_ulps(out.data, ref.data.astype(dtype), dtype)
    # the gradient: in x's dtype, within two of its ulps of the float64 gradient rounded once
    v = np.random.default_rng(2).normal(size=out.shape).astype(dtype)
    out.backward(cr.tensor(v))
    ref.backward(cr.tensor(v.astype(np.float64)))
    assert_within_ulps(x.grad.data, x64.grad.data.astype(dtype), dtype)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_16_bit_layer_norm_is_finite_and_rounds_the_float32_result_once(dtype):
    # spread 300: a float16 (x - mean)**2 overflows (it gave all NaN or 0 before)
    x = cr.tensor((_normal(4_000, 50.0, 300.0).reshape(4, 1_000)).astype(dtype))
    layer = cr.nn.LayerNorm(1_000)
    out, ref = layer(x), layer(x.astype(cr.float32))
    assert_within_ulps(out.data.astype(dtype), ref.data.astype(dtype), dtype, ulps=1)
    half = cr.nn.LayerNorm(1_000, dtype=dtype)(x)
    assert half.dtype == dtype and np.isfinite(half.data.astype(np.float32)).all()


def test_16_bit_reductions_match_torch_where_torch_rounds_once():
    torch = pytest.importorskip("torch")
    ones, hundreds = np.ones(4_096), np.full(1_000, 100.0)
    for dtype, tdtype in ((cr.float16, torch.float16), (cr.bfloat16, torch.bfloat16)):
        t = lambda v: torch.tensor(v, dtype=tdtype)                              # noqa: E731
        x = lambda v: cr.tensor(v.astype(dtype))                                  # noqa: E731
        assert cr.cumsum(x(ones)).data.astype(float).tolist() == t(ones).cumsum(0).float().tolist()
        assert float(cr.mean(x(hundreds))) == float(t(hundreds).mean()) == 100.0
        assert float(cr.var(x(hundreds))) == float(t(hundreds).var(unbiased=False)) == 0.0


def test_fp8_reductions_accumulate_in_float32_too():
    for dtype in (cr.float8_e4m3fn, cr.float8_e5m2):
        x = cr.tensor(np.full(1_000, 100.0).astype(dtype))
        assert cr.mean(x).dtype == dtype
        assert float(cr.mean(x)) == float(np.asarray(100.0).astype(dtype))   # the sum overflowed
        assert float(cr.softmax(x)[0]) == float(np.asarray(1e-3).astype(dtype))


def test_float32_reductions_record_no_casts():
    x = cr.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    for out in (cr.sum(x), cr.mean(x), cr.softmax(x), cr.cumsum(x, 1), cr.logsumexp(x)):
        assert out.dtype == cr.float32 and out.grad_fn.name != "astype", out.grad_fn
    with cr.autocast(cr.bfloat16):
        assert cr.mean(x.astype(cr.bfloat16)).dtype == cr.float32   # autocast's float32 reductions
