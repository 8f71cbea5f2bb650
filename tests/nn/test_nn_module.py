"""Module: registration, traversal, Sequential slices, modes, zero_grad, state dicts (strict errors,
all-or-nothing), hooks."""
import numpy as np
import pytest

import chainrule as cr
from chainrule import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2, generator=np.random.default_rng(0))
        self.scale = nn.Parameter([2.0])
        self.register_buffer("count", np.zeros(1))
        self.register_buffer("scratch", np.zeros(2), persistent=False)
        self.note = "plain attribute"

    def forward(self, x):
        return self.fc(x) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = Block()
        self.b.fc = self.a.fc                 # shared submodule
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(2, 1))

    def forward(self, x):
        return self.head(self.a(x) + self.b(x))


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["a.scale", "a.fc.weight", "a.fc.bias", "b.scale", "head.1.weight", "head.1.bias"]
    assert len(list(net.parameters())) == 6                      # the shared fc counted once
    assert [n for n, _ in net.named_modules()][:3] == ["", "a", "a.fc"]
    assert [n for n, _ in net.named_buffers()] == ["a.count", "a.scratch", "b.count", "b.scratch"]
    assert net.a.note == "plain attribute" and "note" not in net.a._parameters
    with pytest.raises(TypeError, match="is a Parameter"):
        net.a.scale = np.ones(1)
    del net.a.scale
    assert "a.scale" not in dict(net.named_parameters())
    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        class Broken(nn.Module):
            def __init__(self):
                self.w = nn.Parameter([1.0])
        Broken()


def test_sequential_slice_is_a_sequential():
    m = cr.nn.Sequential(cr.nn.Linear(2, 3), cr.nn.ReLU(), cr.nn.Linear(3, 1))
    head = m[0:2]
    assert isinstance(head, cr.nn.Sequential) and len(head) == 2
    assert head(cr.ones((1, 2))).shape == (1, 3)


def test_parameter_refuses_integers():
    with pytest.raises(cr.DTypeError, match="floating dtype"):
        nn.Parameter(np.arange(3))
    p = nn.Parameter([1.0, 2.0])
    assert p.requires_grad and p.is_leaf and p.dtype == np.float32 and isinstance(p, cr.Tensor)


def test_train_eval_and_zero_grad():
    net = Net()
    assert all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    net(cr.ones((4, 3))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.data == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_zero_grad_without_set_to_none_zeroes_in_place():
    m = cr.nn.Linear(2, 2)
    opt = cr.optim.SGD(m.parameters(), lr=0.1)
    m(cr.ones((1, 2))).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and not g.data.any() and not g.requires_grad
    m(cr.ones((1, 2))).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert not m.weight.grad.data.any()
    opt.zero_grad()
    assert m.weight.grad is None


def test_state_dict_round_trip():
    src, dst = Net(), Net()
    for p in src.parameters():
        p.data[...] = np.random.default_rng(1).normal(size=p.shape)
    sd = src.state_dict()
    assert "a.count" in sd and "a.scratch" not in sd              # non-persistent buffer left out
    assert all(not v.requires_grad for v in sd.values())
    result = dst.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = cr.tensor(np.random.default_rng(2).normal(size=(5, 3)))
    np.testing.assert_array_equal(src(x).data, dst(x).data)
    sd["a.fc.weight"].data[0, 0] = 123.0                          # state_dict shares memory
    assert src.a.fc.weight.data[0, 0] == 123.0


def _params(m):
    return {n: p.data.copy() for n, p in m.state_dict().items()}


def test_load_state_dict_strict_errors_leave_model_untouched():
    net = Net()
    before = _params(net)
    good = {k: v.data + 1 for k, v in net.state_dict().items()}
    missing = {k: v for k, v in good.items() if k != "head.1.bias"}
    with pytest.raises(KeyError, match=r"missing keys \['head.1.bias'\].*Nothing was loaded"):
        net.load_state_dict(missing)
    with pytest.raises(KeyError, match=r"unexpected keys \['extra'\]"):
        net.load_state_dict({**good, "extra": np.zeros(1)})
    bad_shape = {**good, "a.fc.weight": np.zeros((3, 3))}
    with pytest.raises(cr.ShapeError, match=r"'a.fc.weight': shape \(3, 3\) in the state dict, \(2, 3\)"):
        net.load_state_dict(bad_shape)
    with pytest.raises(cr.ShapeError, match="dtype complex128 cannot be stored"):
        net.load_state_dict({**good, "a.scale": np.ones(1, dtype=complex)})
    for k, v in _params(net).items():
        np.testing.assert_array_equal(v, before[k])
    res = net.load_state_dict({**missing, "extra": 1.0}, strict=False)
    assert res.missing_keys == ["head.1.bias"] and res.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(net.a.fc.weight.data, before["a.fc.weight"] + 1)
    np.testing.assert_array_equal(net.head[1].bias.data, before["head.1.bias"])


def test_load_state_dict_bumps_versions_so_stale_graphs_fail():
    lin = nn.Linear(2, 2)
    x = cr.ones((1, 2), requires_grad=True)
    y = (lin(x) * (lin.weight * lin.weight).sum()).sum()   # multiply saves the weight itself
    lin.load_state_dict(lin.state_dict())
    with pytest.raises(cr.GraphError, match="modified by an in-place operation"):
        y.backward()


def test_forward_pre_hook_and_forward_hook():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(args[0].data.sum()) or out + 1)
    out = lin(cr.ones((1, 2)))
    np.testing.assert_allclose(out.data, lin.bias.data[None] + 1)
    assert calls == [0.0]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(lin(cr.ones((1, 2))).data, (lin.weight.data.sum(1) + lin.bias.data)[None])


def test_full_backward_hook_sees_and_replaces_grad_input():
    lin = nn.Linear(3, 2, dtype=cr.float64)
    seen = {}

    def hook(module, grad_input, grad_output):
        seen["in"], seen["out"] = grad_input, grad_output
        return (grad_input[0] * 10,)

    handle = lin.register_full_backward_hook(hook)
    x = cr.tensor(np.ones((4, 3)), requires_grad=True)
    g = np.arange(8.0).reshape(4, 2)
    lin(x).backward(g)
    np.testing.assert_allclose(seen["out"][0].data, g)
    np.testing.assert_allclose(seen["in"][0].data, g @ lin.weight.data)
    np.testing.assert_allclose(x.grad.data, 10 * g @ lin.weight.data)
    np.testing.assert_allclose(lin.weight.grad.data, g.T @ np.ones((4, 3)))   # params unaffected
    handle.remove()
    x.grad = None
    lin(x).backward(g)
    np.testing.assert_allclose(x.grad.data, g @ lin.weight.data)


def test_full_backward_hook_when_input_needs_no_grad():
    lin = nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    lin(cr.ones((4, 3))).sum().backward()
    assert seen == [((None,), (4, 2))]


def test_repr_is_nested():
    text = repr(nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Tanh())))
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in text
    assert "(1): Sequential(\n    (0): Tanh()" in text
