"""``cr.func``: ``functional_call`` (torch.func's semantics: the module is unchanged afterwards,
buffers, tuples of dicts, strict, tied weights), per-example gradients of a ``cr.nn`` MLP through
``vmap(grad)`` against a loop, and ``per_example_grad_norms`` against the vmap norms."""
import numpy as np
import pytest

import chainrule as cr

F = cr.nn.functional


def _mlp(sizes=(784, 512, 512, 10), seed=0, dtype=cr.float64):
    rng = np.random.default_rng(seed)
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [cr.nn.Linear(n_in, n_out, dtype=dtype, generator=rng), cr.nn.ReLU()]
    return cr.nn.Sequential(*layers[:-1])


def _snapshot(model):
    return [(name, p, p.data.copy()) for name, p in model.named_parameters()] + \
           [(name, b, b.data.copy()) for name, b in model.named_buffers()]


def _assert_unchanged(model, snap):
    now = dict(list(model.named_parameters()) + list(model.named_buffers()))
    assert list(now) == [name for name, _, _ in snap]
    for name, obj, value in snap:
        assert now[name] is obj, name
        np.testing.assert_array_equal(obj.data, value)


class Scaled(cr.nn.Module):
    """A Linear layer and a buffer that scales its output."""

    def __init__(self):
        super().__init__()
        self.lin = cr.nn.Linear(3, 2, dtype=cr.float64, generator=np.random.default_rng(1))
        self.register_buffer("scale", cr.tensor([2.0, 3.0]))

    def forward(self, x, shift=0.0):
        return self.lin(x) * self.scale + shift


# ----- functional_call -----
def test_functional_call_uses_the_given_tensors_and_leaves_the_module_unchanged():
    model = Scaled()
    snap = _snapshot(model)
    x = cr.tensor(np.random.default_rng(2).standard_normal((4, 3)))
    w, b = cr.tensor(np.ones((2, 3))), cr.tensor([0.5, -0.5])
    out = cr.func.functional_call(model, {"lin.weight": w, "lin.bias": b}, (x,))
    np.testing.assert_allclose(out.data, (x.data @ w.data.T + b.data) * [2.0, 3.0])
    _assert_unchanged(model, snap)
    # args as a single value, kwargs, and the buffer replaced as well
    out = cr.func.functional_call(model, {"scale": cr.tensor([1.0, 1.0])}, x, {"shift": 10.0})
    np.testing.assert_allclose(out.data, x.data @ model.lin.weight.data.T + model.lin.bias.data + 10.0)
    _assert_unchanged(model, snap)


def test_functional_call_restores_the_module_when_forward_raises():
    model = Scaled()
    snap = _snapshot(model)
    with pytest.raises(cr.ShapeError):
        cr.func.functional_call(model, {"lin.weight": cr.tensor(np.ones((2, 3)))}, (cr.ones((4, 5)),))
    _assert_unchanged(model, snap)


def test_functional_call_takes_a_tuple_of_dicts_and_refuses_repeated_names():
    model = Scaled()
    params = {k: v.detach() * 0 for k, v in model.named_parameters()}
    buffers = {"scale": cr.tensor([1.0, 1.0])}
    out = cr.func.functional_call(model, (params, buffers), (cr.ones((1, 3)),))
    np.testing.assert_array_equal(out.data, np.zeros((1, 2)))
    with pytest.raises(ValueError, match="more than one"):
        cr.func.functional_call(model, (params, {"lin.bias": cr.zeros(2)}), (cr.ones((1, 3)),))
    with pytest.raises(TypeError, match="dict"):
        cr.func.functional_call(model, [("lin.bias", cr.zeros(2))], (cr.ones((1, 3)),))


