"""Activations (modules and functions), one_hot, normalize, cosine_similarity and pairwise_distance:
checked against torch in float64 (values, input and parameter gradients, the derivative at each kink),
gradchecked in both modes and to second order, with PyTorch's signatures and errors that name the fix."""
import contextlib
import inspect

import numpy as np
import pytest

import chainrule as cr
from chainrule.nn import activation as nn_act
from chainrule.nn.functional import activation as A

SHAPES = [(1, 5), (3, 7), (2, 3, 5), (4,)]

# (our function, torch's name, kwargs, kink points where the derivative has a convention)
FUNCTIONS = [
    (A.leaky_relu, "leaky_relu", {}, [0.0]),
    (A.leaky_relu, "leaky_relu", {"negative_slope": 0.2}, [0.0]),
    (A.elu, "elu", {}, [0.0]),
    (A.elu, "elu", {"alpha": 1.7}, [0.0]),
    (A.selu, "selu", {}, [0.0]),
    (A.silu, "silu", {}, [0.0]),
    (A.mish, "mish", {}, [0.0]),
    (A.softplus, "softplus", {}, [20.0]),
    (A.softplus, "softplus", {"beta": 2.0, "threshold": 3.0}, [1.5]),
    (A.softsign, "softsign", {}, [0.0]),
    (A.hardtanh, "hardtanh", {}, [-1.0, 1.0]),
    (A.hardtanh, "hardtanh", {"min_val": -0.5, "max_val": 2.0}, [-0.5, 2.0]),
    (A.hardswish, "hardswish", {}, [-3.0, 3.0]),
    (A.relu6, "relu6", {}, [0.0, 6.0]),
]

MODULES = [
    (nn_act.LeakyReLU, {}), (nn_act.LeakyReLU, {"negative_slope": 0.3}), (nn_act.ELU, {"alpha": 0.5}),
    (nn_act.SELU, {}), (nn_act.SiLU, {}), (nn_act.Mish, {}), (nn_act.Softplus, {"beta": 0.5, "threshold": 5.0}),
    (nn_act.Softsign, {}), (nn_act.Hardtanh, {"min_val": -2.0, "max_val": 0.5}), (nn_act.ReLU6, {}),
    (nn_act.Hardswish, {}), (nn_act.Softmax, {"dim": -1}), (nn_act.Softmax, {}), (nn_act.LogSoftmax, {"dim": 0}),
    (nn_act.LogSoftmax, {}), (nn_act.GLU, {}), (nn_act.GLU, {"dim": 0}),
]


def _pair(torch, arr):
    return cr.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)


def _compare(ours_fn, theirs_fn, arrays, torch, seed=3):
    """Value and every input's gradient under a random cotangent, float64, rtol 1e-10."""
    pairs = [_pair(torch, a) for a in arrays]
    ours = ours_fn(*[c for c, _ in pairs])
    theirs = theirs_fn(*[t for _, t in pairs])
    assert ours.shape == tuple(theirs.shape) and ours.dtype == np.float64
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-10, atol=1e-13)
    g = np.random.default_rng(seed).standard_normal(ours.shape)
    ours.backward(cr.tensor(g))
    theirs.backward(torch.tensor(g))
    for c, t in pairs:
        np.testing.assert_allclose(c.grad.data, t.grad.numpy(), rtol=1e-10, atol=1e-13)


def _input(shape, kinks=(), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 3.0
    flat = x.reshape(-1)
    for i, k in enumerate(kinks):                      # the kinks themselves, exactly
        flat[i % flat.size] = k
    return x


# ----- functions against torch -----
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn,name,kwargs,kinks", FUNCTIONS, ids=lambda v: v if isinstance(v, str) else None)
def test_function_matches_torch_including_kinks(fn, name, kwargs, kinks, shape):
    torch = pytest.importorskip("torch")
    x = _input(shape, kinks)
    _compare(lambda c: fn(c, **kwargs), lambda t: getattr(torch.nn.functional, name)(t, **kwargs), [x], torch)


@pytest.mark.parametrize("fn,name,kwargs,kinks", FUNCTIONS, ids=lambda v: v if isinstance(v, str) else None)
def test_derivative_at_each_kink_is_torchs(fn, name, kwargs, kinks):
    torch = pytest.importorskip("torch")
    x = np.array(kinks, dtype=np.float64)
    cx, tx = _pair(torch, x)
    fn(cx, **kwargs).sum().backward()
    getattr(torch.nn.functional, name)(tx, **kwargs).sum().backward()
    np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=1e-14, atol=0)


