"""Containers, Identity, Unflatten and the Module methods (traversal, hooks, modes, state dict keys,
repr), each checked against the torch equivalent built the same way (float64)."""
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.nn.containers import Identity, ModuleDict, ModuleList, ParameterDict, ParameterList, Unflatten
from chainrule.nn.module import Module, Parameter

F64 = cr.float64


def lin(i, o, rng):
    return nn.Linear(i, o, dtype=F64, generator=rng)


def load_from_torch(ours, theirs):
    res = ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert res.missing_keys == [] and res.unexpected_keys == []


def keys_shapes(sd):
    return [(k, tuple(v.shape)) for k, v in sd.items()]


def close(a, b, rtol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-12)


# ----- ModuleList -----
def test_module_list_methods_match_torch(rng):
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = ModuleList([lin(3, 4, rng), nn.Tanh()])
    theirs = tn.ModuleList([tn.Linear(3, 4), tn.Tanh()])
    ours.append(lin(4, 5, rng)).extend([nn.ReLU(), lin(5, 2, rng)])
    theirs.append(tn.Linear(4, 5)).extend([tn.ReLU(), tn.Linear(5, 2)])
    ours.insert(1, lin(4, 4, rng))
    theirs.insert(1, tn.Linear(4, 4))
    ours.insert(-1, nn.Tanh())                    # negative: before the last, as list.insert
    theirs.insert(len(theirs) - 1, tn.Tanh())
    ours += [nn.ReLU()]
    theirs += [tn.ReLU()]
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert repr(ours) == repr(theirs)
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    assert len(ours) == len(theirs) == 8
    assert type(ours[-1]).__name__ == "ReLU" and type(ours[2]).__name__ == "Tanh"
    # slices, pop, del renumber the keys as torch
    assert [type(m).__name__ for m in ours[1:6:2]] == [type(m).__name__ for m in theirs[1:6:2]]
    assert isinstance(ours[1:3], ModuleList)
    assert type(ours.pop(2)).__name__ == type(theirs.pop(2)).__name__ == "Tanh"
    del ours[0]
    del theirs[0]
    del ours[::3]
    del theirs[::3]
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert list(ours._modules) == list(theirs._modules) == [str(i) for i in range(len(theirs))]
    ours[0] = nn.Tanh()
    theirs[0] = tn.Tanh()
    assert repr(ours) == repr(theirs)
    both = ours + ModuleList([lin(2, 2, rng)])
    assert isinstance(both, ModuleList) and len(both) == len(ours) + 1
    assert list(both._modules)[-1] == str(len(ours))


def test_module_list_repr_compresses_runs_like_torch(rng):
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.Tanh(), nn.Tanh(), nn.Linear(2, 3)])
    theirs = tn.ModuleList([tn.Linear(2, 2) for _ in range(3)] + [tn.Tanh(), tn.Tanh(), tn.Linear(2, 3)])
    assert repr(ours) == repr(theirs)
    assert "(0-2): 3 x Linear(in_features=2, out_features=2, bias=True)" in repr(ours)
    assert repr(ModuleList()) == repr(tn.ModuleList()) == "ModuleList()"


def test_module_list_errors():
    ml = ModuleList([nn.Tanh()])
    with pytest.raises(IndexError, match="index 3 is out of range"):
        ml[3]
    with pytest.raises(IndexError, match="index -2 is out of range"):
        ml[-2] = nn.Tanh()
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got Tanh"):
        ml.extend(nn.Tanh())
    with pytest.raises(TypeError, match="expected a Module, got int"):
        ml.append(3)
    with pytest.raises(TypeError, match="ModuleList has no forward"):
        ml(cr.ones(2))


class Tower(Module):
    """A model built on containers: a ModuleList of blocks, a ModuleDict of heads, a ParameterList."""

    def __init__(self, rng=None, torch_nn=None):
        super().__init__()
        self.blocks = ModuleList([lin(3, 5, rng), lin(5, 5, rng)])
        self.heads = ModuleDict({"a": lin(5, 2, rng), "b": lin(5, 1, rng)})
        self.scales = ParameterList([Parameter(np.full(5, 1.5)), Parameter(np.full(5, 0.5))])
        self.offsets = ParameterDict({"b": Parameter(np.zeros(1)), "a": Parameter(np.full(2, 0.1))})

    def forward(self, x):
        for blk, s in zip(self.blocks, self.scales):
            x = cr.tanh(blk(x)) * s
        return self.heads["a"](x) + self.offsets["a"], self.heads["b"](x) * self.offsets["b"]


