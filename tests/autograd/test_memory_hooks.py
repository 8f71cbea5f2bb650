"""saved_tensors_hooks / save_as: called once per saved tensor; backward sees the unpacked value."""
import gc
import weakref

import numpy as np
import pytest

import chainrule as cr


def _counting_hooks(log, transform=lambda d: d):
    def pack(t):
        log.append(("pack", t.shape))
        return t.data.copy()

    def unpack(d):
        log.append(("unpack", d.shape))
        return cr.tensor(transform(d))
    return cr.saved_tensors_hooks(pack, unpack)


def test_pack_once_per_saved_tensor_unpack_once_per_use(rng):
    x = cr.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    w = cr.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    log = []
    with _counting_hooks(log):
        h = x @ w                      # saves x and w: 2 packs
        y = cr.exp(h)                  # saves its output: 1 pack
    assert [e[0] for e in log] == ["pack"] * 3
    y.sum().backward()
    assert [e[0] for e in log].count("unpack") == 3
    np.testing.assert_allclose(w.grad.data, x.data.T @ np.exp(x.data @ w.data))


def test_backward_sees_the_unpacked_value(rng):
    x = cr.tensor(rng.standard_normal(5), requires_grad=True)
    y = cr.tensor(rng.standard_normal(5), requires_grad=True)
    with _counting_hooks([], transform=lambda d: 10 * d):
        z = (x * y).sum()              # d/dx = y, so the gradient shows the unpacked 10*y
    z.backward()
    np.testing.assert_allclose(x.grad.data, 10 * y.data)
    np.testing.assert_allclose(y.grad.data, 10 * x.data)


def test_innermost_hooks_win_and_exit_restores(rng):
    x = cr.tensor(rng.standard_normal(3), requires_grad=True)
    outer, inner = [], []
    with _counting_hooks(outer):
        with _counting_hooks(inner):
            a = cr.sin(x)
        b = cr.cos(x)
    c = cr.tanh(x)
    assert len(inner) == 1 and len(outer) == 1
    (a + b + c).sum().backward()
    np.testing.assert_allclose(x.grad.data, np.cos(x.data) - np.sin(x.data) + 1 - np.tanh(x.data) ** 2)
    assert len(inner) == 2 and len(outer) == 2


def test_hooks_do_not_keep_the_original_array_alive(rng):
    x = cr.tensor(rng.standard_normal(1000).astype(np.float32), requires_grad=True)
    with cr.save_as(cr.float16), cr.profile() as p:
        h = cr.exp(x)                  # exp saves h (as float16)
        y = cr.sin(h)                  # sin saves h (as float16)
        ref = weakref.ref(h)
        del h
        gc.collect()
    assert ref() is None               # the graph holds only the float16 copies
    assert p.saved_bytes == 1000 * 2   # one float16 copy, although two ops saved h
    y.sum().backward()
    assert x.grad.dtype == np.float32


def test_in_place_change_is_still_detected(rng):
    x = cr.tensor(rng.standard_normal(3), requires_grad=True)
    with _counting_hooks([]):
        h = x * 1.0
        y = (h * h).sum()
    h.data += 1
    h._version += 1
    with pytest.raises(cr.GraphError, match="modified by an in-place operation"):
        y.backward()


def test_second_derivative_through_a_packed_leaf():
    x = cr.tensor([1.0, 2.0], dtype=cr.float64, requires_grad=True)
    with cr.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = (x * x * x).sum()
    (g,) = cr.autograd.grad(y, x, create_graph=True)
    (gg,) = cr.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.data, [3.0, 12.0])
    np.testing.assert_allclose(gg.data, [6.0, 12.0])


def test_saved_tensor_hooks_apply_to_custom_functions():
    from tests.custom_functions import Square
    calls = []

    def pack(t):
        calls.append("pack")
        return t.data.astype(np.float16)

    def unpack(obj):
        calls.append("unpack")
        return obj.astype(np.float64)

    x = cr.tensor([1.5, 2.25], dtype=cr.float64, requires_grad=True)
    with cr.saved_tensors_hooks(pack, unpack):
        y = Square.apply(x).sum()
    y.backward()
    assert calls == ["pack", "unpack"]
    np.testing.assert_array_equal(x.grad.data, [3.0, 4.5])     # exact in float16


@pytest.mark.parametrize("dtype,lo,hi", [(cr.float16, 1e-5, 2e-3), (cr.bfloat16, 1e-4, 2e-2)])
def test_save_as_accuracy_and_memory(rng, dtype, lo, hi):
    x = cr.tensor(rng.standard_normal((64, 32)).astype(np.float32))
    ws = [cr.tensor((rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32),
                    requires_grad=True) for _ in range(3)]

    def loss():
        h = x
        for w in ws:
            h = cr.tanh(h @ w)
        return (h * h).mean()

    with cr.profile() as full:
        loss().backward()
    ref = [w.grad.data.copy() for w in ws]
    for w in ws:
        w.grad = None
    with cr.save_as(dtype), cr.profile() as half:
        loss().backward()
    # parameters are kept as they are (alive anyway); x @ ws[0] keeps no ws[0]: x needs no gradient
    params = sum(w.nbytes for w in ws[1:])
    assert half.peak_saved_bytes - params == (full.peak_saved_bytes - params) // 2
    rel = max(np.abs(w.grad.data - r).max() / np.abs(r).max() for w, r in zip(ws, ref))
    assert lo < rel < hi                # rounding is visible, and bounded by the format's precision


def test_bad_arguments():
    with pytest.raises(TypeError, match="must be callables"):
        cr.saved_tensors_hooks(None, lambda t: t)
    with pytest.raises(TypeError, match="floating dtype"):
        cr.save_as(np.int32)
