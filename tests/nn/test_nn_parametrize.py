"""cr.nn.utils.parametrize / parametrizations (weight_norm, spectral_norm) and the older hook-based
weight_norm / spectral_norm, against torch.nn.utils in float64: state_dict keys, forward values,
gradients of the originals, spectral_norm's power-iteration buffers over training steps, removal,
load_state_dict from torch, second order, errors."""
import copy
import pickle
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.nn.utils import parametrizations as PZ
from chainrule.nn.utils import parametrize as P

F64 = cr.float64


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def npy(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def load_from_torch(ours, theirs):
    """Copy torch's state_dict (same keys, same order) into ours."""
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)
    ours.load_state_dict({k: v.detach().numpy() for k, v in sd.items()})


# (cr layer, torch layer, input shape); the cr layers are float64
LAYERS = {
    "linear": (lambda: nn.Linear(5, 4, dtype=F64), lambda t: t.nn.Linear(5, 4), (3, 5)),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3, dtype=F64), lambda t: t.nn.Conv2d(3, 4, 3), (2, 3, 6, 6)),
    "convT2d": (lambda: nn.ConvTranspose2d(3, 2, 3, dtype=F64), lambda t: t.nn.ConvTranspose2d(3, 2, 3),
                (2, 3, 4, 4)),
    "conv1d": (lambda: nn.Conv1d(2, 3, 2, dtype=F64), lambda t: t.nn.Conv1d(2, 3, 2), (2, 2, 5)),
}


def twins(kind, torch, wrap_ours, wrap_theirs):
    make_ours, make_theirs, shape = LAYERS[kind]
    theirs = wrap_theirs(make_theirs(torch).double())
    ours = wrap_ours(make_ours())
    load_from_torch(ours, theirs)
    return ours, theirs, shape


def forward_backward(ours, theirs, x, g, torch):
    xo, xt = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = ours(xo), theirs(xt)
    close(npy(yo), npy(yt))
    yo.backward(cr.tensor(g))
    yt.backward(torch.tensor(g))
    close(npy(xo.grad), npy(xt.grad))
    named_t = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(npy(p.grad), npy(named_t[name].grad))


def sgd_step(model, lr=0.1):
    with cr.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
            p.grad = None


def sgd_step_torch(model, torch, lr=0.1):
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
            p.grad = None


# ----- weight_norm (parametrization) -----
@pytest.mark.parametrize("kind", ["linear", "conv2d", "convT2d", "conv1d"])
@pytest.mark.parametrize("dim", [0, 1, None, -2])
def test_weight_norm_matches_torch(rng, kind, dim):
    torch = pytest.importorskip("torch")
    ours, theirs, shape = twins(kind, torch, lambda m: PZ.weight_norm(m, dim=dim),
                                lambda m: torch.nn.utils.parametrizations.weight_norm(m, dim=dim))
    assert type(ours).__name__ == type(theirs).__name__ == f"Parametrized{type(theirs).__bases__[0].__name__}"
    keys = list(ours.state_dict())
    assert "parametrizations.weight.original0" in keys and "parametrizations.weight.original1" in keys
    close(npy(ours.weight), npy(theirs.weight))
    x = rng.normal(size=shape)
    g = rng.normal(size=tuple(theirs(torch.tensor(x)).shape))
    forward_backward(ours, theirs, x, g, torch)


def test_weight_norm_own_init_matches_torch_right_inverse(rng):
    torch = pytest.importorskip("torch")
    ours = nn.Linear(4, 3, dtype=F64, generator=rng)
    theirs = torch.nn.Linear(4, 3).double()
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    w = npy(ours.weight).copy()
    PZ.weight_norm(ours, dim=1)
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=1)
    for k, v in theirs.state_dict().items():
        close(npy(ours.state_dict()[k]), v.numpy())
    close(npy(ours.weight), w)                       # forward(right_inverse(w)) == w