def torch_tower(torch):
    tn = torch.nn

    class TorchTower(tn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = tn.ModuleList([tn.Linear(3, 5), tn.Linear(5, 5)])
            self.heads = tn.ModuleDict({"a": tn.Linear(5, 2), "b": tn.Linear(5, 1)})
            self.scales = tn.ParameterList([tn.Parameter(torch.full((5,), 1.5)), tn.Parameter(torch.full((5,), .5))])
            self.offsets = tn.ParameterDict({"b": tn.Parameter(torch.zeros(1)),
                                             "a": tn.Parameter(torch.full((2,), .1))})

        def forward(self, x):
            for blk, s in zip(self.blocks, self.scales):
                x = torch.tanh(blk(x)) * s
            return self.heads["a"](x) + self.offsets["a"], self.heads["b"](x) * self.offsets["b"]

    return TorchTower().double()


@pytest.mark.parametrize("batch", [1, 4, 7])
def test_container_model_matches_torch_values_and_gradients(rng, batch):
    torch = pytest.importorskip("torch")
    torch.manual_seed(batch)
    theirs, ours = torch_tower(torch), Tower(rng)
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    load_from_torch(ours, theirs)
    x = rng.normal(size=(batch, 3))
    g1, g2 = rng.normal(size=(batch, 2)), rng.normal(size=(batch, 1))
    xt = torch.tensor(x, requires_grad=True)
    ya, yb = theirs(xt)
    (ya * torch.tensor(g1)).sum().add((yb * torch.tensor(g2)).sum()).backward()
    xc = cr.tensor(x, dtype=F64, requires_grad=True)
    oa, ob = ours(xc)
    ((oa * g1).sum() + (ob * g2).sum()).backward()
    close(oa.data, ya.detach().numpy())
    close(ob.data, yb.detach().numpy())
    close(xc.grad.data, xt.grad.numpy())
    for (n, p), (tn_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == tn_
        close(p.grad.data, tp.grad.numpy())


def test_container_model_gradgradcheck(rng):
    m = Tower(rng)
    x = cr.tensor(rng.normal(size=(2, 3)), dtype=F64, requires_grad=True)
    assert cr.gradgradcheck(lambda x: m(x)[0], (x,))


# ----- ModuleDict -----
def test_module_dict_methods_match_torch(rng):
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = ModuleDict([("z", nn.Linear(2, 2)), ("a", nn.Tanh())])
    theirs = tn.ModuleDict([("z", tn.Linear(2, 2)), ("a", tn.Tanh())])
    ours.update({"m": nn.Linear(2, 3), "b": nn.ReLU()})
    theirs.update({"m": tn.Linear(2, 3), "b": tn.ReLU()})
    ours.update(ModuleDict({"a": nn.Linear(2, 1)}))              # overwrite keeps the position
    theirs.update(tn.ModuleDict({"a": tn.Linear(2, 1)}))
    ours["q"] = Identity()
    theirs["q"] = tn.Identity()
    assert list(ours) == list(theirs) == list(ours.keys()) == ["z", "a", "m", "b", "q"]
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    assert [k for k, _ in ours.items()] == [k for k, _ in theirs.items()]
    assert [type(v).__name__ for v in ours.values()] == [type(v).__name__ for v in theirs.values()]
    assert "m" in ours and "nope" not in ours and len(ours) == 5
    assert type(ours.pop("m")).__name__ == type(theirs.pop("m")).__name__ == "Linear"
    del ours["z"]
    del theirs["z"]
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    ours.clear()
    assert len(ours) == 0 and list(ours.state_dict()) == []


def test_module_dict_errors():
    md = ModuleDict()
    with pytest.raises(TypeError, match="should be called with an iterable of key/value pairs, but got int"):
        md.update(3)
    with pytest.raises(ValueError, match="element #1 has length 3; 2 is required"):
        md.update([("a", nn.Tanh()), ("b", nn.Tanh(), 1)])
    with pytest.raises(TypeError, match="element #0 should be Iterable; is int"):
        md.update([5])
    with pytest.raises(KeyError, match="cannot contain"):
        md["a.b"] = nn.Tanh()
    with pytest.raises(KeyError, match="attribute 'keys' already exists"):
        md["keys"] = nn.Tanh()
    with pytest.raises(KeyError, match=r"no key 'nope'; its keys are \['a'\]"):
        md["nope"]


# ----- ParameterList / ParameterDict -----
def test_parameter_list_matches_torch():
    torch = pytest.importorskip("torch")
    tn = torch.nn
    vals = [np.arange(6.0).reshape(2, 3), np.ones(4)]
    ours = ParameterList([Parameter(vals[0]), cr.tensor(vals[1], dtype=F64)])
    theirs = tn.ParameterList([tn.Parameter(torch.tensor(vals[0])), torch.tensor(vals[1])])
    ours.append(cr.zeros(2, dtype=F64)).extend([Parameter(np.ones((1, 1)))])
    theirs.append(torch.zeros(2, dtype=torch.float64)).extend([tn.Parameter(torch.ones(1, 1, dtype=torch.float64))])
    assert all(isinstance(p, Parameter) for p in ours) and len(ours) == len(theirs) == 4
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs).replace("torch.", "")
    assert [p.shape for p in ours[1:]] == [tuple(p.shape) for p in theirs[1:]]
    assert isinstance(ours[::2], ParameterList) and len(ours[::2]) == 2
    ours[-1] = cr.full((3,), 2.0, dtype=F64)
    theirs[-1] = torch.full((3,), 2.0, dtype=torch.float64)
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    close(ours[3].data, theirs[3].detach().numpy())
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable, but got Tensor"):
        ours.extend(cr.ones(2))
    with pytest.raises(IndexError, match="index 4 is out of range"):
        ours[4]
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        ours(1)


def test_parameter_dict_matches_torch():
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = ParameterDict({"w": cr.ones(2, dtype=F64), "b": Parameter(np.zeros(3))})   # a plain dict: sorted
    theirs = tn.ParameterDict({"w": torch.ones(2, dtype=torch.float64), "b": tn.Parameter(torch.zeros(3))})
    ours.update(OrderedDict([("z", Parameter(np.ones(1))), ("c", Parameter(np.ones(2)))]))
    theirs.update(OrderedDict([("z", tn.Parameter(torch.ones(1))), ("c", tn.Parameter(torch.ones(2)))]))
    ours.update([("y", Parameter(np.ones(4)))])
    theirs.update([("y", tn.Parameter(torch.ones(4)))])
    assert list(ours) == list(theirs) == ["b", "w", "z", "c", "y"]
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert isinstance(ours["w"], Parameter)
    assert list(reversed(ours)) == list(reversed(theirs))
    assert ours.get("nope", 7) == theirs.get("nope", 7) == 7
    k, v = ours.popitem()
    tk, tv = theirs.popitem()
    assert k == tk == "y" and v.shape == tuple(tv.shape)
    assert ours.pop("z").shape == (1,) and "z" not in ours
    theirs.pop("z")
    assert ours.setdefault("n", cr.ones(1, dtype=F64)).shape == (1,)
    theirs.setdefault("n", torch.ones(1, dtype=torch.float64))
    assert list(ours) == list(theirs)
    merged = ours | ParameterDict(OrderedDict([("m", Parameter(np.ones(1)))]))
    assert list(merged) == list(ours) + ["m"] and merged["b"] is ours["b"]
    assert list(ours.fromkeys(["p", "q"])) == ["p", "q"]
    copy = ours.copy()
    assert list(copy) == list(ours) and copy["w"] is ours["w"]
    ours.clear()
    assert len(ours) == 0 and list(ours.state_dict()) == []
    with pytest.raises(TypeError, match="not a string"):
        ours[3] = cr.ones(1)
    with pytest.raises(RuntimeError, match="ParameterDict should not be called"):
        ours(1)


# ----- Identity, Unflatten -----
@pytest.mark.parametrize("dim,sizes,shape", [(1, (2, 3), (4, 6, 5)), (-1, (5, -1), (1, 2, 10)),
                                             (0, (3, 1), (3, 2)), (-2, (-1,), (7, 3, 2))])
def test_unflatten_matches_torch(rng, dim, sizes, shape):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=shape)
    g = None
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.Unflatten(dim, sizes)(xt)
    g = rng.normal(size=tuple(yt.shape))
    yt.backward(torch.tensor(g))
    xc = cr.tensor(x, dtype=F64, requires_grad=True)
    yc = Unflatten(dim, sizes)(xc)
    yc.backward(cr.tensor(g))
    assert yc.shape == tuple(yt.shape)
    close(yc.data, yt.detach().numpy())
    close(xc.grad.data, xt.grad.numpy())
    assert repr(Unflatten(dim, sizes)) == repr(torch.nn.Unflatten(dim, sizes))


