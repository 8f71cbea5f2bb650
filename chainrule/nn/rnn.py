"""Recurrent layers: RNNCell, LSTMCell, GRUCell and the stacked RNN, LSTM, GRU, as ``torch.nn``'s.

Names, arguments, defaults, gate order (LSTM i, f, g, o; GRU r, z, n with the reset gate applied after
the hidden matmul), parameter names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ``weight_hr_l0``) and
initialisation (every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))) follow PyTorch.
Built from chainrule ops, so every layer is differentiable to any order in both modes. A layer works in
the packed layout (``cr.nn.utils.rnn.PackedSequence``; a full batch is packed trivially, one reshape):
the input projection of all steps is one matmul, then each layer and direction runs its recurrence as
one fused primitive (``lstm_scan``, ``gru_scan``, ``rnn_scan`` in ops/nn.py: its backward
returns every step's cotangent as one array). The cells are the same step, as a graph of ops.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.nn import init
from chainrule.nn._common import _positive_int
from chainrule.nn.functional.basic import dropout as _dropout
from chainrule.nn.functional.basic import linear
from chainrule.nn.module import Module, Parameter
from chainrule.nn.utils.rnn import PackedSequence
from chainrule.numpy import raw
from chainrule.ops.nn import gru_scan, lstm_scan, rnn_scan

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_mode(nonlinearity: str, who: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{who}: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu' "
                         f"(or cr.nn.LSTM / cr.nn.GRU for gated cells)")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(raw(x))


def _zeros(shape: tuple, like: Any) -> Tensor:
    dtype = like.dtype if isinstance(like, Tensor) else np.asarray(raw(like)).dtype
    return Tensor(np.zeros(shape, dtype=dtype))


def _step(mode: str, gi: Any, h: Any, c: Any, w_hh: Any, b_hh: Any, w_hr: Any = None) -> tuple:
    """One time step from the input projection ``gi = x @ w_ih.T + b_ih``: returns ``(h', c')``."""
    gh = linear(h, w_hh, b_hh)
    if mode == "RNN_TANH":
        return ops.tanh(gi + gh), None
    if mode == "RNN_RELU":
        return ops.relu(gi + gh), None
    n = _shape(w_hh)[0] // _GATES[mode]
    if mode == "LSTM":
        gates = gi + gh
        i, f = ops.sigmoid(gates[..., :n]), ops.sigmoid(gates[..., n:2 * n])
        g, o = ops.tanh(gates[..., 2 * n:3 * n]), ops.sigmoid(gates[..., 3 * n:])
        c = f * c + i * g
        h = o * ops.tanh(c)
        return (h if w_hr is None else linear(h, w_hr)), c
    r = ops.sigmoid(gi[..., :n] + gh[..., :n])
    z = ops.sigmoid(gi[..., n:2 * n] + gh[..., n:2 * n])
    new = ops.tanh(gi[..., 2 * n:] + r * gh[..., 2 * n:])
    return (1 - z) * new + z * h, None


def _uniform(shape: tuple, bound: float, dtype: Any, generator: Any) -> Parameter:
    p = Parameter(np.zeros(shape, dtype=dtype or get_default_dtype()))
    return init.uniform_(p, -bound, bound, generator)


def _redraw(module: Module, hidden_size: int, generator: Any) -> None:
    bound = 1.0 / math.sqrt(hidden_size)
    for p in module.parameters():
        init.uniform_(p, -bound, bound, generator)


class _NonlinearityRepr:
    """extra_repr for RNNCell and RNN: their base's, then the nonlinearity unless it is the default tanh."""

    nonlinearity: str

    def extra_repr(self) -> str:
        tail = "" if self.nonlinearity == "tanh" else f", nonlinearity={self.nonlinearity!r}"
        return super().extra_repr() + tail


