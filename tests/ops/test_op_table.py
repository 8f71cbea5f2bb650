"""What the op table declares besides the rules: names seen by observers, errors raised inside rules,
accumulation dtypes and autocast policies."""
import numpy as np
import pytest
from op_specs import OP_SPECS

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual
from chainrule.errors import DTypeError, GraphError, ShapeError


# ----- every op reports its own name -----
def test_argmin_and_argsort_report_their_own_names(rng):
    x = cr.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    with cr.profile() as p:
        cr.argmax(x), cr.argmin(x, axis=0), cr.argsort(x, axis=1)
    assert {"argmax", "argmin", "argsort"} <= set(p.ops)
    assert [p.ops[n][0] for n in ("argmax", "argmin", "argsort")] == [1, 1, 1]
    np.testing.assert_array_equal(cr.argsort(x).data, np.argsort(x.data, kind="stable"))
    assert int(cr.argmin(x.data.tolist())) == int(np.argmin(x.data))


def test_gradcheck_names_argmin_at_a_tie():
    x = cr.tensor([0.5, 0.5 + 1e-9, 2.0], dtype=cr.float64, requires_grad=True)
    with pytest.raises(ValueError, match="'argmin'"):
        cr.gradcheck(lambda v: v[cr.argmin(v)] * 2, [x])


# ----- an error inside a rule names the op and the mode -----
@pytest.fixture
def boom():
    """A primitive whose rules raise ``boom.error``."""
    def rule(g, out, x):
        raise boom.error
    prim = cr.ops.defprim("boom_test_only", np.negative, rules=(rule,))
    boom.fn = lambda x: cr.ops.apply(prim, (x,))
    yield boom
    del cr.PRIMITIVES["boom_test_only"]


@pytest.mark.parametrize("error, cls, message", [
    (ShapeError("inner"), ShapeError, "inner"),           # chainrule's errors keep their class
    (GraphError("inner"), GraphError, "inner"),
    (ValueError("inner"), ShapeError, "inner"),           # NumPy's: chainrule's, still ValueError
    (TypeError("inner"), DTypeError, "inner"),
    (KeyError("inner"), GraphError, "KeyError: 'inner'"),
])
def test_an_error_in_a_rule_names_the_op(boom, error, cls, message):
    boom.error = error
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(cls) as info:
        boom.fn(x).sum().backward()
    assert str(info.value) == f"backward of 'boom_test_only': {message}"
    assert info.value.__cause__ is error
    with pytest.raises(cls) as info, dual_level():
        boom.fn(make_dual(cr.tensor([1.0, 2.0]), cr.tensor([1.0, 1.0])))
    assert str(info.value) == f"forward-mode derivative of 'boom_test_only': {message}"


def test_a_real_rule_error_names_its_op():
    x = cr.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    with pytest.raises(ValueError, match=r"^backward of 'logdet': slogdet: .* singular"):
        cr.linalg.slogdet(x).logabsdet.backward()


def test_a_custom_function_error_is_the_users_own():
    class Bad(cr.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise KeyError("mine")
    with pytest.raises(KeyError, match="mine"):
        Bad.apply(cr.tensor([1.0], requires_grad=True)).sum().backward()


# ----- precision policy, declared per primitive -----
ACCUMULATE = {"sum", "prod", "logsumexp", "cumsum", "cumprod", "matmul", "linear", "einsum",
              "softmax", "log_softmax", "softmax_cross_entropy"}
AUTOCAST_FLOAT32 = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "reciprocal", "power",
                    "softplus", "sinh", "cosh", "tan", "arcsin", "arccos", "sum", "prod", "cumsum",
                    "cumprod", "logsumexp", "softmax", "log_softmax", "softmax_cross_entropy", "inv",
                    "solve", "det", "cholesky", "eig", "eigh", "eigvals",
                    "eigvalsh", "eigvalsh_vjp", "logdet", "matrix_exp", "pinv", "qr", "solve_triangular",
                    "svd", "svdvals", "svdvals_vjp", "erfinv"}


def test_the_declared_policies():
    prims = cr.PRIMITIVES.values()
    assert {p.name for p in prims if p.accumulate} == ACCUMULATE
    assert {p.name for p in prims if p.autocast == "float32"} == AUTOCAST_FLOAT32
    assert {p.name for p in prims if p.autocast == "low"} == {"matmul", "linear", "einsum"}
    assert {p.autocast for p in prims} == {"float32", "low", "input"}


@pytest.mark.parametrize("spec", [s for s in OP_SPECS if cr.PRIMITIVES[s.name].accumulate], ids=str)
def test_accumulating_primitives_compute_16_bit_in_float32_and_round_once(spec, rng):
    xs = [x.data.astype(cr.bfloat16) for x in spec.sample(rng)]
    got = spec.fn(*[cr.tensor(x) for x in xs]).data
    want = spec.fn(*[cr.tensor(x.astype(np.float32)) for x in xs]).data.astype(cr.bfloat16)
    assert got.dtype == cr.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
