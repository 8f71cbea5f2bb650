"""Variable-length sequences (``torch.nn.utils.rnn``): pad a list into one tensor and split it back;
pack a padded batch into a ``PackedSequence`` (the recurrent layers' variable-length input) and back.

The packed layout is time-major: the rows of step t (one per sequence still running, longest first)
follow those of step t - 1, ``batch_sizes[t]`` of them. Packing and unpacking are one gather and one
scatter, recorded, so gradients flow from the packed data back to the padded input.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.numpy import raw

__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence",
           "unpack_sequence", "unpad_sequence"]

class _LengthsError(ShapeError, RuntimeError):
    """Bad ``lengths``: a ValueError as chainrule's shape errors, and the RuntimeError PyTorch raises."""


_Fields = namedtuple("_Fields", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_Fields):
    """A batch of variable-length sequences, packed (``torch.nn.utils.rnn.PackedSequence``): ``data``
    (sum of the lengths, *), ``batch_sizes`` (int64, the rows of each time step), ``sorted_indices``
    (the batch order by decreasing length; None when the batch was given sorted) and
    ``unsorted_indices`` (its inverse). Build it with ``pack_padded_sequence`` or ``pack_sequence``.

    >>> import chainrule as cr
    >>> p = cr.nn.utils.rnn.pack_sequence([cr.tensor([1.0, 2.0]), cr.tensor([3.0])])
    >>> p.data, p.batch_sizes
    (tensor([1., 3., 2.]), tensor([2, 1]))
    """

    def __new__(cls, data: Any, batch_sizes: Any = None, sorted_indices: Any = None,
                unsorted_indices: Any = None) -> PackedSequence:
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required; build a PackedSequence with "
                            "pack_padded_sequence or pack_sequence")
        if sorted_indices is not None and unsorted_indices is None:
            unsorted_indices = _indices(np.argsort(_ints(sorted_indices), kind="stable"))
        return super().__new__(cls, data, _indices(_ints(batch_sizes)),
                               None if sorted_indices is None else _indices(_ints(sorted_indices)),
                               None if unsorted_indices is None else _indices(_ints(unsorted_indices)))

    @property
    def is_cuda(self) -> bool:
        """Always False (PyTorch's attribute; chainrule runs on the CPU)."""
        return False

    def is_pinned(self) -> bool:
        """Always False (PyTorch's method)."""
        return False


def _ints(v: Any) -> Any:
    return np.asarray(raw(v)).astype(np.int64, copy=False).reshape(-1)


def _indices(v: Any) -> Tensor:
    return Tensor(np.array(v, dtype=np.int64))


def _rows(batch_sizes: Any, order: Any) -> tuple:
    """(time step, batch column) of every packed row: step t's rows are the first batch_sizes[t]
    sequences of ``order`` (the batch by decreasing length)."""
    t = np.repeat(np.arange(len(batch_sizes)), batch_sizes)
    within = np.arange(len(t)) - np.repeat(np.cumsum(batch_sizes) - batch_sizes, batch_sizes)
    return t, np.asarray(order)[within]