# ----- cells -----
class _CellBase(Module):
    _state_names: tuple = ("hx",)                # LSTMCell's are ("h", "c") and it has its own forward

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool, dtype: Any,
                 generator: Any) -> None:
        super().__init__()
        self._mode = mode
        who = type(self).__name__
        self.input_size = _positive_int(input_size, "input_size", who)
        self.hidden_size = _positive_int(hidden_size, "hidden_size", who)
        self.bias = bool(bias)
        gates = _GATES[self._mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self.weight_ih = _uniform((gates, self.input_size), bound, dtype, generator)
        self.weight_hh = _uniform((gates, self.hidden_size), bound, dtype, generator)
        if bias:
            self.bias_ih = _uniform((gates,), bound, dtype, generator)
            self.bias_hh = _uniform((gates,), bound, dtype, generator)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def reset_parameters(self, generator: Any = None) -> None:
        """Draw every parameter again from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), in place."""
        _redraw(self, self.hidden_size, generator)

    def _check(self, x: Any, hx: Any) -> tuple:
        """Returns ``(batched x, batched states, unbatched?)``; hx is a tuple of states or None."""
        who, shape = type(self).__name__, _shape(x)
        if len(shape) not in (1, 2) or shape[-1] != self.input_size:
            raise ShapeError(f"{who}: expected input of shape (N, input_size={self.input_size}) or "
                             f"(input_size={self.input_size},), got {shape}; a sequence goes to "
                             f"{who[:-4]}, or loop over its time steps")
        unbatched = len(shape) == 1
        if unbatched:
            x = x[None]
        n = _shape(x)[0]
        if hx is None:
            return x, tuple(_zeros((n, self.hidden_size), x) for _ in range(len(self._state_names))), unbatched
        states = []
        for name, h in zip(self._state_names, hx):
            want = (self.hidden_size,) if unbatched else (n, self.hidden_size)
            if _shape(h) != want:
                raise ShapeError(f"{who}: {name} must have shape {want} for an input of shape {shape}, got "
                                 f"{_shape(h)}; pass hidden states of shape (N, hidden_size) (or (hidden_size,) "
                                 f"for an unbatched input)")
            states.append(h[None] if unbatched else h)
        return x, tuple(states), unbatched

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")

    def forward(self, input: Any, hx: Any = None) -> Any:
        x, (h,), unbatched = self._check(input, None if hx is None else (hx,))
        h, _ = _step(self._mode, linear(x, self.weight_ih, self.bias_ih), h, None, self.weight_hh, self.bias_hh)
        return h[0] if unbatched else h


class RNNCell(_NonlinearityRepr, _CellBase):
    """One Elman step ``h' = tanh(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)`` (or relu); hx zeros if omitted.

    >>> import chainrule as cr
    >>> from chainrule.nn.rnn import RNNCell
    >>> RNNCell(4, 3)(cr.ones((2, 4))).shape
    (2, 3)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 dtype: Any = None, generator: Any = None) -> None:
        super().__init__(_rnn_mode(nonlinearity, "RNNCell"), input_size, hidden_size, bias, dtype, generator)
        self.nonlinearity = nonlinearity


class LSTMCell(_CellBase):
    """One LSTM step (gates i, f, g, o); ``hx=(h, c)``, zeros if omitted; returns ``(h', c')``.

    >>> import chainrule as cr
    >>> from chainrule.nn.rnn import LSTMCell
    >>> h, c = LSTMCell(4, 3)(cr.ones((2, 4))); h.shape, c.shape
    ((2, 3), (2, 3))
    """

    _state_names = ("h", "c")

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = None,
                 generator: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, dtype, generator)

    def forward(self, input: Any, hx: Any = None) -> tuple:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise ValueError(f"LSTMCell: hx must be a tuple (h, c) of two tensors, got {type(hx).__name__}")
        x, (h, c), unbatched = self._check(input, hx)
        h, c = _step("LSTM", linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h[0], c[0]) if unbatched else (h, c)


class GRUCell(_CellBase):
    """One GRU step (gates r, z, n; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``); hx zeros if omitted.

    >>> import chainrule as cr
    >>> from chainrule.nn.rnn import GRUCell
    >>> GRUCell(4, 3)(cr.ones(4)).shape
    (3,)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = None,
                 generator: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, dtype, generator)


