"""Every primitive's batching rule, checked over the op table: each op under ``cr.vmap`` equals a
Python loop of it over the batch, for several ``in_axes`` (batch first, batch last, unbatched
arguments), and the gradient through the batched op equals the loop's."""
from __future__ import annotations

import numpy as np
import pytest

import chainrule as cr
from tests.op_specs import COMPLEX_SPECS, NONDIFF_SPECS, OP_SPECS

B = 3


def _in_axes(spec):
    n = len(spec.shapes)
    yield (0,) * n
    yield (-1,) * n
    if n > 1:
        yield (None,) + (0,) * (n - 1)
        yield (0,) * (n - 1) + (None,)


# ops whose result's shape (or dtype) depends on the values: under vmap they raise VmapError (the
# last test) instead of batching, so the value tests skip them
DATA_DEPENDENT = {"unique", "unique-axis", "unique_all", "unique_values", "intersect1d", "setdiff1d", "union1d",
                  "setxor1d", "trim_zeros", "roots", "real_if_close"}

# NumPy's in-place functions, whose rows write the other inputs into a copy of the first: with the
# first unbatched, the copy is unbatched too, and writing a batched value into it is an error (as in
# PyTorch; the last test)
WRITES_INTO_FIRST = {"put", "put_along_axis", "putmask", "place", "fill_diagonal", "copyto"}


def _writes_batched_into_unbatched(spec, axes):
    return str(spec) in WRITES_INTO_FIRST and axes[0] is None and any(a is not None for a in axes[1:])


CASES = [pytest.param(spec, axes, id=f"{spec}-{'-'.join(map(str, axes))}")
         for spec in OP_SPECS + COMPLEX_SPECS if str(spec) not in DATA_DEPENDENT for axes in _in_axes(spec)
         if not _writes_batched_into_unbatched(spec, axes)]


def _batch(spec, axes, rng):
    """(examples, args): B sampled examples, and vmap's arguments (unbatched ones from example 0)."""
    examples = [spec.sample(rng) for _ in range(B)]
    for ex in examples[1:]:
        for i, a in enumerate(axes):
            if a is None:
                ex[i] = examples[0][i]
    args = [examples[0][i] if a is None else
            cr.tensor(np.stack([ex[i].data for ex in examples], axis=a), requires_grad=True)
            for i, a in enumerate(axes)]
    return examples, args


def _value(t):
    return np.asarray(t.detach() if isinstance(t, cr.Tensor) else t)


@pytest.mark.parametrize("spec, axes", CASES)
def test_batching_rule_matches_a_loop(spec, axes, rng):
    examples, args = _batch(spec, axes, rng)
    expected = np.stack([_value(spec.fn(*ex)) for ex in examples])
    got = cr.vmap(spec.fn, in_axes=axes)(*args)
    assert isinstance(got, cr.Tensor) and not isinstance(got, cr.BatchedTensor)
    np.testing.assert_allclose(_value(got), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("spec, axes", [c for c in CASES if not c.values[0].complex])
def test_gradient_through_a_batched_op_matches_the_loop(spec, axes, rng):
    examples, args = _batch(spec, axes, rng)
    out = cr.vmap(spec.fn, in_axes=axes)(*args)
    weights = rng.standard_normal(out.shape)
    (out * weights).sum().backward()
    loop_args = [[x.detach().requires_grad_() for x in ex] for ex in examples]
    for i, a in enumerate(axes):                        # unbatched: one tensor shared by all examples
        if a is None:
            for ex in loop_args[1:]:
                ex[i] = loop_args[0][i]
    total = sum((spec.fn(*ex) * cr.tensor(w)).sum() for ex, w in zip(loop_args, weights))
    total.backward()
    for i, (x, a) in enumerate(zip(args, axes)):
        if a is None:
            expected = loop_args[0][i].grad
        else:
            expected = np.stack([np.zeros(ex[i].shape) if ex[i].grad is None else ex[i].grad.data
                                 for ex in loop_args], axis=a)
        got = np.zeros(x.shape) if x.grad is None else x.grad.data
        np.testing.assert_allclose(got, np.zeros(x.shape) if expected is None else _value(expected),
                                   rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(NONDIFF_SPECS))
def test_nondifferentiable_ops_batch(name, rng):
    xs = rng.uniform(-2, 2, (B, 3, 4))
    fn = NONDIFF_SPECS[name]
    expected = np.stack([_value(fn(cr.tensor(x))) for x in xs])
    np.testing.assert_array_equal(_value(cr.vmap(fn)(cr.tensor(xs))), expected)


def test_every_primitive_has_a_batching_rule():
    missing = sorted(name for name, p in cr.PRIMITIVES.items() if p.batch is None)
    assert not missing, f"primitives without a batching rule: {missing}"


@pytest.mark.parametrize("spec", [pytest.param(s, id=f"{s}-{'complex' if s.complex else 'real'}")
                                  for s in OP_SPECS + COMPLEX_SPECS if str(s) in DATA_DEPENDENT])
def test_value_dependent_ops_raise_under_vmap(spec, rng):
    _, args = _batch(spec, (0,) * len(spec.shapes), rng)
    with pytest.raises(cr.VmapError, match="depend"):
        cr.vmap(spec.fn)(*args)


@pytest.mark.parametrize("spec", [s for s in OP_SPECS if str(s) in WRITES_INTO_FIRST and len(s.shapes) > 1], ids=str)
def test_writing_a_batched_value_into_an_unbatched_copy_raises(spec, rng):
    axes = (None,) + (0,) * (len(spec.shapes) - 1)
    _, args = _batch(spec, axes, rng)
    with pytest.raises(cr.VmapError, match="not batched"):
        cr.vmap(spec.fn, in_axes=axes)(*args)
