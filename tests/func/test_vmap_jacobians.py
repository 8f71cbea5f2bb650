"""The VJP and JVP rules with batched cotangents and tangents: ``jacrev`` (vmap of the VJP over
the output basis) and ``jacfwd`` (vmap of the JVP over the input basis) of every op-table row,
each one batched pass, agree with each other and with one VJP per row."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import chainrule as cr
from tests.op_specs import OP_SPECS


@pytest.mark.parametrize("spec", OP_SPECS, ids=str)
def test_batched_jacobians_agree_with_row_by_row_vjps(spec, rng):
    xs = [x.detach().numpy() for x in spec.sample(rng)]
    if np.asarray(spec.fn(*xs)).dtype != np.float64:
        pytest.skip("the transforms differentiate float16/32/64 outputs; this row casts to another dtype")
    argnums = tuple(range(len(xs)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # no fallback to one pass per basis vector
        rev = cr.jacrev(spec.fn, argnums=argnums)(*xs)
        fwd = cr.jacfwd(spec.fn, argnums=argnums)(*xs)
    out, vjp_fn = cr.vjp(spec.fn, *xs)
    out = np.asarray(out)
    rows = [vjp_fn(e.reshape(out.shape)) for e in np.eye(out.size)]
    for i, x in enumerate(xs):
        expected = np.stack([np.asarray(r[i]) for r in rows]).reshape(out.shape + x.shape)
        np.testing.assert_allclose(np.asarray(rev[i]), expected, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.asarray(fwd[i]), expected, rtol=1e-8, atol=1e-10)
