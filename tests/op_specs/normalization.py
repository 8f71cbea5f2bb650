"""Op-table rows for chainrule/ops/normalization.py: training-mode batch norm as one primitive, on
(N, C), (N, C, L) and (N, C, H, W) inputs, and with numbers for weight and bias (no affine); layer
norm's core over the last one and two axes, and its VJP (checked to the third order); ``SPECS``
(float64). They have no complex derivative (as PyTorch's), so ``COMPLEX_SPECS`` is empty."""
from __future__ import annotations

from chainrule.ops import normalization as Nm
from tests.op_specs.spec import OpSpec, _tl


def _bn(eps):
    return lambda x, w, b: Nm.batch_norm_train(x, w, b, eps)


def _t_ln(k, eps):
    return _tl(lambda t, x: t.nn.functional.layer_norm(x, x.shape[-k:], eps=eps))


def _t_ln_backward(k, eps):
    def fn(t, g, x):
        shape = x.shape[-k:]
        return t.ops.aten.native_layer_norm_backward(g, x, shape, *t.ops.aten.native_layer_norm(
            x, shape, None, None, eps)[1:], None, None, [True, False, False])[0]
    return _tl(fn)


def _t_bn(eps):
    return _tl(lambda t, x, w, b: t.nn.functional.batch_norm(x, None, None, w, b, training=True, eps=eps))


SPECS = [
    OpSpec("batch_norm_train", _bn(1e-5), id="batch_norm_train-2d", shapes=((5, 3), (3,), (3,)),
           torch_fn=_t_bn(1e-5)),
    OpSpec("batch_norm_train", _bn(0.1), id="batch_norm_train-3d-eps", shapes=((2, 3, 4), (3,), (3,)),
           torch_fn=_t_bn(0.1)),
    OpSpec("batch_norm_train", _bn(1e-5), id="batch_norm_train-4d", shapes=((2, 2, 3, 2), (2,), (2,)),
           torch_fn=_t_bn(1e-5)),
    OpSpec("batch_norm_train", lambda x: Nm.batch_norm_train(x, 1.0, 0.0, 1e-5), id="batch_norm_train-no-affine",
           shapes=((3, 2, 2),), torch_fn=_tl(lambda t, x: t.nn.functional.batch_norm(x, None, None, training=True))),
    OpSpec("layer_norm", lambda x: Nm.layer_norm(x, (-1,), 1e-5), id="layer_norm-last", shapes=((3, 5),),
           order=3, torch_fn=_t_ln(1, 1e-5)),
    OpSpec("layer_norm", lambda x: Nm.layer_norm(x, (-2, -1), 0.1), id="layer_norm-last-two-eps",
           shapes=((2, 3, 4),), torch_fn=_t_ln(2, 0.1)),
    OpSpec("layer_norm_backward", lambda g, x: Nm.layer_norm_backward(g, x, (-1,), 1e-5),
           id="layer_norm_backward-last", shapes=((3, 5), (3, 5)), order=3, torch_fn=_t_ln_backward(1, 1e-5)),
    OpSpec("layer_norm_backward", lambda g, x: Nm.layer_norm_backward(g, x, (-2, -1), 0.1),
           id="layer_norm_backward-last-two-eps", shapes=((2, 3, 4), (2, 3, 4)), torch_fn=_t_ln_backward(2, 0.1)),
]
COMPLEX_SPECS: list = []
