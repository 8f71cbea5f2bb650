"""cr.fft: NumPy's values for every function and argument, gradients in both modes against central
differences (complex data through view_as_complex/view_as_real), second order, PyTorch's gradients,
np.fft dispatch, FLOPs and errors."""
import numpy as np
import pytest

import chainrule as cr

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 6))
Z = X + 1j * RNG.normal(size=(4, 6))

# (name, call on a module with NumPy's fft API, real input?)
CASES = [
    ("fft", lambda m, a: m.fft(a), False),
    ("fft-pad-axis0", lambda m, a: m.fft(a, 8, 0), False),
    ("fft-crop-ortho", lambda m, a: m.fft(a, 4, norm="ortho"), False),
    ("ifft", lambda m, a: m.ifft(a), False),
    ("ifft-forward", lambda m, a: m.ifft(a, 7, norm="forward"), False),
    ("fft-of-real", lambda m, a: m.fft(a), True),
    ("rfft", lambda m, a: m.rfft(a), True),
    ("rfft-odd", lambda m, a: m.rfft(a, 7), True),
    ("rfft-axis0-ortho", lambda m, a: m.rfft(a, axis=0, norm="ortho"), True),
    ("irfft", lambda m, a: m.irfft(a), False),
    ("irfft-odd", lambda m, a: m.irfft(a, 7), False),
    ("irfft-axis0-forward", lambda m, a: m.irfft(a, 9, 0, norm="forward"), False),
    ("hfft", lambda m, a: m.hfft(a), False),
    ("hfft-odd-ortho", lambda m, a: m.hfft(a, 5, norm="ortho"), False),
    ("ihfft", lambda m, a: m.ihfft(a), True),
    ("fft2", lambda m, a: m.fft2(a), False),
    ("ifft2-s", lambda m, a: m.ifft2(a, (3, 8)), False),
    ("rfft2", lambda m, a: m.rfft2(a), True),
    ("irfft2", lambda m, a: m.irfft2(a), False),
    ("irfft2-s", lambda m, a: m.irfft2(a, (5, 5)), False),
    ("fftn", lambda m, a: m.fftn(a), False),
    ("ifftn-axes", lambda m, a: m.ifftn(a, None, (0,)), False),
    ("rfftn", lambda m, a: m.rfftn(a, (5, 5), (0, 1)), True),
    ("irfftn", lambda m, a: m.irfftn(a, (3, 7), (0, 1)), False),
    # a repeated axis transforms again (NumPy's 1-D transforms one after another, each with its size)
    ("fftn-repeated-axis", lambda m, a: m.fftn(a, (3, 8), (1, 1)), False),
    ("ifftn-repeated-axis", lambda m, a: m.ifftn(a, (5, 2, 7), (-1, 0, 1), norm="ortho"), False),
    ("rfftn-repeated-axis", lambda m, a: m.rfftn(a, (5, 3, 7), (1, 0, 1)), True),
    ("irfftn-repeated-axis", lambda m, a: m.irfftn(a, (3, 5, 9), (0, 0, 1), norm="forward"), False),
    ("rfft2-repeated-last", lambda m, a: m.rfft2(a, (4, 6), (1, 1)), True),
    ("fft2-whole-axis", lambda m, a: m.fft2(a, (-1, 4)), False),
    ("fftshift", lambda m, a: m.fftshift(a), False),
    ("ifftshift-axis", lambda m, a: m.ifftshift(a, 1), True),
]
IDS = [c[0] for c in CASES]


def _input(real):
    return X if real else Z


@pytest.mark.parametrize("name, call, real", CASES, ids=IDS)
def test_values_match_numpy(name, call, real):
    a = _input(real)
    want = call(np.fft, a)
    got = call(cr.fft, cr.tensor(a))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.data, want, rtol=1e-12, atol=1e-12)


def _as_real_fn(call, real):
    """The transform as a map of real arrays (complex data as (..., 2) pairs), for gradcheck."""
    def fn(p):
        out = call(cr.fft, p if real else cr.view_as_complex(p))
        return cr.view_as_real(out) if out.dtype.kind == "c" else out
    return fn


@pytest.mark.parametrize("name, call, real", CASES, ids=IDS)
def test_both_modes_and_second_order_match_central_differences(name, call, real):
    a = _input(real)
    p = cr.tensor(a if real else np.stack([a.real, a.imag], -1), requires_grad=True)
    fn = _as_real_fn(call, real)
    assert cr.gradcheck(fn, (p,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda q: fn(q) * fn(q), (p,))


@pytest.mark.parametrize("name, call, real", CASES, ids=IDS)
def test_gradients_match_torch(name, call, real):
    torch = pytest.importorskip("torch")
    if "repeated" in name:
        pytest.skip("torch.fft refuses repeated dims; test_a_repeated_axis_is_the_chain_of_1d_transforms")
    a = _input(real)
    want = call(np.fft, a)
    w = RNG.normal(size=want.shape) + (1j * RNG.normal(size=want.shape) if want.dtype.kind == "c" else 0)
    z = cr.tensor(a, requires_grad=True)
    (call(cr.fft, z) * cr.tensor(w)).real.sum().backward()
    t = torch.tensor(a, requires_grad=True)
    (call(torch.fft, t) * torch.tensor(w)).real.sum().backward()
    np.testing.assert_allclose(z.grad.data, t.grad.resolve_conj().numpy(), rtol=1e-10, atol=1e-12)


def test_a_repeated_axis_is_the_chain_of_1d_transforms():
    # NumPy's rule (issue 26): fftn(z, s=(2, 7), axes=(1, 1)) on (3, 4, 5) is fft(fft(z, 7, 1), 2, 1),
    # shape (3, 2, 5), not (3, 7, 5)
    a = RNG.normal(size=(3, 4, 5)) + 1j * RNG.normal(size=(3, 4, 5))
    w = RNG.normal(size=(3, 2, 5))
    chains = [(lambda m, z: m.fftn(z, (2, 7), (1, 1)), lambda m, z: m.fft(m.fft(z, 7, 1), 2, 1)),
              (lambda m, z: m.rfftn(z.real, (2, 7), (1, 1)), lambda m, z: m.fft(m.rfft(z.real, 7, 1), 2, 1)),
              (lambda m, z: m.irfftn(z, (2, 7), (1, 1))[:, :2], lambda m, z: m.irfft(m.ifft(z, 2, 1), 7, 1)[:, :2])]
    for nd, chain in chains:
        assert nd(np.fft, a).shape == (3, 2, 5)
        np.testing.assert_allclose(nd(np.fft, a), chain(np.fft, a), rtol=1e-12, atol=1e-12)
        grads = []
        for fn in (nd, chain):
            z = cr.tensor(a, requires_grad=True)
            (fn(cr.fft, z) * cr.tensor(w)).real.sum().backward()
            grads.append(z.grad.data)
        t = pytest.importorskip("torch").tensor(a, requires_grad=True)
        (chain(pytest.importorskip("torch").fft, t).real * t.new_tensor(w).real).sum().backward()
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grads[0], t.grad.resolve_conj().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("dtype", [cr.bfloat16, cr.float16], ids=str)
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
                                  "irfft2", "fftn", "ifftn", "rfftn", "irfftn"])
