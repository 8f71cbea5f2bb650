"""FP8 quantization: round-trip bounds per format, per-block vs per-tensor, straight-through gradients."""
import numpy as np
import pytest

import chainrule as cr
from chainrule import fp8

# relative rounding error of a normal FP8 value: half an ulp = 2^-(mantissa bits + 1)
BOUND = {cr.float8_e4m3fn: 2.0 ** -4, cr.float8_e5m2: 2.0 ** -3}


@pytest.mark.parametrize("dtype", fp8.FORMATS, ids=str)
@pytest.mark.parametrize("block_size", [None, 16])
def test_round_trip_error_bound(dtype, block_size, rng):
    x = rng.standard_normal((8, 64)).astype(np.float32)
    q, s = fp8.quantize(x, dtype, block_size)
    assert q.dtype == dtype and s.dtype == np.float32
    assert s.shape == (() if block_size is None else (8, 4))
    back = np.asarray(fp8.dequantize(q, s))
    tiny = float(cr.precision.finfo(dtype).smallest_normal)
    normal = np.abs(np.asarray(q).astype(np.float32)) >= tiny
    rel = np.abs(back - x)[normal] / np.abs(x)[normal]
    assert rel.max() <= BOUND[dtype] * (1 + 1e-6)
    assert np.max(np.abs(back)) == pytest.approx(np.max(np.abs(x)), rel=1e-6)   # amax maps exactly


def test_per_block_beats_per_tensor_with_outliers():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    x.flat[rng.choice(x.size, 16, replace=False)] *= 1000.0
    w = (rng.standard_normal((256, 32)) / 16).astype(np.float32)
    for dtype in fp8.FORMATS:
        per_tensor = fp8.relative_error(fp8.fp8_matmul(x, w, dtype), x @ w)
        per_block = fp8.relative_error(fp8.fp8_matmul(x, w, dtype, block_size=32), x @ w)
        gain = 0.7 if dtype == cr.float8_e4m3fn else 0.9     # e5m2 has more range, less to gain
        assert per_block < gain * per_tensor < gain * 0.2, (dtype, per_block, per_tensor)


def test_straight_through_gradients():
    x = cr.tensor(np.linspace(-300, 300, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    w = cr.tensor(np.ones((4, 2), np.float32), requires_grad=True)
    fp8.fp8_matmul(x, w, block_size=2).sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.full((3, 4), 2.0))   # exactly d(x @ w)/dx
    q, s = fp8.quantize(x)
    x.grad = None
    fp8.dequantize(q, s).sum().backward()          # through the FP8 tensor: one FP8 rounding
    np.testing.assert_allclose(x.grad.data, 1.0, rtol=BOUND[cr.float8_e4m3fn])


def test_bad_input_errors():
    with pytest.raises(cr.DTypeError, match="fp8.quantize: dtype must be"):
        fp8.quantize(np.ones(4), dtype=cr.float16)
    with pytest.raises(cr.ShapeError, match="multiple of block_size=3"):
        fp8.quantize(np.ones((2, 4)), block_size=3)


def test_fp8_quantize_refuses_non_finite_input():
    with pytest.raises(ValueError, match="inf/NaN"):
        cr.fp8.quantize(cr.tensor([1.0, np.inf]))
