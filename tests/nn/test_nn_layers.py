"""Every layer: gradchecked in float64 (both modes, second order where cheap), compared with torch."""
import inspect

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.errors import ShapeError
from chainrule.nn import functional as F


def t64(rng, *shape, scale=1.0):
    return cr.tensor(rng.normal(size=shape) * scale, dtype=cr.float64, requires_grad=True)


# ----- gradcheck in float64: inputs and parameters -----
def test_linear_gradcheck(rng):
    x, w, b = t64(rng, 3, 4), t64(rng, 2, 4), t64(rng, 2)
    assert cr.gradcheck(F.linear, (x, w, b), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x, w: F.linear(x, w).sum(axis=0), (x, w))


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), ((1, 2), (1, 0))])
def test_conv2d_gradcheck(rng, stride, padding):
    x, w, b = t64(rng, 2, 2, 5, 5), t64(rng, 3, 2, 3, 3), t64(rng, 3)
    assert cr.gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding), (x, w, b),
                        modes=("rev", "fwd"))


def test_conv2d_second_order(rng):
    x, w = t64(rng, 1, 1, 4, 4), t64(rng, 2, 1, 2, 2)
    assert cr.gradgradcheck(lambda x, w: F.conv2d(x, w, stride=1, padding=1), (x, w))


@pytest.mark.parametrize("fn", [F.max_pool2d, F.avg_pool2d], ids=["max", "avg"])
@pytest.mark.parametrize("kernel,stride,padding", [(2, None, 0), (3, 2, 1)])
def test_pool_gradcheck(rng, fn, kernel, stride, padding):
    x = t64(rng, 2, 2, 5, 5)
    assert cr.gradcheck(lambda x: fn(x, kernel, stride, padding), (x,), modes=("rev", "fwd"))


def test_layer_norm_gradcheck(rng):
    x, w, b = t64(rng, 3, 2, 4), t64(rng, 2, 4), t64(rng, 2, 4)
    assert cr.gradcheck(lambda x, w, b: F.layer_norm(x, (2, 4), w, b), (x, w, b), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x: F.layer_norm(x, (4,)), (x,))


def test_embedding_gradcheck_accumulates_repeated_rows(rng):
    w = t64(rng, 5, 3)
    idx = np.array([[0, 2], [2, 4]])
    assert cr.gradcheck(lambda w: F.embedding(idx, w), (w,), modes=("rev", "fwd"))
    F.embedding(idx, w).sum().backward()
    np.testing.assert_array_equal(w.grad.data[:, 0], [1, 0, 2, 0, 1])


@pytest.mark.parametrize("layer", [nn.ReLU(), nn.Tanh(), nn.GELU(), nn.Sigmoid(), nn.Flatten()],
                         ids=lambda m: type(m).__name__)
def test_activation_layers_gradcheck(rng, layer):
    x = t64(rng, 3, 2, 2)
    assert cr.gradcheck(layer, (x,), modes=("rev", "fwd"))


def test_dropout_gradcheck_with_fixed_mask(rng):
    x = t64(rng, 4, 5)
    assert cr.gradcheck(lambda x: F.dropout(x, 0.3, generator=np.random.default_rng(7)), (x,))


def test_module_layers_in_float64_gradcheck(rng):
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, dtype=cr.float64, generator=rng), nn.Tanh(),
                        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8, 3, dtype=cr.float64, generator=rng),
                        nn.LayerNorm(3, dtype=cr.float64))
    x = t64(rng, 2, 1, 4, 4)
    assert net[0].weight.dtype == np.float64
    assert cr.gradcheck(net, (x,))


# ----- losses: hand values, stability, gradcheck -----
def test_cross_entropy_values_and_reductions():
    logits = cr.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=cr.float64)
    y = np.array([0, 2])
    per = F.cross_entropy(logits, y, reduction="none").data
    expected = [np.log(np.exp(2) + 2) - 2, np.log(3)]
    np.testing.assert_allclose(per, expected, rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(logits, y).data, np.mean(expected), rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(logits, y, reduction="sum").data, np.sum(expected))