def test_named_kink_conventions():
    x = cr.tensor([0.0], dtype=cr.float64, requires_grad=True)
    A.leaky_relu(x, 0.1).sum().backward()
    assert x.grad.item() == 0.1                                  # leaky_relu'(0) = negative_slope
    b = cr.tensor([-1.0, 1.0], dtype=cr.float64, requires_grad=True)
    A.hardtanh(b).sum().backward()
    np.testing.assert_array_equal(b.grad.data, [0.0, 0.0])      # hardtanh' = 0 at the bounds
    h = cr.tensor([-3.0, 3.0], dtype=cr.float64, requires_grad=True)
    A.hardswish(h).sum().backward()
    np.testing.assert_array_equal(h.grad.data, [0.0, 1.0])


def test_no_nan_gradient_from_the_unused_branch():
    x = cr.tensor([800.0, -800.0, 0.0], dtype=cr.float64, requires_grad=True)
    (A.elu(x) + A.selu(x) + A.softplus(x) + A.mish(x) + A.silu(x)).sum().backward()
    assert np.isfinite(x.grad.data).all()
    np.testing.assert_allclose(A.softplus(x).data, [800.0, 0.0, np.log(2.0)])


@pytest.mark.parametrize("shape,n", [((3, 4, 5), 4), ((1, 2), 2), ((5,), 1), ((2, 3), 1), ((2, 1, 3, 2), 1)],
                         ids=str)
def test_prelu_matches_torch_input_and_weight_gradients(shape, n):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = _input(shape, [0.0])
    w = rng.uniform(-0.5, 0.5, n)
    _compare(A.prelu, torch.nn.functional.prelu, [x, w], torch)


@pytest.mark.parametrize("shape,dim", [((3, 4), -1), ((1, 6), 1), ((4, 3), 0), ((2, 5, 4), 2), ((6,), 0)], ids=str)
def test_glu_matches_torch(shape, dim):
    torch = pytest.importorskip("torch")
    _compare(lambda c: A.glu(c, dim), lambda t: torch.nn.functional.glu(t, dim), [_input(shape)], torch)


# ----- modules against torch -----
@pytest.mark.parametrize("shape", [(1, 4), (3, 6), (2, 4, 6), (2, 2, 3, 4)], ids=str)
@pytest.mark.parametrize("cls,kwargs", MODULES, ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_module_matches_torch_in_train_and_eval(cls, kwargs, shape):
    torch = pytest.importorskip("torch")
    ours, theirs = cls(**kwargs), getattr(torch.nn, cls.__name__)(**kwargs)
    if cls is nn_act.GLU and shape[kwargs.get("dim", -1)] % 2:          # GLU halves an even axis
        shape = tuple(2 * n if i == kwargs.get("dim", -1) % len(shape) else n for i, n in enumerate(shape))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    x = _input(shape, [0.0])
    for mode in (True, False):
        ours.train(mode)
        theirs.train(mode)
        with pytest.warns(UserWarning) if cls in (nn_act.Softmax, nn_act.LogSoftmax) and "dim" not in kwargs \
                else contextlib.nullcontext():
            _compare(ours, theirs, [x], torch)


@pytest.mark.parametrize("num_parameters,shape", [(1, (1, 3)), (1, (4, 2, 5)), (3, (2, 3)), (3, (1, 3, 4, 2)),
                                                  (5, (3, 5, 7))], ids=str)
def test_prelu_module_state_dict_and_training_against_torch(num_parameters, shape):
    torch = pytest.importorskip("torch")
    ours = nn_act.PReLU(num_parameters, init=0.1, dtype=cr.float64)
    theirs = torch.nn.PReLU(num_parameters, init=0.1, dtype=torch.float64)
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd) == ["weight"]
    assert ours.weight.shape == tuple(sd["weight"].shape)
    np.testing.assert_array_equal(ours.weight.data, sd["weight"].numpy())       # same initialisation
    theirs.weight.data.uniform_(-1, 1, generator=torch.Generator().manual_seed(0))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(5)
    for step in range(3):                             # a few SGD steps: parameters stay equal
        x = _input(shape, [0.0], seed=step)
        cx, tx = _pair(torch, x)
        g = rng.standard_normal(shape)
        yo, yt = ours(cx), theirs(tx)
        np.testing.assert_allclose(yo.data, yt.detach().numpy(), rtol=1e-10)
        yo.backward(cr.tensor(g))
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(ours.weight.grad.data, theirs.weight.grad.numpy(), rtol=1e-10)
        ours.weight.data[...] -= 0.1 * ours.weight.grad.data
        with torch.no_grad():
            theirs.weight -= 0.1 * theirs.weight.grad
        ours.weight.grad, theirs.weight.grad = None, None
        np.testing.assert_allclose(ours.weight.data, theirs.weight.detach().numpy(), rtol=1e-12)


