"""Loading legacy checkpoints: ``Module.register_load_state_dict_pre_hook`` / ``_post_hook`` (arguments
and order against torch), old ``torch.nn.utils.weight_norm`` checkpoints (``weight_g``/``weight_v``)
into the parametrized ``weight_norm`` (outputs and gradients against torch in float64), and the init of
zero-element tensors (torch's warning, a working module)."""
import copy
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.nn.utils import parametrizations as PZ

torch = pytest.importorskip("torch")
F64 = cr.float64
TOL = {"rtol": 1e-12, "atol": 1e-12}

# (chainrule layer, torch layer, input shape)
LAYERS = {
    "linear": (lambda: nn.Linear(5, 4, dtype=F64), lambda: torch.nn.Linear(5, 4), (3, 5)),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3, dtype=F64), lambda: torch.nn.Conv2d(3, 4, 3), (2, 3, 6, 6)),
    "convT1d": (lambda: nn.ConvTranspose1d(3, 2, 3, dtype=F64), lambda: torch.nn.ConvTranspose1d(3, 2, 3),
                (2, 3, 5)),
}


def npy(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def as_numpy(sd):
    return {k: npy(v) for k, v in sd.items()}


def old_torch(kind, dim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)      # torch deprecates the hook form
        return torch.nn.utils.weight_norm(LAYERS[kind][1]().double(), dim=dim)


def check_same(ours, theirs, pairs, shape, seed=0):
    """Outputs, input gradients and the gradients of ``pairs`` (our parameter, theirs) agree."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    xo, xt = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = ours(xo), theirs(xt)
    np.testing.assert_allclose(npy(yo), npy(yt), **TOL)
    g = rng.normal(size=yo.shape)
    yo.backward(cr.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(npy(xo.grad), npy(xt.grad), **TOL)
    for po, pt in pairs:
        np.testing.assert_allclose(npy(po.grad), npy(pt.grad), **TOL)


# ----- old weight_norm checkpoints -----
@pytest.mark.parametrize("kind", list(LAYERS))
@pytest.mark.parametrize("dim", [0, 1, None])
def test_old_torch_weight_norm_checkpoint_loads_into_the_parametrization(kind, dim):
    theirs = old_torch(kind, dim)
    sd = as_numpy(theirs.state_dict())
    assert sorted(sd) == ["bias", "weight_g", "weight_v"]
    ours = PZ.weight_norm(LAYERS[kind][0](), dim=dim)
    res = ours.load_state_dict(sd)                          # strict: the pre-hook renamed both keys
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert sorted(sd) == ["bias", "weight_g", "weight_v"]   # the caller's dict is left alone
    po = ours.parametrizations.weight
    np.testing.assert_array_equal(npy(po.original0), sd["weight_g"])
    np.testing.assert_array_equal(npy(po.original1), sd["weight_v"])
    check_same(ours, theirs, [(po.original0, theirs.weight_g), (po.original1, theirs.weight_v),
                              (ours.bias, theirs.bias)], LAYERS[kind][2])


def test_old_checkpoint_of_a_nested_module_uses_the_prefix():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                     torch.nn.utils.weight_norm(torch.nn.Linear(4, 2))).double()
    sd = as_numpy(theirs.state_dict())
    assert "2.weight_g" in sd
    ours = nn.Sequential(nn.Linear(3, 4, dtype=F64), nn.Tanh(), PZ.weight_norm(nn.Linear(4, 2, dtype=F64)))
    ours.load_state_dict(sd)
    check_same(ours, theirs, [(ours[2].parametrizations.weight.original0, theirs[2].weight_g),
                              (ours[0].weight, theirs[0].weight)], (5, 3))


@pytest.mark.parametrize("kind", list(LAYERS))
def test_new_form_checkpoints_load_both_ways(kind):
    make_ours, make_theirs, shape = LAYERS[kind]
    theirs = torch.nn.utils.parametrizations.weight_norm(make_theirs().double())
    ours = PZ.weight_norm(make_ours())
    sd = as_numpy(theirs.state_dict())
    assert list(ours.state_dict()) == list(sd)
    ours.load_state_dict(sd)                                # torch's new form into ours
    check_same(ours, theirs, [(ours.parametrizations.weight.original1,
                               theirs.parametrizations.weight.original1)], shape)
    back = torch.nn.utils.parametrizations.weight_norm(make_theirs().double())
    back.load_state_dict({k: torch.tensor(v) for k, v in as_numpy(ours.state_dict()).items()})
    fresh = PZ.weight_norm(make_ours())
    fresh.load_state_dict(as_numpy(back.state_dict()))
    check_same(fresh, back, [(fresh.parametrizations.weight.original0,
                              back.parametrizations.weight.original0)], shape, seed=1)


def test_chainrule_old_form_checkpoint_loads_into_both_new_forms():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = nn.utils.weight_norm(nn.Linear(5, 4, dtype=F64))
    sd = as_numpy(old.state_dict())
    assert sorted(sd) == ["bias", "weight_g", "weight_v"]
    ours = PZ.weight_norm(nn.Linear(5, 4, dtype=F64))
    ours.load_state_dict(sd)
    theirs = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(5, 4).double())
    theirs.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})   # torch's own renaming hook
    check_same(ours, theirs, [(ours.parametrizations.weight.original0,
                               theirs.parametrizations.weight.original0)], (3, 5))
    x = cr.tensor(np.random.default_rng(3).normal(size=(3, 5)))
    np.testing.assert_allclose(npy(ours(x)), npy(old(x)), **TOL)


def test_only_a_complete_old_pair_is_renamed():
    ours = PZ.weight_norm(nn.Linear(3, 2, dtype=F64))
    sd = {"bias": np.zeros(2), "weight_g": np.ones((2, 1))}
    with pytest.raises(KeyError, match=r"missing keys \['parametrizations.weight.original0', "
                                       r"'parametrizations.weight.original1'\], unexpected keys \['weight_g'\]"):
        ours.load_state_dict(sd)


def test_the_renaming_hook_survives_deepcopy():
    theirs = old_torch("linear", 0)
    ours = copy.deepcopy(PZ.weight_norm(nn.Linear(5, 4, dtype=F64)))
    ours.load_state_dict(as_numpy(theirs.state_dict()))
    check_same(ours, theirs, [], (2, 5))


# ----- the hook API, against torch -----
def _recording_pair(framework):
    """Sequential(Linear, Sequential(Linear)) with a pre- and a post-hook on every module, recording
    what torch (or chainrule) passes, in the order it calls them."""
    lib = torch.nn if framework == "torch" else nn
    net = lib.Sequential(lib.Linear(2, 3), lib.Sequential(lib.Linear(3, 1)))
    calls = []
    names = {id(m): n for n, m in net.named_modules()}

    def pre(module, sd, prefix, local_metadata, strict, missing, unexpected, errors):
        assert isinstance(errors, list)
        calls.append(("pre", names[id(module)], prefix, sorted(sd), strict, dict(local_metadata),
                      list(missing), list(unexpected)))

    def post(module, keys):
        calls.append(("post", names[id(module)], list(keys.missing_keys), list(keys.unexpected_keys)))

    handles = [h for m in net.modules() for h in (m.register_load_state_dict_pre_hook(pre),
                                                  m.register_load_state_dict_post_hook(post))]
    return net, calls, handles


def test_pre_and_post_hooks_get_torch_arguments_in_torch_order():
    tnet, tcalls, _ = _recording_pair("torch")
    onet, ocalls, _ = _recording_pair("chainrule")
    sd = {k: v for k, v in tnet.state_dict().items() if k != "1.0.bias"}
    sd["1.junk"] = torch.zeros(1)
    tres = tnet.load_state_dict(sd, strict=False)            # a plain dict: no _metadata
    ores = onet.load_state_dict(as_numpy(sd), strict=False)
    assert ocalls == tcalls
    assert [c[:2] for c in ocalls] == [("pre", ""), ("pre", "0"), ("post", "0"), ("pre", "1"), ("pre", "1.0"),
                                       ("post", "1.0"), ("post", "1"), ("post", "")]
    assert ocalls[3][2:4] == ("1.", ["1.0.weight", "1.junk"])     # the pre-hook's prefix and keys
    assert ocalls[2][2:] == ([], []) and ocalls[-1][2:] == (["1.0.bias"], ["1.junk"])  # the keys at each post-hook
    assert (ores.missing_keys, ores.unexpected_keys) == (tres.missing_keys, tres.unexpected_keys)


def test_handles_remove_the_hooks():
    net, calls, handles = _recording_pair("chainrule")
    for h in handles:
        h.remove()
    net.load_state_dict(net.state_dict())
    assert calls == []


def test_local_metadata_is_the_modules_entry_of_metadata():
    seen = {}
    for lib, arrays in ((torch.nn, False), (nn, True)):
        net = lib.Sequential(lib.Linear(2, 2))
        net[0].register_load_state_dict_pre_hook(
            lambda m, sd, prefix, meta, *rest, lib=lib: seen.setdefault(lib, dict(meta)))
        sd = torch.nn.Sequential(torch.nn.Linear(2, 2)).state_dict()   # has torch's _metadata
        if arrays:
            meta = sd._metadata
            sd = type(sd)(as_numpy(sd))
            sd._metadata = meta
        net.load_state_dict(sd)
    assert seen[nn] == seen[torch.nn] == {"version": 1}


def test_a_child_hook_edits_only_its_copy():
    for lib in (torch.nn, nn):
        net = lib.Sequential(lib.Linear(2, 2))
        net[0].register_load_state_dict_pre_hook(lambda m, sd, prefix, *r: sd.pop(prefix + "bias"))
        res = net.load_state_dict(net.state_dict(), strict=False)
        assert res.missing_keys == ["0.bias"] and res.unexpected_keys == []


def test_error_msgs_of_a_pre_hook_fail_the_load_and_nothing_is_loaded():
    m = nn.Linear(2, 2, dtype=F64)
    before = npy(m.weight).copy()
    m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, meta, strict, mk, uk, errors:
                                        errors.append("checkpoint version 0 is too old"))
    with pytest.raises(RuntimeError, match=r"load_state_dict for Linear: a load_state_dict pre-hook "
                                           r"reported: checkpoint version 0 is too old\. Nothing was loaded"):
        m.load_state_dict({"weight": np.ones((2, 2)), "bias": np.ones(2)})
    np.testing.assert_array_equal(npy(m.weight), before)


def test_post_hooks_forgive_or_add_keys_under_strict():
    m = nn.Linear(2, 2, dtype=F64)
    h = m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
    assert m.load_state_dict({"weight": np.ones((2, 2))}) == ([], [])
    np.testing.assert_array_equal(npy(m.weight), np.ones((2, 2)))
    h.remove()
    m.register_load_state_dict_post_hook(lambda mod, keys: keys.unexpected_keys.append("made.up"))
    with pytest.raises(KeyError, match=r"unexpected keys \['made.up'\]. Nothing was loaded"):
        m.load_state_dict({"weight": np.full((2, 2), 7.0), "bias": np.zeros(2)})
    np.testing.assert_array_equal(npy(m.weight), np.ones((2, 2)))          # the copy was undone
    res = m.load_state_dict({"weight": np.full((2, 2), 7.0), "bias": np.zeros(2)}, strict=False)
    assert res.unexpected_keys == ["made.up"] and npy(m.weight)[0, 0] == 7.0


def test_hook_errors_name_the_method():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="register_load_state_dict_pre_hook: hook must be callable"):
        m.register_load_state_dict_pre_hook(3)
    with pytest.raises(TypeError, match="register_load_state_dict_post_hook: hook must be callable"):
        m.register_load_state_dict_post_hook(None)
    m.register_load_state_dict_post_hook(lambda mod, keys: keys)
    with pytest.raises(TypeError, match="a post-hook of Linear returned a value; it must return None"):
        m.load_state_dict(m.state_dict())
    with pytest.raises(TypeError, match="load_state_dict for Linear: expected a dict-like state_dict"):
        m.load_state_dict([("weight", np.ones((2, 2)))])


# ----- zero-element init -----
@pytest.mark.parametrize("name", ["kaiming_uniform_", "kaiming_normal_"])
@pytest.mark.parametrize("shape", [(5, 0), (0, 5), (0,)])
def test_kaiming_of_a_zero_element_tensor_warns_and_is_a_no_op(name, shape):
    t = cr.zeros(shape)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert getattr(nn.init, name)(t) is t
    assert t.shape == shape


@pytest.mark.parametrize("name", ["xavier_uniform_", "xavier_normal_"])
def test_xavier_of_a_zero_element_tensor(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # (5, 0): silent, as torch
        assert getattr(nn.init, name)(cr.zeros((5, 0))).shape == (5, 0)
    with pytest.warns(UserWarning, match="zero-element"):   # (0, 0): torch divides by zero
        getattr(nn.init, name)(cr.zeros((0, 0)))


def test_default_bound_is_torchs():
    assert nn.init._default_bound((4, 9)) == 1 / 3
    assert nn.init._default_bound((6, 2, 3, 3)) == 1 / np.sqrt(18)
    with pytest.warns(UserWarning, match="zero-element"):
        assert nn.init._default_bound((5, 0)) == 0.0
    with pytest.warns(UserWarning, match="zero-element"):
        assert nn.init._default_bound((0, 5)) == 1 / np.sqrt(5)



@pytest.mark.parametrize("make, x_shape, y_shape, zero_bias", [
    (lambda: nn.Linear(0, 5, dtype=F64), (3, 0), (3, 5), True),
    (lambda: nn.Linear(5, 0, dtype=F64), (3, 5), (3, 0), False),
    (lambda: nn.Conv2d(0, 4, 3, dtype=F64), (2, 0, 5, 5), (2, 4, 3, 3), True),
], ids=["linear_no_input", "linear_no_output", "conv2d"])
def test_layers_with_a_zero_element_weight_warn_and_work(make, x_shape, y_shape, zero_bias):
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        m = make()
    assert not zero_bias or not npy(m.bias).any()            # torch's bias bound is 0 without inputs
    y = m(cr.ones(x_shape, dtype=F64))
    bias = npy(m.bias).reshape((-1,) + (1,) * (len(y_shape) - 2))
    np.testing.assert_array_equal(npy(y), np.broadcast_to(bias, y_shape))  # nothing in: the bias


def test_a_transposed_conv_without_inputs_builds():
    # (torch builds it too, and refuses its forward: "expected weight to be at least 1 at dimension 0")
    with pytest.warns(UserWarning, match="zero-element"):
        m = nn.ConvTranspose1d(0, 2, 3, dtype=F64)
    assert m.weight.shape == (0, 2, 3) and m.bias.shape == (2,)


def test_torch_agrees_on_linear_without_inputs():
    with pytest.warns(UserWarning, match="zero-element"):
        ref = torch.nn.Linear(0, 5).double()
    assert not ref.bias.detach().numpy().any()
    assert tuple(ref(torch.ones(3, 0, dtype=torch.float64)).shape) == (3, 5)