def test_cross_entropy_is_stable_for_huge_logits():
    logits = cr.tensor([[1000.0, -1000.0]], dtype=cr.float32, requires_grad=True)
    loss = F.cross_entropy(logits, [1])
    loss.backward()
    assert np.isclose(loss.item(), 2000.0)
    np.testing.assert_allclose(logits.grad.data, [[1.0, -1.0]], atol=1e-6)


def test_losses_gradcheck(rng):
    z, t = t64(rng, 4, 3), cr.tensor(rng.uniform(size=(4, 3)))
    assert cr.gradcheck(lambda z: F.cross_entropy(z, [0, 2, 1, 2]), (z,), modes=("rev", "fwd"))
    assert cr.gradcheck(lambda z: F.mse_loss(z, t, reduction="sum"), (z,))
    assert cr.gradcheck(lambda z: F.binary_cross_entropy_with_logits(z, t), (z,))
    assert cr.gradgradcheck(lambda z: F.cross_entropy(z, [0, 2, 1, 2]), (z,))


def test_bce_with_logits_matches_formula_and_does_not_overflow():
    x = cr.tensor([-800.0, 0.0, 3.0], dtype=cr.float64)
    t = cr.tensor([1.0, 0.0, 1.0], dtype=cr.float64)
    out = F.binary_cross_entropy_with_logits(x, t, reduction="none").data
    np.testing.assert_allclose(out, [800.0, np.log(2), np.log1p(np.exp(-3.0))], rtol=1e-12)


def test_loss_errors_name_the_op_and_fix():
    with pytest.raises(cr.DTypeError, match="integer class indices"):
        F.cross_entropy(cr.zeros((2, 3)), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"target values must lie in \[0, 3\)"):
        F.cross_entropy(cr.zeros((2, 3)), [0, 3])
    with pytest.raises(cr.ShapeError, match="expected input"):
        F.cross_entropy(cr.zeros((2, 3)), [0, 1, 2])
    with pytest.raises(ValueError, match="reduction must be"):
        F.mse_loss(cr.zeros(2), cr.zeros(2), reduction="avg")
    with pytest.raises(cr.ShapeError, match="mse_loss"):
        F.mse_loss(cr.zeros(2), cr.zeros(3))


def test_layer_shape_errors_are_raised_at_forward_time():
    with pytest.raises(cr.ShapeError, match="in_features=4"):
        nn.Linear(4, 2)(cr.zeros((3, 5)))
    with pytest.raises(cr.ShapeError, match="in_channels=3"):
        nn.Conv2d(1, 2, 3)(cr.zeros((1, 3, 5, 5)))
    with pytest.raises(cr.ShapeError, match=r"\(N, C, H, W\)"):
        nn.MaxPool2d(2)(cr.zeros((4, 4)))
    with pytest.raises(cr.ShapeError, match="larger than the padded input"):
        nn.Conv2d(1, 1, 5)(cr.zeros((1, 1, 3, 3)))
    with pytest.raises(IndexError, match="num_embeddings"):
        nn.Embedding(3, 2)(cr.tensor([3]))


def test_conv2d_on_unbatched_input_names_the_expected_layout():
    # a (C, H, W) input is unbatched, as torch reads it; fewer axes name the layouts
    assert F.conv2d(cr.ones((1, 8, 8)), cr.ones((2, 1, 3, 3))).shape == (2, 6, 6)
    with pytest.raises(ShapeError, match=r"\(N, C, H, W\)"):
        F.conv2d(cr.ones((8, 8)), cr.ones((2, 1, 3, 3)))
    with pytest.raises(ShapeError, match="in_channels=3"):
        F.conv2d(cr.ones((1, 3, 8, 8)), cr.ones((2, 1, 3, 3)))


