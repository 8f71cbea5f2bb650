"""NumPy's positional order: every chainrule function with a NumPy namesake (``cr.<name>``,
``cr.linalg.<name>``, ``cr.fft.<name>``, the targets of ``np.<name>(tensor)``) and every Tensor method
with an ndarray namesake takes its positional arguments in NumPy's order; a parameter that NumPy
does not have at that position is keyword-only, so ``cr.sum(t, 0, np.float64)`` cannot silently
read the dtype as something else."""
import inspect

import numpy as np
import pytest

import chainrule as cr
from chainrule import numpy as ops
from chainrule.core.errors import UnsupportedArgument

P = inspect.Parameter
# the same parameter under another name (NumPy's ``b`` is chainrule's ``y``; ``ndarray.clip(min, max)``)
SYNONYMS = {frozenset(pair) for pair in [("b", "y"), ("x2", "y"), ("other", "y"), ("min", "a_min"),
                                         ("max", "a_max"), ("M", "m"), ("N", "n"), ("tup", "xs"),
                                         ("arrays", "xs")]}
# where chainrule deliberately follows another library, and a NumPy-ordered call fails loudly
# (each checked in test_the_allowed_differences_fail_loudly)
ALLOWED = {
    "save": "torch.save's (obj, path)",
    "Tensor.flatten": "torch's flatten(start_axis, end_axis); NumPy's order='C' string is refused",
    "reshape": "reshape(x, 2, 3) as ndarray.reshape and torch; NumPy's positional order string is refused",
}


def positional(fn, skip=0):
    """Names of ``fn``'s positional parameters in order (``*args`` ends them), less the first ``skip``."""
    names = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind is P.VAR_POSITIONAL:
            names.append("*" + p.name)
        if p.kind not in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names[skip:]


def mismatch(mine, numpys, first_is_operand=True):
    """The first position at which chainrule's positional parameter is not NumPy's, or None."""
    for i, name in enumerate(mine):
        if i == 0 and first_is_operand:
            continue                                   # the operand: x, a, arrays, m, ...
        if name.startswith("*"):
            return None if i < len(numpys) and numpys[i].startswith("*") else i
        if i >= len(numpys) or not (numpys[i] == name or frozenset((numpys[i], name)) in SYNONYMS):
            return i
    return None


def _ufunc_mismatch(mine, ufunc):
    """A ufunc's positional arguments are its operands, then ``out``."""
    operands = [n for n in mine if not n.startswith("*")][:ufunc.nin]
    rest = mine[len(operands):]
    if any(n.startswith("*") for n in mine) or not rest or rest == ["out"]:
        return None
    return len(operands)


def _pairs():
    """(label, chainrule function, NumPy function) for every NumPy namesake chainrule publishes."""
    seen = {}
    for prefix, mine, theirs in (("", cr, np), ("linalg.", cr.linalg, np.linalg), ("fft.", cr.fft, np.fft)):
        for name in dir(mine):
            fn, nfn = getattr(mine, name), getattr(theirs, name, None)
            if name.startswith("_") or nfn is None or not callable(fn) or isinstance(fn, type) \
                    or isinstance(nfn, type) or not callable(nfn):
                continue
            seen[prefix + name] = (fn, nfn)
    for nfn, fn in ops._FUNCTIONS.items():        # np.<name>(tensor)'s targets (ufuncs pass operands only)
        module = getattr(nfn, "__module__", "numpy") or "numpy"
        prefix = "linalg." if "linalg" in module else "fft." if "fft" in module else ""
        seen.setdefault(prefix + nfn.__name__ + f" -> {fn.__name__}", (fn, nfn))
    return sorted(seen.items())


PAIRS = _pairs()


def test_the_enumeration_sees_the_namespaces():
    labels = {label for label, _ in PAIRS}
    assert len(PAIRS) > 300
    for want in ("sum", "nanmean", "median", "cumsum", "linalg.svd", "fft.rfft", "exp", "amax", "max -> amax",
                 "zeros", "kaiser"):
        assert want in labels, want


