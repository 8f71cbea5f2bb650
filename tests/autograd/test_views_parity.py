"""Views and in-place operations, the rest of PyTorch's model: retain_grad follows an in-place
change, ops keep only what their gradients need (matmul), diagonal and same-shape reshape are
views, in-place on an output of split/unbind or on a view made under no_grad raises, forward-mode
tangents of views, and ``ctx.mark_dirty``. Each program runs in chainrule and, where installed,
in torch: both raise, or both give the same values."""
import numpy as np
import pytest
from views_lib import Lib

import chainrule as cr
from chainrule import forward_ad as fwAD


def _np(t):
    if t is None:
        return None
    return np.array(t.data if isinstance(t, cr.Tensor) else t.detach().numpy(), dtype=np.float64)


# ----- saved values: only what the gradients need -----
def matmul_operand_no_gradient_reads(L):          # c @ h keeps c (for h's gradient), not h
    x = L.t([[1., 2], [3, 4]], True)
    c = L.t([[1., -1], [2, 0.5]])
    h = x * 1
    z = c @ h
    h += 1
    (z * z).sum().backward()
    return x.grad


def matmul_operand_a_gradient_reads(L):           # h @ c keeps c for h's gradient: c changed raises
    x = L.t([[1., 2], [3, 4]], True)
    c = L.t([[1., -1], [2, 0.5]])
    z = (x * 1) @ c
    c += 1
    z.sum().backward()
    return x.grad


def matmul_vector_operands(L):                    # 1-D operands: ranks read off the cotangent
    x = L.t([1., 2, 3], True)
    m = L.t(np.arange(12.0).reshape(2, 3, 2) / 10, True)
    z = (x @ m).sum() + (m.swapaxes(1, 2) @ x).sum() + (x @ x) * 2
    z.backward()
    return np.concatenate([_np(x.grad), _np(m.grad).ravel()])


# ----- retain_grad follows the tensor -----
def retain_grad_after_in_place(L):
    x = L.t([1., 2, 3, 4], True)
    y = x * 1
    y.retain_grad()
    y.mul_(3) if L.torch is not None else y.__imul__(3)
    (y * y).sum().backward()
    return np.concatenate([_np(y.grad), _np(x.grad)])


def retain_grad_after_in_place_on_a_view(L):
    x = L.t([1., 2, 3, 4], True)
    y = x * 1
    y.retain_grad()
    v = y[0:2]
    v *= 3
    (y * y).sum().backward()
    return np.concatenate([_np(y.grad), _np(x.grad)])


def retain_grad_on_a_view_after_its_base_changes(L):
    x = L.t([1., 2, 3, 4], True)
    y = x * 1
    v = y[0:2]
    v.retain_grad()
    y *= 3
    (v.sum() * 2 + y.sum()).backward()
    return np.concatenate([_np(v.grad), _np(x.grad)])


# ----- more views -----
def in_place_on_a_diagonal(L):
    x = L.t(np.arange(1.0, 10.0), True)
    m = (x * 1).reshape(3, 3)
    d = m.diagonal()
    d *= 5
    (m * m).sum().backward()
    return np.concatenate([_np(m).ravel(), _np(x.grad)])


def in_place_on_an_offset_diagonal_view_of_exp(L):     # exp saved its output: raises
    x = L.t(np.arange(6.0).reshape(2, 3) / 6, True)
    y = x.exp()
    d = y.diagonal(1)
    d += 1
    y.sum().backward()
    return x.grad


def reshape_to_the_same_shape_is_a_view(L):
    x = L.t([1., 2, 3, 4], True)
    y = x * 1
    z = y.reshape(4)
    z *= 2
    (y * y).sum().backward()
    return np.concatenate([_np(y), _np(x.grad), [float(z is y)]])


def reshape_to_the_same_shape_without_grad(L):
    y = L.t([1., 2, 3, 4])
    z = y.reshape(4)
    z += 1
    return np.concatenate([_np(y), [float(z is y)]])


# ----- errors of multi-output views and no_grad views -----
def in_place_on_a_split_output(L):
    x = L.t([1., 2, 3, 4], True)
    p, q = L.split(x * 1, 2)
    p *= 2
    return x.grad


def in_place_on_an_unbind_output(L):
    x = L.t([[1., 2], [3, 4]], True)
    rows = (x * 1).unbind(0)
    rows[1] += 1
    return x.grad


def in_place_on_a_view_of_a_split_output(L):
    x = L.t([1., 2, 3, 4], True)
    p, q = L.split(x * 1, 2)
    w = p[0:1]
    w *= 2
    return x.grad


def in_place_on_a_split_output_without_grad(L):   # nothing requires grad: allowed
    y = L.t([1., 2, 3, 4])
    p, q = L.split(y, 2)
    q *= 2
    return y