# ----- stacked sequence layers -----
class _RNNBase(Module):
    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int, bias: bool,
                 batch_first: bool, dropout: float, bidirectional: bool, proj_size: int, dtype: Any,
                 generator: Any) -> None:
        super().__init__()
        who = type(self).__name__
        self.mode = mode
        self.input_size = _positive_int(input_size, "input_size", who)
        self.hidden_size = _positive_int(hidden_size, "hidden_size", who)
        self.num_layers = _positive_int(num_layers, "num_layers", who)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1:
            raise ValueError(f"{who}: dropout must be a number in [0, 1] (the probability of zeroing an element "
                             f"of each layer's output but the last), got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{who}: dropout adds dropout after all but the last recurrent layer, so a non-zero "
                          f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", UserWarning, stacklevel=3)
        if isinstance(proj_size, bool) or not isinstance(proj_size, (int, np.integer)) or proj_size < 0:
            raise ValueError(f"{who}: proj_size must be a non-negative integer, got {proj_size!r}")
        if proj_size >= hidden_size:
            raise ValueError(f"{who}: proj_size has to be smaller than hidden_size, got proj_size={proj_size} "
                             f"and hidden_size={hidden_size}")
        self.bias, self.batch_first, self.bidirectional = bool(bias), bool(batch_first), bool(bidirectional)
        self.dropout, self.proj_size, self.generator = float(dropout), int(proj_size), generator
        directions = 2 if bidirectional else 1
        out = self.proj_size or self.hidden_size
        gates = _GATES[mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self._flat_weights_names: list = []
        for layer in range(self.num_layers):
            n_in = self.input_size if layer == 0 else out * directions
            for d in range(directions):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gates, n_in)), ("weight_hh", (gates, out))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if self.proj_size:
                    shapes.append(("weight_hr", (self.proj_size, self.hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + sfx, _uniform(shape, bound, dtype, generator))
                    self._flat_weights_names.append(name + sfx)

    def reset_parameters(self, generator: Any = None) -> None:
        """Draw every parameter again from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), in place.

        >>> import chainrule as cr, numpy as np
        >>> from chainrule.nn.rnn import GRU
        >>> m = GRU(2, 4)
        >>> m.reset_parameters(generator=np.random.default_rng(0))
        >>> bool(abs(m.weight_hh_l0.data).max() <= 0.5)
        True
        """
        _redraw(self, self.hidden_size, generator)

    def flatten_parameters(self) -> None:
        """A no-op, for code written for PyTorch (there it compacts the weights for cuDNN)."""

    @property
    def all_weights(self) -> list:
        """The parameters per layer and direction, as PyTorch's ``all_weights``."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _states(self, n: int, like: Any, hx: Any, unbatched: bool, in_shape: tuple, order: Any) -> list:
        """The initial states per layer and direction, batched: a list of ``(h, c)`` (c None but for
        LSTM); ``order``: a packed batch's sorted_indices (hx is given in the caller's order)."""
        who = type(self).__name__
        total = self.num_layers * (2 if self.bidirectional else 1)
        out = self.proj_size or self.hidden_size
        want_h = (total, out) if unbatched else (total, n, out)
        want_c = (total, self.hidden_size) if unbatched else (total, n, self.hidden_size)
        if hx is None:
            h0 = _zeros((total, n, out), like)
            c0 = _zeros((total, n, self.hidden_size), like) if self.mode == "LSTM" else None
        else:
            if self.mode == "LSTM":
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise ValueError(f"{who}: hx must be a tuple (h_0, c_0) of two tensors, got {type(hx).__name__}")
                h0, c0 = hx
            else:
                h0, c0 = hx, None
            for name, t, want in (("h_0", h0, want_h), ("c_0", c0, want_c)):
                if t is not None and _shape(t) != want:
                    layout = "(D * num_layers, " + ("" if unbatched else "N, ") + \
                        ("hidden_size" if name == "c_0" or not self.proj_size else "proj_size") + ")"
                    raise ShapeError(f"{who}: {name} must have shape {layout} = {want} for an input of shape "
                                     f"{in_shape}, got {_shape(t)}; "
                                     f"D = 2 if bidirectional else 1")
            if unbatched:
                h0 = h0[:, None]
                c0 = None if c0 is None else c0[:, None]
            elif order is not None:
                h0 = h0[:, order]
                c0 = None if c0 is None else c0[:, order]
        return [(h0[k], None if c0 is None else c0[k]) for k in range(total)]

    def _input(self, input: Any) -> tuple:
        """``(rows, batch_sizes, shape, unbatched)``: the input in the packed layout (time-major rows)."""
        who = type(self).__name__
        if isinstance(input, PackedSequence):
            shape = _shape(input.data)
            if len(shape) != 2 or shape[-1] != self.input_size:
                raise ShapeError(f"{who}: a PackedSequence's data must have shape (sum of lengths, input_size="
                                 f"{self.input_size}), got {shape}; pack inputs of shape (L, N, input_size)")
            sizes = tuple(int(b) for b in np.asarray(raw(input.batch_sizes)).tolist())
            return input.data, sizes, shape, False
        shape = _shape(input)
        layout = "(N, L, input_size)" if self.batch_first else "(L, N, input_size)"
        if len(shape) not in (2, 3) or shape[-1] != self.input_size:
            raise ShapeError(f"{who}: expected input of shape {layout} or (L, input_size) unbatched, with "
                             f"input_size={self.input_size}, got {shape}; check batch_first={self.batch_first} "
                             f"and input_size")
        if 0 in shape[:-1]:
            raise ShapeError(f"{who}: got an empty input of shape {shape}; the sequence length and batch size "
                             f"must be at least 1")
        unbatched = len(shape) == 2
        x = input[:, None] if unbatched else (ops.swapaxes(input, 0, 1) if self.batch_first else input)
        steps, n = _shape(x)[:2]
        return ops.reshape(x, (steps * n, self.input_size)), (n,) * steps, shape, unbatched

    def _layer(self, x: Any, sfx: str, state: tuple, batch_sizes: tuple, reverse: bool) -> tuple:
        """One layer and direction over the packed rows ``x``: ``(output rows, h_n, c_n)``."""
        w_ih, w_hh = getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx)
        b_ih = getattr(self, "bias_ih" + sfx) if self.bias else None
        b_hh = getattr(self, "bias_hh" + sfx) if self.bias else None
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        h, c = state
        if self.mode == "GRU":              # b_hh apart: the reset gate multiplies W_hn h + b_hn
            gi = linear(x, w_ih, b_ih)
            out = gru_scan(gi, w_hh, _zeros((_shape(w_hh)[0],), gi) if b_hh is None else b_hh, h, batch_sizes,
                           reverse)
            rows, n = _shape(gi)[0], self.hidden_size
            return out[:rows, :n], out[rows:, :n], None
        gi = linear(x, w_ih, None if b_ih is None else b_ih + b_hh)    # both biases, before the recurrence
        rows = _shape(gi)[0]
        if self.mode == "LSTM":
            out = lstm_scan(gi, w_hh, h, c, w_hr, batch_sizes, reverse)
            p = _shape(h)[-1]
            return out[:rows, :p], out[rows:, :p], out[rows:, p:p + self.hidden_size]
        out = rnn_scan(gi, w_hh, h, batch_sizes, reverse, "tanh" if self.mode == "RNN_TANH" else "relu")
        return out[:rows], out[rows:], None

    def forward(self, input: Any, hx: Any = None) -> tuple:
        packed = isinstance(input, PackedSequence)
        x, batch_sizes, shape, unbatched = self._input(input)
        order = input.sorted_indices if packed else None
        states = self._states(batch_sizes[0], x, hx, unbatched, shape, None if order is None else raw(order))
        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                out, h, c = self._layer(x, f"_l{layer}" + ("_reverse" if d else ""),
                                        states[layer * directions + d], batch_sizes, bool(d))
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else ops.concatenate(outs, axis=-1)
            if self.dropout > 0 and layer < self.num_layers - 1:
                x = _dropout(x, self.dropout, self.training, self.generator)
        h_n = ops.stack(h_n, axis=0)
        c_n = ops.stack(c_n, axis=0) if self.mode == "LSTM" else None
        if packed:
            x = PackedSequence(x, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
            if input.unsorted_indices is not None:
                back = raw(input.unsorted_indices)
                h_n, c_n = h_n[:, back], None if c_n is None else c_n[:, back]
        else:
            x = ops.reshape(x, (len(batch_sizes), batch_sizes[0], _shape(x)[-1]))
            if unbatched:
                x, h_n, c_n = x[:, 0], h_n[:, 0], None if c_n is None else c_n[:, 0]
            elif self.batch_first:
                x = ops.swapaxes(x, 0, 1)
        return (x, (h_n, c_n)) if self.mode == "LSTM" else (x, h_n)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for name, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        return s


class RNN(_NonlinearityRepr, _RNNBase):
    """A stack of Elman layers (tanh or relu) over a sequence; returns ``(output, h_n)`` as PyTorch.

    Input (L, N, input_size), (N, L, input_size) with ``batch_first``, or (L, input_size) unbatched;
    ``h_0`` of shape (D * num_layers, N, hidden_size), zeros if omitted (D = 2 if bidirectional). A
    ``PackedSequence`` input (all three layers) gives a PackedSequence output and each sequence's own h_n.

    >>> import chainrule as cr
    >>> from chainrule.nn.rnn import RNN
    >>> out, h_n = RNN(4, 3, num_layers=2, bidirectional=True)(cr.ones((5, 2, 4)))
    >>> out.shape, h_n.shape
    ((5, 2, 6), (4, 2, 3))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype: Any = None, generator: Any = None) -> None:
        super().__init__(_rnn_mode(nonlinearity, "RNN"), input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, dtype, generator)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """A stack of LSTM layers over a sequence; returns ``(output, (h_n, c_n))`` as PyTorch.

    Gates i, f, g, o; ``hx = (h_0, c_0)``, zeros if omitted. With ``proj_size > 0`` each layer's hidden
    state is projected by ``weight_hr_l{k}`` to ``proj_size`` features (h_n and output use it; c_n does not).

    >>> import chainrule as cr
    >>> from chainrule.nn.rnn import LSTM
    >>> out, (h_n, c_n) = LSTM(4, 3, batch_first=True, proj_size=2)(cr.ones((2, 5, 4)))
    >>> out.shape, h_n.shape, c_n.shape
    ((2, 5, 2), (1, 2, 2), (1, 2, 3))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 dtype: Any = None, generator: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, dtype, generator)


class GRU(_RNNBase):
    """A stack of GRU layers over a sequence (gates r, z, n); returns ``(output, h_n)`` as PyTorch.

    >>> import chainrule as cr
    >>> from chainrule.nn.rnn import GRU
    >>> out, h_n = GRU(4, 3)(cr.ones((5, 4)))
    >>> out.shape, h_n.shape
    ((5, 3), (1, 3))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype: Any = None, generator: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         0, dtype, generator)
