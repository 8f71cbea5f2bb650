"""``MultiheadAttention``: PyTorch's layer, its parameters, initialisation and state_dict keys."""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.nn import init
from chainrule.nn.functional.attention import multi_head_attention_forward
from chainrule.nn.layers import Linear
from chainrule.nn.module import Module, Parameter

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """The ``out_proj`` of ``MultiheadAttention``: a ``Linear`` (PyTorch's name, same keys).

    >>> import chainrule as cr
    >>> from chainrule.nn.attention import NonDynamicallyQuantizableLinear
    >>> list(NonDynamicallyQuantizableLinear(4, 4).state_dict())
    ['weight', 'bias']
    """


class MultiheadAttention(Module):
    """Multi-head attention, as ``torch.nn.MultiheadAttention``.

    ``in_proj_weight`` (3E, E) is packed when ``kdim == vdim == embed_dim``; otherwise
    ``q_proj_weight``, ``k_proj_weight`` (E, kdim) and ``v_proj_weight`` (E, vdim). The projections
    are Xavier-uniform, their biases zero, ``out_proj`` a Linear with PyTorch's default init (bias
    zeroed), ``bias_k``/``bias_v`` Xavier-normal. Inputs are (L, N, E) ((N, L, E) with
    ``batch_first``) or unbatched (L, E); boolean masks mean *not allowed* (True), float masks are
    added. ``forward`` returns ``(output, weights)``.

    >>> import chainrule as cr
    >>> from chainrule.nn.attention import MultiheadAttention
    >>> mha = MultiheadAttention(8, 2, batch_first=True)
    >>> x = cr.ones((3, 5, 8))
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    ((3, 5, 8), (3, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, dtype: Any = None,
                 generator: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be positive, got "
                             f"embed_dim={embed_dim}, num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim={embed_dim} must be divisible by "
                             f"num_heads={num_heads}; pick num_heads among the divisors of embed_dim")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first, self.head_dim, self.add_zero_attn = batch_first, embed_dim // num_heads, add_zero_attn
        self.generator = generator
        dtype = dtype or get_default_dtype()

        def empty(*shape: int) -> Parameter:
            return Parameter(np.zeros(shape, dtype=dtype))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = empty(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype,
                                                        generator=generator)
        if add_bias_kv:
            self.bias_k, self.bias_v = empty(1, 1, embed_dim), empty(1, 1, embed_dim)
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self._reset_parameters(generator)

    def _reset_parameters(self, generator: Any = None) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight, generator=generator)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w, generator=generator)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b, generator=generator)

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None, need_weights: bool = True,
                attn_mask: Any = None, average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
        """``(output, weights)`` of attending from ``query`` to ``key``/``value`` (see the class)."""
        return multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal, generator=self.generator,
            batch_first=self.batch_first)

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")
