"""cr.nn.utils against torch.nn.utils in float64: gradient clipping (norm and value), parameters <-> one
vector, and rnn.pad_sequence / unpad_sequence (values and gradients)."""
import math

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)
from chainrule.nn.utils.rnn import pad_sequence, unpad_sequence

F64 = cr.float64


def close(a, b, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-14)


def twin_models(rng, torch):
    """A small cr model and the same torch model with the same weights and the same gradients."""
    ours = nn.Sequential(nn.Linear(3, 5, dtype=F64, generator=rng), nn.Tanh(),
                         nn.Linear(5, 2, dtype=F64, generator=rng), nn.Linear(2, 2, dtype=F64, generator=rng))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2),
                                 torch.nn.Linear(2, 2)).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x, g = rng.normal(size=(4, 3)) * 3, rng.normal(size=(4, 2)) * 5
    ours(cr.tensor(x, dtype=F64)).backward(cr.tensor(g))
    theirs(torch.tensor(x)).backward(torch.tensor(g))
    ours[3].bias.grad = None                                     # a parameter without a gradient is skipped
    theirs[3].bias.grad = None
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 3.5, "inf"])
@pytest.mark.parametrize("max_norm", [0.3, 1e6])                 # clipped, and coefficient clamped at 1
def test_clip_grad_norm_matches_torch(rng, norm_type, max_norm):
    torch = pytest.importorskip("torch")
    ours, theirs = twin_models(rng, torch)
    nt = float(norm_type)
    total_o = clip_grad_norm_(ours.parameters(), max_norm, norm_type=nt)
    total_t = torch.nn.utils.clip_grad_norm_(theirs.parameters(), max_norm, norm_type=nt)
    assert isinstance(total_o, cr.Tensor) and total_o.shape == () and total_o.dtype == np.float64
    close(total_o.data, total_t.numpy())
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            close(p.grad.data, q.grad.numpy())
    if max_norm < 1:
        after = get_total_norm([p.grad for p in ours.parameters() if p.grad is not None], nt)
        assert float(after) <= max_norm * (1 + 1e-9)


def test_clip_grad_norm_single_tensor_empty_and_foreach(rng):
    torch = pytest.importorskip("torch")
    g = rng.normal(size=(3, 4))
    p, q = nn.Parameter(np.zeros((3, 4))), torch.nn.Parameter(torch.zeros(3, 4, dtype=torch.float64))
    p.grad, q.grad = cr.tensor(g), torch.tensor(g)
    close(clip_grad_norm_(p, 0.5, foreach=True).data, torch.nn.utils.clip_grad_norm_(q, 0.5, foreach=True).numpy())
    close(p.grad.data, q.grad.numpy())
    empty = clip_grad_norm_([nn.Parameter(np.zeros(2))], 1.0)
    assert float(empty) == float(torch.nn.utils.clip_grad_norm_([torch.nn.Parameter(torch.zeros(2))], 1.0)) == 0.0
    version = p.grad._version
    clip_grad_norm_([p], 0.1)
    assert p.grad._version > version                             # an in-place change, as torch's mul_