def test_layer_norm_accepts_an_int_normalized_shape():
    x = cr.tensor([[1.0, 3.0], [2.0, 6.0]])
    np.testing.assert_allclose(F.layer_norm(x, 2).data, F.layer_norm(x, (2,)).data)


# ----- max_pool2d on integers -----
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_max_pool2d_pads_integers_with_the_dtype_minimum(dtype):
    info = np.iinfo(dtype)
    v = np.array([[info.min, info.min + 1, 5], [info.min, info.min, 7], [2, info.min, 3]], dtype=dtype)
    x = cr.tensor(v.reshape(1, 1, 3, 3))
    out = F.max_pool2d(x, 2, stride=2, padding=1)
    assert out.dtype == dtype
    # windows of the padded 5x5 map: the top-left one sees only the real value info.min
    np.testing.assert_array_equal(out.data[0, 0], [[info.min, 5], [2, 7]])
    np.testing.assert_array_equal(nn.MaxPool2d(3, stride=1, padding=1)(x).data[0, 0],
                                  [[info.min + 1, 7, 7], [2, 7, 7], [2, 7, 7]])


def test_max_pool2d_float_padding_still_uses_minus_infinity():
    x = cr.tensor(np.full((1, 1, 2, 2), -1e30))
    np.testing.assert_array_equal(F.max_pool2d(x, 2, stride=1, padding=1).data, np.full((1, 1, 3, 3), -1e30))


# ----- dropout -----
def test_dropout_masks_are_reproducible_and_scaled():
    x = cr.ones((50, 40))
    a = nn.Dropout(0.25, generator=np.random.default_rng(3))(x).data
    b = nn.Dropout(0.25, generator=np.random.default_rng(3))(x).data
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.75)}
    assert abs((a == 0).mean() - 0.25) < 0.03
    cr.random.manual_seed(11)
    c = F.dropout(x, 0.5).data
    cr.random.manual_seed(11)
    np.testing.assert_array_equal(c, F.dropout(x, 0.5).data)


def test_dropout_is_identity_in_eval_and_zero_at_p1():
    d = nn.Dropout(0.9)
    x = cr.tensor(np.arange(6.0))
    np.testing.assert_array_equal(d.eval()(x).data, x.data)
    np.testing.assert_array_equal(F.dropout(x, 1.0).data, np.zeros(6))
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        nn.Dropout(1.5)


# ----- torch as a second oracle -----
def _torch_pair(torch, arr):
    return cr.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)


def test_conv_pool_net_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(2, 3, 7, 7))
    w, b = rng.normal(size=(4, 3, 3, 3)), rng.normal(size=4)
    (cx, tx), (cw, tw), (cb, tb) = (_torch_pair(torch, a) for a in (x, w, b))
    conv = F.conv2d(cx, cw, cb, stride=2, padding=1)                 # (2, 4, 4, 4)
    ours = F.max_pool2d(conv, 2, 1) + F.avg_pool2d(conv, 3, 1, 1)[..., :3, :3]
    tconv = torch.nn.functional.conv2d(tx, tw, tb, stride=2, padding=1)
    theirs = torch.nn.functional.max_pool2d(tconv, 2, 1) + \
        torch.nn.functional.avg_pool2d(tconv, 3, 1, 1)[..., :3, :3]
    assert ours.shape == tuple(theirs.shape) == (2, 4, 3, 3)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-10)
    g = rng.normal(size=theirs.shape)
    ours.backward(g)
    theirs.backward(torch.tensor(g))
    for c, t in ((cx, tx), (cw, tw), (cb, tb)):
        np.testing.assert_allclose(c.grad.data, t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_pool_padding_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(1, 2, 5, 5))
    cx, tx = _torch_pair(torch, x)
    for ours_fn, theirs_fn in ((F.max_pool2d, torch.nn.functional.max_pool2d),
                               (F.avg_pool2d, torch.nn.functional.avg_pool2d)):
        ours, theirs = ours_fn(cx, 3, 2, 1), theirs_fn(tx, 3, 2, 1)
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12)