def split_output_read_only_is_fine(L):
    x = L.t([1., 2, 3, 4], True)
    p, q = L.split(x * 1, 2)
    (p * q).sum().backward()
    return x.grad


def in_place_on_a_no_grad_view(L):
    x = L.t([1., 2, 3, 4], True)
    y = x * 1
    with L.no_grad():
        v = y[0:2]
    v *= 2
    return y


def in_place_on_a_no_grad_view_by_a_tensor_that_requires_grad(L):
    w = L.t([1., 2.], True)
    y = L.t([1., 2, 3, 4])
    with L.no_grad():
        v = y[0:2]
    v *= w
    return y


def in_place_on_a_no_grad_view_under_no_grad(L):
    x = L.t([1., 2, 3, 4], True)
    y = x * 1
    with L.no_grad():
        v = y[0:2]
    with L.no_grad():
        v *= 2
    (y * y).sum().backward()
    return np.concatenate([_np(y), _np(x.grad)])


def a_no_grad_view_is_a_leaf_that_requires_grad(L):   # PyTorch's rule, kept for parity: its
    x = L.t([1., 2, 3, 4], True)                       # gradient goes nowhere
    y = x * 1
    with L.no_grad():
        v = y[0:2]
    (v * v).sum().backward()
    return [float(v.requires_grad), float(v.is_leaf), float(x.grad is None), float(v.grad is None)]


# ----- forward mode -----
def tangent_of_a_view_after_in_place(L):
    fw = L.fw()
    with fw.dual_level():
        xd = fw.make_dual(L.t([1., 2, 3, 4]), L.t([1., 10, 100, 1000]))
        y = xd * 1
        v = y[0:2]
        v *= 10
        return np.concatenate([_np(fw.unpack_dual(y).tangent), _np(fw.unpack_dual(v).tangent)])


def tangent_enters_a_base_through_its_view(L):
    fw = L.fw()
    with fw.dual_level():
        xd = fw.make_dual(L.t([1., 2, 3, 4]), L.t([1., 10, 100, 1000]))
        y = L.t([0., 0, 0, 0])
        v = y[1:3]
        v += xd[0:2] * 2
        return _np(fw.unpack_dual(y).tangent)


def tangent_of_a_view_after_its_base_changes(L):
    fw = L.fw()
    with fw.dual_level():
        xd = fw.make_dual(L.t([1., 2, 3, 4]), L.t([1., 10, 100, 1000]))
        y = xd * 1
        v = y.reshape(2, 2)[1]
        y *= 3
        return _np(fw.unpack_dual(v).tangent)


# ----- ctx.mark_dirty -----
def _doubler(L):
    class Double(L.function()):
        @staticmethod
        def forward(ctx, a):
            a *= 2
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 2
    return Double


def mark_dirty_rebases_the_input(L):
    x = L.t([1., 2, 3], True)
    y = x * 1
    z = _doubler(L).apply(y)
    (y * y).sum().backward()
    return np.concatenate([_np(y), _np(x.grad), [float(z is y)]])


def mark_dirty_on_a_view_rewrites_its_base(L):
    x = L.t([1., 2, 3], True)
    y = x * 1
    _doubler(L).apply(y[0:2])
    (y * y).sum().backward()
    return np.concatenate([_np(y), _np(x.grad)])


def mark_dirty_on_a_leaf_that_requires_grad(L):
    x = L.t([1., 2, 3], True)
    _doubler(L).apply(x)
    return x


def mark_dirty_after_a_save(L):            # exp saved y; the Function changed it: stale, raises
    x = L.t([1., 2, 3], True)
    y = x.exp()
    _doubler(L).apply(y)
    y.sum().backward()
    return x.grad


PROGRAMS = [
    matmul_operand_no_gradient_reads, matmul_operand_a_gradient_reads, matmul_vector_operands,
    retain_grad_after_in_place, retain_grad_after_in_place_on_a_view,
    retain_grad_on_a_view_after_its_base_changes, in_place_on_a_diagonal,
    in_place_on_an_offset_diagonal_view_of_exp, reshape_to_the_same_shape_is_a_view,
    reshape_to_the_same_shape_without_grad, in_place_on_a_split_output, in_place_on_an_unbind_output,
    in_place_on_a_view_of_a_split_output, in_place_on_a_split_output_without_grad,
    split_output_read_only_is_fine, in_place_on_a_no_grad_view,
    in_place_on_a_no_grad_view_by_a_tensor_that_requires_grad, in_place_on_a_no_grad_view_under_no_grad,
    a_no_grad_view_is_a_leaf_that_requires_grad, tangent_of_a_view_after_in_place,
    tangent_enters_a_base_through_its_view, tangent_of_a_view_after_its_base_changes,
    mark_dirty_rebases_the_input, mark_dirty_on_a_view_rewrites_its_base,
    mark_dirty_on_a_leaf_that_requires_grad, mark_dirty_after_a_save,
]