def test_prelu_default_dtype_and_init():
    m = nn_act.PReLU()
    assert m.weight.dtype == cr.get_default_dtype() and m.weight.tolist() == [0.25]
    assert repr(m) == "PReLU(num_parameters=1)"


# ----- signatures: PyTorch's argument names and defaults -----
_SKIP = {"device", "dtype", "out", "_stacklevel", "min_value", "max_value"}   # the last two: deprecated in torch


def _check_signature(ours, theirs):
    ours_p = inspect.signature(ours).parameters
    for name, p in inspect.signature(theirs).parameters.items():
        if name in _SKIP or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        assert name in ours_p, f"{ours.__name__} lacks torch's argument {name!r}"
        assert ours_p[name].default == p.default, (ours.__name__, name, ours_p[name].default, p.default)


@pytest.mark.parametrize("name", nn_act.__all__)
def test_module_signature_is_torchs(name):
    torch = pytest.importorskip("torch")
    _check_signature(getattr(nn_act, name), getattr(torch.nn, name))


# torch's builtins carry no signature: their documented ones
_DOCUMENTED = {"cosine_similarity": {"dim": 1, "eps": 1e-8}, "gelu": {"approximate": "none"},
               "one_hot": {"num_classes": -1},
               "pairwise_distance": {"p": 2.0, "eps": 1e-6, "keepdim": False}, "prelu": {},
               "softplus": {"beta": 1.0, "threshold": 20.0}}


@pytest.mark.parametrize("name", A.__all__)
def test_function_signature_is_torchs(name):
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.nn.functional, name)
    try:
        inspect.signature(theirs)
    except ValueError:
        ours_p = inspect.signature(getattr(A, name)).parameters
        for arg, default in _DOCUMENTED[name].items():
            assert ours_p[arg].default == default, (name, arg)
        return
    _check_signature(getattr(A, name), theirs)


# ----- gradcheck: both modes, second order -----
@pytest.mark.parametrize("fn", [lambda x: A.leaky_relu(x, 0.2), A.elu, A.selu, A.silu, A.mish,
                                lambda x: A.softplus(x, 2.0, 1.0), A.softsign, lambda x: A.hardtanh(x, -0.7, 0.4),
                                A.hardswish, A.relu6, lambda x: A.glu(x, 1), lambda x: A.normalize(x, 3.0, 1),
                                lambda x: A.normalize(x)],
                         ids=["leaky_relu", "elu", "selu", "silu", "mish", "softplus", "softsign", "hardtanh",
                              "hardswish", "relu6", "glu", "normalize_p3", "normalize"])