def test_clip_grad_norm_nonfinite(rng):
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.zeros(3))
    p.grad = cr.tensor([1.0, np.inf, 2.0])
    with pytest.raises(RuntimeError, match="total norm of order 2.0 for gradients from `parameters` is non-finite"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(p.grad.data, [1.0, np.inf, 2.0])         # untouched on error
    q = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    q.grad = torch.tensor([1.0, np.inf, 2.0], dtype=torch.float64)
    total_o, total_t = clip_grad_norm_([p], 1.0), torch.nn.utils.clip_grad_norm_([q], 1.0)
    assert np.isinf(float(total_o)) and np.isinf(float(total_t))
    np.testing.assert_array_equal(p.grad.data, q.grad.numpy())
    with pytest.raises(TypeError, match="item 0 is int"):
        clip_grad_norm_([3], 1.0)


def test_clip_grads_with_norm_and_get_total_norm_match_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = twin_models(rng, torch)
    grads_o = [p.grad for p in ours.parameters() if p.grad is not None]
    grads_t = [p.grad for p in theirs.parameters() if p.grad is not None]
    for nt in (2.0, 1.0, math.inf, 0.5, 0.0, -math.inf):
        close(get_total_norm(grads_o, nt).data, torch.nn.utils.get_total_norm(grads_t, nt).numpy())
    clip_grads_with_norm_(ours.parameters(), 0.7, get_total_norm(grads_o))
    torch.nn.utils.clip_grads_with_norm_(theirs.parameters(), 0.7, torch.nn.utils.get_total_norm(grads_t))
    for a, b in zip(grads_o, grads_t):
        close(a.data, b.numpy())


@pytest.mark.parametrize("clip_value", [0.05, 0.5, 100.0])
def test_clip_grad_value_matches_torch(rng, clip_value):
    torch = pytest.importorskip("torch")
    ours, theirs = twin_models(rng, torch)
    assert clip_grad_value_(ours.parameters(), clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs.parameters(), clip_value)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        if p.grad is not None:
            close(p.grad.data, q.grad.numpy())
            assert np.abs(p.grad.data).max() <= clip_value
    with pytest.raises(ValueError, match="clip_value must be non-negative"):
        clip_grad_value_(ours.parameters(), -1.0)


def test_parameters_to_vector_and_back_match_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = twin_models(rng, torch)
    v_o = parameters_to_vector(ours.parameters())
    v_t = torch.nn.utils.parameters_to_vector(theirs.parameters())
    close(v_o.data, v_t.detach().numpy())
    w = rng.normal(size=v_o.shape)
    (v_o * cr.tensor(w)).sum().backward()                       # recorded, as torch's cat of views
    (v_t * torch.tensor(w)).sum().backward()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        close(p.grad.data, q.grad.numpy())
    new = rng.normal(size=v_o.shape)
    vector_to_parameters(cr.tensor(new), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs.parameters())
    for p, q in zip(ours.parameters(), theirs.parameters()):
        close(p.data, q.detach().numpy())
        assert p.requires_grad and p.is_leaf
    close(parameters_to_vector(ours.parameters()).data, new)


def test_parameters_to_vector_second_order(rng):
    a = cr.tensor(rng.normal(size=(2, 2)), dtype=F64, requires_grad=True)
    b = cr.tensor(rng.normal(size=3), dtype=F64, requires_grad=True)
    assert cr.gradgradcheck(lambda a, b: parameters_to_vector([a, b]) ** 3, (a, b))


def test_vector_to_parameters_errors():
    lin = nn.Linear(2, 1)
    with pytest.raises(TypeError, match="expected a cr.Tensor for vec, but got: list"):
        vector_to_parameters([1.0, 2.0, 3.0], lin.parameters())
    with pytest.raises(cr.ShapeError, match=r"vec has 4 elements but the parameters \(shapes \[\(1, 2\), \(1,\)\]"):
        vector_to_parameters(cr.ones(4), lin.parameters())
    with pytest.raises(cr.ShapeError, match="vec must be 1-D"):
        vector_to_parameters(cr.ones((3, 1)), lin.parameters())
    with pytest.raises(ValueError, match="got no parameters"):
        parameters_to_vector([])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("lengths,trailing", [((3, 1, 4), (2,)), ((1,), ()), ((2, 5), (2, 3)), ((3, 3), (1,))])
def test_pad_sequence_matches_torch(rng, batch_first, padding_side, lengths, trailing):
    torch = pytest.importorskip("torch")
    seqs = [rng.normal(size=(n,) + trailing) for n in lengths]
    ours = [cr.tensor(s, dtype=F64, requires_grad=True) for s in seqs]
    theirs = [torch.tensor(s, requires_grad=True) for s in seqs]
    out_o = pad_sequence(ours, batch_first=batch_first, padding_value=-2.5, padding_side=padding_side)
    out_t = torch.nn.utils.rnn.pad_sequence(theirs, batch_first=batch_first, padding_value=-2.5,
                                            padding_side=padding_side)
    assert out_o.shape == tuple(out_t.shape)
    close(out_o.data, out_t.detach().numpy())
    g = rng.normal(size=out_o.shape)
    out_o.backward(cr.tensor(g))
    out_t.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        close(a.grad.data, b.grad.numpy())
    if padding_side == "right":
        back = unpad_sequence(out_o, list(lengths), batch_first=batch_first)
        back_t = torch.nn.utils.rnn.unpad_sequence(out_t, torch.tensor(lengths), batch_first=batch_first)
        for a, b in zip(back, back_t):
            close(a.data, b.detach().numpy())


def test_pad_sequence_integers_and_second_order(rng):
    torch = pytest.importorskip("torch")
    ints = [np.array([1, 2, 3]), np.array([4])]
    out = pad_sequence([cr.tensor(i) for i in ints], batch_first=True, padding_value=9)
    ref = torch.nn.utils.rnn.pad_sequence([torch.tensor(i) for i in ints], batch_first=True, padding_value=9)
    np.testing.assert_array_equal(out.data, ref.numpy())
    assert out.dtype == np.int64
    a = cr.tensor(rng.normal(size=(3, 2)), dtype=F64, requires_grad=True)
    b = cr.tensor(rng.normal(size=(1, 2)), dtype=F64, requires_grad=True)
    assert cr.gradcheck(lambda a, b: pad_sequence([a, b], padding_side="left"), (a, b), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda a, b: pad_sequence([a, b]) ** 2, (a, b))


def test_pad_sequence_errors():
    with pytest.raises(cr.ShapeError, match=r"sequence 1 has shape \(2, 3\) but sequence 0 has \(3, 2\)"):
        pad_sequence([cr.ones((3, 2)), cr.ones((2, 3))])
    with pytest.raises(ValueError, match="empty list of sequences"):
        pad_sequence([])
    with pytest.raises(ValueError, match="padding_side to be one of left or right, but got 'middle'"):
        pad_sequence([cr.ones(2)], padding_side="middle")
    with pytest.raises(cr.ShapeError, match="sequence 0 is a 0-d tensor"):
        pad_sequence([cr.tensor(1.0)])
    with pytest.raises(cr.ShapeError, match=r"lengths \[3, 5\] do not fit"):
        unpad_sequence(cr.ones((2, 4)), [3, 5], batch_first=True)


def test_clip_grad_norm_float32_keeps_the_dtype():
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.zeros(2, np.float32))
    p.grad = cr.tensor(np.array([3.0, 4.0], np.float32))
    q = torch.nn.Parameter(torch.zeros(2))
    q.grad = torch.tensor([3.0, 4.0])
    total = clip_grad_norm_([p], 1.0)
    assert total.dtype == np.float32 and p.grad.dtype == np.float32
    np.testing.assert_allclose(total.data, torch.nn.utils.clip_grad_norm_([q], 1.0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(p.grad.data, q.grad.numpy(), rtol=1e-6)
