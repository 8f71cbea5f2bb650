"""Views, in-place ops through them and tensor hooks inside ``cr.vmap`` (issue 26, items 1 and 2).

Every view kind (slice, step slice, reshape, ``.T``, diagonal, a view of a view) with every kind
of write through it (``*=``, ``+=`` of a batched value, ``__setitem__`` on the view), in every
composition (``vmap(grad)``, ``grad(vmap)``, ``vmap(jacfwd)``, ``vmap(jvp)``, nested ``vmap``,
``vmap(hessian)``), against the Python loop of ``cr.grad`` per example and against
``torch.func.vmap`` where torch is installed; hooks on batched tensors likewise.
"""
from __future__ import annotations

import numpy as np
import pytest

import chainrule as cr

W = np.arange(12.0).reshape(3, 4) / 10
X = np.random.default_rng(0).uniform(-1, 1, (3, 12))

VIEWS = {
    "slice": lambda y, lib: y[1:3],
    "step_slice": lambda y, lib: y[::2, 1::2],
    "reshape": lambda y, lib: y.reshape(12),
    "T": lambda y, lib: y.T,
    "diagonal": lambda y, lib: lib.diagonal(y),
    "view_of_view": lambda y, lib: y[1:][:, 1:3],
}


def _imul(v, x):
    v *= 10


def _iadd(v, x):
    v += x[0] * x[1]                 # a batched value: it differs per example


def _setitem(v, x):
    v[0] = 7 * x[0]                  # __setitem__ on the view


WRITES = {"imul": _imul, "iadd": _iadd, "setitem": _setitem}


def loss(view, write, lib=cr):
    weights = W if lib is cr else lib.tensor(W)

    def L(x):
        y = (x * 2).reshape(3, 4)
        v = VIEWS[view](y, lib)
        WRITES[write](v, x)
        return (y ** 2 * weights).sum() + (v ** 3).sum()
    return L


def per_example(f, xs):
    return np.stack([np.asarray(f(x)) for x in xs])


CASES = [(v, w) for v in VIEWS for w in WRITES]