def test_weight_norm_second_order(rng):
    lin = PZ.weight_norm(nn.Linear(3, 2, dtype=F64, generator=rng))
    x = cr.tensor(rng.normal(size=(4, 3)))
    plist = lin.parametrizations.weight
    g0, v0 = plist.original0.detach(), plist.original1.detach()

    def f(g, v):
        return cr.tanh(x @ PZ.weight_norm_value(v, g, 0).T)
    assert cr.gradgradcheck(f, (g0.clone().requires_grad_(), v0.clone().requires_grad_()))
    # and through the module itself: d/d(original) of a gradient, against torch
    torch = pytest.importorskip("torch")
    theirs = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2).double())
    theirs.load_state_dict({k: torch.tensor(npy(v)) for k, v in lin.state_dict().items()})
    xo, xt = cr.tensor(npy(x), requires_grad=True), torch.tensor(npy(x), requires_grad=True)
    (go,) = cr.autograd.grad(cr.tanh(lin(xo)).sum(), (xo,), create_graph=True)
    (gt,) = torch.autograd.grad(torch.tanh(theirs(xt)).sum(), (xt,), create_graph=True)
    (go ** 2).sum().backward()
    (gt ** 2).sum().backward()
    close(npy(plist.original1.grad), theirs.parametrizations.weight.original1.grad.numpy())
    close(npy(plist.original0.grad), theirs.parametrizations.weight.original0.grad.numpy())


def test_weight_norm_under_functional_call_and_vmap(rng):
    m = PZ.weight_norm(nn.Linear(3, 2, dtype=F64, generator=rng))
    x = cr.tensor(rng.normal(size=(4, 3)))
    params = {k: v.detach().clone() for k, v in m.named_parameters()}
    grads = cr.func.grad(lambda p: cr.func.functional_call(m, p, (x,)).sum())(params)
    m(x).sum().backward()
    for k, p in m.named_parameters():
        close(npy(grads[k]), npy(p.grad))
    close(npy(cr.vmap(m)(x)), npy(m(x)))


def test_weight_norm_training_steps_and_removal(rng):
    torch = pytest.importorskip("torch")
    ours, theirs, shape = twins("conv2d", torch, PZ.weight_norm, torch.nn.utils.parametrizations.weight_norm)
    for _ in range(3):
        x = rng.normal(size=shape)
        ours(cr.tensor(x)).sum().backward()
        theirs(torch.tensor(x)).sum().backward()
        sgd_step(ours)
        sgd_step_torch(theirs, torch)
    for k, v in theirs.state_dict().items():
        close(npy(ours.state_dict()[k]), v.numpy())
    P.remove_parametrizations(ours, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight")
    assert type(ours) is nn.Conv2d and list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    assert isinstance(ours.weight, nn.Parameter)
    close(npy(ours.weight), theirs.weight.detach().numpy())
    assert not hasattr(ours, "parametrizations")


# ----- spectral_norm (parametrization) -----
@pytest.mark.parametrize("kind", ["linear", "conv2d", "convT2d"])
@pytest.mark.parametrize("n_iter", [1, 3])
def test_spectral_norm_training_steps_match_torch(rng, kind, n_iter):
    torch = pytest.importorskip("torch")
    sn_t = torch.nn.utils.parametrizations.spectral_norm
    ours, theirs, shape = twins(kind, torch, lambda m: PZ.spectral_norm(m, n_power_iterations=n_iter),
                                lambda m: sn_t(m, n_power_iterations=n_iter))
    assert list(ours.state_dict())[-2:] == ["parametrizations.weight.0._u", "parametrizations.weight.0._v"]
    out_shape = tuple(theirs.eval()(torch.tensor(rng.normal(size=shape))).shape)
    theirs.train()
    for _ in range(4):
        x, g = rng.normal(size=shape), rng.normal(size=out_shape)
        forward_backward(ours, theirs, x, g, torch)
        sgd_step(ours)
        sgd_step_torch(theirs, torch)
        for k, v in theirs.state_dict().items():
            close(npy(ours.state_dict()[k]), v.numpy())


def test_spectral_norm_eval_keeps_buffers_and_normalises(rng):
    torch = pytest.importorskip("torch")
    ours, theirs, shape = twins("linear", torch, PZ.spectral_norm, torch.nn.utils.parametrizations.spectral_norm)
    ours.eval()
    theirs.eval()
    u = npy(ours.parametrizations.weight[0]._u).copy()
    x = rng.normal(size=shape)
    forward_backward(ours, theirs, x, np.ones((3, 4)), torch)
    close(npy(ours.parametrizations.weight[0]._u), u)
    # sigma = u.W v with unit u, v is at most the largest singular value: W / sigma's is >= 1
    assert np.linalg.svd(npy(ours.weight), compute_uv=False)[0] >= 1 - 1e-12


def test_spectral_norm_1d_and_dim(rng):
    torch = pytest.importorskip("torch")
    ours = PZ.spectral_norm(nn.Linear(4, 3, dtype=F64), "bias")
    theirs = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(4, 3).double(), "bias")
    load_from_torch(ours, theirs)
    close(npy(ours.bias), theirs.bias.detach().numpy())
    assert list(ours.state_dict()) == ["weight", "parametrizations.bias.original"]
    ours, theirs, shape = twins("conv2d", torch, lambda m: PZ.spectral_norm(m, dim=2),
                                lambda m: torch.nn.utils.parametrizations.spectral_norm(m, dim=2))
    assert ours.parametrizations.weight[0]._u.shape == (3,)
    forward_backward(ours, theirs, rng.normal(size=shape), np.ones((2, 4, 4, 4)), torch)