def test_unflatten_and_identity_in_a_model_gradgradcheck(rng):
    net = nn.Sequential(Identity(3, flag=True), nn.Flatten(), lin(6, 4, rng), Unflatten(1, (2, 2)), nn.Tanh())
    x = cr.tensor(rng.normal(size=(2, 3, 2)), dtype=F64, requires_grad=True)
    assert net(x).shape == (2, 2, 2)
    assert cr.gradcheck(net, (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(net, (x,))
    assert Identity()(x) is x


def test_unflatten_errors():
    with pytest.raises(cr.ShapeError, match=r"Unflatten: sizes \(2, 2\) don't multiply up to the size of dim 1 \(6\)"):
        Unflatten(1, (2, 2))(cr.ones((3, 6)))
    with pytest.raises(cr.ShapeError, match="dim=3 is out of range for input of shape"):
        Unflatten(3, (2, 3))(cr.ones((3, 6)))
    with pytest.raises(cr.ShapeError, match=r"sizes \(4, -1\) cannot unflatten dim 1 of size 6"):
        Unflatten(1, (4, -1))(cr.ones((3, 6)))
    with pytest.raises(TypeError, match="found element of type float at pos 1"):
        Unflatten(1, (2, 3.0))
    with pytest.raises(TypeError, match="must be a tuple of ints"):
        Unflatten(1, 6)
    with pytest.raises(ValueError, match="at most one -1"):
        Unflatten(1, (-1, -1))


# ----- Module methods against torch -----
class Pair(Module):
    def __init__(self, shared, rng):
        super().__init__()
        self.left = shared
        self.right = shared
        self.own = lin(2, 2, rng)
        self.register_buffer("steps", cr.zeros((), dtype=F64))
        self.register_buffer("tmp", cr.zeros(2, dtype=F64), persistent=False)

    def forward(self, x):
        return self.own(self.left(x))


def torch_pair(torch):
    tn = torch.nn

    class TPair(tn.Module):
        def __init__(self, shared):
            super().__init__()
            self.left = shared
            self.right = shared
            self.own = tn.Linear(2, 2)
            self.register_buffer("steps", torch.zeros(()))
            self.register_buffer("tmp", torch.zeros(2), persistent=False)

        def forward(self, x):
            return self.own(self.left(x))

    return TPair(tn.Linear(2, 2)).double()


def test_traversal_with_shared_modules_matches_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Sequential(Pair(lin(2, 2, rng), rng), nn.Tanh()), torch.nn.Sequential(torch_pair(torch),
                                                                                           torch.nn.Tanh())
    for kw in ({}, {"remove_duplicate": False}, {"prefix": "net"}):
        assert [n for n, _ in ours.named_modules(**kw)] == [n for n, _ in theirs.named_modules(**kw)]
    for kw in ({}, {"remove_duplicate": False}, {"prefix": "net"}, {"recurse": False}):
        assert [n for n, _ in ours.named_parameters(**kw)] == [n for n, _ in theirs.named_parameters(**kw)]
        assert [n for n, _ in ours.named_buffers(**kw)] == [n for n, _ in theirs.named_buffers(**kw)]
    assert [n for n, _ in ours[0].named_children()] == [n for n, _ in theirs[0].named_children()] == ["left", "own"]
    assert len(list(ours[0].children())) == 2
    assert keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())    # every path to a shared module
    assert list(ours.state_dict(prefix="m.")) == list(theirs.state_dict(prefix="m."))
    assert all(v.requires_grad for k, v in ours.state_dict(keep_vars=True).items() if "weight" in k)
    load_from_torch(ours, theirs)
    x = rng.normal(size=(3, 2))
    close(ours(cr.tensor(x, dtype=F64)).data, theirs(torch.tensor(x)).detach().numpy())
    memo = set()
    assert [n for n, _ in ours.named_modules(memo=memo)] == [n for n, _ in ours.named_modules()]
    assert len(memo) == 5 and list(ours.named_modules(memo=memo)) == []


def test_apply_order_get_submodule_and_get_parameter_match_torch(rng):
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = nn.Sequential(ModuleList([lin(2, 2, rng), nn.Tanh()]), ModuleDict({"h": lin(2, 1, rng)}))
    theirs = tn.Sequential(tn.ModuleList([tn.Linear(2, 2), tn.Tanh()]), tn.ModuleDict({"h": tn.Linear(2, 1)}))
    seen_o, seen_t = [], []
    assert ours.apply(lambda m: seen_o.append(type(m).__name__)) is ours
    theirs.apply(lambda m: seen_t.append(type(m).__name__))
    assert seen_o == seen_t == ["Linear", "Tanh", "ModuleList", "Linear", "ModuleDict", "Sequential"]
    for path in ("", "0", "0.1", "1.h"):
        assert type(ours.get_submodule(path)).__name__ == type(theirs.get_submodule(path)).__name__
    assert ours.get_parameter("1.h.bias") is ours[1]["h"].bias
    assert ours.get_parameter("0.0.weight").shape == tuple(theirs.get_parameter("0.0.weight").shape)
    with pytest.raises(AttributeError, match=r"ModuleList has no attribute `5`"):
        ours.get_submodule("0.5")
    with pytest.raises(AttributeError, match="`in_features` is not an nn.Module"):
        ours.get_submodule("1.h.in_features")
    with pytest.raises(AttributeError, match="`in_features` is not a parameter"):
        ours.get_parameter("1.h.in_features")
    with pytest.raises(AttributeError, match=r"Linear has no attribute `gamma`; its parameters are \['weight', 'b"):
        ours.get_parameter("1.h.gamma")
    with pytest.raises(AttributeError):
        theirs.get_parameter("1.h.gamma")


def test_modes_requires_grad_and_buffers(rng):
    net = nn.Sequential(ModuleList([nn.Dropout(0.5), lin(2, 2, rng)]), nn.Tanh())
    assert net.eval() is net and not any(m.training for m in net.modules())
    assert net.train() is net and all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train("no")
    assert net.requires_grad_(False) is net and not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(requires_grad=True)
    assert all(p.requires_grad for p in net.parameters())
    m = Module()
    m.register_buffer("a", cr.ones(2), persistent=False)
    assert list(m.state_dict()) == []
    m.register_buffer("a", cr.ones(2))                       # re-registered persistent: saved again
    assert list(m.state_dict()) == ["a"]
    m.plain = 3
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", cr.ones(1))
    with pytest.raises(KeyError, match="cannot contain"):
        m.register_buffer("a.b", cr.ones(1))
    with pytest.raises(KeyError, match="empty"):
        m.register_parameter("", None)
    with pytest.raises(TypeError, match="the name should be a string"):
        m.add_module(3, nn.Tanh())


def test_zero_grad_matches_torch_semantics(rng):
    net = nn.Sequential(lin(2, 2, rng))
    net(cr.ones((1, 2), dtype=F64)).sum().backward()
    g = net[0].weight.grad
    net.zero_grad(set_to_none=False)
    assert net[0].weight.grad is g and not g.data.any()
    net.zero_grad()
    assert net[0].weight.grad is None


def test_repr_of_nested_containers_matches_torch():
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = nn.Sequential(ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.Tanh()]),
                         ModuleDict({"u": Unflatten(1, (1, 2)), "i": Identity()}),
                         nn.Sequential(nn.ReLU(), nn.Linear(2, 1, bias=False)))
    theirs = tn.Sequential(tn.ModuleList([tn.Linear(2, 2), tn.Linear(2, 2), tn.Tanh()]),
                           tn.ModuleDict({"u": tn.Unflatten(1, (1, 2)), "i": tn.Identity()}),
                           tn.Sequential(tn.ReLU(), tn.Linear(2, 1, bias=False)))
    assert repr(ours) == repr(theirs)

    class Multi(Module):
        def extra_repr(self):
            return "a=1\nb=2"

    class TMulti(tn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(Multi()) == repr(TMulti())[1:] == "Multi(\n  a=1\n  b=2\n)"


# ----- hooks against torch: call order, arguments, return values -----
def _hooked(model, log, kind):
    handles = []
    for name, m in model.named_modules():
        tag = name or "root"

        def pre(mod, args, tag=tag):
            log.append(("pre", tag, [tuple(a.shape) for a in args]))

        def pre_kw(mod, args, kwargs, tag=tag):
            log.append(("pre_kw", tag, sorted(kwargs)))

        def post(mod, args, out, tag=tag):
            log.append(("post", tag, tuple(out.shape)))

        def first(mod, args, out, tag=tag):
            log.append(("first", tag))

        handles += [m.register_forward_pre_hook(pre), m.register_forward_pre_hook(pre_kw, with_kwargs=True),
                    m.register_forward_hook(post), m.register_forward_hook(first, prepend=True)]
    return handles


def test_hook_call_order_and_arguments_match_torch(rng):
    torch = pytest.importorskip("torch")
    tn = torch.nn
    ours = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Tanh(), nn.Linear(4, 2)))
    theirs = tn.Sequential(tn.Linear(3, 4), tn.Sequential(tn.Tanh(), tn.Linear(4, 2)))
    log_o, log_t = [], []
    handles = _hooked(ours, log_o, "cr")
    _hooked(theirs, log_t, "torch")
    ours(cr.ones((5, 3)))
    theirs(torch.ones(5, 3))
    assert log_o == log_t and len(log_o) == 5 * 4
    for h in handles:
        h.remove()
    log_o.clear()
    ours(cr.ones((5, 3)))
    assert log_o == []