@pytest.mark.parametrize("view, write", CASES)
def test_in_place_through_a_view_gives_the_base_its_gradient(view, write):
    L = loss(view, write)
    want = per_example(cr.grad(L), X)
    np.testing.assert_allclose(cr.vmap(cr.grad(L))(X), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cr.grad(lambda X: cr.vmap(L)(X).sum())(X), want, rtol=1e-12, atol=1e-12)
    xt = cr.tensor(X, requires_grad=True)
    cr.vmap(L)(xt).sum().backward()                          # a backward started after the vmap
    np.testing.assert_allclose(xt.grad.numpy(), want, rtol=1e-12, atol=1e-12)
    nested = cr.vmap(cr.vmap(cr.grad(L)))(np.stack([X, -X]))
    np.testing.assert_allclose(nested, np.stack([want, per_example(cr.grad(L), -X)]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("view, write", CASES)
def test_in_place_through_a_view_in_forward_mode(view, write):
    L = loss(view, write)
    want = per_example(cr.grad(L), X)
    np.testing.assert_allclose(cr.vmap(cr.jacfwd(L))(X), want, rtol=1e-12, atol=1e-12)
    T = np.random.default_rng(1).uniform(-1, 1, X.shape)
    _, tangents = cr.vmap(lambda x, t: cr.jvp(L, (x,), (t,)))(X, T)
    np.testing.assert_allclose(tangents, (want * T).sum(1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("view, write", [("slice", "imul"), ("diagonal", "iadd"), ("T", "setitem")])
def test_in_place_through_a_view_second_order(view, write):
    L = loss(view, write)
    np.testing.assert_allclose(cr.vmap(cr.hessian(L))(X), per_example(cr.hessian(L), X), rtol=1e-10, atol=1e-10)


def test_the_per_example_loop_is_right():
    # the reference the tests above compare with, against central differences
    L, x, eps = loss("view_of_view", "iadd"), X[0], 1e-6
    fd = [(L(x + eps * e) - L(x - eps * e)).item() / (2 * eps) for e in np.eye(12)]
    np.testing.assert_allclose(cr.grad(L)(x), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("view, write", CASES)
def test_in_place_through_a_view_matches_torch_func(view, write):
    torch = pytest.importorskip("torch")
    L, Lt, xt = loss(view, write), loss(view, write, torch), torch.tensor(X)
    np.testing.assert_allclose(cr.vmap(cr.grad(L))(X), torch.func.vmap(torch.func.grad(Lt))(xt).numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cr.vmap(cr.jacfwd(L))(X), torch.func.vmap(torch.func.jacfwd(Lt))(xt).numpy(),
                               rtol=1e-12, atol=1e-12)


def test_the_issue_reproducer():
    def L(x):
        y = x * 2
        v = y[1:3]
        v *= 10
        return (y ** 2).sum()
    np.testing.assert_allclose(cr.vmap(cr.grad(L))(np.ones((1, 4))), [[8.0, 800.0, 800.0, 8.0]])


def test_a_write_into_the_base_re_derives_its_views():
    def L(x):
        y = x * 2
        v = y[1:3]
        y *= x                        # v sees the write (its history is re-derived from y)
        return (v ** 2).sum() + y.sum()
    np.testing.assert_allclose(cr.vmap(cr.grad(L))(X[:, :4]), per_example(cr.grad(L), X[:, :4]), rtol=1e-12)


def test_a_saved_value_changed_through_a_view_raises_as_without_vmap():
    def L(x):
        y = x * 2
        z = y * y                     # saves y
        v = y[1:3]
        v *= 10
        return z.sum()
    with pytest.raises(cr.GraphError, match="modified by an in-place operation"):
        cr.grad(L)(X[0])
    with pytest.raises(cr.GraphError, match="modified by an in-place operation"):
        cr.vmap(cr.grad(L))(X)


def test_an_unbatched_value_with_a_graph_written_into_a_numpy_input():
    # the batch of a NumPy argument takes the history of what is written into it (a view or not)
    w0, xs = np.array([1.5, -0.5]), X[:, :4]

    def per(w, x):
        y = x * 2
        v = y[1:3]
        v *= w
        y *= w[0]
        return (y ** 2).sum()
    want = sum(cr.grad(per)(w0, cr.tensor(x)) for x in xs)
    np.testing.assert_allclose(cr.grad(lambda w: cr.vmap(lambda x: per(w, x))(xs).sum())(w0), want, rtol=1e-12)


def test_a_hook_on_a_view_written_in_place_is_left_behind():
    # as without vmap and in torch: the write regenerates the view, its old node's hook sees nothing
    def make(lib):
        def f(x):
            y = x * 2
            v = y[1:3]
            v.register_hook(lambda g: g * 100)
            v *= 10
            w = y[0:2]
            w.register_hook(lambda g: g * 7)
            return (y ** 2).sum() + (w ** 2).sum()
        return f
    xs = X[:, :4]
    want = per_example(cr.grad(make(cr)), xs)
    np.testing.assert_allclose(cr.vmap(cr.grad(make(cr)))(xs), want, rtol=1e-12)
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(torch.func.vmap(torch.func.grad(make(torch)))(torch.tensor(xs)).numpy(), want,
                               rtol=1e-12)


def test_an_in_place_op_on_a_view_returned_by_the_vmap():
    xt = cr.tensor(X[:, :4], requires_grad=True)
    out = cr.vmap(lambda x: (x * 2)[1:3])(xt)      # a view of the batch, written after the vmap
    out *= 3
    (out ** 2).sum().backward()
    want = np.zeros((3, 4))
    want[:, 1:3] = 72 * X[:, 1:3]
    np.testing.assert_allclose(xt.grad.numpy(), want, rtol=1e-12)


def test_real_imag_and_detach_views_under_vmap():
    def L(x):
        z = x * (1 + 2j)
        r = z.real
        r[1:3] *= 3                   # through .real
        z.imag = x * 5                # the .imag setter
        d = z.detach()
        d[0] *= 10                    # changes the value, not the gradient's path
        return (cr.abs(z) ** 2).sum()
    xs = X[:, :4]
    want = per_example(cr.grad(L), xs)
    np.testing.assert_allclose(cr.vmap(cr.grad(L))(xs), want, rtol=1e-12)
    np.testing.assert_allclose(cr.vmap(cr.jacfwd(L))(xs), want, rtol=1e-12)


def test_views_that_refuse_in_place_ops_refuse_them_under_vmap_too():
    def split_view(x):
        a, _ = cr.split(x * 2, 2)
        a *= 2
        return a.sum()

    def no_grad_view(x):
        y = x * 2
        with cr.no_grad():
            v = y[1:3]
        v *= 2
        return y.sum()
    for f, match in ((split_view, "split/unbind"), (no_grad_view, "under no_grad")):
        with pytest.raises(cr.GraphError, match=match):
            cr.grad(f)(X[0])
        with pytest.raises(cr.GraphError, match=match):
            cr.vmap(cr.grad(f))(X)


# ----- hooks -----
def hooked(lib):
    def f(x):
        x.register_hook(lambda g: g * 3)             # on the input
        y = lib.sin(x) * x
        y.register_hook(lambda g: g + x)             # a batched value in the hook
        z = y * y
        z.register_hook(lambda g: None)              # returns None: the gradient is unchanged
        y2 = y * 2
        y2.register_hook(lambda g: g * 1000).remove()
        return (z * y2).sum()
    return f


def test_hooks_fire_in_vmap_of_grad():
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g * 10)
        return (y ** 2).sum()
    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(cr.vmap(cr.grad(f))(xs), 80 * xs)          # the issue's reproducer
    want = per_example(cr.grad(hooked(cr)), X[:, :4])
    np.testing.assert_allclose(cr.vmap(cr.grad(hooked(cr)))(X[:, :4]), want, rtol=1e-12)
    nested = cr.vmap(cr.vmap(cr.grad(hooked(cr))))(np.stack([X[:, :4], X[:, 4:8]]))
    np.testing.assert_allclose(nested, np.stack([want, per_example(cr.grad(hooked(cr)), X[:, 4:8])]), rtol=1e-12)


def test_hooks_match_torch_func():
    torch = pytest.importorskip("torch")
    got = cr.vmap(cr.grad(hooked(cr)))(X[:, :4])
    np.testing.assert_allclose(got, torch.func.vmap(torch.func.grad(hooked(torch)))(torch.tensor(X[:, :4])).numpy(),
                               rtol=1e-12)


def test_hooks_fire_when_the_backward_runs_outside_the_vmap():
    # torch.func refuses these; the hook sees the batch as inside the vmap
    want = per_example(cr.grad(hooked(cr)), X[:, :4])
    np.testing.assert_allclose(cr.grad(lambda xs: cr.vmap(hooked(cr))(xs).sum())(X[:, :4]), want, rtol=1e-12)
    xt = cr.tensor(X[:, :4], requires_grad=True)
    cr.vmap(hooked(cr))(xt).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), want, rtol=1e-12)


def test_a_hook_sees_the_gradient_batched_and_may_return_it_unbatched():
    seen = []

    def f(x):
        y = x * 2
        y.register_hook(lambda g: seen.append((type(g), g.shape, g.sum())) or cr.ones(2, dtype=cr.float64))
        return (y ** 2).sum()
    xs = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_allclose(cr.vmap(cr.grad(f))(xs), np.full((3, 2), 2.0))   # every example's: ones
    (kind, shape, total), = seen
    assert kind is cr.BatchedTensor and shape == (2,) and isinstance(total, cr.BatchedTensor)


def test_hooks_and_second_order():
    f = hooked(cr)
    np.testing.assert_allclose(cr.vmap(cr.hessian(f))(X[:, :4]), per_example(cr.hessian(f), X[:, :4]), rtol=1e-10)


def test_what_hooks_on_batched_tensors_refuse():
    def retain(x):
        y = x * 2
        y.retain_grad()
        return y.sum()
    with pytest.raises(cr.VmapError, match="retain_grad"):
        cr.vmap(cr.grad(retain))(X)
    with pytest.raises(cr.VmapError, match="post_accumulate"):
        cr.vmap(lambda x: x.register_post_accumulate_grad_hook(print))(cr.tensor(X, requires_grad=True))
    with pytest.raises(cr.GraphError, match="does not require grad"):
        cr.vmap(lambda x: x.register_hook(print))(X)

    def other_level(x):                              # a gradient batched where y is not
        y = x * 2
        cr.vmap(lambda u: y.register_hook(lambda g: g * u))(np.ones(2))
        return (y ** 2).sum()
    with pytest.raises(cr.VmapError, match="hook .* batched at vmap level"):
        cr.vmap(cr.grad(other_level))(X)


# ----- a reshape that merges axes where the batch's memory is not laid out as one example's -----
# One example's ``(x * 2).reshape(-1)`` is a view; with the batch axis between the example's axes
# in memory (in_axes=1, or a transposed physical batch) the batch's reshape must copy: the copy is
# kept equal to its base at every write, so writes through it and reads of it are a view's.
XB = np.random.default_rng(2).uniform(-1, 1, (4, 2, 3))     # 4 examples of shape (2, 3)
LAYOUTS = {                                                # memory order of (example axes, batch)
    "in_axes_1": (np.ascontiguousarray(XB.transpose(1, 0, 2)), 1),   # (2, batch, 3)
    "in_axes_-1": (np.ascontiguousarray(XB.transpose(1, 2, 0)), -1),  # (2, 3, batch)
    "transposed": (np.ascontiguousarray(XB.transpose(1, 0, 2)).transpose(1, 0, 2), 0),  # (2, batch, 3)
    "transposed_F": (np.ascontiguousarray(XB.transpose(2, 0, 1)).transpose(1, 2, 0), 0),  # (3, batch, 2):
}                                                          # one example is F-ordered: its reshape copies


def examples(layout):
    """The examples as vmap sees them (their memory layout too), for the per-example loop."""
    xs, axis = LAYOUTS[layout]
    return list(np.moveaxis(xs, axis, 0))


def merged_loss(write):
    def L(x):
        y = x * 2
        v = y.reshape(-1)                 # merges the example's two axes
        WRITES[write](v, x[0])
        y[0, 0] = y[0, 0] * 3             # a write into the base: v must see it
        return (y ** 2 * W[:2, :3]).sum() + (v ** 3).sum()
    return L


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("write", WRITES)
def test_a_merging_reshape_of_a_batch_laid_out_otherwise_is_a_view(layout, write):
    xs, axis = LAYOUTS[layout]
    L = merged_loss(write)
    want = per_example(cr.grad(L), examples(layout))
    np.testing.assert_allclose(cr.vmap(cr.grad(L), in_axes=axis)(xs), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cr.grad(lambda a: cr.vmap(L, in_axes=axis)(a).sum())(xs),
                               np.moveaxis(want, 0, axis % 3), rtol=1e-12, atol=1e-12)
    T = np.random.default_rng(3).uniform(-1, 1, XB.shape)
    values, tangents = cr.vmap(lambda x, t: cr.jvp(L, (x,), (t,)), in_axes=(axis, 0))(xs, T)
    np.testing.assert_allclose(values, [L(x).item() for x in examples(layout)], rtol=1e-12)
    np.testing.assert_allclose(tangents, (want * T).sum((1, 2)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_merging_reshape_of_a_batch_laid_out_otherwise_reads_and_writes_values(layout):
    xs, axis = LAYOUTS[layout]

    def f(x):
        y = x * 2
        v = y.reshape(-1)
        first = v * 1                     # a read before any write
        v *= 10                           # reaches y
        y[1] += 1                         # reaches v
        return first, y, v
    got = cr.vmap(f, in_axes=axis)(xs)
    for g, w in zip(got, zip(*(f(x) for x in examples(layout)))):
        np.testing.assert_allclose(np.asarray(g.data), np.stack([np.asarray(t.data) for t in w]), rtol=1e-15)


def test_a_reshape_that_copies_for_one_example_too_stays_a_copy():
    # one example's y is laid out transposed (y = x.T * 2): its reshape copies, and a write
    # through that copy does not reach y, with or without vmap
    def L(x):
        y = x.T * 2
        v = y.reshape(-1)
        v *= 10
        return (y ** 2).sum() + v.sum()
    xs, axis = LAYOUTS["in_axes_1"]
    want = per_example(cr.grad(L), examples("in_axes_1"))
    np.testing.assert_allclose(cr.vmap(cr.grad(L), in_axes=axis)(xs), want, rtol=1e-12)
    np.testing.assert_allclose(want, 8 * XB + 20, rtol=1e-12)


def test_views_of_a_merging_reshape_copy_in_nested_vmap_and_second_order():
    def L(x):
        y = x * 2
        v = y.reshape(-1)
        w = v[1:4]                        # a view of the kept copy
        w *= 10
        u = v.reshape(3, 2)
        u[0] += x[0, 0]
        return (y ** 2).sum() + (v ** 3).sum() + (u * w[0]).sum()
    xs = np.ascontiguousarray(np.random.default_rng(4).uniform(-1, 1, (2, 5, 4, 3)))  # both batch
    want = np.stack([per_example(cr.grad(L), list(np.moveaxis(xs[:, i], 1, 0))) for i in range(5)])
    np.testing.assert_allclose(cr.vmap(cr.vmap(cr.grad(L), in_axes=1), in_axes=1)(xs), want, rtol=1e-12)
    np.testing.assert_allclose(cr.vmap(cr.hessian(L), in_axes=1)(xs[:, 0]),
                               per_example(cr.hessian(L), list(np.moveaxis(xs[:, 0], 1, 0))), rtol=1e-12)
