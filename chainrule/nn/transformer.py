"""Transformer layers, as ``torch.nn``'s: encoder and decoder layers, their stacks and ``Transformer``.

Same submodules, state_dict keys, initialisation and residual/normalisation order (post-norm, or
pre-norm with ``norm_first=True``) as PyTorch; built from ``MultiheadAttention``, ``Linear``,
``LayerNorm`` and ``Dropout``.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.nn import init
from chainrule.nn.attention import MultiheadAttention
from chainrule.nn.containers import ModuleList
from chainrule.nn.functional.activation import gelu
from chainrule.nn.functional.basic import relu
from chainrule.nn.layers import Dropout, LayerNorm, Linear
from chainrule.nn.module import Module
from chainrule.numpy import raw

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]

_ACTIVATIONS = {"relu": relu, "gelu": gelu}


def _generate_square_subsequent_mask(sz: int, dtype: Any = None) -> Tensor:
    """The (sz, sz) causal float mask: 0 on and below the diagonal, -inf above, as PyTorch's."""
    mask = np.where(np.triu(np.ones((sz, sz), dtype=bool), 1), -np.inf, 0.0)
    return Tensor(mask.astype(dtype or get_default_dtype()))


def _activation(activation: Any, who: str) -> Callable:
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{who}: activation should be 'relu' or 'gelu' (or a callable), got {activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"{who}: activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation


def _norm(d_model: int, eps: float, bias: bool, dtype: Any) -> LayerNorm:
    norm = LayerNorm(d_model, eps=eps, dtype=dtype)
    if not bias:                           # PyTorch's LayerNorm(bias=False): a weight and no bias
        norm.bias = None
    return norm


def _check_width(x: Any, d_model: int, who: str, name: str) -> None:
    shape = np.shape(raw(x))
    if len(shape) not in (2, 3) or shape[-1] != d_model:
        raise ShapeError(f"{who}: {name} must be (S, E), (S, N, E) or (N, S, E) with batch_first=True, with "
                         f"E = d_model = {d_model}; got {shape}")


def _clones(layer: Module, n: int) -> ModuleList:
    # deep copies share the layer's random generators (one stream, as PyTorch's global one)
    memo = {id(g): g for m in layer.modules() for g in [getattr(m, "generator", None)] if g is not None}
    return ModuleList([copy.deepcopy(layer, dict(memo)) for _ in range(n)])


class _TransformerLayer(Module):
    """What both layers share: self-attention (and attention over memory with ``_cross_attention``),
    the feed-forward block, and a LayerNorm and Dropout per block, registered in PyTorch's order."""

    _cross_attention = False

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, dtype: Any = None, generator: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype, generator=generator)
        if self._cross_attention:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                     batch_first=batch_first, dtype=dtype, generator=generator)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype, generator=generator)
        self.dropout = Dropout(dropout, generator=generator)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype, generator=generator)
        self.norm_first = norm_first
        self.norm1 = _norm(d_model, layer_norm_eps, bias, dtype)
        self.norm2 = _norm(d_model, layer_norm_eps, bias, dtype)
        if self._cross_attention:
            self.norm3 = _norm(d_model, layer_norm_eps, bias, dtype)
        self.dropout1 = Dropout(dropout, generator=generator)
        self.dropout2 = Dropout(dropout, generator=generator)
        if self._cross_attention:
            self.dropout3 = Dropout(dropout, generator=generator)
        self.activation = _activation(activation, type(self).__name__)
        self.d_model, self.batch_first = d_model, batch_first

    @staticmethod
    def _attention_block(attention: Module, dropout: Module, x: Any, mem: Any, attn_mask: Any,
                         key_padding_mask: Any, is_causal: bool) -> Any:
        x = attention(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                      need_weights=False, is_causal=is_causal)[0]
        return dropout(x)

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        return self._attention_block(self.self_attn, self.dropout1, x, x, attn_mask, key_padding_mask, is_causal)

    def _feed_forward(self, x: Any) -> Any:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with a residual and LayerNorm, as PyTorch's.

    Post-norm by default; ``norm_first=True`` normalises before each block. ``activation`` is
    ``"relu"``, ``"gelu"`` or a callable; ``forward(src, src_mask=None, src_key_padding_mask=None,
    is_causal=False)``.

    >>> import chainrule as cr
    >>> from chainrule.nn.transformer import TransformerEncoderLayer
    >>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> layer(cr.ones((2, 5, 8))).shape
    (2, 5, 8)
    """

    def forward(self, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Any:
        _check_width(src, self.d_model, type(self).__name__, "src")
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _ff_block(self, x: Any) -> Any:
        return self.dropout2(self._feed_forward(x))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over ``memory``, then a feed-forward block (residuals, LayerNorms).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``, as PyTorch's.

    >>> import chainrule as cr
    >>> from chainrule.nn.transformer import TransformerDecoderLayer
    >>> layer = TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> layer(cr.ones((4, 2, 8)), cr.ones((6, 2, 8))).shape
    (4, 2, 8)
    """

    _cross_attention = True

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Any:
        who = type(self).__name__
        _check_width(tgt, self.d_model, who, "tgt")
        _check_width(memory, self.d_model, who, "memory")
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x: Any, mem: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        return self._attention_block(self.multihead_attn, self.dropout2, x, mem, attn_mask, key_padding_mask,
                                     is_causal)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout3(self._feed_forward(x))


