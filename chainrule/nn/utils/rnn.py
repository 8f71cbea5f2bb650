"""Variable-length sequences (``torch.nn.utils.rnn``): pad a list into one tensor, and split it back."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chainrule import numpy as ops
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor

__all__ = ["pad_sequence", "unpad_sequence"]


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
