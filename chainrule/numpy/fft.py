"""``cr.fft``: NumPy's ``np.fft``, differentiable (complex-to-complex, real and Hermitian transforms).

>>> import chainrule as cr
>>> cr.fft.ifft(cr.fft.fft(cr.tensor([1.0, 2.0, 3.0]))).real.tolist()
[1.0, 2.0, 3.0]
"""
from chainrule.ops.fft import (
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
           "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]
