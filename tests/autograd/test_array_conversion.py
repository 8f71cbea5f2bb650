"""np.asarray / np.array / __array__ / a library's NumPy code on a tensor that is part of a graph
(requires grad, leaf or not; batched inside cr.vmap; dual inside cr.jvp) raises a ConversionError
that names the function and the fix, instead of dropping the derivative silently; plain tensors
convert exactly as before."""
import copy
import pickle

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

import chainrule as cr
from chainrule import forward_ad as fwAD
from chainrule.numpy import creation

X = np.array([[0.3, -0.2], [0.1, 0.5]])


def _in_grad(body):
    cr.grad(lambda t: cr.sum(body(t) * 1.0))(X)


def _leaf(body):
    body(cr.tensor(X, requires_grad=True))


def _non_leaf(body):
    body(cr.tensor(X, requires_grad=True) * 2.0)


def _batched(body):
    cr.vmap(body)(np.stack([X, 2 * X, 3 * X]))


def _dual(body):
    cr.jvp(lambda t: cr.sum(body(t) * 1.0), (X,), (np.ones_like(X),))


def _dual_level(body):
    with fwAD.dual_level():
        body(fwAD.make_dual(cr.tensor(X), cr.tensor(np.ones_like(X))))


KINDS = {"leaf": _leaf, "non_leaf": _non_leaf, "inside_grad": _in_grad, "batched": _batched,
         "jvp": _dual, "dual_level": _dual_level}