def pack_padded_sequence(input: Any, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (``(B, T, *)`` with ``batch_first``) of sequences of the given
    ``lengths`` (a list, array or int64 tensor). ``enforce_sorted=True`` expects the lengths in
    decreasing order; ``False`` sorts them (stably) and records the order in ``sorted_indices``.

    >>> import chainrule as cr
    >>> x = cr.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    >>> cr.nn.utils.rnn.pack_padded_sequence(x, [3, 1], batch_first=True).data
    tensor([1., 4., 2., 3.])
    """
    x = input if isinstance(input, Tensor) else Tensor(np.asarray(input))
    if np.ndim(raw(lengths)) != 1:
        raise _LengthsError(f"pack_padded_sequence: 'lengths' argument should be a 1D CPU int64 tensor, but got "
                         f"{np.ndim(raw(lengths))}D lengths; pass one length per sequence")
    lens = _ints(lengths)
    if x.ndim < 2:
        raise ShapeError(f"pack_padded_sequence: input must have a time and a batch axis, (T, B, *) or (B, T, *) "
                         f"with batch_first=True, got shape {x.shape}")
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else x.shape[:2]
    if len(lens) != batch:
        raise _LengthsError(f"pack_padded_sequence: Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{len(lens)} (batch_size={batch}); input shape {x.shape}, batch_first={batch_first}")
    if (lens <= 0).any():
        raise _LengthsError("pack_padded_sequence: Length of all samples has to be greater than 0, but found an "
                         f"element in 'lengths' that is <= 0: {lens.tolist()}")
    if (lens > steps).any():
        raise _LengthsError(f"pack_padded_sequence: lengths {lens.tolist()} exceed the {steps} time steps of the "
                         f"input (shape {x.shape}, batch_first={batch_first})")
    if enforce_sorted:
        if (lens[:-1] < lens[1:]).any():
            raise _LengthsError("pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
                             "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                             "pack_padded_sequence and/or pack_sequence to sidestep this requirement if you "
                             "do not need ONNX exportability.")
        order, sorted_indices = np.arange(batch), None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = order
    batch_sizes = (lens[order][None, :] > np.arange(int(lens.max()))[:, None]).sum(axis=1)
    t, b = _rows(batch_sizes, order)
    data = x[b, t] if batch_first else x[t, b]
    return PackedSequence(data, batch_sizes, sorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple:
    """The inverse of ``pack_padded_sequence``: ``(padded, lengths)``, padded (T, B, *) (``(B, T, *)``
    with ``batch_first``) in the original batch order, T the longest length or ``total_length``.

    >>> import chainrule as cr
    >>> p = cr.nn.utils.rnn.pack_sequence([cr.tensor([1.0, 2.0]), cr.tensor([3.0])])
    >>> cr.nn.utils.rnn.pad_packed_sequence(p, batch_first=True)
    (tensor([[1., 2.],
            [3., 0.]]), tensor([2, 1]))
    """
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence (from pack_padded_sequence or "
                        f"pack_sequence), got {type(sequence).__name__}")
    data, batch_sizes, sorted_indices, _ = sequence
    sizes = _ints(batch_sizes)
    steps, batch = len(sizes), int(sizes[0])
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"pad_packed_sequence: Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max sequence length "
                             f"being {steps}")
        steps = int(total_length)
    order = np.arange(batch) if sorted_indices is None else _ints(sorted_indices)
    t, b = _rows(sizes, order)
    lengths = np.zeros(batch, dtype=np.int64)
    lengths[order] = (sizes[None, :] > np.arange(batch)[:, None]).sum(axis=1)
    data = data if isinstance(data, Tensor) else Tensor(np.asarray(data))
    shape = ((batch, steps) if batch_first else (steps, batch)) + tuple(data.shape[1:])
    base = np.full(shape, padding_value, dtype=data.dtype)
    return ops.index_put(base, (b, t) if batch_first else (t, b), data), _indices(lengths)


def pack_sequence(sequences: Any, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors of shapes (L_i, *) (``enforce_sorted``: longest first, as torch).

    >>> import chainrule as cr
    >>> p = cr.nn.utils.rnn.pack_sequence([cr.tensor([1.0]), cr.tensor([2.0, 3.0])], enforce_sorted=False)
    >>> p.data, p.sorted_indices
    (tensor([2., 1., 3.]), tensor([1, 0]))
    """
    seqs = [s if isinstance(s, Tensor) else Tensor(np.asarray(s)) for s in sequences]
    lengths = [s.shape[0] if s.ndim else 0 for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences a PackedSequence holds, in the original order (recorded).

    >>> import chainrule as cr
    >>> p = cr.nn.utils.rnn.pack_sequence([cr.tensor([1.0]), cr.tensor([2.0, 3.0])], enforce_sorted=False)
    >>> cr.nn.utils.rnn.unpack_sequence(p)
    [tensor([1.]), tensor([2., 3.])]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def pad_sequence(sequences: Any, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack tensors of shapes ``(L_i, *)`` into ``(L_max, B, *)`` (``(B, L_max, *)`` with
    ``batch_first=True``), filling with ``padding_value`` after (``"right"``) or before (``"left"``)
    each sequence. Recorded: gradients flow back to every sequence.

    >>> import chainrule as cr
    >>> cr.nn.utils.rnn.pad_sequence([cr.tensor([1.0, 2.0, 3.0]), cr.tensor([4.0])], batch_first=True)
    tensor([[1., 2., 3.],
            [4., 0., 0.]])
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: expected padding_side to be one of left or right, but got "
                         f"{padding_side!r}")
    if not isinstance(sequences, Iterable):
        raise TypeError(f"pad_sequence: expected an iterable of tensors for sequences, but got "
                        f"{type(sequences).__name__}")
    seqs = [s if isinstance(s, Tensor) else Tensor(s) for s in sequences]
    if not seqs:
        raise ValueError("pad_sequence: received an empty list of sequences; pass at least one tensor")
    trailing = seqs[0].shape[1:]
    for i, s in enumerate(seqs):
        if s.ndim == 0:
            raise ShapeError(f"pad_sequence: sequence {i} is a 0-d tensor; every sequence needs a length "
                             f"axis first, shape (L, *)")
        if s.shape[1:] != trailing:
            raise ShapeError(f"pad_sequence: sequence {i} has shape {s.shape} but sequence 0 has {seqs[0].shape}; "
                             f"all sequences must agree after the first (length) axis, here {trailing}")
    max_len = max(s.shape[0] for s in seqs)
    dtype = seqs[0].dtype
    padded = []
    for s in seqs:
        extra = max_len - s.shape[0]
        if s.dtype != dtype:
            s = s.astype(dtype)
        if extra:
            before, after = (extra, 0) if padding_side == "left" else (0, extra)
            s = ops.pad(s, [(before, after)] + [(0, 0)] * len(trailing), constant_values=padding_value)
        padded.append(s)
    return ops.stack(padded, axis=0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list:
    """Split a right-padded batch back into its sequences of the given ``lengths`` (recorded).

    >>> import chainrule as cr
    >>> x = cr.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    >>> cr.nn.utils.rnn.unpad_sequence(x, [3, 1], batch_first=True)
    [tensor([1., 2., 3.]), tensor([4.])]
    """
    x = padded_sequences if batch_first else ops.swapaxes(padded_sequences, 0, 1)
    lengths = [int(n) for n in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]
    if len(lengths) != x.shape[0] or any(n < 0 or n > x.shape[1] for n in lengths):
        raise ShapeError(f"unpad_sequence: lengths {lengths} do not fit a padded batch of {x.shape[0]} "
                         f"sequences of at most {x.shape[1]} steps (shape {padded_sequences.shape}, "
                         f"batch_first={batch_first})")
    return [x[i, :n] for i, n in enumerate(lengths)]