@pytest.mark.parametrize("label, fns", PAIRS, ids=[label for label, _ in PAIRS])
def test_positional_parameters_follow_numpy(label, fns):
    fn, nfn = fns
    label = label.split(" -> ")[0]
    if label in ALLOWED:
        return
    mine = positional(fn)
    if isinstance(nfn, np.ufunc):
        bad = _ufunc_mismatch(mine, nfn)
        assert bad is None, f"cr.{label}{inspect.signature(fn)}: after the {nfn.nin} operand(s) NumPy's " \
                            f"ufunc takes only out positionally; make {mine[bad]!r} keyword-only"
        return
    theirs = positional(nfn)
    bad = mismatch(mine, theirs)
    assert bad is None, (f"cr.{label}{inspect.signature(fn)} vs numpy's {inspect.signature(nfn)}: position {bad} "
                         f"is {mine[bad]!r} in chainrule, {theirs[bad] if bad < len(theirs) else 'absent'!r} in "
                         f"NumPy; follow NumPy's order or make it keyword-only")


def _method_pairs():
    for name in sorted(dir(cr.Tensor)):
        fn, nfn = getattr(cr.Tensor, name, None), getattr(np.ndarray, name, None)
        if name.startswith("_") or nfn is None or not inspect.isfunction(fn):
            continue
        theirs = positional(nfn, skip=1)
        full = getattr(np, name, None)              # ndarray.sum(axis, dtype, out, **kwargs): np.sum's order
        if full is not None and not isinstance(full, np.ufunc) and callable(full):
            longer = positional(full, skip=1)
            if len(longer) > len(theirs) and mismatch(theirs, longer, False) is None:
                theirs = longer
        yield name, fn, theirs


METHODS = list(_method_pairs())


def test_the_method_enumeration_sees_the_reductions():
    names = {name for name, _, _ in METHODS}
    assert {"sum", "mean", "std", "var", "max", "min", "cumsum", "argmax", "clip", "round", "sort"} <= names


@pytest.mark.parametrize("name, fn, theirs", METHODS, ids=[m[0] for m in METHODS])
def test_tensor_methods_follow_ndarray(name, fn, theirs):
    if f"Tensor.{name}" in ALLOWED:
        return
    mine = positional(fn, skip=1)
    bad = mismatch(mine, theirs, False)
    assert bad is None, (f"Tensor.{name}{inspect.signature(fn)}: position {bad} is {mine[bad]!r}, ndarray.{name} "
                         f"has {theirs[bad] if bad < len(theirs) else 'nothing'!r} there")


def test_the_allowed_differences_fail_loudly(tmp_path):
    t = cr.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError):
        t.flatten("C")
    with pytest.raises((TypeError, AttributeError, ValueError)):
        cr.save(str(tmp_path / "a.npy"), t)
    for order in ("C", "F"):
        with pytest.raises((TypeError, ValueError)):
            cr.reshape(t, (6,), order)


def test_the_guard_catches_the_old_sum():
    def old_sum(x, axis=None, keepdims=False, dtype=None):
        return x
    assert mismatch(positional(old_sum), positional(np.sum)) == 2
    assert _ufunc_mismatch(["x", "y", "dtype"], np.add) == 2 and _ufunc_mismatch(["x", "y", "out"], np.add) is None


# ----- the values: NumPy's positional forms give NumPy's answers -----
X = np.random.default_rng(0).normal(size=(3, 4))
XI = np.arange(12, dtype=np.int32).reshape(3, 4)


