"""cr.profile: counted FLOPs against hand counts, saved bytes against the arrays actually held."""
import gc

import numpy as np
import pytest

import chainrule as cr
from tests.custom_functions import Square


def _t(shape, rng, requires_grad=True, dtype=np.float64):
    return cr.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=requires_grad)


def test_matmul_counts_2mkn_forward_and_4mkn_backward(rng):
    m, k, n = 3, 5, 7
    x, w = _t((m, k), rng), _t((k, n), rng)
    with cr.profile() as p:
        out = x @ w
        out.backward(cr.ones((m, n), dtype=cr.float64))
    calls, fwd, bwd, _ = p.ops["matmul"]
    assert (calls, fwd, bwd) == (3, 2 * m * k * n, 4 * m * k * n)
    assert p.forward_flops == 2 * m * k * n and p.backward_flops == 4 * m * k * n


def test_matmul_backward_skips_inputs_that_need_no_grad(rng):
    x, w = _t((4, 6), rng, requires_grad=False), _t((6, 2), rng)
    with cr.profile() as p:
        (x @ w).sum().backward()
    assert p.ops["matmul"][1:3] == [2 * 4 * 6 * 2, 2 * 4 * 6 * 2]


@pytest.mark.parametrize("spec,shapes,contraction", [
    ("ij,jk->ik", ((3, 4), (4, 5)), 3 * 4 * 5),
    ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5)), 2 * 3 * 4 * 5),
    ("i,i->", ((6,), (6,)), 6),
])
def test_einsum_counts_two_flops_per_multiply_add(rng, spec, shapes, contraction):
    xs = [_t(s, rng) for s in shapes]
    with cr.profile() as p:
        out = cr.einsum(spec, *xs)
        out.backward(cr.ones(out.shape, dtype=cr.float64))
    assert p.ops["einsum"][1] == 2 * contraction
    assert p.ops["einsum"][2] == 2 * 2 * contraction        # one einsum per input, same size


def test_elementwise_and_reduction_conventions(rng):
    x = _t((5, 6), rng)
    with cr.profile() as p:
        y = cr.exp(x)                  # 30: one per output element
        z = y * x                      # 30
        s = z.sum(axis=1)              # 30: one per input element
        m = cr.amax(x)                 # 30
        r = x.reshape(30)              # 0: shape op
    assert p.ops["exp"][1] == 30 and p.ops["multiply"][1] == 30
    assert p.ops["sum"][1] == 30 and p.ops["amax"][1] == 30 and p.ops["reshape"][1] == 0
    assert p.forward_flops == 120
    assert s.shape == (5,) and m.shape == () and r.shape == (30,)


def test_elementwise_backward_counts_the_rule_ops(rng):
    x = _t((4, 5), rng)
    with cr.profile() as p:
        y = cr.exp(x)
        y.backward(cr.ones((4, 5), dtype=cr.float64))
    assert p.backward_flops == 20               # g * out: one multiply per element
    assert p.ops["multiply"][2] == 20


def test_saved_bytes_equal_the_arrays_held_and_drop_after_backward(rng):
    x, w = _t((8, 16), rng), _t((16, 4), rng)
    with cr.profile() as p:
        h = x @ w                      # saves x and w
        y = cr.tanh(h)                 # saves its output
        loss = (y * y).sum()           # saves y once (x and y of multiply are the same array)
        held = x.nbytes + w.nbytes + y.nbytes
        assert p.saved_bytes == held
        loss.backward()
    assert p.saved_bytes == 0
    assert p.peak_saved_bytes == held


def test_retain_graph_keeps_the_bytes(rng):
    x = _t((10,), rng)
    with cr.profile() as p:
        y = cr.exp(x).sum()
        y.backward(retain_graph=True)
        assert p.saved_bytes == 80
        y.backward()
    assert p.saved_bytes == 0


def test_views_of_one_array_count_once(rng):
    w = _t((6, 6), rng)
    x = _t((3, 6), rng)
    with cr.profile() as p:
        a = x @ w
        b = x @ w.T                    # w.T is a view of w's array
    assert p.saved_bytes == x.nbytes + w.nbytes
    assert a.shape == b.shape == (3, 6)


def test_no_grad_saves_nothing(rng):
    x, w = _t((8, 16), rng), _t((16, 4), rng)
    with cr.profile() as p, cr.no_grad():
        y = cr.tanh(x @ w).sum()
    assert p.peak_saved_bytes == 0 and p.forward_flops > 0 and not y.requires_grad


def test_dropped_graph_releases_its_bytes(rng):
    x = _t((100,), rng)
    with cr.profile() as p:
        y = cr.exp(x)
        assert p.saved_bytes == 800
        del y
        gc.collect()
    assert p.saved_bytes == 0 and p.peak_saved_bytes == 800


def test_custom_function_saves_are_counted_and_freed(rng):
    x = _t((50,), rng)
    with cr.profile() as p:
        y = Square.apply(x).sum()
        assert p.saved_bytes == 400 and p.ops["Function"][3] == 400
        y.backward()
    assert p.saved_bytes == 0
    np.testing.assert_allclose(x.grad.data, 2 * x.data)
    with cr.profile() as q, cr.no_grad():
        Square.apply(x)
    assert q.peak_saved_bytes == 0


def test_table_and_phase_times(rng):
    x, w = _t((64, 64), rng), _t((64, 64), rng)
    with cr.profile() as p:
        cr.relu(x @ w).sum().backward()
    text = str(p)
    assert "matmul" in text and "relu" in text and "bwd FLOPs" in text and "saved bytes" in text
    assert f"{2 * 64 ** 3:,}" in text
    assert p.forward_time > 0 and p.backward_time > 0
    assert p.total_flops == p.forward_flops + p.backward_flops


def test_mlp_step_is_about_6nd(rng):
    d, width, n_tok = 16, 256, 32
    ws = [_t((d, width), rng, dtype=np.float32), _t((width, width), rng, dtype=np.float32),
          _t((width, width), rng, dtype=np.float32), _t((width, d), rng, dtype=np.float32)]
    x = cr.tensor(rng.standard_normal((n_tok, d)).astype(np.float32))
    with cr.profile() as p:
        h = x
        for w in ws:
            h = cr.relu(h @ w)
        (h * h).mean().backward()
    n = sum(w.size for w in ws)
    matmul_bwd = 4 * n * n_tok - 2 * n_tok * d * width     # no gradient for the data x
    assert p.ops["matmul"][1] == 2 * n * n_tok
    assert p.ops["matmul"][2] == matmul_bwd
    assert abs(p.total_flops / (6 * n * n_tok) - 1) < 0.05


def test_divide_keeps_its_operands_not_the_quotient(rng):
    x, y = _t((10,), rng), _t((10,), rng)
    with cr.profile() as p:
        q = x / y                       # x and y, as PyTorch's div: the quotient may change in place
        assert p.saved_bytes == 160 and p.ops["divide"][3] == 160
        r = x / 2.0                     # a constant divisor: x needs only it
        c = 3.0 / y                     # y, already held: counted once
        assert p.saved_bytes == 160
        q += 1
        (q.sum() + r.sum() + c.sum()).backward()
    np.testing.assert_allclose(x.grad.data, 1 / y.data + 0.5, rtol=1e-12)
    np.testing.assert_allclose(y.grad.data, -x.data / y.data ** 2 - 3 / y.data ** 2, rtol=1e-12)
    assert p.saved_bytes == 0
