"""Recurrent layers: checked against torch in float64 (outputs, final states, input and parameter
gradients), gradchecked in both modes and to second order on tiny instances, init and errors."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

RTOL, ATOL = 1e-10, 1e-12


def _ours_and_torch(torch, kind, *args, **kwargs):
    """The same layer twice: torch's (float64, seeded) and ours with torch's weights loaded."""
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(*args, **kwargs, dtype=torch.float64)
    ours = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU, "RNNCell": RNNCell, "LSTMCell": LSTMCell,
            "GRUCell": GRUCell}[kind](*args, **kwargs, dtype=cr.float64)
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)
    assert [tuple(v.shape) for v in ours.state_dict().values()] == [tuple(v.shape) for v in sd.values()]
    ours.load_state_dict({k: v.detach().numpy() for k, v in sd.items()})
    return ours, theirs


def _flat(out):
    return [t for t in (out if isinstance(out, tuple) else (out,))
            for t in (t if isinstance(t, tuple) else (t,))]


def _check_against_torch(torch, rng, ours, theirs, inputs, hx_is_tuple=False):
    """Forward both on ``inputs`` (arrays; the first is x, the rest the states), pull back random
    cotangents from every output, compare outputs, input gradients and parameter gradients."""
    ci = [cr.tensor(a, requires_grad=True) for a in inputs]
    ti = [torch.tensor(a, requires_grad=True) for a in inputs]
    if len(inputs) == 1:
        c_out, t_out = ours(ci[0]), theirs(ti[0])
    elif hx_is_tuple:
        c_out, t_out = ours(ci[0], tuple(ci[1:])), theirs(ti[0], tuple(ti[1:]))
    else:
        c_out, t_out = ours(ci[0], ci[1]), theirs(ti[0], ti[1])
    c_flat, t_flat = _flat(c_out), _flat(t_out)
    assert len(c_flat) == len(t_flat)
    loss_c, loss_t = 0.0, 0.0
    for c, t in zip(c_flat, t_flat):
        assert c.shape == tuple(t.shape)
        np.testing.assert_allclose(c.data, t.detach().numpy(), rtol=RTOL, atol=ATOL)
        g = rng.normal(size=c.shape)
        loss_c = loss_c + (c * cr.tensor(g)).sum()
        loss_t = loss_t + (t * torch.tensor(g)).sum()
    loss_c.backward()
    loss_t.backward()
    for c, t in zip(ci, ti):
        np.testing.assert_allclose(c.grad.data, t.grad.numpy(), rtol=RTOL, atol=ATOL)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, theirs_params[name].grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=name)
    return c_out


# (num_layers, bidirectional, batch_first, with h0, L, N, input_size, hidden_size, bias); N=None: unbatched
CONFIGS = [
    (1, False, False, False, 5, 3, 4, 3, True),
    (2, False, True, True, 4, 2, 3, 5, True),
    (1, True, False, True, 3, 1, 5, 3, True),        # batch 1, odd sizes
    (2, True, True, False, 3, 3, 2, 3, True),
    (2, True, False, True, 4, 2, 3, 2, False),       # no bias
    (2, True, False, True, 3, None, 3, 4, True),     # unbatched (L, H_in)
    (1, False, True, False, 1, 2, 3, 3, True),       # a single time step
]
KINDS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {}), ("LSTM", {"proj_size": 2})]


@pytest.mark.parametrize("kind,extra", KINDS, ids=["rnn_tanh", "rnn_relu", "lstm", "gru", "lstm_proj"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "L{}_bi{}_bf{}_h0{}_N{}_bias{}".format(
    c[0], int(c[1]), int(c[2]), int(c[3]), c[5], int(c[8])))
def test_sequence_layers_match_torch(rng, kind, extra, config):
    torch = pytest.importorskip("torch")
    layers, bidir, batch_first, with_h0, L, N, n_in, hidden, bias = config
    if extra.get("proj_size", 0) >= hidden:
        extra = {"proj_size": hidden - 1}
    ours, theirs = _ours_and_torch(torch, kind, n_in, hidden, num_layers=layers, bidirectional=bidir,
                                   batch_first=batch_first, bias=bias, **extra)
    D = 2 if bidir else 1
    out_size = extra.get("proj_size") or hidden
    if N is None:
        x = rng.normal(size=(L, n_in))
        h_shape, c_shape = (D * layers, out_size), (D * layers, hidden)
    else:
        x = rng.normal(size=(N, L, n_in) if batch_first else (L, N, n_in))
        h_shape, c_shape = (D * layers, N, out_size), (D * layers, N, hidden)
    inputs = [x]
    if with_h0:
        inputs.append(rng.normal(size=h_shape))
        if kind == "LSTM":
            inputs.append(rng.normal(size=c_shape))
    out = _check_against_torch(torch, rng, ours, theirs, inputs, hx_is_tuple=kind == "LSTM")
    y = out[0]
    expect = (L, D * out_size) if N is None else ((N, L, D * out_size) if batch_first else (L, N, D * out_size))
    assert y.shape == expect


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batch,with_hx,bias", [(3, False, True), (1, True, True), (None, True, True),
                                                (None, False, True), (2, True, False)])
def test_cells_match_torch(rng, kind, batch, with_hx, bias):
    torch = pytest.importorskip("torch")
    ours, theirs = _ours_and_torch(torch, kind, 5, 3, bias=bias)
    lead = () if batch is None else (batch,)
    inputs = [rng.normal(size=lead + (5,))]
    if with_hx:
        inputs += [rng.normal(size=lead + (3,)) for _ in range(2 if kind == "LSTMCell" else 1)]
    _check_against_torch(torch, rng, ours, theirs, inputs, hx_is_tuple=kind == "LSTMCell")


def test_rnn_cell_relu_matches_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _ours_and_torch(torch, "RNNCell", 4, 3, nonlinearity="relu")
    _check_against_torch(torch, rng, ours, theirs, [rng.normal(size=(2, 4)), rng.normal(size=(2, 3))])


def test_cells_unrolled_equal_the_sequence_layer(rng):
    # an LSTM over a sequence is LSTMCell applied step by step with the same weights
    seq = LSTM(3, 4, dtype=cr.float64, generator=rng)
    cell = LSTMCell(3, 4, dtype=cr.float64)
    cell.load_state_dict({k[:-3]: v for k, v in seq.state_dict().items()})
    x = cr.tensor(rng.normal(size=(5, 2, 3)))
    out, (h_n, c_n) = seq(x)
    h = c = cr.tensor(np.zeros((2, 4)))
    for t in range(5):
        h, c = cell(x[t], (h, c))
        np.testing.assert_allclose(out.data[t], h.data, rtol=1e-13)
    np.testing.assert_allclose(h_n.data[0], h.data, rtol=1e-13)
    np.testing.assert_allclose(c_n.data[0], c.data, rtol=1e-13)


# ----- dropout between layers (not after the last) -----
def test_dropout_one_zeroes_the_input_of_later_layers_as_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _ours_and_torch(torch, "GRU", 3, 4, num_layers=2, dropout=1.0)
    x = rng.normal(size=(4, 2, 3))
    out = _check_against_torch(torch, rng, ours, theirs, [x])
    assert np.abs(out[0].data).min() > 0          # no dropout after the last layer
    ref = GRU(4, 4, dtype=cr.float64)             # layer 1 only ever sees zeros
    ref.load_state_dict({k.replace("_l1", "_l0"): v for k, v in ours.state_dict().items() if "_l1" in k})
    np.testing.assert_allclose(out[0].data, ref(cr.tensor(np.zeros((4, 2, 4))))[0].data, rtol=1e-13)


def test_dropout_is_off_in_eval_and_reproducible_in_train(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _ours_and_torch(torch, "LSTM", 3, 4, num_layers=3, dropout=0.5)
    ours.eval()
    theirs.eval()
    _check_against_torch(torch, rng, ours, theirs, [rng.normal(size=(4, 2, 3))])
    x = cr.tensor(rng.normal(size=(6, 2, 3)))
    a = LSTM(3, 4, 2, dropout=0.5, dtype=cr.float64, generator=np.random.default_rng(1))
    b = LSTM(3, 4, 2, dropout=0.5, dtype=cr.float64, generator=np.random.default_rng(1))
    np.testing.assert_array_equal(a(x)[0].data, b(x)[0].data)
    assert not np.allclose(a(x)[0].data, a.eval()(x)[0].data)


# ----- gradcheck: both modes, second order -----
def _t64(rng, *shape):
    return cr.tensor(rng.normal(size=shape), dtype=cr.float64, requires_grad=True)


@pytest.mark.parametrize("cell", [RNNCell, LSTMCell, GRUCell])
def test_cells_gradcheck_both_modes_and_second_order(rng, cell):
    m = cell(2, 2, dtype=cr.float64, generator=rng)
    x, h = _t64(rng, 2, 2), _t64(rng, 2, 2)

    def f(x, h):
        if cell is LSTMCell:
            h_new, c_new = m(x, (h, h * 0.5))
            return h_new * 1.5 + c_new
        return m(x, h)

    assert cr.gradcheck(f, (x, h), modes=("rev", "fwd"))
    assert cr.gradgradcheck(f, (x, h))


@pytest.mark.parametrize("kind", [GRU, LSTM])
def test_sequence_layer_gradcheck_second_order(rng, kind):
    m = kind(2, 2, num_layers=2, bidirectional=True, dtype=cr.float64, generator=rng)
    x = _t64(rng, 3, 1, 2)
    assert cr.gradcheck(lambda x: m(x)[0], (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x: m(x)[0], (x,))


def test_parameter_gradients_gradcheck(rng):
    m = LSTM(2, 3, proj_size=2, dtype=cr.float64, generator=rng)
    x = cr.tensor(rng.normal(size=(3, 2, 2)))
    names = [n for n, _ in m.named_parameters()]
    params = [cr.tensor(p.data.copy(), requires_grad=True) for p in m.parameters()]

    def f(*ps):
        return cr.func.functional_call(m, dict(zip(names, ps)), (x,))[0]

    assert cr.gradcheck(f, tuple(params))


# ----- initialisation and state dicts -----
def test_init_bounds_and_generator():
    m = GRU(10, 25, num_layers=2, generator=np.random.default_rng(0))
    bound = 1 / np.sqrt(25)
    for p in m.parameters():
        assert np.abs(p.data).max() <= bound
    assert max(np.abs(p.data).max() for p in m.parameters()) > 0.95 * bound
    assert m.weight_ih_l0.dtype == cr.float32
    same = GRU(10, 25, num_layers=2, generator=np.random.default_rng(0))
    for p, q in zip(m.parameters(), same.parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    c = LSTMCell(3, 16, generator=np.random.default_rng(0))
    assert np.abs(c.weight_ih.data).max() <= 0.25 and c.weight_ih.shape == (64, 3)


def test_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")
    for ours, theirs in ((LSTM(3, 4, 2, bidirectional=True, proj_size=2), torch.nn.LSTM(3, 4, 2, bidirectional=True,
                                                                                           proj_size=2)),
                         (GRU(3, 4, 3, bias=False), torch.nn.GRU(3, 4, 3, bias=False)),
                         (RNN(3, 4, bidirectional=True), torch.nn.RNN(3, 4, bidirectional=True)),
                         (GRUCell(3, 4), torch.nn.GRUCell(3, 4)), (RNNCell(3, 4, bias=False),
                                                                   torch.nn.RNNCell(3, 4, bias=False))):
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
        assert list(ours.state_dict()) == list(theirs.state_dict())


def test_all_weights_and_repr():
    m = LSTM(3, 4, 2, bidirectional=True)
    assert len(m.all_weights) == 4 and [w.shape for w in m.all_weights[2]] == [(16, 8), (16, 4), (16,), (16,)]
    assert repr(m) == "LSTM(3, 4, num_layers=2, bidirectional=True)"
    assert repr(RNNCell(2, 3, nonlinearity="relu")) == "RNNCell(2, 3, nonlinearity='relu')"


# ----- errors name the layer, the shapes and the fix -----
def test_errors():
    with pytest.raises(cr.ShapeError, match=r"LSTM: expected input of shape \(L, N, input_size\).*input_size=3.*"
                                            r"\(5, 2, 4\)"):
        LSTM(3, 4)(cr.zeros((5, 2, 4)))
    with pytest.raises(cr.ShapeError, match=r"GRU: expected input of shape \(N, L, input_size\)"):
        GRU(3, 4, batch_first=True)(cr.zeros((2, 2, 2, 3)))
    with pytest.raises(cr.ShapeError, match=r"RNN: h_0 must have shape .* = \(2, 2, 4\).*got \(1, 2, 4\)"):
        RNN(3, 4, bidirectional=True)(cr.zeros((5, 2, 3)), cr.zeros((1, 2, 4)))
    with pytest.raises(cr.ShapeError, match=r"LSTM: c_0 must have shape .*hidden_size\) = \(1, 2, 4\)"):
        LSTM(3, 4, proj_size=2)(cr.zeros((5, 2, 3)), (cr.zeros((1, 2, 2)), cr.zeros((1, 2, 2))))
    with pytest.raises(ValueError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        LSTM(3, 4)(cr.zeros((5, 2, 3)), cr.zeros((1, 2, 4)))
    with pytest.raises(cr.ShapeError, match=r"GRUCell: expected input of shape \(N, input_size=3\)"):
        GRUCell(3, 4)(cr.zeros((5, 2, 3)))
    with pytest.raises(cr.ShapeError, match=r"RNNCell: hx must have shape \(2, 4\)"):
        RNNCell(3, 4)(cr.zeros((2, 3)), cr.zeros((3, 4)))
    with pytest.raises(ValueError, match="LSTMCell: hx must be a tuple"):
        LSTMCell(3, 4)(cr.zeros((2, 3)), cr.zeros((2, 4)))
    with pytest.raises(ValueError, match="unknown nonlinearity 'gelu'"):
        RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\]"):
        GRU(3, 4, 2, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
        GRU(3, 0)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        GRU(3, 4, dropout=0.2)


# ----- training and transforms -----
def test_a_few_sgd_steps_match_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _ours_and_torch(torch, "LSTM", 3, 4, num_layers=2, batch_first=True, proj_size=3)
    opt_c = cr.optim.SGD(ours.parameters(), lr=0.1)
    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.1)
    for _ in range(3):
        x, y = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))
        for opt, model, lib in ((opt_c, ours, cr), (opt_t, theirs, torch)):
            opt.zero_grad()
            out, (h_n, c_n) = model(lib.tensor(x))
            loss = ((out - lib.tensor(y)) ** 2).mean() + (c_n ** 2).mean()
            loss.backward()
            opt.step()
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.data, theirs_params[name].detach().numpy(), rtol=1e-10, atol=1e-12)


def test_vmap_over_unbatched_sequences_equals_the_batched_call(rng):
    m = GRU(3, 4, bidirectional=True, dtype=cr.float64, generator=rng)
    x = cr.tensor(rng.normal(size=(6, 5, 3)))                      # 6 sequences of length 5
    out, h_n = cr.vmap(m)(x)
    ref_out, ref_h = m(cr.tensor(np.swapaxes(x.data, 0, 1)))             # (L, N, H_in)
    np.testing.assert_allclose(out.data, np.swapaxes(ref_out.data, 0, 1), rtol=1e-12)
    np.testing.assert_allclose(h_n.data, np.swapaxes(ref_h.data, 0, 1), rtol=1e-12)


def test_reset_parameters_and_plain_inputs():
    m = LSTM(3, 4, 2)
    before = [p.data.copy() for p in m.parameters()]
    m.reset_parameters(generator=np.random.default_rng(2))
    m.flatten_parameters()
    assert all(not np.array_equal(a, p.data) and np.abs(p.data).max() <= 0.5 for a, p in zip(before, m.parameters()))
    c = GRUCell(3, 4)
    c.reset_parameters(generator=np.random.default_rng(2))
    assert np.abs(c.weight_ih.data).max() <= 0.5
    out, (h_n, c_n) = m(np.ones((5, 2, 3), dtype=np.float32))      # a NumPy array is accepted, float32 stays
    assert out.dtype == h_n.dtype == np.float32 and out.shape == (5, 2, 4)