def test_gradcheck_both_modes_and_second_order(rng, fn):
    x = cr.tensor(rng.normal(size=(3, 4)) * 2.0, dtype=cr.float64, requires_grad=True)
    assert cr.gradcheck(fn, (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, (x,))


def test_prelu_and_distances_second_order(rng):
    x = cr.tensor(rng.normal(size=(2, 3, 2)), dtype=cr.float64, requires_grad=True)
    w = cr.tensor([0.1, -0.2, 0.3], dtype=cr.float64, requires_grad=True)
    y = cr.tensor(rng.normal(size=(2, 3, 2)), dtype=cr.float64, requires_grad=True)
    assert cr.gradcheck(A.prelu, (x, w), modes=("rev", "fwd"))
    assert cr.gradgradcheck(A.prelu, (x, w))
    assert cr.gradgradcheck(A.cosine_similarity, (x, y))
    assert cr.gradgradcheck(lambda a, b: A.pairwise_distance(a, b, 3.0), (x, y))
    assert cr.gradgradcheck(nn_act.LogSoftmax(1), (x,))


def test_modules_under_vmap_match_a_loop(rng):
    x = cr.tensor(rng.normal(size=(4, 3, 6)), dtype=cr.float64)
    for m in (nn_act.LeakyReLU(0.1), nn_act.Hardtanh(), nn_act.Hardswish(), nn_act.ELU(), nn_act.GLU()):
        batched = cr.vmap(m)(x)
        np.testing.assert_allclose(batched.data, np.stack([m(x[i]).data for i in range(4)]), rtol=1e-12)


def test_dtype_is_kept():
    x = cr.tensor([-4.0, -1.0, 0.5, 4.0], dtype=cr.float32)
    for fn in (A.leaky_relu, A.elu, A.selu, A.silu, A.mish, A.softplus, A.softsign, A.hardtanh, A.hardswish,
               A.relu6):
        assert fn(x).dtype == np.float32, fn.__name__
    assert A.normalize(cr.ones((2, 3), dtype=cr.float32)).dtype == np.float32


# ----- one_hot, normalize, cosine_similarity, pairwise_distance -----
@pytest.mark.parametrize("values,num_classes", [([0, 2, 1], -1), ([[1], [3]], 5), ([4], -1), (3, 4)], ids=str)
def test_one_hot_matches_torch(values, num_classes):
    torch = pytest.importorskip("torch")
    ours = A.one_hot(cr.tensor(np.array(values, dtype=np.int64)), num_classes)
    theirs = torch.nn.functional.one_hot(torch.tensor(values), num_classes)
    assert ours.dtype == np.int64 and not ours.requires_grad
    np.testing.assert_array_equal(ours.data, theirs.numpy())


def test_one_hot_errors():
    with pytest.raises(cr.DTypeError, match="integer class indices"):
        A.one_hot(cr.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"lie in \[0, 2\)"):
        A.one_hot(cr.tensor([0, 2]), 2)
    with pytest.raises(ValueError, match=r"lie in \[0, 3\)"):
        A.one_hot(cr.tensor([-1, 2]))
    with pytest.raises(ValueError, match="empty tensor; pass num_classes"):
        A.one_hot(cr.tensor(np.zeros(0, dtype=np.int64)))
    assert A.one_hot(cr.tensor(np.zeros(0, dtype=np.int64)), 3).shape == (0, 3)


@pytest.mark.parametrize("shape,p,dim", [((3, 4), 2.0, 1), ((1, 5), 1.0, 1), ((2, 3, 4), 3.0, -1), ((5,), 2.0, 0),
                                         ((3, 4), float("inf"), 0), ((2, 3, 2), 0.5, 2)], ids=str)
def test_normalize_matches_torch(shape, p, dim):
    torch = pytest.importorskip("torch")
    _compare(lambda c: A.normalize(c, p, dim), lambda t: torch.nn.functional.normalize(t, p, dim),
             [_input(shape)], torch)


def test_normalize_and_cosine_of_a_zero_vector_match_torch():
    torch = pytest.importorskip("torch")
    z = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]])
    _compare(lambda c: A.normalize(c), lambda t: torch.nn.functional.normalize(t), [z], torch)
    _compare(A.cosine_similarity, torch.nn.functional.cosine_similarity, [z, np.ones((2, 3))], torch)