def test_functional_call_strict():
    model = Scaled()
    full = {**{k: v.detach() for k, v in model.named_parameters()}, "scale": cr.tensor([1.0, 1.0])}
    cr.func.functional_call(model, full, (cr.ones((1, 3)),), strict=True)
    with pytest.raises(KeyError, match=r"missing keys \['scale'\]"):
        cr.func.functional_call(model, {k: v for k, v in full.items() if k != "scale"}, (cr.ones((1, 3)),),
                                strict=True)
    with pytest.raises(KeyError, match=r"unexpected keys \['extra'\]"):
        cr.func.functional_call(model, {**full, "extra": cr.ones(1)}, (cr.ones((1, 3)),), strict=True)


def test_functional_call_unknown_names():
    model = Scaled()
    # strict=False: a name the module lacks is a plain attribute for the call, and gone afterwards
    cr.func.functional_call(model, {"extra": cr.ones(1)}, (cr.ones((1, 3)),))
    assert "extra" not in model.__dict__
    with pytest.raises(KeyError, match="submodule 'nope'"):
        cr.func.functional_call(model, {"nope.weight": cr.ones(1)}, (cr.ones((1, 3)),))
    with pytest.raises(TypeError, match="cr.nn.Module"):
        cr.func.functional_call(lambda x: x, {}, (cr.ones(1),))