class _LayerStack(Module):
    """``num_layers`` deep copies of one layer, then an optional ``norm``."""

    def __init__(self, layer: Module, num_layers: int, norm: Module | None, who: str) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"{who}: num_layers must be at least 1, got {num_layers}")
        self.layers = _clones(layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def _final_norm(self, out: Any) -> Any:
        return out if self.norm is None else self.norm(out)


class TransformerEncoder(_LayerStack):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn, then ``norm`` if given.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch's signature (PyTorch's
    nested-tensor fast path only changes speed, and padded outputs, in inference).

    >>> import chainrule as cr
    >>> from chainrule.nn.transformer import TransformerEncoder, TransformerEncoderLayer
    >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16)
    >>> enc = TransformerEncoder(layer, num_layers=2)
    >>> enc(cr.ones((5, 3, 8))).shape, len(enc.layers)
    ((5, 3, 8), 2)
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__(encoder_layer, num_layers, norm, "TransformerEncoder")
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Any:
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        return self._final_norm(out)


class TransformerDecoder(_LayerStack):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn over ``memory``, then ``norm``.

    >>> import chainrule as cr
    >>> from chainrule.nn.transformer import TransformerDecoder, TransformerDecoderLayer
    >>> dec = TransformerDecoder(TransformerDecoderLayer(8, 2, dim_feedforward=16), 2)
    >>> dec(cr.ones((4, 3, 8)), cr.ones((5, 3, 8))).shape
    (4, 3, 8)
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__(decoder_layer, num_layers, norm, "TransformerDecoder")

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self._final_norm(out)


class Transformer(Module):
    """An encoder-decoder Transformer, as ``torch.nn.Transformer``: final LayerNorms on both stacks,
    every matrix parameter re-initialised Xavier-uniform.

    >>> import chainrule as cr
    >>> from chainrule.nn.transformer import Transformer
    >>> model = Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                           dim_feedforward=16, batch_first=True)
    >>> src, tgt = cr.ones((2, 5, 8)), cr.ones((2, 4, 8))
    >>> model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(4)).shape
    (2, 4, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, dtype: Any = None, generator: Any = None) -> None:
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias, dtype, generator)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*layer_args), num_encoder_layers, _norm(d_model, layer_norm_eps, bias, dtype))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*layer_args), num_decoder_layers, _norm(d_model, layer_norm_eps, bias, dtype))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p, generator=generator)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None, memory_mask: Any = None,
                src_key_padding_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        ss, ts = np.shape(raw(src)), np.shape(raw(tgt))
        if len(ss) != len(ts) or (len(ss) == 3 and ss[0 if self.batch_first else 1] != ts[0 if self.batch_first
                                                                                         else 1]):
            raise ShapeError(f"Transformer: src {ss} and tgt {ts} must both be batched with the same batch size "
                             f"(axis {0 if self.batch_first else 1}), or both unbatched (S, E)")
        if ss[-1] != self.d_model or ts[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature number of src {ss} and tgt {ts} must equal d_model="
                             f"{self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """The (sz, sz) causal float mask: 0 on and below the diagonal, -inf above, as PyTorch's.

        >>> from chainrule.nn.transformer import Transformer
        >>> Transformer.generate_square_subsequent_mask(3)
        tensor([[  0., -inf, -inf],
                [  0.,   0., -inf],
                [  0.,   0.,   0.]])
        """
        if device not in (None, "cpu"):
            raise ValueError(f"Transformer.generate_square_subsequent_mask: chainrule runs on the CPU (NumPy); "
                             f"got device={device!r}, pass device=None")
        return _generate_square_subsequent_mask(sz, dtype)