@pytest.mark.parametrize("s1,s2,dim", [((3, 4), (3, 4), 1), ((1, 5), (1, 5), 1), ((2, 3, 4), (3, 4), -1),
                                       ((4, 1), (4, 3), 0), ((5,), (5,), 0)], ids=str)
def test_cosine_similarity_matches_torch(s1, s2, dim):
    torch = pytest.importorskip("torch")
    _compare(lambda a, b: A.cosine_similarity(a, b, dim), lambda a, b: torch.nn.functional.cosine_similarity(a, b, dim),
             [_input(s1, seed=1), _input(s2, seed=2)], torch)


@pytest.mark.parametrize("s1,s2,p,keepdim", [((3, 4), (3, 4), 2.0, False), ((1, 5), (1, 5), 1.0, True),
                                             ((4, 3), (1, 3), 3.0, False), ((5,), (5,), 2.0, False)], ids=str)
def test_pairwise_distance_matches_torch(s1, s2, p, keepdim):
    torch = pytest.importorskip("torch")
    _compare(lambda a, b: A.pairwise_distance(a, b, p, keepdim=keepdim),
             lambda a, b: torch.nn.functional.pairwise_distance(a, b, p, keepdim=keepdim),
             [_input(s1, seed=1), _input(s2, seed=2)], torch)


# ----- errors name the layer, the shapes and the fix -----
def test_errors_name_the_layer_shapes_and_fix():
    with pytest.raises(cr.ShapeError, match=r"glu: halving dim=-1 needs an even size, got shape \(2, 3\)"):
        A.glu(cr.ones((2, 3)))
    with pytest.raises(cr.ShapeError, match=r"PReLU: num_parameters=3 .* got shape \(2, 4\); build PReLU\(4\)"):
        nn_act.PReLU(3)(cr.ones((2, 4)))
    with pytest.raises(cr.ShapeError, match=r"prelu: weight has 3 entries"):
        A.prelu(cr.ones((2, 4)), cr.ones(3))
    with pytest.raises(ValueError, match="Hardtanh: min_val=1 is above max_val=0"):
        nn_act.Hardtanh(1, 0)
    with pytest.raises(cr.ShapeError, match=r"normalize: dim=1 is out of range .* \(3,\).*dim=0"):
        A.normalize(cr.ones(3))
    with pytest.raises(cr.ShapeError, match=r"cosine_similarity: x1 of shape \(2, 3\) and x2 of shape \(2, 4\)"):
        A.cosine_similarity(cr.ones((2, 3)), cr.ones((2, 4)))
    with pytest.raises(cr.ShapeError, match=r"Softmax: dim=2 is out of range for input of shape \(2, 3\)"):
        nn_act.Softmax(dim=2)(cr.ones((2, 3)))
    with pytest.raises(ValueError, match="PReLU: num_parameters must be at least 1"):
        nn_act.PReLU(0)


def test_reprs():
    assert repr(nn_act.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn_act.Softmax(dim=1)) == "Softmax(dim=1)"
    assert repr(nn_act.Hardtanh()) == "Hardtanh(min_val=-1.0, max_val=1.0)"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_both_forms_match_torch_to_second_order(approximate):
    torch = pytest.importorskip("torch")
    x = np.linspace(-4.0, 4.0, 17)
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.nn.functional.gelu(xt, approximate=approximate).sum(), xt, create_graph=True)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    m = cr.nn.GELU(approximate)
    assert repr(m) == repr(torch.nn.GELU(approximate))
    xc = cr.tensor(x, requires_grad=True)
    np.testing.assert_allclose(m(xc).detach().numpy(),
                               torch.nn.functional.gelu(xt, approximate=approximate).detach().numpy(), rtol=1e-13,
                               atol=1e-15)
    g = cr.grad(lambda v: m(v).sum())
    np.testing.assert_allclose(np.asarray(g(x)), gt.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(cr.grad(lambda v: g(v).sum())(x)), ggt.numpy(), rtol=1e-10, atol=1e-13)


def test_gelu_refuses_an_unknown_approximation():
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        cr.nn.GELU("erf")
    with pytest.raises(ValueError, match="gelu: approximate"):
        cr.nn.functional.gelu(cr.tensor([1.0]), approximate="fast")