class Tied(cr.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = cr.nn.Linear(2, 2, bias=False, dtype=cr.float64)
        self.b = cr.nn.Linear(2, 2, bias=False, dtype=cr.float64)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


def test_functional_call_tied_weights():
    model = Tied()
    snap = _snapshot(model)
    x, w = cr.tensor([[1.0, 2.0]]), cr.tensor([[1.0, 1.0], [0.0, 1.0]])
    out = cr.func.functional_call(model, {"a.weight": w}, (x,))          # both uses take w
    np.testing.assert_allclose(out.data, x.data @ w.data.T @ w.data.T)
    out = cr.func.functional_call(model, {"a.weight": w}, (x,), tie_weights=False)   # only a's
    np.testing.assert_allclose(out.data, x.data @ w.data.T @ model.a.weight.data.T)
    cr.func.functional_call(model, {"a.weight": w, "b.weight": w}, (x,))
    with pytest.raises(ValueError, match="tied"):
        cr.func.functional_call(model, {"a.weight": w, "b.weight": w * 2}, (x,))
    _assert_unchanged(model, snap)


class Counter(cr.nn.Module):
    """A forward that re-assigns its buffer (as a running statistic does)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", cr.tensor(0.0))

    def forward(self, x):
        self.count = self.count + 1
        return x * self.count


def test_functional_call_hands_a_reassigned_buffer_back():
    model = Counter()
    state = {"count": cr.tensor(5.0)}
    out = cr.func.functional_call(model, state, (cr.tensor(1.0),))
    assert float(out) == 6.0 and float(state["count"]) == 6.0 and float(model.count) == 0.0


def test_grad_through_functional_call_equals_backward():
    model = _mlp((5, 4, 3))
    x, y = cr.tensor(np.random.default_rng(3).standard_normal((6, 5))), cr.tensor([0, 1, 2, 0, 1, 2])
    params = {k: v.detach() for k, v in model.named_parameters()}
    g = cr.grad(lambda p: F.cross_entropy(cr.func.functional_call(model, p, (x,)), y))(params)
    F.cross_entropy(model(x), y).backward()
    for k, p in model.named_parameters():
        np.testing.assert_allclose(g[k].data, p.grad.data, rtol=1e-12, atol=1e-14)


def test_functional_call_under_vmap_with_batched_parameters():
    model = _mlp((3, 4, 2))
    rng = np.random.default_rng(7)
    ensemble = {k: cr.tensor(rng.standard_normal((5,) + v.shape)) for k, v in model.named_parameters()}
    x = cr.tensor(rng.standard_normal((6, 3)))
    out = cr.vmap(lambda p, x: cr.func.functional_call(model, p, (x,)), in_axes=(0, None))(ensemble, x)
    for i in range(5):
        one = cr.func.functional_call(model, {k: v[i] for k, v in ensemble.items()}, (x,))
        np.testing.assert_allclose(out.data[i], one.data, rtol=1e-12)


def test_namespace():
    for name in ("vmap", "grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian"):
        assert getattr(cr.func, name) is getattr(cr, name)


# ----- per-example gradients -----
@pytest.fixture(scope="module")
def mlp_case():
    model = _mlp()
    rng = np.random.default_rng(4)
    x, y = cr.tensor(rng.standard_normal((6, 784))), cr.tensor(rng.integers(0, 10, 6))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(params, x, y):
        return F.cross_entropy(cr.func.functional_call(model, params, (x[None],)), y[None])
    grads = cr.vmap(cr.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    return model, params, x, y, loss, grads


def test_per_example_gradients_of_an_mlp_match_a_loop(mlp_case):
    model, params, x, y, loss, grads = mlp_case
    assert {k: v.shape for k, v in grads.items()} == {k: (6,) + p.shape for k, p in params.items()}
    one = cr.grad(loss)
    for i in range(len(x)):
        gi = one(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(grads[k].data[i], gi[k].data, rtol=1e-10, atol=1e-12)


def _norms(grads, n):
    return np.sqrt(sum((np.asarray(g.data).reshape(n, -1) ** 2).sum(1) for g in grads.values()))


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_per_example_grad_norms_match_vmap(mlp_case, reduction):
    model, _, x, y, _, grads = mlp_case
    got = cr.func.per_example_grad_norms(lambda out, y: F.cross_entropy(out, y, reduction=reduction), model, x, y)
    np.testing.assert_allclose(got, _norms(grads, len(x)), rtol=1e-10)
    assert all(p.grad is None for p in model.parameters())       # nothing accumulated


class Tokens(cr.nn.Module):
    """Linear layers over (N, T, features) inputs; the second one is called twice."""

    def __init__(self, n_in, hidden, bias=True):
        super().__init__()
        rng = np.random.default_rng(5)
        self.a = cr.nn.Linear(n_in, hidden, dtype=cr.float64, generator=rng)
        self.b = cr.nn.Linear(hidden, hidden, bias=bias, dtype=cr.float64, generator=rng)
        self.frozen = cr.nn.LayerNorm(hidden, dtype=cr.float64).requires_grad_(False)

    def forward(self, x):
        return self.b(cr.tanh(self.b(self.frozen(cr.tanh(self.a(x))))))


@pytest.mark.parametrize("n_in,hidden,bias", [(6, 5, True), (2, 2, False)])   # Gram / materialised paths
def test_per_example_grad_norms_sequences_and_reused_layers(n_in, hidden, bias):
    model = Tokens(n_in, hidden, bias)
    rng = np.random.default_rng(6)
    x, y = cr.tensor(rng.standard_normal((4, 3, n_in))), cr.tensor(rng.standard_normal((4, 3, hidden)))
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}

    def loss(params, x, y):
        return ((cr.func.functional_call(model, params, (x[None],)) - y[None]) ** 2).sum()
    ref = _norms(cr.vmap(cr.grad(loss), in_axes=(None, 0, 0))(params, x, y), 4)
    got = cr.func.per_example_grad_norms(lambda out, y: ((out - y) ** 2).sum(), model, x, y)
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_per_example_grad_norms_errors():
    x, y = cr.ones((2, 1, 4, 4)), cr.tensor([0, 1])
    conv = cr.nn.Sequential(cr.nn.Conv2d(1, 2, 3), cr.nn.Flatten(), cr.nn.Linear(8, 2))
    with pytest.raises(TypeError, match=r"\['0.weight', '0.bias'\] are not in cr.nn.Linear"):
        cr.func.per_example_grad_norms(lambda out, y: F.cross_entropy(out, y, reduction="sum"), conv, x, y)
    model = _mlp((4, 3, 2))
    with pytest.raises(cr.ShapeError, match="per-example losses"):
        cr.func.per_example_grad_norms(lambda out, y: F.cross_entropy(out, y, reduction="none")[None],
                                       model, cr.ones((2, 4)), y)
    tied = Tied()
    with pytest.raises(TypeError, match="tied"):
        cr.func.per_example_grad_norms(lambda out, y: (out ** 2).sum(), tied, cr.ones((2, 2)), y)
