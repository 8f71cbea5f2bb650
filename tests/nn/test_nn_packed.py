"""Packed sequences (``cr.nn.utils.rnn``) and the recurrent layers on them, against torch in float64:
packing and unpacking (values, batch sizes, sort orders, gradients back to the padded input), RNN /
LSTM / GRU on a PackedSequence (output data, h_n and c_n at each sequence's own last step, input and
parameter gradients), the fused LSTM recurrence in both modes and to second order, and the errors."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.nn.utils.rnn import (
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    unpack_sequence,
)
from chainrule.ops.nn import _lstm_scan_grads, gru_scan, lstm_scan, rnn_scan
from tests.nn.test_nn_rnn import _ours_and_torch

RTOL, ATOL = 1e-10, 1e-12
LENGTHS = {
    "sorted": ([4, 3, 3, 1], True),              # ties and a length-1 sequence
    "unsorted": ([2, 4, 1, 4, 3], False),
    "unsorted_ties": ([3, 3, 1, 3], False),
    "one": ([3], True),
}


def _close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours.data if isinstance(ours, cr.Tensor) else ours),
                               theirs.detach().numpy(), rtol=RTOL, atol=ATOL)


def _same_indices(ours, theirs):
    assert (ours is None) == (theirs is None)
    if ours is not None:
        assert ours.dtype == np.int64 and ours.tolist() == theirs.tolist()


# ----- pack / pad, against torch -----
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("case", LENGTHS, ids=str)
@pytest.mark.parametrize("as_type", ["list", "ndarray", "tensor"])
def test_pack_padded_sequence_matches_torch(rng, case, batch_first, as_type):
    torch = pytest.importorskip("torch")
    lengths, enforce = LENGTHS[case]
    steps, batch = max(lengths) + 1, len(lengths)               # one step of padding beyond the longest
    x = rng.normal(size=(batch, steps, 2) if batch_first else (steps, batch, 2))
    lens = {"list": lengths, "ndarray": np.array(lengths), "tensor": cr.tensor(np.array(lengths))}[as_type]
    xc, xt = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours = pack_padded_sequence(xc, lens, batch_first=batch_first, enforce_sorted=enforce)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lengths), batch_first=batch_first,
                                                     enforce_sorted=enforce)
    assert isinstance(ours, PackedSequence) and isinstance(ours, tuple)
    _close(ours.data, theirs.data)
    assert ours.batch_sizes.dtype == np.int64 and ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    _same_indices(ours.sorted_indices, theirs.sorted_indices)
    _same_indices(ours.unsorted_indices, theirs.unsorted_indices)
    g = rng.normal(size=ours.data.shape)                          # gradients back to the padded input
    (ours.data * cr.tensor(g)).sum().backward()
    (theirs.data * torch.tensor(g)).sum().backward()
    _close(xc.grad, xt.grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("case", LENGTHS, ids=str)
@pytest.mark.parametrize("padding_value,total_length", [(0.0, None), (-1.5, 7)])
def test_pad_packed_sequence_matches_torch(rng, case, batch_first, padding_value, total_length):
    torch = pytest.importorskip("torch")
    lengths, enforce = LENGTHS[case]
    x = rng.normal(size=(max(lengths), len(lengths), 3))
    packed_c = pack_padded_sequence(cr.tensor(x), lengths, enforce_sorted=enforce)
    data_c = cr.tensor(packed_c.data.data, requires_grad=True)
    packed_c = PackedSequence(data_c, packed_c.batch_sizes, packed_c.sorted_indices, packed_c.unsorted_indices)
    packed_t = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), torch.tensor(lengths), enforce_sorted=enforce)
    data_t = packed_t.data.clone().requires_grad_(True)
    packed_t = torch.nn.utils.rnn.PackedSequence(data_t, packed_t.batch_sizes, packed_t.sorted_indices,
                                                 packed_t.unsorted_indices)
    ours, ours_len = pad_packed_sequence(packed_c, batch_first, padding_value, total_length)
    theirs, theirs_len = torch.nn.utils.rnn.pad_packed_sequence(packed_t, batch_first, padding_value, total_length)
    _close(ours, theirs)
    assert ours_len.dtype == np.int64 and ours_len.tolist() == theirs_len.tolist() == lengths
    g = rng.normal(size=ours.shape)
    (ours * cr.tensor(g)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    _close(data_c.grad, data_t.grad)


@pytest.mark.parametrize("enforce", [True, False])
def test_pack_sequence_and_unpack_sequence_match_torch(rng, enforce):
    torch = pytest.importorskip("torch")
    lengths = [3, 3, 2, 1] if enforce else [1, 3, 2, 3]
    seqs = [rng.normal(size=(n, 2)) for n in lengths]
    ours = pack_sequence([cr.tensor(s, requires_grad=True) for s in seqs], enforce_sorted=enforce)
    theirs = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=enforce)
    _close(ours.data, theirs.data)
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    back = unpack_sequence(ours)
    assert [b.shape for b in back] == [s.shape for s in seqs]
    for b, s in zip(back, seqs):
        np.testing.assert_array_equal(b.data, s)


def test_packed_sequence_fields_and_constructor():
    p = PackedSequence(cr.tensor([1.0, 2.0, 3.0]), [2, 1], sorted_indices=[1, 0])
    assert p.unsorted_indices.tolist() == [1, 0] and p.batch_sizes.tolist() == [2, 1]
    data, batch_sizes, sorted_indices, unsorted_indices = p        # a 4-tuple, as torch's
    assert data is p.data and not p.is_cuda and not p.is_pinned()
    with pytest.raises(TypeError, match="batch_sizes is required"):
        PackedSequence(cr.tensor([1.0]))


def test_packing_errors():
    x = cr.zeros((3, 2, 1))
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when `enforce_sorted` is True"):
        pack_padded_sequence(x, [1, 2])
    with pytest.raises(ValueError, match="enforce_sorted=False"):
        pack_padded_sequence(x, [1, 2])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        pack_padded_sequence(x, [2, 0])
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to batch_size, but got 1"):
        pack_padded_sequence(x, [1])
    with pytest.raises(ValueError, match="exceed the 3 time steps"):
        pack_padded_sequence(x, [4, 1])
    with pytest.raises(RuntimeError, match="1D"):
        pack_padded_sequence(x, [[1, 2]])
    with pytest.raises(ValueError, match="total_length=1 and max sequence length being 2"):
        pad_packed_sequence(pack_padded_sequence(x, [2, 1]), total_length=1)
    with pytest.raises(TypeError, match="expected a PackedSequence"):
        pad_packed_sequence(x)


# ----- the recurrent layers on packed input, against torch -----
# (kind, extra kwargs, num_layers, bidirectional, with hx)
LAYERS = [
    ("LSTM", {}, 1, False, False), ("LSTM", {}, 2, True, True), ("LSTM", {"proj_size": 2}, 2, True, True),
    ("LSTM", {"proj_size": 2}, 1, False, False), ("GRU", {}, 2, True, True), ("GRU", {}, 1, False, False),
    ("RNN", {}, 2, True, True), ("RNN", {"nonlinearity": "relu"}, 1, True, False),
]


@pytest.mark.parametrize("case", LENGTHS, ids=str)
@pytest.mark.parametrize("kind,extra,layers,bidir,with_hx", LAYERS,
                         ids=lambda v: v if isinstance(v, str) else None)
def test_layers_on_packed_input_match_torch(rng, case, kind, extra, layers, bidir, with_hx):
    torch = pytest.importorskip("torch")
    lengths, enforce = LENGTHS[case]
    n_in, hidden = 3, 4
    ours, theirs = _ours_and_torch(torch, kind, n_in, hidden, num_layers=layers, bidirectional=bidir,
                                   batch_first=True, **extra)
    x = rng.normal(size=(len(lengths), max(lengths), n_in))
    xc, xt = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    pc = pack_padded_sequence(xc, lengths, batch_first=True, enforce_sorted=enforce)
    pt = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lengths), batch_first=True, enforce_sorted=enforce)
    args_c, args_t, states = (), (), []
    if with_hx:
        d = layers * (2 if bidir else 1)
        shapes = [(d, len(lengths), extra.get("proj_size") or hidden)] + ([(d, len(lengths), hidden)]
                                                                           if kind == "LSTM" else [])
        states = [rng.normal(size=s) for s in shapes]
        hc = [cr.tensor(s, requires_grad=True) for s in states]
        ht = [torch.tensor(s, requires_grad=True) for s in states]
        args_c = (tuple(hc) if kind == "LSTM" else hc[0],)
        args_t = (tuple(ht) if kind == "LSTM" else ht[0],)
    out_c, hn_c = ours(pc, *args_c)
    out_t, hn_t = theirs(pt, *args_t)
    assert isinstance(out_c, PackedSequence)
    assert out_c.batch_sizes.tolist() == out_t.batch_sizes.tolist()
    _same_indices(out_c.sorted_indices, out_t.sorted_indices)
    finals_c = list(hn_c) if kind == "LSTM" else [hn_c]
    finals_t = list(hn_t) if kind == "LSTM" else [hn_t]
    loss_c, loss_t = 0.0, 0.0
    for c, t in zip([out_c.data] + finals_c, [out_t.data] + finals_t):
        _close(c, t)
        g = rng.normal(size=c.shape)
        loss_c, loss_t = loss_c + (c * cr.tensor(g)).sum(), loss_t + (t * torch.tensor(g)).sum()
    loss_c.backward()
    loss_t.backward()
    _close(xc.grad, xt.grad)
    if with_hx:
        for c, t in zip(hc, ht):
            _close(c.grad, t.grad)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad)


def test_packed_round_trip_through_a_layer_equals_padded_per_sequence(rng):
    """Each sequence alone (no padding) gives the rows the packed batch gives it."""
    m = cr.nn.LSTM(2, 3, num_layers=2, bidirectional=True, dtype=cr.float64, generator=rng)
    seqs = [rng.normal(size=(n, 2)) for n in (2, 5, 1)]
    out, (h_n, c_n) = m(pack_sequence([cr.tensor(s) for s in seqs], enforce_sorted=False))
    padded, lengths = pad_packed_sequence(out, batch_first=True)
    for i, s in enumerate(seqs):
        alone, (h1, c1) = m(cr.tensor(s[:, None]))
        np.testing.assert_allclose(padded.data[i, :len(s)], alone.data[:, 0], rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(padded.data[i, len(s):], 0.0)
        np.testing.assert_allclose(h_n.data[:, i], h1.data[:, 0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(c_n.data[:, i], c1.data[:, 0], rtol=1e-12, atol=1e-14)


def test_dropout_between_layers_on_packed_input(rng):
    m = cr.nn.GRU(2, 3, num_layers=2, dropout=0.5, dtype=cr.float64, generator=np.random.default_rng(0))
    p = pack_sequence([cr.tensor(rng.normal(size=(n, 2))) for n in (3, 2)])
    m.eval()
    a, b = m(p)[0].data, m(p)[0].data
    np.testing.assert_array_equal(a.data, b.data)                  # eval: no dropout
    m.train()
    c = m(p)[0].data
    assert c.shape == a.shape and not np.allclose(c.data, a.data)


def test_layer_errors_on_packed_input():
    m = cr.nn.LSTM(3, 4)
    with pytest.raises(ValueError, match="input_size=3"):
        m(pack_sequence([cr.zeros((2, 2))]))
    with pytest.raises(ValueError, match="h_0 must have shape"):
        m(pack_sequence([cr.zeros((2, 3))]), (cr.zeros((1, 2, 4)), cr.zeros((1, 2, 4))))


# ----- the fused recurrence: modes, orders, vmap -----
def _scan_inputs(rng, proj):
    n, p, big_n = 2, (1 if proj else 2), 3
    shapes = [(6, 4 * n), (4 * n, p), (big_n, p), (big_n, n)] + ([(p, n)] if proj else [])
    return [cr.tensor(rng.normal(size=s), requires_grad=True) for s in shapes]


@pytest.mark.parametrize("proj", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_scan_gradcheck_both_modes_and_second_order(rng, proj, reverse):
    xs = _scan_inputs(rng, proj)

    def f(*a):
        return lstm_scan(*a[:4], a[4] if proj else None, batch_sizes=(3, 2, 1), reverse=reverse)

    assert cr.gradcheck(f, tuple(xs), modes=("rev", "fwd"))
    assert cr.gradgradcheck(f, tuple(xs))


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_scan_gradcheck_both_modes_and_second_order(rng, reverse):
    xs = [cr.tensor(rng.normal(size=s), requires_grad=True) for s in [(6, 6), (6, 2), (6,), (3, 2)]]

    def f(*a):
        return gru_scan(*a, batch_sizes=(3, 2, 1), reverse=reverse)

    assert cr.gradcheck(f, tuple(xs), modes=("rev", "fwd"))
    assert cr.gradgradcheck(f, tuple(xs))


@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_scan_gradcheck_both_modes_and_second_order(rng, reverse):
    xs = [cr.tensor(rng.normal(size=s), requires_grad=True) for s in [(6, 2), (2, 2), (3, 2)]]

    def f(*a):
        return rnn_scan(*a, batch_sizes=(3, 2, 1), reverse=reverse)

    assert cr.gradcheck(f, tuple(xs), modes=("rev", "fwd"))
    assert cr.gradgradcheck(f, tuple(xs))


def test_lstm_vmap_equals_the_batched_call(rng):
    m = cr.nn.LSTM(3, 4, bidirectional=True, proj_size=2, dtype=cr.float64, generator=rng)
    x = cr.tensor(rng.normal(size=(5, 6, 3)))                      # 5 sequences of length 6
    out, (h_n, c_n) = cr.vmap(m)(x)
    ref_out, (ref_h, ref_c) = m(cr.tensor(np.swapaxes(x.data, 0, 1)))
    np.testing.assert_allclose(out.data, np.swapaxes(ref_out.data, 0, 1), rtol=1e-12)
    np.testing.assert_allclose(h_n.data, np.swapaxes(ref_h.data, 0, 1), rtol=1e-12)
    np.testing.assert_allclose(c_n.data, np.swapaxes(ref_c.data, 0, 1), rtol=1e-12)


def test_lstm_scan_low_precision_and_errors():
    a = [np.zeros(s, dtype=np.float16) for s in [(4, 8), (8, 2), (2, 2), (2, 2)]]
    out = lstm_scan(*a, batch_sizes=(2, 2))
    assert out.dtype == np.float16 and out.shape == (6, 12)
    with pytest.raises(ValueError, match="lstm_scan: got gi, w_hh, h0, c0 of shapes"):
        lstm_scan(*a, batch_sizes=(2, 1))
    with pytest.raises(ValueError, match="non-increasing"):
        lstm_scan(np.zeros((4, 8)), np.zeros((8, 2)), np.zeros((2, 2)), np.zeros((2, 2)), batch_sizes=(1, 3))
    b = [np.zeros(s, dtype=np.float16) for s in [(3, 6), (6, 2), (6,), (2, 2)]]
    out = gru_scan(*b, batch_sizes=(2, 1))
    assert out.dtype == np.float16 and out.shape == (5, 10)
    assert rnn_scan(np.zeros((3, 2), dtype=np.float16), np.zeros((2, 2), dtype=np.float16),
                    np.zeros((2, 2), dtype=np.float16), batch_sizes=(2, 1)).dtype == np.float16
    with pytest.raises(ValueError, match="rnn_scan: unknown nonlinearity 'gelu'"):
        rnn_scan(np.zeros((3, 2)), np.zeros((2, 2)), np.zeros((2, 2)), batch_sizes=(2, 1), nonlinearity="gelu")
    with pytest.raises(ValueError, match="rnn_scan: got gi, w_hh, h0 of shapes"):
        rnn_scan(np.zeros((3, 2)), np.zeros((2, 3)), np.zeros((2, 2)), batch_sizes=(2, 1))
    with pytest.raises(ValueError, match=r"gru_scan: got gi, w_hh, b_hh, h0 of shapes \[\(3, 6\), \(6, 2\), \(5,\)"):
        gru_scan(b[0], b[1], np.zeros(5), b[3], batch_sizes=(2, 1))


@pytest.mark.parametrize("proj,reverse", [(False, False), (True, True)])
def test_lstm_scan_plain_backward_equals_the_recorded_rule(rng, proj, reverse):
    """A plain backward runs the loop in place on ndarrays; create_graph runs it as chainrule ops."""
    xs = [x.data for x in _scan_inputs(rng, proj)]
    params = {"batch_sizes": (3, 2, 1), "reverse": reverse}
    out = lstm_scan(*xs[:4], xs[4] if proj else None, **params)
    g = rng.normal(size=out.shape)
    plain = _lstm_scan_grads(g, out, *xs, **params)
    recorded = _lstm_scan_grads(cr.tensor(g), cr.tensor(out), *[cr.tensor(x) for x in xs], **params)
    assert all(isinstance(r, cr.Tensor) for r in recorded if r is not None)
    for a, b in zip(plain, recorded):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b.data, rtol=1e-13, atol=1e-14)


def test_packed_lstm_double_backward_matches_torch(rng):
    """create_graph through a packed LSTM: the gradient of a gradient, against torch."""
    torch = pytest.importorskip("torch")
    ours, theirs = _ours_and_torch(torch, "LSTM", 2, 3, bidirectional=True)
    x = rng.normal(size=(3, 2, 2))
    lengths = [3, 1]
    xc, xt = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_c = ours(pack_padded_sequence(xc, lengths))[0].data
    out_t = theirs(torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lengths)))[0].data
    (gc,) = cr.autograd.grad((out_c ** 2).sum(), [xc], create_graph=True)
    (gt,) = torch.autograd.grad((out_t ** 2).sum(), [xt], create_graph=True)
    _close(gc, gt)
    (gc * gc).sum().backward()
    (gt * gt).sum().backward()
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad)