# (body, the name the message gives, the fix it gives)
CONVERSIONS = {
    "np.asarray": (lambda t: np.asarray(t), "np.asarray()", None),
    "np.array": (lambda t: np.array(t), "np.array()", None),
    "__array__": (lambda t: t.__array__(), "np.asarray()", None),
    "list": (lambda t: np.array([1.0, t[0, 0]]), "np.array()", "cr.stack"),
    "logsumexp": (scipy.special.logsumexp, "scipy.special.logsumexp", "cr.special.logsumexp"),
    "softmax": (scipy.special.softmax, "scipy.special.softmax", "cr.special.softmax"),
    "norm.logpdf": (scipy.stats.norm.logpdf, "scipy.stats.norm.logpdf", "cr.stats.norm.logpdf"),
    "expm": (scipy.linalg.expm, "scipy.linalg.expm", "cr.linalg.matrix_exp"),
    "vectorize": (lambda t: np.vectorize(lambda a: a * a)(t), "numpy.vectorize", None),
    "random.normal": (lambda t: np.random.default_rng(0).normal(loc=t), "np.asarray()", None),
    "entropy": (lambda t: scipy.stats.entropy(t), "scipy.stats.entropy", None),   # behind a decorator
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_a_graph_tensor_refuses_to_become_an_ndarray(kind, conversion):
    body, name, fix = CONVERSIONS[conversion]
    expected = cr.VmapConversionError if kind == "batched" else cr.ConversionError
    with pytest.raises(expected) as info:
        KINDS[kind](body)
    msg = str(info.value)
    assert isinstance(info.value, cr.GraphError) and isinstance(info.value, RuntimeError)
    assert name in msg, msg
    if fix is not None:
        assert fix in msg, msg
    if kind == "batched":
        assert isinstance(info.value, cr.VmapError) and "cr.vmap" in msg
        assert "cr.where" in msg or fix in msg      # the chainrule version, else how to write it
    else:
        assert "drop its derivative silently" in msg and ".detach()" in msg
        assert ("requires grad" if kind in ("leaf", "non_leaf", "inside_grad") else "forward-mode tangent") in msg


def test_the_advice_is_true_chainrule_versions_differentiate():
    g = cr.grad(lambda t: cr.special.logsumexp(t))(X)
    np.testing.assert_allclose(g, scipy.special.softmax(X), rtol=1e-12)
    g = cr.grad(lambda t: cr.sum(cr.stats.norm.logpdf(t)))(X)
    np.testing.assert_allclose(g, -X, rtol=1e-12)
    np.testing.assert_allclose(cr.linalg.matrix_exp(cr.tensor(X)).data, scipy.linalg.expm(X), rtol=1e-12)
    # the gradient the silent detach used to drop: d/dt logsumexp = softmax, not zero
    assert np.abs(cr.grad(lambda t: cr.special.logsumexp(t.detach()) + cr.sum(t))(X) - 1).max() == 0


@pytest.mark.parametrize("kind", ["leaf", "non_leaf", "jvp", "dual_level"])
def test_numpy_method_refuses_a_graph_tensor(kind):
    with pytest.raises(cr.ConversionError, match=r"numpy\(\): this tensor .*\.detach\(\)\.numpy\(\)"):
        KINDS[kind](lambda t: t.numpy())
    with pytest.raises(cr.VmapConversionError, match="vmap"):
        _batched(lambda t: t.numpy())


def test_writing_a_dual_into_an_ndarray_and_numpy_without_a_chainrule_version_refuse():
    with pytest.raises(cr.DTypeError, match="copyto: cannot write a tensor that carries a forward-mode tangent"):
        _dual(lambda t: np.full_like(X, t[0, 0]))
    with pytest.raises(cr.UnsupportedArgument, match="sliding_window_view .*forward-mode tangent"):
        _dual(lambda t: np.lib.stride_tricks.sliding_window_view(t, 2, axis=0))


def test_plain_tensors_convert_as_before():
    t = cr.tensor(X)
    assert np.asarray(t) is t.data                      # shared, not copied
    assert t.numpy() is t.data
    np.testing.assert_array_equal(np.array(t), X)
    assert np.array(t) is not t.data
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(t.__array__(copy=True), X)
    np.testing.assert_array_equal(np.array([1.0, t[0, 0]]), [1.0, 0.3])
    assert scipy.special.logsumexp(t) == scipy.special.logsumexp(X)
    np.testing.assert_array_equal(scipy.linalg.expm(t), scipy.linalg.expm(X))
    # out of the graph on purpose: detach(), and numbers through float() / item() / tolist()
    x = cr.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(np.asarray(x.detach()), X)
    assert float(x[0, 0]) == 0.3 and x[1, 1].item() == 0.5 and x.tolist() == X.tolist()
    # a tensor left from a finished jvp carries a stale tangent: it converts
    kept = []
    cr.jvp(lambda a: kept.append(a * 2) or cr.sum(a), (X,), (X,))
    np.testing.assert_array_equal(np.asarray(kept[0]), 2 * X)


def test_cr_tensor_copies_tensors_in_a_list_by_value():
    x = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
    y = cr.tensor([x * 3, 1.0], dtype=cr.float64)
    np.testing.assert_array_equal(y.data, [6.0, 1.0])
    assert not y.requires_grad and y.is_leaf
    with pytest.raises(cr.VmapConversionError):
        _batched(lambda t: cr.tensor([t[0, 0], 1.0]))


@pytest.mark.filterwarnings("ignore:cr.vmap. the custom Function ImplicitSolve")     # jacrev's vmap:
@pytest.mark.filterwarnings("ignore:jacrev. the function cannot be batched")         # its fallback
def test_transforms_of_arrays_return_results_outside_any_graph():
    """Results computed from arrays carry no graph (they convert): the inner graph of a vjp
    differentiated by jvp, and a fixed point's scratch leaves, end inside the transform."""
    A = np.array([[1.0, 2.0], [0.5, -1.0], [0.3, 0.2]])
    x, cot, w = np.array([0.1, 0.2]), np.array([1.0, -1.0, 0.5]), np.array([0.3, 0.1, -0.2])

    def pulled(c):
        return cr.vjp(lambda x: cr.tanh(A @ x), x)[1](c)[0]

    out, lin = cr.jvp(pulled, (cot,), (w,))
    assert type(lin) is np.ndarray
    np.testing.assert_allclose(lin, pulled(w), rtol=1e-12)     # linear in the cotangent
    hess = cr.jacrev(cr.jacrev(lambda p: cr.fixed_point(lambda z, p: p[0] * cr.cos(z) + p[1],
                                                        cr.tensor(0.0, dtype=cr.float64), p)))(x)
    assert type(hess) is np.ndarray and hess.shape == (2, 2)


# ----- the advice is true where chainrule's version does not differentiate the argument (item 3) -----
def test_the_advice_does_not_send_the_user_to_a_version_that_refuses_the_argument():
    t = cr.tensor(2.0, requires_grad=True)
    with pytest.raises(cr.ConversionError) as info:
        np.kaiser(4, t)                          # NumPy's own code converts beta
    msg = str(info.value)
    assert msg.startswith("numpy.kaiser converts a tensor that requires grad"), msg
    assert "cr.kaiser does not differentiate beta either" in msg and "beta.detach()" in msg, msg
    assert "which is differentiable" not in msg
    with pytest.raises(cr.ConversionError, match=r"kaiser\(\): beta requires grad"):
        cr.kaiser(4, t)                          # (so the message above is true)
    np.testing.assert_array_equal(np.kaiser(4, t.detach()), np.kaiser(4, 2.0))


def test_the_advice_names_chainrule_s_own_function_when_it_asked():
    # chainrule.numpy.creation.full (the plain path behind cr.full) hands its fill value to np.full
    t = cr.tensor(2.0, requires_grad=True)
    with pytest.raises(cr.ConversionError) as info:
        creation.full((2,), t)
    msg = str(info.value)
    assert msg.startswith("chainrule.numpy.creation.full converts"), msg
    assert "does not differentiate the argument fill_value" in msg and "fill_value.detach()" in msg, msg
    assert "use cr.full" not in msg


def test_a_library_function_handed_to_a_transform_is_named_as_the_users_call():
    with pytest.raises(cr.VmapConversionError, match="^scipy.special.logsumexp needs the values"):
        cr.vmap(scipy.special.logsumexp)(np.ones((2, 3)))
    with pytest.raises(cr.ConversionError, match="^scipy.special.logsumexp converts .*use cr.special.logsumexp"):
        cr.grad(scipy.special.logsumexp)(np.ones(3))


# ----- format (item 3's neighbours: what a user prints) -----
def test_format_of_a_one_element_tensor_is_its_value():
    torch = pytest.importorskip("torch")
    for value in (1.5, -2.25e-7, 3):
        for spec in (".3f", "", ">10", ".2e"):
            if isinstance(value, int) and "." in spec:
                continue
            assert format(cr.tensor(value), spec) == format(torch.tensor(value), spec), (value, spec)
    assert f"{cr.tensor(1.5, requires_grad=True) * 2:.3f}" == "3.000"        # in a graph too, as .item()
    assert f"{cr.tensor([[1.5]]):.1f}" == "1.5" and f"{cr.tensor(7):04d}" == "0007"
    t = cr.tensor([1.5, 2.0])
    assert format(t, "") == str(t) == f"{t}" and f"{cr.tensor([1.5])}" == str(cr.tensor([1.5]))
    with pytest.raises(TypeError, match=r"unsupported format string '.2f' .*shape \(2,\).*t\.item\(\)"):
        f"{t:.2f}"
    with pytest.raises(cr.VmapError):
        cr.vmap(lambda x: f"{x:.2f}" and x)(np.ones(3))


# ----- pickle, copy, deepcopy (views share a list of weakrefs: it must not be pickled) -----
def _made():
    base = cr.tensor([1.0, 2.0, 3.0])
    view, detached = base[1:], base.detach()
    leaf = cr.tensor([1.0, 2.0], requires_grad=True)
    return {"base_with_views": base, "view": view, "detached": detached, "leaf": leaf,
            "reshaped": base.reshape(3, 1), "parameter": cr.nn.Parameter([0.5, -1.0])}


@pytest.mark.parametrize("name", list(_made()))
def test_pickle_and_deepcopy_keep_values_and_requires_grad(name):
    t = _made()[name]
    for again in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert type(again) is type(t) and again.is_leaf and again.requires_grad == t.requires_grad
        np.testing.assert_array_equal(again.data, t.data)
        assert again._family is None and again._view is None      # its own memory and version counter
        again.data[0] = 99.0
        assert t.data[0] != 99.0
    assert copy.copy(t).requires_grad == t.requires_grad


def test_pickle_of_a_result_is_a_leaf_and_deepcopy_refuses_it_as_torch():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    again = pickle.loads(pickle.dumps(y))
    assert again.is_leaf and again.requires_grad and again.data.tolist() == [2.0, 4.0]
    with pytest.raises(cr.GraphError, match="deepcopy: only leaf tensors .*<MultiplyBackward>.*detach"):
        copy.deepcopy(y)
    with pytest.raises(cr.GraphError, match="only leaf tensors"):
        copy.deepcopy(x[1:])                      # a view of a leaf that requires grad is not a leaf
    y.sum().backward()
    deep = copy.deepcopy(x)
    assert deep.grad.data.tolist() == [2.0, 2.0] and deep.grad is not x.grad
    assert pickle.loads(pickle.dumps(x)).grad is None          # pickle leaves .grad out, as torch
    deep.data[0] += 1                                          # an in-place change to the copy ...
    deep._bump()
    assert x._version == 0                                     # ... is not the original's
    with pytest.raises(cr.VmapError, match="batched by cr.vmap"):
        cr.vmap(lambda r: pickle.dumps(r) and r)(np.ones((2, 2)))


def test_deepcopy_of_a_module_copies_its_parameters():
    m = cr.nn.Linear(2, 3)
    m2 = copy.deepcopy(m)
    assert type(m2.weight) is cr.nn.Parameter and m2.weight is not m.weight
    np.testing.assert_array_equal(m2.weight.data, m.weight.data)
    m2(cr.tensor(np.ones((1, 2)))).sum().backward()
    assert m.weight.grad is None and m2.weight.grad is not None