def test_hook_return_values_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(2, 3))
    results = []
    for lib, mk, tens in ((cr, lambda: lin(3, 3, np.random.default_rng(1)), lambda a: cr.tensor(a, dtype=F64)),
                          (torch, lambda: torch.nn.Linear(3, 3).double(), torch.tensor)):
        m = mk()
        if lib is torch:
            with torch.no_grad():
                for p, q in zip(m.parameters(), lin(3, 3, np.random.default_rng(1)).parameters()):
                    p.copy_(torch.tensor(q.data))
        h1 = m.register_forward_pre_hook(lambda mod, args: args[0] * 2)          # not a tuple: wrapped
        h2 = m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), kwargs), with_kwargs=True)
        h3 = m.register_forward_hook(lambda mod, args, out: out * 3)
        h4 = m.register_forward_hook(lambda mod, args, kwargs, out: out - args[0].sum(), with_kwargs=True)
        h5 = m.register_forward_hook(lambda mod, args, out: None, prepend=True)
        results.append(np.asarray(m(tens(x)).detach().numpy() if lib is torch else m(tens(x)).data))
        for h in (h1, h2, h3, h4, h5):
            h.remove()
        results.append(np.asarray(m(tens(x)).detach().numpy() if lib is torch else m(tens(x)).data))
    close(results[0], results[2])
    close(results[1], results[3])
    assert not np.allclose(results[0], results[1])


