"""Op-table rows for chainrule/ops/conv.py: the three convolution primitives (padding to an exact fit,
cropping where it is negative), in 1-, 2- and 3-d, with strides, dilations and groups; ``SPECS``
(float64) and ``COMPLEX_SPECS`` (complex128)."""
from __future__ import annotations

from chainrule.ops import conv as C
from tests.op_specs.spec import OpSpec, _tl


def _conv(stride, dilation=None, groups=1, padding=None):
    dilation = dilation or (1,) * len(stride)
    return lambda x, w: C.conv(x, w, stride, dilation, groups, padding)


def _conv_t(stride, dilation=None, groups=1, padding=None):
    dilation = dilation or (1,) * len(stride)
    return lambda a, w: C.conv_transpose(a, w, stride, dilation, groups, padding)


def _conv_w(stride, dilation=None, groups=1, padding=None):
    dilation = dilation or (1,) * len(stride)
    return lambda x, a: C.conv_weight(x, a, stride, dilation, groups, padding)


def _t_conv(stride, dilation=None, groups=1, padding=0):
    nd = len(stride)
    dilation = dilation or (1,) * nd
    return _tl(lambda t, x, w: getattr(t.nn.functional, f"conv{nd}d")(x, w, stride=stride, dilation=dilation,
                                                                         groups=groups, padding=padding))


def _t_conv_t(stride, dilation=None, groups=1, padding=0, output_padding=0):
    nd = len(stride)
    dilation = dilation or (1,) * nd
    return _tl(lambda t, a, w: getattr(t.nn.functional, f"conv_transpose{nd}d")(
        a, w, stride=stride, dilation=dilation, groups=groups, padding=padding, output_padding=output_padding))


def _t_conv_w(kernel, stride, dilation=None, groups=1, padding=0):
    nd = len(stride)
    dilation = dilation or (1,) * nd

    def fn(t, x, a):
        shape = (a.shape[1], x.shape[1] // groups) + kernel
        return getattr(t.nn.grad, f"conv{nd}d_weight")(x, shape, a, stride=stride, dilation=dilation, groups=groups,
                                                       padding=padding)
    return _tl(fn)


SPECS = [
    OpSpec("conv", _conv((2,)), id="conv-1d-stride", shapes=((2, 2, 7), (3, 2, 3)), torch_fn=_t_conv((2,))),
    OpSpec("conv", _conv((1, 1), (1, 2), 2), id="conv-2d-groups-dilation", shapes=((1, 4, 5, 6), (2, 2, 2, 2)),
           torch_fn=_t_conv((1, 1), (1, 2), 2)),
    OpSpec("conv", _conv((2, 1), None, 1, ((1, 1), (2, 2))), id="conv-2d-padding", shapes=((1, 2, 5, 4), (3, 2, 3, 3)),
           torch_fn=_t_conv((2, 1), None, 1, (1, 2))),
    OpSpec("conv", _conv((1, 1), (1, 2), 2, ((1, 0), (2, -1))), id="conv-2d-asymmetric-and-crop",
           shapes=((1, 4, 5, 6), (2, 2, 2, 2))),
    OpSpec("conv", _conv((1, 2, 1)), id="conv-3d", shapes=((1, 1, 3, 3, 3), (2, 1, 2, 1, 2)),
           torch_fn=_t_conv((1, 2, 1))),
    OpSpec("conv_transpose", _conv_t((2,), None, 2), id="conv_transpose-1d-groups", shapes=((2, 4, 3), (4, 1, 3)),
           torch_fn=_t_conv_t((2,), None, 2)),
    OpSpec("conv_transpose", _conv_t((2, 1), (1, 2)), id="conv_transpose-2d-dilation",
           shapes=((1, 2, 2, 3), (2, 3, 2, 2)), torch_fn=_t_conv_t((2, 1), (1, 2))),
    OpSpec("conv_transpose", _conv_t((2,), None, 1, ((1, 0),)), id="conv_transpose-1d-output-padding",
           shapes=((2, 2, 3), (2, 3, 3)), torch_fn=_t_conv_t((2,), None, 1, 1, 1)),
    OpSpec("conv_transpose", _conv_t((1, 2), (2, 1), 1, ((1, -1), (0, 2))), id="conv_transpose-2d-asymmetric",
           shapes=((1, 2, 3, 3), (2, 2, 2, 3))),
    OpSpec("conv_weight", _conv_w((2,), None, 1, ((1, 1),)), id="conv_weight-1d-padding", shapes=((2, 2, 7), (2, 3, 3)),
           torch_fn=_t_conv_w((5,), (2,), None, 1, 1)),
    OpSpec("conv_weight", _conv_w((1, 1), None, 1, ((0, 1), (1, -1))), id="conv_weight-2d-asymmetric",
           shapes=((1, 2, 4, 5), (1, 2, 3, 3))),
    OpSpec("conv_weight", _conv_w((2,)), id="conv_weight-1d-stride", shapes=((2, 2, 7), (2, 3, 3)),
           torch_fn=_t_conv_w((3,), (2,))),
    OpSpec("conv_weight", _conv_w((1, 1), (2, 2), 2), id="conv_weight-2d-groups-dilation",
           shapes=((1, 4, 5, 5), (1, 2, 3, 1)), torch_fn=_t_conv_w((2, 3), (1, 1), (2, 2), 2)),
]

COMPLEX_SPECS = [
    OpSpec("conv", _conv((2,)), id="conv-complex", shapes=((1, 2, 5), (2, 2, 3)), kinds="cc",
           torch_fn=_t_conv((2,))),
    OpSpec("conv_transpose", _conv_t((2,), None, 2), id="conv_transpose-complex", shapes=((1, 2, 2), (2, 1, 2)),
           kinds="cc", torch_fn=_t_conv_t((2,), None, 2)),
    OpSpec("conv_weight", _conv_w((2,)), id="conv_weight-complex", shapes=((1, 2, 5), (1, 2, 2)),
           kinds="cc"),                     # (torch has no complex kernel for conv1d_weight)
]