def test_spectral_norm_seeded_init_and_removal(rng):
    cr.random.manual_seed(3)
    a = PZ.spectral_norm(nn.Linear(5, 4, dtype=F64, generator=np.random.default_rng(1)))
    cr.random.manual_seed(3)
    b = PZ.spectral_norm(nn.Linear(5, 4, dtype=F64, generator=np.random.default_rng(1)))
    close(npy(a.parametrizations.weight[0]._u), npy(b.parametrizations.weight[0]._u), rtol=0, atol=0)
    a.eval()
    w = npy(a.weight).copy()
    P.remove_parametrizations(a, "weight")
    close(npy(a.weight), w)
    P.remove_parametrizations(b, "weight", leave_parametrized=False)
    assert list(b.state_dict()) == ["bias", "weight"] and type(b) is nn.Linear


# ----- the older hook-based forms -----
def test_legacy_weight_norm_matches_torch(rng):
    torch = pytest.importorskip("torch")
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        ours = nn.utils.weight_norm(nn.Conv2d(3, 4, 3, dtype=F64), dim=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.utils.weight_norm(torch.nn.Conv2d(3, 4, 3).double(), dim=1)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight_g", "weight_v"]
    load_from_torch(ours, theirs)
    forward_backward(ours, theirs, rng.normal(size=(2, 3, 5, 5)), np.ones((2, 4, 3, 3)), torch)
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    close(npy(ours.weight), theirs.weight.detach().numpy())
    assert not ours._forward_pre_hooks
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(ours)


@pytest.mark.parametrize("kind", ["linear", "convT2d"])
def test_legacy_spectral_norm_training_steps_match_torch(rng, kind):
    torch = pytest.importorskip("torch")
    ours, theirs, shape = twins(kind, torch, lambda m: nn.utils.spectral_norm(m, n_power_iterations=2),
                                lambda m: torch.nn.utils.spectral_norm(m, n_power_iterations=2))
    assert list(ours.state_dict())[-3:] == ["weight_orig", "weight_u", "weight_v"]
    out_shape = tuple(theirs.eval()(torch.tensor(rng.normal(size=shape))).shape)
    theirs.train()
    for _ in range(3):
        forward_backward(ours, theirs, rng.normal(size=shape), rng.normal(size=out_shape), torch)
        sgd_step(ours)
        sgd_step_torch(theirs, torch)
        for k, v in theirs.state_dict().items():
            close(npy(ours.state_dict()[k]), v.numpy())
    ours.eval()
    theirs.eval()
    forward_backward(ours, theirs, rng.normal(size=shape), rng.normal(size=out_shape), torch)
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    close(npy(ours.weight), theirs.weight.detach().numpy())


def test_legacy_errors():
    lin = nn.utils.spectral_norm(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="two spectral_norm hooks"):
        nn.utils.spectral_norm(lin)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="no parameter named 'w'"):
        nn.utils.spectral_norm(nn.Linear(2, 2), name="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wn = nn.utils.weight_norm(nn.Linear(2, 2))
        with pytest.raises(RuntimeError, match="two weight_norm hooks"):
            nn.utils.weight_norm(wn)
        with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
            nn.utils.weight_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
        nn.utils.remove_spectral_norm(nn.Linear(2, 2))


# ----- parametrize: the general machinery -----
class Symmetric(nn.Module):
    def forward(self, x):
        return cr.triu(x) + cr.triu(x, 1).T

    def right_inverse(self, a):
        return cr.triu(a)


class Scale(nn.Module):
    def forward(self, x):
        return 2 * x

    def right_inverse(self, a):
        return a / 2


def test_register_chain_assign_and_cache(rng):
    torch = pytest.importorskip("torch")

    class SymT(torch.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).T

        def right_inverse(self, a):
            return a.triu()

    class ScaleT(torch.nn.Module):
        def forward(self, x):
            return 2 * x

        def right_inverse(self, a):
            return a / 2
    ours, theirs = nn.Linear(3, 3, dtype=F64), torch.nn.Linear(3, 3).double()
    P.register_parametrization(ours, "weight", Symmetric())
    P.register_parametrization(ours, "weight", Scale())
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", SymT())
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", ScaleT())
    load_from_torch(ours, theirs)
    assert len(ours.parametrizations.weight) == 2
    forward_backward(ours, theirs, rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), torch)
    a = rng.normal(size=(3, 3))
    a = a + a.T
    original = ours.parametrizations.weight.original
    ours.weight = cr.tensor(a)                         # through right_inverse, in place
    theirs.weight = torch.tensor(a)
    assert ours.parametrizations.weight.original is original
    close(npy(ours.weight), a)
    close(npy(original), theirs.parametrizations.weight.original.detach().numpy())
    with P.cached():
        w1 = ours.weight
        assert ours.weight is w1
    assert ours.weight is not w1
    with pytest.raises(KeyError, match="'weight' is parametrized"):
        ours.weight = nn.Parameter(a)