RAISES = {   # what chainrule's error says
    "matmul_operand_a_gradient_reads": "modified in place after it was saved",
    "in_place_on_an_offset_diagonal_view_of_exp": "modified by an in-place operation",
    "in_place_on_a_split_output": "returned by split/unbind",
    "in_place_on_an_unbind_output": "returned by split/unbind",
    "in_place_on_a_view_of_a_split_output": "returned by split/unbind",
    "in_place_on_a_no_grad_view": "created under no_grad",
    "in_place_on_a_no_grad_view_by_a_tensor_that_requires_grad": "created under no_grad",
    "mark_dirty_on_a_leaf_that_requires_grad": "a leaf tensor that requires grad",
    "mark_dirty_after_a_save": "modified by an in-place operation",
}

EXPECTED = {   # by hand
    "matmul_operand_no_gradient_reads": None,      # torch's value only
    "retain_grad_after_in_place": [6., 12, 18, 24, 18, 36, 54, 72],
    "retain_grad_after_in_place_on_a_view": [6., 12, 6, 8, 18, 36, 6, 8],
    "retain_grad_on_a_view_after_its_base_changes": [2., 2, 9, 9, 3, 3],
    "in_place_on_a_diagonal": [5., 2, 3, 4, 25, 6, 7, 8, 45, 50, 4, 6, 8, 250, 12, 14, 16, 450],
    "reshape_to_the_same_shape_is_a_view": [2., 4, 6, 8, 8, 16, 24, 32, 0],
    "reshape_to_the_same_shape_without_grad": [2., 3, 4, 5, 0],
    "split_output_read_only_is_fine": [3., 4, 1, 2],
    "in_place_on_a_no_grad_view_under_no_grad": [2., 4, 3, 4, 4, 8, 6, 8],
    "a_no_grad_view_is_a_leaf_that_requires_grad": [1., 1, 1, 1],
    "tangent_of_a_view_after_in_place": [10., 100, 100, 1000, 10, 100],
    "tangent_enters_a_base_through_its_view": [0., 2, 20, 0],
    "tangent_of_a_view_after_its_base_changes": [300., 3000],
    "mark_dirty_rebases_the_input": [2., 4, 6, 8, 16, 24, 1],
    "mark_dirty_on_a_view_rewrites_its_base": [2., 4, 3, 8, 16, 6],
}


def _value(got):
    if isinstance(got, list) and all(isinstance(g, float) for g in got):
        return np.asarray(got)
    return _np(got) if hasattr(got, "shape") and not isinstance(got, np.ndarray) else np.asarray(got)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_views_in_place_programs(program):
    name = program.__name__
    if name in RAISES:
        with pytest.raises(cr.GraphError, match=RAISES[name]):
            program(Lib())
        return
    got = _value(program(Lib()))
    if EXPECTED.get(name) is not None:
        np.testing.assert_allclose(got, EXPECTED[name], rtol=1e-12)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_views_in_place_programs_match_torch(program):
    torch = pytest.importorskip("torch")
    try:
        want = _value(program(Lib(torch)))
    except RuntimeError:
        assert program.__name__ in RAISES, "torch raises here, chainrule does not expect to"
        with pytest.raises(cr.GraphError):
            program(Lib())
        return
    assert program.__name__ not in RAISES, "chainrule raises here, torch does not"
    np.testing.assert_allclose(_value(program(Lib())), want, rtol=1e-12)


def test_mark_dirty_needs_the_input_returned():
    class Forgets(cr.Function):
        @staticmethod
        def forward(ctx, a):
            a *= 2
            ctx.mark_dirty(a)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(cr.GraphError, match="marked dirty .* was not returned"):
        Forgets.apply(cr.tensor([1.0, 2.0], requires_grad=True) * 1)


def test_mark_dirty_under_forward_mode_takes_the_jvp():
    with fwAD.dual_level():
        xd = fwAD.make_dual(cr.tensor([1.0, 2.0]), cr.tensor([1.0, 1.0]))
        y = xd * 1
        _doubler(Lib()).apply(y)
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.data, [2.0, 2.0])   # not 4: forward's
        np.testing.assert_allclose(y.data, [2.0, 4.0])                           # own *= is not counted


def test_diagonal_is_a_writable_view_with_numpys_values():
    m = cr.tensor(np.arange(24.0).reshape(2, 3, 4))
    for args in [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, 0, 2)]:
        np.testing.assert_array_equal(m.diagonal(*args).data, np.diagonal(m.data, *args))
    d = m.diagonal(1, 1, 2)
    d[...] = -1
    assert m._version == 1 and m.data[0, 0, 1] == -1 and m.data[1, 2, 3] == -1
    with pytest.raises(cr.ShapeError, match="diagonal: needs at least 2 dimensions"):
        cr.diagonal(cr.tensor([1.0, 2.0]))