def same(got, want):
    got = got.data if isinstance(got, cr.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    tol = 1e-6 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("call", [
    lambda m, x: m.sum(x, 0, np.float32),
    lambda m, x: m.sum(x, 1, None, None, True),
    lambda m, x: m.prod(x, 0, np.float64, None, True),
    lambda m, x: m.mean(x, 0, np.float32),
    lambda m, x: m.mean(x, 1, None, None, True),
    lambda m, x: m.std(x, 0, None, None, 1),
    lambda m, x: m.var(x, 1, np.float32, None, 1, True),
    lambda m, x: m.cumsum(x, 0, np.float64),
    lambda m, x: m.cumprod(x, 1, np.float32),
    lambda m, x: m.amax(x, 0, None, True),
    lambda m, x: m.min(x, 1, None, True, 10.0),
    lambda m, x: m.argmax(x, 1, None),
    lambda m, x: m.nansum(x, 0, np.float32, None, True),
], ids=["sum-dtype", "sum-keepdims", "prod", "mean-dtype", "mean-keepdims", "std-ddof", "var", "cumsum",
        "cumprod", "amax", "min-initial", "argmax", "nansum"])
@pytest.mark.parametrize("x", [X, XI], ids=["float", "int"])
def test_positional_forms_equal_numpy(call, x):
    same(call(cr, cr.tensor(x)), call(np, x))
    same(call(np, cr.tensor(x)), call(np, x))                 # np.<f>(tensor) dispatch alike


@pytest.mark.parametrize("call", [
    lambda t: t.sum(0, np.float32), lambda t: t.sum(1, None, None, True), lambda t: t.mean(0, np.float32),
    lambda t: t.std(0, None, None, 1), lambda t: t.var(1, None, None, 0, True), lambda t: t.max(0, None, True),
    lambda t: t.cumsum(0, np.float64), lambda t: t.prod(1, None, None, True), lambda t: t.argmin(0, None),
], ids=["sum", "sum-keepdims", "mean", "std", "var", "max", "cumsum", "prod", "argmin"])
def test_tensor_methods_take_ndarray_positional_forms(call):
    same(call(cr.tensor(X)), call(X))


def test_the_dtype_is_not_taken_as_keepdims():
    """The bug: ``cr.sum(t, 0, np.float64)`` used to read np.float64 as keepdims=True."""
    t = cr.tensor(X.astype(np.float32))
    for got in (cr.sum(t, 0, np.float64), t.sum(0, np.float64), cr.mean(t, 0, np.float64)):
        assert got.shape == (4,) and got.dtype == np.float64


def test_positional_forms_keep_the_gradient():
    x = cr.tensor(X, requires_grad=True)
    cr.sum(cr.std(x, 0, None, None, 1) * cr.mean(x, 0, np.float64)).backward()
    xt = __import__("torch").tensor(X, requires_grad=True)
    (xt.std(0, correction=1) * xt.mean(0)).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda t, o: cr.sum(t, 0, None, o), lambda t, o: cr.mean(t, None, None, o), lambda t, o: cr.amax(t, 0, o),
    lambda t, o: cr.cumsum(t, 0, None, o), lambda t, o: cr.std(t, 0, None, o), lambda t, o: cr.argmax(t, 0, o),
    lambda t, o: t.sum(0, None, o), lambda t, o: t.max(0, o), lambda t, o: cr.prod(t, out=o),
], ids=["sum", "mean", "amax", "cumsum", "std", "argmax", "t.sum", "t.max", "prod"])
def test_out_is_refused_by_name(call):
    with pytest.raises(UnsupportedArgument, match="out= is not supported"):
        call(cr.tensor(X), np.empty(4))


def test_every_out_parameter_is_refused_by_name():
    """Each function with NumPy's ``out`` raises UnsupportedArgument for an array there."""
    fns = {id(fn): fn for _, (fn, _) in PAIRS if "out" in inspect.signature(fn).parameters}
    assert len(fns) > 50
    for fn in fns.values():
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.default is P.empty and p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        with pytest.raises(UnsupportedArgument, match="out= is not supported"):
            fn(*[cr.tensor(np.ones((3, 3)))] * len(required), out=np.empty((3, 3)))


@pytest.mark.parametrize("call", [
    lambda t: cr.concatenate([t, t], 0, None, np.float32), lambda t: cr.hstack([t, t], np.float32),
    lambda t: cr.average(t, 0, None, False, True), lambda t: cr.pad(t, 1, "constant", 3.0),
    lambda t: cr.argmax(t, 0, None, True),
], ids=["concatenate", "hstack", "average", "pad", "argmax"])
def test_parameters_numpy_takes_by_keyword_only_are_keyword_only(call):
    with pytest.raises(TypeError, match="positional"):
        call(cr.tensor(X))