def test_buffer_unsafe_and_multi_original():
    class Twice(nn.Module):
        def forward(self, x):
            return cr.concatenate([x, x])

    m = nn.Module()
    m.register_buffer("b", cr.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="may not change the dtype or the shape"):
        P.register_parametrization(m, "b", Twice())
    P.register_parametrization(m, "b", Twice(), unsafe=True)
    assert m.b.shape == (4,) and list(m.state_dict()) == ["parametrizations.b.original"]
    assert not m.parametrizations.b.original.requires_grad
    P.remove_parametrizations(m, "b")
    assert list(m._buffers) == ["b"] and m.b.shape == (4,)
    lin = PZ.weight_norm(nn.Linear(3, 2))
    with pytest.raises(ValueError, match="sequence of tensors"):
        P.remove_parametrizations(lin, "weight", leave_parametrized=False)


def test_is_parametrized_type_before_copy_and_pickle():
    lin = PZ.weight_norm(nn.Linear(3, 2))
    assert P.is_parametrized(lin) and P.is_parametrized(lin, "weight") and not P.is_parametrized(lin, "bias")
    assert not P.is_parametrized(nn.Linear(2, 2))
    assert P.type_before_parametrizations(lin) is nn.Linear and isinstance(lin, nn.Linear)
    twin = copy.deepcopy(lin)
    close(npy(twin.weight), npy(lin.weight))
    twin.parametrizations.weight.original0.data[...] = 0
    assert float(np.abs(npy(lin.weight)).sum()) > 0
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(lin)
    other = nn.Linear(3, 2)
    P.transfer_parametrizations_and_params(lin, other)
    assert other.parametrizations.weight.original1 is lin.parametrizations.weight.original1