def test_bad_kwargs_pre_hook_and_always_call_hooks():
    torch = pytest.importorskip("torch")
    m = nn.ReLU()
    m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"must return None or a tuple of \(new_args, new_kwargs\)"):
        m(cr.ones(1))

    class Boom(Module):
        def forward(self, x):
            raise ValueError("boom")

    class TBoom(torch.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    for m, x in ((Boom(), cr.ones(1)), (TBoom(), torch.ones(1))):
        seen = []
        m.register_forward_hook(lambda mod, args, out: seen.append(("always", out)), always_call=True)
        m.register_forward_hook(lambda mod, args, out: seen.append(("normal", out)))
        m.register_forward_hook(lambda mod, args, out: 1 / 0, always_call=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="boom"):
                m(x)
        assert seen == [("always", None)]
        message = str(w[0].message).replace("``", "")
        assert len(w) == 1 and "always_call=True raised an exception" in message


def test_handle_as_context_manager_and_ids():
    m = nn.ReLU()
    with m.register_forward_hook(lambda mod, args, out: out + 1, always_call=True) as h:
        assert m(cr.tensor([1.0])).tolist() == [2.0]
        assert h.id in m._forward_hooks_always_called
    assert m(cr.tensor([1.0])).tolist() == [1.0]
    assert not m._forward_hooks and not m._forward_hooks_always_called


def test_call_without_hooks_takes_the_fast_path(monkeypatch):
    m = nn.Linear(2, 2)

    def fail(*a, **k):
        raise AssertionError("the hook path ran without hooks")

    monkeypatch.setattr(Module, "_call_with_hooks", fail)
    assert m(cr.ones((1, 2))).shape == (1, 2)


# ----- Sequential -----
def _seq_pair(torch):
    """The same five modules on both sides (types matched by name), numbered."""
    kinds = [("Linear", (2, 2)), ("Tanh", ()), ("ReLU", ()), ("Linear", (2, 3)), ("Sigmoid", ())]
    return (nn.Sequential(*[getattr(nn, k)(*a) for k, a in kinds]),
            torch.nn.Sequential(*[getattr(torch.nn, k)(*a) for k, a in kinds]))


def _same(ours, theirs):
    assert list(ours._modules) == list(theirs._modules)
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    assert len(ours) == len(theirs) and keys_shapes(ours.state_dict()) == keys_shapes(theirs.state_dict())
    assert repr(ours) == repr(theirs)


SEQ_EDITS = {
    "append": lambda s, t: s.append(t.nn.Sigmoid() if hasattr(t, "nn") else t.Sigmoid()),
    "insert 0": lambda s, t: s.insert(0, t.nn.Tanh() if hasattr(t, "nn") else t.Tanh()),
    "insert -2": lambda s, t: s.insert(-2, t.nn.ReLU() if hasattr(t, "nn") else t.ReLU()),
    "insert len": lambda s, t: s.insert(len(s), t.nn.ReLU() if hasattr(t, "nn") else t.ReLU()),
    "del 1": lambda s, t: s.__delitem__(1),
    "del -1": lambda s, t: s.__delitem__(-1),
    "del 1:4": lambda s, t: s.__delitem__(slice(1, 4)),
    "del ::2": lambda s, t: s.__delitem__(slice(None, None, 2)),
    "pop 2": lambda s, t: s.pop(2),
    "pop 1:3": lambda s, t: s.pop(slice(1, 3)),
    "setitem 1": lambda s, t: s.__setitem__(1, t.nn.Sigmoid() if hasattr(t, "nn") else t.Sigmoid()),
    "setitem -1": lambda s, t: s.__setitem__(-1, t.nn.Tanh() if hasattr(t, "nn") else t.Tanh()),
    "extend": lambda s, t: s.extend([t.nn.ReLU() if hasattr(t, "nn") else t.ReLU(), s[0]]),
    "iadd": lambda s, t: s.__iadd__(s[1:3]),
    "imul": lambda s, t: s.__imul__(2),
}


@pytest.mark.parametrize("edit", sorted(SEQ_EDITS))
def test_sequential_list_methods_match_torch(edit):
    torch = pytest.importorskip("torch")
    ours, theirs = _seq_pair(torch)
    r_ours, r_theirs = SEQ_EDITS[edit](ours, cr), SEQ_EDITS[edit](theirs, torch)
    _same(ours, theirs)
    if isinstance(r_theirs, torch.nn.Module):        # what the method returns: self, a module, a slice
        assert type(r_ours).__name__ == type(r_theirs).__name__
        if isinstance(r_theirs, torch.nn.Sequential) and r_theirs is not theirs:
            _same(r_ours, r_theirs)
        assert (r_ours is ours) == (r_theirs is theirs)


def test_sequential_slicing_adding_and_repeating_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _seq_pair(torch)
    for idx in (slice(1, 4), slice(None, None, -2), slice(3, None)):
        _same(ours[idx], theirs[idx])
        assert ours[idx][0] is list(ours)[idx][0]            # the same modules, not copies
    _same(ours + ours[1:3], theirs + theirs[1:3])
    _same(ours[:2] * 3, theirs[:2] * 3)
    _same(2 * ours[:2], 2 * theirs[:2])
    assert ours[-1] is list(ours)[-1] and ours[0] is list(ours)[0]


def test_sequential_from_an_ordered_dict_keeps_names_as_torch(rng):
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(OrderedDict([("fc1", lin(3, 4, rng)), ("act", nn.Tanh()), ("fc2", lin(4, 2, rng))]))
    theirs = torch.nn.Sequential(OrderedDict([("fc1", torch.nn.Linear(3, 4).double()), ("act", torch.nn.Tanh()),
                                              ("fc2", torch.nn.Linear(4, 2).double())]))
    load_from_torch(ours, theirs)
    _same(ours, theirs)
    _same(ours[1:], theirs[1:])                      # a slice keeps the names
    assert ours.fc2 is ours[2] and ours[-1] is ours[2]
    x = rng.standard_normal((5, 3))
    close(ours(cr.tensor(x)).data, theirs(torch.tensor(x)).detach().numpy())
    ours[1], theirs[1] = nn.ReLU(), torch.nn.ReLU()  # item assignment keeps the name
    _same(ours, theirs)
    ours.append(nn.Sigmoid())
    theirs.append(torch.nn.Sigmoid())
    _same(ours, theirs)
    del ours[0]
    del theirs[0]                                    # deleting renumbers every name, as torch
    _same(ours, theirs)


def test_sequential_errors():
    net = nn.Sequential(nn.Tanh(), nn.ReLU())
    with pytest.raises(IndexError, match="index 2 is out of range"):
        net[2]
    with pytest.raises(IndexError, match="index -3 is out of range"):
        net[-3] = nn.Tanh()
    with pytest.raises(IndexError, match="Sequential.insert: index 3 is out of range"):
        net.insert(3, nn.Tanh())
    with pytest.raises(TypeError, match="Sequential.insert: expected a Module, got int"):
        net.insert(0, 3)
    with pytest.raises(TypeError, match=r"Sequential \+ list: add a Sequential"):
        net + [nn.Tanh()]
    with pytest.raises(ValueError, match="multiplier must be a positive int"):
        net * 0
    with pytest.raises(TypeError, match=r"Sequential: index must be an int or a slice, got str '0'.*getattr"):
        net["0"]


# ----- global module hooks (cr.nn.module's register_module_*_hook) -----
def test_global_hooks_run_with_the_modules_own_in_torchs_order():
    torch = pytest.importorskip("torch")
    from torch.nn.modules import module as tmod

    from chainrule.nn import module as cmod
    logs = {}
    for lib, reg, tn, tens in ((cr, cmod, nn, lambda s: cr.ones(s, requires_grad=True)),
                               (torch, tmod, torch.nn, lambda s: torch.ones(*s, requires_grad=True))):
        log = logs.setdefault(lib.__name__, [])
        net = tn.Sequential(tn.Linear(3, 4), tn.Tanh(), tn.Linear(4, 2))
        local = [net[0].register_forward_pre_hook(lambda m, a: log.append(("pre", type(m).__name__))),
                 net[0].register_forward_hook(lambda m, a, o: log.append(("fwd", type(m).__name__))),
                 net[2].register_full_backward_hook(lambda m, gi, go: log.append(("bwd", type(m).__name__)))]
        handles = [
            reg.register_module_forward_pre_hook(lambda m, a: log.append(("global pre", type(m).__name__))),
            reg.register_module_forward_hook(lambda m, a, o: log.append(("global fwd", type(m).__name__))),
            reg.register_module_forward_hook(lambda m, a, kw, o: log.append(("global kw", sorted(kw))),
                                             with_kwargs=True),
            reg.register_module_full_backward_hook(
                lambda m, gi, go: log.append(("global bwd", type(m).__name__, len(gi), len(go))))]
        net(tens((2, 3))).sum().backward()
        for h in handles + local:
            h.remove()
        before = len(log)
        net(tens((2, 3))).sum().backward()
        assert len(log) == before                       # removed: nothing runs any more
    assert logs["chainrule"] == logs["torch"] and len(logs["torch"]) > 15
    assert Module.__call__ is cmod._fast_call           # the hook-less fast path is back


def test_global_hooks_replace_values_and_always_call_as_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.modules import module as tmod

    from chainrule.nn import module as cmod
    got = []
    for reg, m, x in ((cmod, nn.ReLU(), cr.tensor([-1.0, 2.0])), (tmod, torch.nn.ReLU(), torch.tensor([-1.0, 2.0]))):
        with reg.register_module_forward_pre_hook(lambda mod, a: (a[0] + 2,)), \
                reg.register_module_forward_hook(lambda mod, a, o: o * 10):
            got.append(np.asarray(m(x).tolist()))
    close(got[0], got[1])

    class Boom(Module):
        def forward(self, x):
            raise ValueError("boom")
    seen = []
    with cmod.register_module_forward_hook(lambda mod, a, o: seen.append(o), always_call=True):
        with pytest.raises(ValueError, match="boom"):
            Boom()(cr.ones(1))
    assert seen == [None] and Module.__call__ is cmod._fast_call
    with pytest.raises(TypeError, match="hook must be callable"):
        cmod.register_module_forward_hook(3)
