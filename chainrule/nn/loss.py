"""Loss modules, as ``torch.nn``'s: each wraps its function (``chainrule.nn.functional``) and keeps
``reduction``. As in PyTorch, a class ``weight`` (and BCEWithLogitsLoss's ``pos_weight``) is a buffer:
in ``state_dict`` when given, absent when None. PyTorch's deprecated ``size_average``/``reduce`` are
accepted and mapped to ``reduction`` as PyTorch maps them.
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.tensor import Tensor
from chainrule.nn.functional import basic
from chainrule.nn.functional import loss as L
from chainrule.nn.functional.loss import _legacy_reduction
from chainrule.nn.module import Module
from chainrule.numpy import raw

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CTCLoss", "CosineEmbeddingLoss", "CrossEntropyLoss", "HuberLoss",
           "KLDivLoss",
           "L1Loss", "MSELoss", "MarginRankingLoss", "NLLLoss", "SmoothL1Loss", "TripletMarginLoss"]

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    _allowed = _REDUCTIONS
    _fn: Any = None        # the functional form: the default forward is _fn(input, target, reduction=, ...)
    _options: tuple = ()   # ... with these attributes as the keyword arguments of the same names

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        reduction = _legacy_reduction(size_average, reduce, reduction)
        if reduction not in self._allowed:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {', '.join(map(repr, self._allowed))}"
                             f", got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""

    def forward(self, input: Any, target: Any) -> Any:
        return self._fn(input, target, reduction=self.reduction, **{k: getattr(self, k) for k in self._options})


def _buffer(value: Any) -> Any:
    if value is None or isinstance(value, Tensor):
        return value
    arr = np.asarray(raw(value))                 # an ndarray keeps a float dtype; a list takes the default
    keep = isinstance(raw(value), np.ndarray) and arr.dtype.kind == "f"
    return Tensor(arr if keep else arr.astype(get_default_dtype()))


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(weight))


class L1Loss(_Loss):
    """Mean absolute error.

    >>> import chainrule as cr
    >>> cr.nn.L1Loss()(cr.tensor([1.0, 4.0]), cr.tensor([2.0, 2.0]))
    tensor(1.5)
    """

    _fn = staticmethod(L.l1_loss)


class MSELoss(_Loss):
    """Mean squared error.

    >>> import chainrule as cr
    >>> cr.nn.MSELoss(reduction="sum")(cr.tensor([1.0, 4.0]), cr.tensor([2.0, 2.0]))
    tensor(5.)
    """

    _fn = staticmethod(basic.mse_loss)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above (``smooth_l1_loss``).

    >>> import chainrule as cr
    >>> cr.nn.SmoothL1Loss(beta=2.0)(cr.tensor([1.0]), cr.tensor([0.0]))
    tensor(0.25)
    """

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    _fn, _options = staticmethod(L.smooth_l1_loss), ("beta",)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, ``delta``-scaled linear above (``huber_loss``).

    >>> import chainrule as cr
    >>> cr.nn.HuberLoss(delta=2.0)(cr.tensor([3.0]), cr.tensor([0.0]))
    tensor(4.)
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    _fn, _options = staticmethod(L.huber_loss), ("delta",)


class CrossEntropyLoss(_WeightedLoss):
    """Cross-entropy of logits against class indices or probabilities (``cross_entropy``), with PyTorch's
    ``weight``, ``ignore_index`` and ``label_smoothing``.

    >>> import chainrule as cr
    >>> round(float(cr.nn.CrossEntropyLoss()(cr.tensor([[0.0, 0.0]]), cr.tensor([1]))), 4)
    0.6931
    """

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Any, target: Any) -> Any:
        return basic.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                                   self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices given log-probabilities (``nll_loss``).

    >>> import chainrule as cr
    >>> cr.nn.NLLLoss()(cr.tensor([[-1.0, -2.0]]), cr.tensor([1]))
    tensor(2.)
    """

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:
        return basic.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy on probabilities (``binary_cross_entropy``), ``weight`` per element.

    >>> import chainrule as cr
    >>> round(float(cr.nn.BCELoss()(cr.tensor([0.5]), cr.tensor([0.0]))), 4)
    0.6931
    """

    _fn, _options = staticmethod(L.binary_cross_entropy), ("weight",)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits (``binary_cross_entropy_with_logits``), ``weight`` per element,
    ``pos_weight`` per class (the last axis); both are buffers.

    >>> import chainrule as cr
    >>> m = cr.nn.BCEWithLogitsLoss(pos_weight=cr.tensor([3.0]))
    >>> list(m.state_dict()), round(float(m(cr.tensor([0.0]), cr.tensor([1.0]))), 4)
    (['pos_weight'], 2.0794)
    """

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(weight))
        self.register_buffer("pos_weight", _buffer(pos_weight))

    _fn, _options = staticmethod(L.binary_cross_entropy_with_logits), ("weight", "pos_weight")


class KLDivLoss(_Loss):
    """KL divergence of log-probability ``input`` from ``target`` (``kl_div``); ``reduction="batchmean"``
    gives the true KL per example.

    >>> import chainrule as cr
    >>> x = cr.log(cr.tensor([[0.25, 0.75]]))
    >>> float(cr.nn.KLDivLoss(reduction="batchmean")(x, cr.tensor([[0.25, 0.75]])))
    0.0
    """

    _allowed = _REDUCTIONS + ("batchmean",)

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    _fn, _options = staticmethod(L.kl_div), ("log_target",)


class _PairMarginLoss(_Loss):
    """A loss of two inputs, a target and a ``margin``: ``_fn(input1, input2, target, margin, reduction=)``."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return self._fn(input1, input2, target, self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_PairMarginLoss):
    """``1 - cos`` for pairs labelled 1, ``max(0, cos - margin)`` for pairs labelled -1.

    >>> import chainrule as cr
    >>> cr.nn.CosineEmbeddingLoss()(cr.tensor([[1.0, 0.0]]), cr.tensor([[0.0, 1.0]]), cr.tensor([1]))
    tensor(1.)
    """

    _fn = staticmethod(L.cosine_embedding_loss)


class MarginRankingLoss(_PairMarginLoss):
    """``max(0, -y (x1 - x2) + margin)``.

    >>> import chainrule as cr
    >>> cr.nn.MarginRankingLoss(margin=1.0)(cr.tensor([2.0]), cr.tensor([0.0]), cr.tensor([-1.0]))
    tensor(3.)
    """

    _fn = staticmethod(L.margin_ranking_loss)


class TripletMarginLoss(_Loss):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the pairwise p-distance.

    >>> import chainrule as cr
    >>> a, p, n = cr.zeros((1, 2)), cr.zeros((1, 2)), cr.ones((1, 2))
    >>> round(float(cr.nn.TripletMarginLoss(margin=2.0, eps=0.0)(a, p, n)), 4)
    0.5858
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return L.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                     reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist temporal classification (``ctc_loss``) of (T, N, C) log-probabilities against
    label sequences.

    >>> import chainrule as cr
    >>> lp = cr.log_softmax(cr.zeros((3, 1, 3)), axis=2)
    >>> round(float(cr.nn.CTCLoss()(lp, cr.tensor([[1, 2]]), [3], [2])), 4)      # -log(5/27) / 2
    0.8432
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> Any:
        return L.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)
