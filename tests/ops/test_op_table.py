"""What the op table declares besides the rules: names seen by observers, errors raised inside rules,
accumulation dtypes and autocast policies."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual
from chainrule.errors import DTypeError, GraphError, ShapeError
from tests.op_specs import OP_SPECS


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
    prim = cr.numpy.defprim("boom_test_only", np.negative, rules=(rule,))
    boom.fn = lambda x: cr.numpy.apply(prim, (x,))
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
PRIMS = list(cr.PRIMITIVES.values())
ROOT = Path(__file__).resolve().parents[2]

# No field of the table says which elementwise functions overflow or lose their digits in 16 bits:
# these are the ones of PyTorch's autocast-to-float32 list (exp, log, pow, reciprocal, softplus,
# sinh, cosh, tan, asin, acos, erfinv, ...) that chainrule has.
ELEMENTWISE_FLOAT32 = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "reciprocal", "power",
                       "softplus", "sinh", "cosh", "tan", "arcsin", "arccos", "erfinv"}


def calls(prim, module: str) -> bool:
    """Whether the primitive's forward calls NumPy's or SciPy's ``module`` (linalg, fft) itself."""
    forward = prim.forward
    if not hasattr(forward, "__code__"):       # NumPy's own function (np.linalg.inv) or a ufunc
        return module in getattr(forward, "__module__", "").split(".")
    return module in forward.__code__.co_names


def test_the_policies_have_three_values():
    assert {p.autocast for p in PRIMS} == {"float32", "low", "input"}


def test_lapack_runs_in_float32_and_only_it_among_the_non_accumulating():
    """A factorisation or solve (LAPACK has no 16-bit routines) runs in float32 under autocast; an op
    that neither calls LAPACK nor accumulates is float32 only if it is an elementwise function."""
    lapack = {p.name for p in PRIMS if calls(p, "linalg")}
    assert len(lapack) >= 15 and all(cr.PRIMITIVES[n].kind == "matmul" for n in lapack)
    assert {p.name for p in PRIMS if p.autocast == "float32" and not p.accumulate
            and p.kind != "elementwise"} == lapack
    assert not any(cr.PRIMITIVES[n].accumulate for n in lapack)


def test_what_sums_accumulates_in_float32():
    """Sums, products and softmax accumulate (what selects, amax/amin with their tie rule, does not);
    contractions accumulate and run in the low dtype; nothing else accumulates."""
    sums = {p.name for p in PRIMS if p.kind in ("reduction", "softmax") and p.decide is None}
    contractions = {p.name for p in PRIMS if p.kind == "matmul" and not calls(p, "linalg") and not calls(p, "fft")}
    assert {"sum", "cumprod", "softmax_cross_entropy"} <= sums and {"matmul", "einsum"} <= contractions
    assert {p.name for p in PRIMS if p.accumulate} == sums | contractions
    assert {p.name for p in PRIMS if p.autocast == "low"} == contractions
    assert all(cr.PRIMITIVES[n].autocast == "float32" for n in sums)


def test_ffts_run_in_the_input_dtype():
    """NumPy's FFT (pocketfft) computes in the input's precision: no cast, no accumulation flag."""
    ffts = [p for p in PRIMS if calls(p, "fft")]
    assert {"fftn", "rfftn", "irfftn"} <= {p.name for p in ffts}
    assert {(p.autocast, p.accumulate) for p in ffts} == {("input", False)}


def test_elementwise_functions_in_float32():
    assert {p.name for p in PRIMS if p.kind == "elementwise" and p.autocast == "float32"} == ELEMENTWISE_FLOAT32
    assert not any(p.autocast != "input" for p in PRIMS if p.kind in ("discrete", "shape"))


def test_the_precision_docs_state_the_table():
    """docs/precision.md's autocast table: the low row is the low ops, the float32 row names only
    float32 ops."""
    text = (ROOT / "docs" / "precision.md").read_text()

    def row(title):
        cell = re.search(rf"^\| {title} \| (.*) \|$", text, re.M).group(1).split(":")[-1]
        return {n.strip() for n in re.split(r"[,/]", re.sub(r"\([^)]*\)", "", cell))}
    assert row("low dtype") == {p.name for p in PRIMS if p.autocast == "low"}
    assert len(row("float32")) > 10
    assert {n: cr.PRIMITIVES[n].autocast for n in row("float32")} == dict.fromkeys(row("float32"), "float32")


@pytest.mark.parametrize("name, field, value, check", [
    ("solve", "autocast", "input", test_lapack_runs_in_float32_and_only_it_among_the_non_accumulating),
    ("correlate", "autocast", "float32", test_lapack_runs_in_float32_and_only_it_among_the_non_accumulating),
    ("tanh", "autocast", "float32", test_elementwise_functions_in_float32),
    ("amax", "accumulate", True, test_what_sums_accumulates_in_float32),
    ("cumsum", "accumulate", False, test_what_sums_accumulates_in_float32),
    ("einsum", "autocast", "float32", test_what_sums_accumulates_in_float32),
    ("rfftn", "autocast", "float32", test_ffts_run_in_the_input_dtype),
    ("reshape", "autocast", "low", test_elementwise_functions_in_float32),
    ("cholesky", "autocast", "input", test_the_precision_docs_state_the_table),
])
def test_a_wrong_policy_fails_its_check(monkeypatch, name, field, value, check):
    monkeypatch.setattr(cr.PRIMITIVES[name], field, value)
    with pytest.raises(AssertionError):
        check()


@pytest.mark.parametrize("spec", [s for s in OP_SPECS if cr.PRIMITIVES[s.name].accumulate], ids=str)
def test_accumulating_primitives_compute_16_bit_in_float32_and_round_once(spec, rng):
    xs = [x.data.astype(cr.bfloat16) for x in spec.sample(rng)]
    got = spec.fn(*[cr.tensor(x) for x in xs]).data
    want = spec.fn(*[cr.tensor(x.astype(np.float32)) for x in xs]).data.astype(cr.bfloat16)
    assert got.dtype == cr.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


# ----- the README's counts -----
def test_the_readme_counts_the_op_table():
    """README.md's op counts are the table's (of a fresh `import chainrule`: docs and doctests
    declare primitives of their own), so a new primitive fails here until the README says so."""
    count = ("import chainrule as cr; P = cr.PRIMITIVES.values(); print(len(P), "
             "sum(p.differentiable_out for p in P), sum(p.differentiable_out and p.complex is not None for p in P))")
    counts = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True, check=True).stdout.split()
    said = re.search(r"(\d+) primitives \((\d+) differentiable, (\d+) of them with complex derivatives\)",
                     (ROOT / "README.md").read_text())
    assert said, "README.md no longer states the op table's counts"
    assert list(said.groups()) == counts, ("README.md should say: {} primitives ({} differentiable, {} of them "
                                           "with complex derivatives)".format(*counts))
