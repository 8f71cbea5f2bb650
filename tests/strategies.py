"""Hypothesis strategies: small functions, not a configurable factory."""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import chainrule as cr


def broadcastable_pairs(max_dims: int = 3, max_side: int = 3):
    return mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=max_dims, max_side=max_side)


# (name, function) pairs that are smooth everywhere on [-1.5, 1.5]
SMOOTH_UNARY = [("tanh", cr.tanh), ("sin", cr.sin), ("exp", cr.exp), ("sigmoid", cr.sigmoid),
                ("square", cr.square), ("softplus", cr.softplus), ("arctan", cr.arctan),
                ("cos", cr.cos), ("erf", cr.erf)]
SMOOTH_BINARY = [("add", cr.add), ("subtract", cr.subtract), ("multiply", cr.multiply),
                 ("div_safe", lambda x, y: x / (1.5 + y * y)), ("hypot", lambda x, y: cr.sqrt(1 + x * x + y * y))]
REDUCE = [("sum0", lambda x: cr.sum(x, axis=0, keepdims=True)), ("mean", lambda x: cr.mean(x, axis=-1, keepdims=True)),
          ("softmax", lambda x: cr.softmax(x, axis=-1)), ("lse", lambda x: cr.logsumexp(x, axis=-1, keepdims=True)),
          ("flip", lambda x: cr.flip(x, 0)), ("T", lambda x: cr.transpose(cr.transpose(x)))]


@st.composite
def compositions(draw, min_ops: int = 2, max_ops: int = 6):
    """A random program of 2-6 ops over one input of shape (2, 3): returns (description, function)."""
    steps = []
    for _ in range(draw(st.integers(min_ops, max_ops))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce"]))
        if kind == "unary":
            steps.append(("u",) + draw(st.sampled_from(SMOOTH_UNARY)))
        elif kind == "binary":
            steps.append(("b",) + draw(st.sampled_from(SMOOTH_BINARY)))
        else:
            steps.append(("r",) + draw(st.sampled_from(REDUCE)))

    def program(x):
        vals = [x]
        for kind, _, fn in steps:
            if kind == "b":
                vals.append(fn(vals[-1], vals[0]))   # reuse the input: a DAG, not a chain
            else:
                vals.append(fn(vals[-1]))
        # the largest intermediate: exp(exp(exp(x))) ~ 1e38 makes central differences meaningless
        program.peak = max(float(np.max(np.abs(v.data))) for v in vals)
        return vals[-1]
    return " -> ".join(name for _, name, _ in steps), program


def arrays(rng: np.random.Generator, shape) -> cr.Tensor:
    return cr.tensor(rng.uniform(-1.5, 1.5, size=shape), dtype=cr.float64, requires_grad=True)


# ----- hooks fuzz (tests/autograd/test_hooks_fuzz.py) -----

def leaf_shape_sets(max_leaves: int = 3, max_dims: int = 3, max_side: int = 3):
    """1-3 leaf shapes with no zero-size dimension: sometimes mutually broadcastable, sometimes not."""
    n = st.integers(1, max_leaves)
    together = n.flatmap(lambda k: mutually_broadcastable_shapes(
        num_shapes=k, min_dims=0, max_dims=max_dims, min_side=1, max_side=max_side)).map(
        lambda s: list(s.input_shapes))
    apart = st.lists(st.lists(st.integers(1, max_side), max_size=max_dims).map(tuple),
                     min_size=1, max_size=max_leaves)
    return st.one_of(together, apart)


def grad_hooks():
    """A hook description: ("scale", c), ("shift", c), ("observe",), ("removed", c) (registered,
    then removed before backward) or ("dropped", c) (a scale hook removed between two backward
    passes). Constants are exact binary fractions."""
    return st.one_of(st.tuples(st.just("scale"), st.sampled_from([0.5, -2.0, 3.0])),
                     st.tuples(st.just("shift"), st.sampled_from([0.25, -1.0])),
                     st.just(("observe",)),
                     st.tuples(st.just("removed"), st.sampled_from([10.0])),
                     st.tuples(st.just("dropped"), st.sampled_from([0.5, 3.0])))


def post_accumulate_hooks(dropped: bool = True):
    """A post-accumulate-grad hook description (for a leaf): ("post_scale", c) / ("post_shift", c)
    (multiply / add ``c`` to ``t.grad`` in place), ("post_observe",) (record a copy of ``t.grad``),
    ("post_removed", c) (a scale hook registered, then removed before backward) or
    ("post_dropped", c) (a scale hook removed between two backward passes; only if ``dropped``).
    Constants are exact binary fractions."""
    kinds = [st.tuples(st.just("post_scale"), st.sampled_from([0.5, -2.0, 3.0])),
             st.tuples(st.just("post_shift"), st.sampled_from([0.25, -1.0])),
             st.just(("post_observe",)), st.tuples(st.just("post_removed"), st.sampled_from([10.0]))]
    if dropped:
        kinds.append(st.tuples(st.just("post_dropped"), st.sampled_from([0.5, 3.0])))
    return st.one_of(kinds)


def index_keys(shape: tuple):
    """A basic or advanced index for a tensor of ``shape`` (ndim >= 1) selecting at least one element:
    ("int", i), ("slice", start, stop, step), ("last", i) for x[..., i], ("array", (i, ...)) with
    repeats allowed."""
    n0, nl = shape[0], shape[-1]
    return st.one_of(
        st.tuples(st.just("int"), st.integers(-n0, n0 - 1)),
        st.integers(0, n0 - 1).flatmap(lambda a: st.tuples(
            st.just("slice"), st.just(a), st.integers(a + 1, n0), st.sampled_from([1, 2]))),
        st.tuples(st.just("last"), st.integers(-nl, nl - 1)),
        st.tuples(st.just("array"), st.lists(st.integers(0, n0 - 1), min_size=1, max_size=4).map(tuple)))
