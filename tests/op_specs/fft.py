"""Op-table rows for cr.fft's primitive (real data in, as every row: complex data through view_as_complex)."""
from __future__ import annotations

import chainrule as cr
from tests.op_specs.spec import OpSpec, _tl

SPECS = [
    OpSpec("fftn", lambda x: cr.view_as_real(cr.fft.fft(x)), torch_fn=_tl(lambda t, x: t.view_as_real(t.fft.fft(x)))),
    OpSpec("rfftn", lambda x: cr.view_as_real(cr.fft.rfft2(x, norm="forward")), id="rfftn-rfft2", shapes=((3, 5),),
           torch_fn=_tl(lambda t, x: t.view_as_real(t.fft.rfft2(x, norm="forward")))),
    OpSpec("irfftn", lambda x: cr.fft.irfft2(cr.fft.rfft2(x) * (1 + 1j), (3, 4), norm="ortho"),
           id="irfftn-irfft2", shapes=((3, 5),),
           torch_fn=_tl(lambda t, x: t.fft.irfft2(t.fft.rfft2(x) * (1 + 1j), (3, 4), norm="ortho"))),
]