def test_parametrize_errors():
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        P.register_parametrization(nn.Linear(2, 2), "w", Scale())
    with pytest.raises(TypeError, match="must be a cr.nn.Module"):
        P.register_parametrization(nn.Linear(2, 2), "weight", lambda x: x)
    with pytest.raises(ValueError, match="does not have a parametrization on 'bias'"):
        P.remove_parametrizations(PZ.weight_norm(nn.Linear(2, 2)), "bias")
    with pytest.raises(ValueError, match="no parameter or buffer with name 'w'"):
        PZ.spectral_norm(nn.Linear(2, 2), "w")
    with pytest.raises(IndexError, match="dimension out of range"):
        PZ.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        PZ.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match="dimension out of range"):
        PZ.weight_norm(nn.Linear(2, 2), dim=5)
    m = P.register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = cr.ones((2, 2))


# ----- orthogonal -----
ORTHO_CASES = [((4, 4), None, True), ((4, 4), "cayley", True), ((3, 5), None, True), ((5, 3), None, True),
               ((4, 4), "householder", True), ((5, 3), "matrix_exp", True), ((3, 5), "cayley", True),
               ((5, 3), "householder", False), ((3, 5), "householder", False), ((4, 4), "householder", False)]


@pytest.mark.parametrize("shape,orthogonal_map,trivial", ORTHO_CASES)
def test_orthogonal_matches_torch(rng, shape, orthogonal_map, trivial):
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Linear(shape[1], shape[0]).double()
    ours = nn.Linear(shape[1], shape[0], dtype=F64)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orthogonal_map, use_trivialization=trivial)
    PZ.orthogonal(ours, orthogonal_map=orthogonal_map, use_trivialization=trivial)
    if shape[0] == shape[1] or not trivial:      # no random completion: registration itself agrees
        for k, v in theirs.state_dict().items():
            close(npy(ours.state_dict()[k]), v.numpy())
    load_from_torch(ours, theirs)
    for _ in range(3):
        forward_backward(ours, theirs, rng.normal(size=(2, shape[1])), rng.normal(size=(2, shape[0])), torch)
        sgd_step(ours)
        sgd_step_torch(theirs, torch)
    w = npy(ours.weight)
    small = w @ w.T if shape[0] <= shape[1] else w.T @ w
    close(small, np.eye(min(shape)), atol=1e-12)
    close(w, theirs.weight.detach().numpy())


def test_orthogonal_batch_assign_and_errors(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Module(), torch.nn.Module()
    a = rng.normal(size=(2, 4, 3))
    ours.register_buffer("q", cr.tensor(a))
    theirs.register_buffer("q", torch.tensor(a))
    PZ.orthogonal(ours, "q")
    torch.nn.utils.parametrizations.orthogonal(theirs, "q")
    load_from_torch(ours, theirs)
    close(npy(ours.q), theirs.q.numpy())
    q = np.linalg.qr(rng.normal(size=(2, 4, 3)))[0]
    ours.q = cr.tensor(q)                                   # right_inverse: a new base
    close(npy(ours.q), q)
    with pytest.raises(ValueError, match=r"of shape \(2, 4, 3\), got a tensor of shape \(4, 3\)"):
        ours.q = cr.tensor(q[0])
    with pytest.raises(ValueError, match="expected a matrix or batch of matrices"):
        PZ.orthogonal(nn.Linear(2, 2), "bias")
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        PZ.orthogonal(nn.Linear(2, 2), orthogonal_map="qr")
    m = PZ.orthogonal(nn.Linear(3, 3, dtype=F64), use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = cr.tensor(np.eye(3))


def test_attribute_error_inside_a_parametrization_is_not_swallowed():
    class Broken(nn.Module):
        def forward(self, x):
            return x.no_such_method()

    m = P.register_parametrization(nn.Linear(2, 2), "weight", Broken(), unsafe=True)
    with pytest.raises(RuntimeError, match="ParametrizedLinear.weight: the parametrization raised AttributeError"):
        _ = m.weight
