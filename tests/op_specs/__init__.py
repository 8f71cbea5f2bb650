"""One spec per primitive: how to call it, on which shapes and domain. The op-table tests iterate
``OP_SPECS`` (float64 inputs), ``COMPLEX_SPECS`` (complex128) and ``NONDIFF_SPECS``; each family's rows
live in its own module here."""
from tests.op_specs import (
    conv,
    core,
    decompositions,
    fft,
    normalization,
    numpy_arrays,
    numpy_math,
    numpy_stats,
    special,
    spectral,
)
from tests.op_specs.core import NONDIFF_SPECS, ZERO_GRAD
from tests.op_specs.spec import OpSpec

_FAMILIES = (numpy_math, numpy_arrays, numpy_stats, special, conv, normalization)
OP_SPECS = core.OP_SPECS + fft.SPECS + spectral.SPECS + decompositions.SPECS + [
    row for family in _FAMILIES for row in family.SPECS]
COMPLEX_SPECS = core.COMPLEX_SPECS + spectral.COMPLEX_SPECS + decompositions.COMPLEX_SPECS + [
    row for family in _FAMILIES for row in family.COMPLEX_SPECS]

__all__ = ["COMPLEX_SPECS", "NONDIFF_SPECS", "OP_SPECS", "OpSpec", "ZERO_GRAD"]