def test_16_bit_input_is_transformed_in_float32(name, dtype, norm):
    # NumPy has no bfloat16 reciprocal/sqrt loops for the norms (issue 26): chainrule computes in
    # float32; a complex result is complex64 (no narrower complex dtype), a real one (irfft of
    # 16-bit data) is rounded back to the input's dtype, as every real op's
    x = cr.tensor(X.astype(dtype), requires_grad=True)
    out = getattr(cr.fft, name)(x, norm=norm)
    want = getattr(np.fft, name)(X.astype(dtype).astype(np.float32), norm=norm)
    assert out.dtype == (cr.complex64 if want.dtype.kind == "c" else dtype)
    rtol = {cr.bfloat16: 2 ** -8, cr.float16: 2 ** -11}[dtype]
    np.testing.assert_allclose(out.data.astype(want.dtype), want, rtol=rtol, atol=rtol * np.abs(want).max())
    (cr.abs(out) ** 2).sum().backward()
    x32 = cr.tensor(X.astype(dtype).astype(np.float32), requires_grad=True)
    (cr.abs(getattr(cr.fft, name)(x32, norm=norm)) ** 2).sum().backward()
    assert x.grad.dtype == dtype
    g32 = x32.grad.data                           # a few 16-bit roundings apart (the loss of a 16-bit irfft is 16-bit)
    np.testing.assert_allclose(x.grad.data.astype(np.float32), g32, rtol=2 * rtol, atol=2 * rtol * np.abs(g32).max())


def test_the_adjoint_convention():
    # a real loss of complex parameters: z.grad = dL/dx + i dL/dy; for L = |fft(z)|^2 summed, that
    # is 2 n z (Parseval: sum |fft z|^2 = n sum |z|^2)
    z = cr.tensor(Z[0], requires_grad=True)
    (cr.abs(cr.fft.fft(z)) ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.data, 2 * 6 * Z[0], rtol=1e-12)


def test_numpy_fft_functions_dispatch_to_chainrule():
    z = cr.tensor(Z, requires_grad=True)
    out = np.fft.rfft(np.fft.irfft(z, 10), 10)
    assert isinstance(out, cr.Tensor) and out.requires_grad
    np.testing.assert_allclose(out.data, np.fft.rfft(np.fft.irfft(Z, 10), 10), rtol=1e-12, atol=1e-12)
    assert isinstance(np.fft.fftshift(z), cr.Tensor)


def test_frequencies_and_flops():
    np.testing.assert_allclose(cr.fft.fftfreq(8, 0.5).data, np.fft.fftfreq(8, 0.5), rtol=1e-6)
    np.testing.assert_allclose(cr.fft.rfftfreq(9).data, np.fft.rfftfreq(9), rtol=1e-6)
    assert cr.fft.fftfreq(4).dtype == cr.get_default_dtype()
    prim = cr.PRIMITIVES["fftn"]
    out = np.fft.fft(np.ones((3, 16)))
    assert prim.flops(out, None, axes=(1,), norm="backward", inverse=False) == 5 * 48 * 4   # 5 n log2 n, 3 rows


def test_single_precision_stays_single():
    x = cr.tensor(X.astype(np.float32), requires_grad=True)
    out = cr.fft.rfft(x)
    assert out.dtype == cr.complex64
    cr.abs(out).sum().backward()
    assert x.grad.dtype == cr.float32


def test_clear_errors():
    with pytest.raises(ValueError, match="norm must be"):
        cr.fft.fft(cr.tensor(Z), norm="unitary")
    with pytest.raises(cr.ShapeError, match="fft: invalid number of data points"):
        cr.fft.fft(cr.tensor(Z), 0)
    with pytest.raises(cr.DTypeError, match="rfft.*complex128.*real data"):
        cr.fft.rfft(cr.tensor(Z))
    with pytest.raises(cr.ShapeError, match="out of bounds"):
        cr.fft.fft(cr.tensor(Z), axis=2)
    for fn in (cr.fft.fft, cr.fft.rfft, cr.fft.irfft, cr.fft.hfft):     # -1 is whole-axis only in the n-D ones
        with pytest.raises(cr.ShapeError, match=f"{fn.__name__}: invalid number of data points"):
            fn(cr.tensor(X), -1)