def test_layers_and_losses_match_torch(rng):
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    x = rng.normal(size=(4, 6))
    w, b = rng.normal(size=(3, 6)), rng.normal(size=3)
    lw, lb = rng.normal(size=6), rng.normal(size=6)
    y = np.array([0, 2, 1, 1])
    pairs = [_torch_pair(torch, a) for a in (x, w, b, lw, lb)]
    (cx, tx), (cw, tw), (cb, tb), (clw, tlw), (clb, tlb) = pairs
    ours = F.cross_entropy(F.linear(F.gelu(F.layer_norm(cx, (6,), clw, clb)), cw, cb), y)
    theirs = tF.cross_entropy(tF.linear(tF.gelu(tF.layer_norm(tx, (6,), tlw, tlb)), tw, tb),
                              torch.tensor(y))
    assert np.isclose(ours.item(), theirs.item(), rtol=1e-10)
    ours.backward()
    theirs.backward()
    for c, t in pairs:
        np.testing.assert_allclose(c.grad.data, t.grad.numpy(), rtol=1e-8, atol=1e-12)
    target = rng.uniform(size=(4, 6))
    np.testing.assert_allclose(
        F.binary_cross_entropy_with_logits(cr.tensor(x), cr.tensor(target), reduction="sum").data,
        tF.binary_cross_entropy_with_logits(torch.tensor(x), torch.tensor(target), reduction="sum").item())
    np.testing.assert_allclose(F.mse_loss(cr.tensor(x), cr.tensor(target)).data,
                               tF.mse_loss(torch.tensor(x), torch.tensor(target)).item())


def test_embedding_matches_torch(rng):
    torch = pytest.importorskip("torch")
    w = rng.normal(size=(6, 3))
    idx = np.array([[1, 5, 1], [0, 2, 2]])
    cw, tw = _torch_pair(torch, w)
    (F.embedding(idx, cw) ** 2).sum().backward()
    (torch.nn.functional.embedding(torch.tensor(idx), tw) ** 2).sum().backward()
    np.testing.assert_allclose(cw.grad.data, tw.grad.numpy(), rtol=1e-12)


def test_default_init_bounds_match_pytorch():
    lin = nn.Linear(100, 50, generator=np.random.default_rng(0))
    bound = 1 / np.sqrt(100)
    assert np.abs(lin.weight.data).max() <= bound and np.abs(lin.weight.data).max() > 0.9 * bound
    conv = nn.Conv2d(4, 8, 3, generator=np.random.default_rng(0))
    assert np.abs(conv.weight.data).max() <= 1 / np.sqrt(36)
    a = nn.Linear(3, 2, generator=np.random.default_rng(5)).weight.data
    np.testing.assert_array_equal(a, nn.Linear(3, 2, generator=np.random.default_rng(5)).weight.data)


def test_init_functions_statistics():
    g = np.random.default_rng(0)
    w = cr.zeros((400, 300))
    nn.init.kaiming_normal_(w, nonlinearity="relu", generator=g)
    assert abs(w.data.std() - np.sqrt(2 / 300)) < 0.002
    nn.init.xavier_uniform_(w, generator=g)
    assert abs(np.abs(w.data).max() - np.sqrt(6 / 700)) < 1e-3
    nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu", generator=g)
    assert np.abs(w.data).max() <= np.sqrt(6 / 400)
    with pytest.raises(cr.ShapeError, match="at least 2 dimensions"):
        nn.init.xavier_normal_(cr.zeros(3))
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        nn.init.calculate_gain("swish")


# ----- every public function of nn.functional and nn.init carries a doctest -----
@pytest.mark.parametrize("module", [F, nn.init], ids=lambda m: m.__name__)
def test_public_functions_have_doctests(module):
    own = [name for name, fn in vars(module).items() if inspect.isfunction(fn)
           and not name.startswith("_") and fn.__module__.startswith(module.__name__)]
    assert len(own) >= 9
    assert [name for name in own if ">>>" not in (getattr(module, name).__doc__ or "")] == []
