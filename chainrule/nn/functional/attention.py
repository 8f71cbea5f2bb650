"""Attention as functions: ``scaled_dot_product_attention`` and ``multi_head_attention_forward``, as
``torch.nn.functional``'s.

Both are composites of chainrule ops (matmul, softmax, reshapes), so they differentiate to any order
in both modes. Masks are constants or tensors: a float mask is added to the scores; a boolean mask
means *take part* (True) in ``scaled_dot_product_attention`` and *not allowed* (True) in
``multi_head_attention_forward``, as in PyTorch.
"""
from __future__ import annotations

import math
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._constants import shape_constant
from chainrule.core._dtypes import is_floating
from chainrule.core._shapes import broadcasts_to
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.tensor import Tensor
from chainrule.nn.functional.basic import dropout, linear
from chainrule.numpy import raw, softmax

__all__ = ["multi_head_attention_forward", "scaled_dot_product_attention"]


def _shape(x: Any) -> tuple:
    return tuple(np.shape(raw(x)))


def _dtype(x: Any) -> Any:
    r = raw(x)                          # (a batched tensor's raw value is not an ndarray: its dtype is)
    return r.dtype if hasattr(r, "dtype") else np.asarray(r).dtype


def _additive(mask: Any, dtype: Any, true_means_masked: bool, who: str, name: str) -> Any:
    """A mask as an additive float bias: boolean masks become 0 / -inf; float masks pass through."""
    if mask is None:
        return None
    kind = _dtype(mask)
    if kind == np.bool_:
        m = np.asarray(raw(mask))
        blocked = m if true_means_masked else ~m
        return np.where(blocked, -np.inf, 0.0).astype(dtype)
    if not is_floating(kind):
        raise DTypeError(f"{who}: {name} must be boolean or floating point, got dtype {kind} with shape "
                         f"{_shape(mask)}; convert it with mask.astype(bool)")
    return mask if isinstance(mask, Tensor) else np.asarray(mask, dtype=dtype)


def _causal_bias(n_q: int, n_k: int, dtype: Any) -> Any:
    """-inf above the diagonal (query i sees keys 0..i), top-left aligned as PyTorch (made once per
    shape and dtype: a constant that cr.compile can bake into a tape)."""
    return shape_constant(("causal_bias", n_q, n_k, np.dtype(dtype).str), lambda: np.where(
        np.triu(np.ones((n_q, n_k), dtype=bool), 1), -np.inf, 0.0).astype(dtype))


def _project(x: Any, w: Any, b: Any) -> Any:
    """``linear`` over the last axis, on the rows of ``x`` as one 2-D matrix: NumPy runs a 3-D matmul as one
    product per leading index (on a transposed input, 128 products of 8 rows: 5x slower at seq 128, batch 8)."""
    shape = _shape(x)
    return ops.reshape(linear(ops.reshape(x, (-1, shape[-1])), w, b), shape[:-1] + (-1,))


def _heads(t: Any, batch_first: bool, n_heads: int, head_dim: int) -> Any:
    """(N, S, E) (``batch_first``) or (S, N, E) as (N, H, S, head_dim): a strided view that matmul takes as is."""
    if batch_first:
        n, s, _ = _shape(t)
        return ops.swapaxes(ops.reshape(t, (n, s, n_heads, head_dim)), 1, 2)
    s, n, _ = _shape(t)
    return ops.transpose(ops.reshape(t, (s, n, n_heads, head_dim)), (1, 2, 0, 3))


def _static_heads(static: Any, name: str, bsz: int, n_heads: int, head_dim: int, who: str) -> Any:
    """A given ``static_k``/``static_v`` (N * H, S, head_dim), checked, as (N, H, S, head_dim)."""
    shape = _shape(static)
    if len(shape) != 3 or shape[::2] != (bsz * n_heads, head_dim):
        raise ShapeError(f"{who}: {name} must be (N * num_heads, S, head_dim) = ({bsz * n_heads}, S, "
                         f"{head_dim}), got {shape}")
    return ops.reshape(static, (bsz, n_heads, shape[1], head_dim))


def _attend(q: Any, k: Any, v: Any, bias: Any, dropout_p: float, generator: Any) -> tuple:
    """``(softmax(q k^T + bias) v, weights)`` over the last two axes (q already scaled)."""
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2))
    if bias is not None:
        scores = scores + bias
    weights = softmax(scores, axis=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True, generator)
    return ops.matmul(weights, v), weights


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False, *, generator: Any = None) -> Any:
    """``softmax(query @ key.T * scale + mask) @ value`` over the last two axes, as PyTorch's.

    ``query`` is (..., L, E), ``key`` (..., S, E), ``value`` (..., S, Ev); ``scale`` defaults to
    1/sqrt(E). A boolean ``attn_mask`` (broadcastable to (..., L, S)) says which pairs *take part*
    (True); a float one is added to the scores. ``is_causal`` masks keys after each query. Dropout
    (``dropout_p``, drawn from ``generator``) applies whenever ``dropout_p > 0``, as in PyTorch.
    ``enable_gqa`` repeats key/value heads (axis -3) to match the query's.

    >>> import chainrule as cr
    >>> from chainrule.nn.functional.attention import scaled_dot_product_attention
    >>> q = k = v = cr.ones((1, 2, 3, 4))
    >>> scaled_dot_product_attention(q, k, v, is_causal=True).shape
    (1, 2, 3, 4)
    """
    who = "scaled_dot_product_attention"
    qs, ks, vs = _shape(query), _shape(key), _shape(value)
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise ShapeError(f"{who}: query, key and value need at least 2 axes (..., L, E), got {qs}, {ks}, "
                         f"{vs}; add a sequence axis with x.reshape(1, -1)")
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise ShapeError(f"{who}: expected query (..., L, E), key (..., S, E), value (..., S, Ev), got "
                         f"query {qs}, key {ks}, value {vs}; the query's and key's last axes and the key's "
                         f"and value's sequence axes must agree")
    if enable_gqa:
        if len(qs) < 3 or len(ks) < 3 or qs[-3] % ks[-3] or ks[-3] != vs[-3]:
            raise ShapeError(f"{who}: enable_gqa needs heads on axis -3 with the query's a multiple of the "
                             f"key's and value's, got query {qs}, key {ks}, value {vs}")
        key = ops.repeat(key, qs[-3] // ks[-3], axis=-3)
        value = ops.repeat(value, qs[-3] // vs[-3], axis=-3)
    dtype = _dtype(query)
    bias = None
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{who}: pass either attn_mask or is_causal=True, not both; fold the causal "
                             f"mask into attn_mask")
        bias = _causal_bias(qs[-2], ks[-2], dtype)
    elif attn_mask is not None:
        ms = _shape(attn_mask)
        ss = np.broadcast_shapes(qs[:-2], _shape(key)[:-2]) + (qs[-2], ks[-2])
        if not broadcasts_to(ms, ss):
            raise ShapeError(f"{who}: attn_mask of shape {ms} does not broadcast to the scores' shape {ss} "
                             f"(..., L, S); reshape it to (L, S) or (..., L, S)")
        bias = _additive(attn_mask, dtype, False, who, "attn_mask")
    factor = 1.0 / math.sqrt(qs[-1]) if scale is None else scale
    return _attend(query * factor, key, value, bias, dropout_p, generator)[0]


def _check_inputs(query: Any, key: Any, value: Any, key_padding_mask: Any, attn_mask: Any,
                  num_heads: int) -> bool:
    """Whether the call is batched ((L, N, E) inputs) or not ((L, E)); PyTorch's shape rules."""
    who = "MultiheadAttention"
    qs, ks, vs = _shape(query), _shape(key), _shape(value)
    if len(qs) not in (2, 3):
        raise ShapeError(f"{who}: query must be (L, E) unbatched or (L, N, E) batched ((N, L, E) with "
                         f"batch_first=True), got {qs}")
    batched = len(qs) == 3
    n = len(qs)
    if len(ks) != n or len(vs) != n:
        raise ShapeError(f"{who}: for a {n}-D query {qs}, key and value must be {n}-D too, got key {ks} and "
                         f"value {vs}")
    if key_padding_mask is not None and len(_shape(key_padding_mask)) != n - 1:
        raise ShapeError(f"{who}: for a {n}-D query, key_padding_mask must be {n - 1}-D ("
                         f"{'(N, S)' if batched else '(S,)'}), got {_shape(key_padding_mask)}")
    if attn_mask is not None:
        ms = _shape(attn_mask)
        if len(ms) not in (2, 3):
            raise ShapeError(f"{who}: attn_mask must be (L, S) or (N * num_heads, L, S), got {ms}")
        if not batched and len(ms) == 3 and ms[0] != num_heads:
            raise ShapeError(f"{who}: for unbatched inputs a 3-D attn_mask must be (num_heads={num_heads}, "
                             f"L, S), got {ms}")
    return batched


def _pad_key_axis(mask: Any) -> Any:
    """One more key column (a zero bias) for the bias_k / zero-attention slot."""
    if mask is None:
        return None
    nd = len(_shape(mask))
    return ops.pad(mask, ((0, 0),) * (nd - 1) + ((0, 1),))


def multi_head_attention_forward(query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Any, in_proj_bias: Any, bias_k: Any, bias_v: Any,
                                 add_zero_attn: bool, dropout_p: float, out_proj_weight: Any,
                                 out_proj_bias: Any, training: bool = True, key_padding_mask: Any = None,
                                 need_weights: bool = True, attn_mask: Any = None,
                                 use_separate_proj_weight: bool = False, q_proj_weight: Any = None,
                                 k_proj_weight: Any = None, v_proj_weight: Any = None, static_k: Any = None,
                                 static_v: Any = None, average_attn_weights: bool = True,
                                 is_causal: bool = False, *, generator: Any = None,
                                 batch_first: bool = False) -> tuple:
    """Multi-head attention over (L, N, E) query and (S, N, E) key/value (or unbatched (L, E)), as
    PyTorch's function behind ``nn.MultiheadAttention``.

    Boolean masks mean *not allowed* (True); float masks are added. ``key_padding_mask`` is (N, S);
    ``attn_mask`` (L, S) or (N * num_heads, L, S). ``is_causal`` is a hint that ``attn_mask`` is the
    causal mask (which must be given). Returns ``(output, weights)``: weights (N, L, S) averaged over
    heads, (N, num_heads, L, S) with ``average_attn_weights=False``, or None if not ``need_weights``.
    ``batch_first=True`` (keyword-only, chainrule's) takes and returns (N, L, E) and (N, S, E) as they
    are: the layer passes its own, so batch-first inputs are never transposed.

    >>> import chainrule as cr
    >>> from chainrule.nn.functional.attention import multi_head_attention_forward
    >>> E = 4
    >>> w, b = cr.ones((3 * E, E)) * 0.1, cr.zeros(3 * E)
    >>> x = cr.ones((3, 2, E))
    >>> out, wts = multi_head_attention_forward(x, x, x, E, 2, w, b, None, None, False, 0.0,
    ...                                           cr.ones((E, E)), cr.zeros(E))
    >>> out.shape, wts.shape
    ((3, 2, 4), (2, 3, 3))
    """
    who = "MultiheadAttention"
    batched = _check_inputs(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:                     # (L, E) -> (1, L, E): one batch-first example
        query, key, value = (ops.expand_dims(t, 0) for t in (query, key, value))
        batch_first = True
        if key_padding_mask is not None:
            key_padding_mask = ops.expand_dims(key_padding_mask, 0) if isinstance(key_padding_mask, Tensor) \
                else np.asarray(key_padding_mask)[None]
    seq = 1 if batch_first else 0       # the sequence axis; the batch axis is the other of the first two
    qs, ks, vs = _shape(query), _shape(key), _shape(value)
    tgt_len, bsz, embed_dim = qs[seq], qs[1 - seq], qs[2]
    src_len = ks[seq]
    if embed_dim != embed_dim_to_check:
        raise ShapeError(f"{who}: query of shape {qs} has embedding size {embed_dim}, the layer "
                         f"expects embed_dim={embed_dim_to_check}")
    if embed_dim % num_heads:
        raise ValueError(f"{who}: embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
    head_dim = embed_dim // num_heads
    if (ks[:2] != vs[:2]) if use_separate_proj_weight else (ks != vs):
        raise ShapeError(f"{who}: key {ks} and value {vs} must have the same "
                         f"{'sequence and batch sizes' if use_separate_proj_weight else 'shape'}")
    if ks[1 - seq] != bsz:
        raise ShapeError(f"{who}: query {qs} and key {ks} have different batch sizes "
                         f"(axis 1, or axis 0 with batch_first=True)")
    dtype = _dtype(query)
    key_padding_mask = _additive(key_padding_mask, dtype, True, who, "key_padding_mask")
    if is_causal and attn_mask is None:
        raise ValueError(f"{who}: is_causal=True is a hint that attn_mask is the causal mask; pass the mask "
                         f"too (e.g. cr.nn.Transformer.generate_square_subsequent_mask(L))")
    attn_mask = _additive(attn_mask, dtype, True, who, "attn_mask")

    # ----- in-projection: three linears on the packed weight's rows (as fast as one packed product, and
    # their VJPs need no split of a packed cotangent); q scaled here, the smallest place -----
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(f"{who}: use_separate_proj_weight=True needs q_proj_weight, k_proj_weight and "
                             f"v_proj_weight")
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if _shape(in_proj_weight) != (3 * embed_dim, embed_dim):
            raise ShapeError(f"{who}: in_proj_weight must be (3 * embed_dim, embed_dim) = "
                             f"({3 * embed_dim}, {embed_dim}), got {_shape(in_proj_weight)}")
        w_q, w_k, w_v = (ops.getitem(in_proj_weight, slice(i * embed_dim, (i + 1) * embed_dim)) for i in range(3))
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = (ops.getitem(in_proj_bias, slice(i * embed_dim, (i + 1) * embed_dim)) for i in range(3))
    q = _project(query, w_q, b_q) * math.sqrt(1.0 / head_dim)
    k, v = _project(key, w_k, b_k), _project(value, w_v, b_v)

    # ----- masks' shapes -----
    if attn_mask is not None:
        ms = _shape(attn_mask)
        if len(ms) == 2:
            if ms != (tgt_len, src_len):
                raise ShapeError(f"{who}: a 2-D attn_mask must be (L, S) = ({tgt_len}, {src_len}), got {ms}")
        elif ms != (bsz * num_heads, tgt_len, src_len):
            raise ShapeError(f"{who}: a 3-D attn_mask must be (N * num_heads, L, S) = ({bsz * num_heads}, "
                             f"{tgt_len}, {src_len}), got {ms}")
        else:
            attn_mask = ops.reshape(attn_mask, (bsz, num_heads, tgt_len, src_len))
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{who}: bias_k/bias_v (add_bias_kv) cannot be combined with static_k/static_v")
        row = (bsz, 1, embed_dim) if batch_first else (1, bsz, embed_dim)
        k = ops.concatenate([k, ops.broadcast_to(bias_k, row)], axis=seq)
        v = ops.concatenate([v, ops.broadcast_to(bias_v, row)], axis=seq)
        attn_mask, key_padding_mask = _pad_key_axis(attn_mask), _pad_key_axis(key_padding_mask)
    elif (bias_k is None) != (bias_v is None):
        raise ValueError(f"{who}: pass both bias_k and bias_v, or neither")

    # ----- heads: (N, H, L, head_dim), strided views (PyTorch's (N * H, L, head_dim), unflattened) -----
    q = _heads(q, batch_first, num_heads, head_dim)
    k = _heads(k, batch_first, num_heads, head_dim) if static_k is None else \
        _static_heads(static_k, "static_k", bsz, num_heads, head_dim, who)
    v = _heads(v, batch_first, num_heads, head_dim) if static_v is None else \
        _static_heads(static_v, "static_v", bsz, num_heads, head_dim, who)
    if add_zero_attn:
        zeros = np.zeros((bsz, num_heads, 1, head_dim), dtype=dtype)
        k, v = ops.concatenate([k, zeros], axis=2), ops.concatenate([v, zeros], axis=2)
        attn_mask, key_padding_mask = _pad_key_axis(attn_mask), _pad_key_axis(key_padding_mask)
    src_len = _shape(k)[2]

    # ----- the key padding mask joins the attention mask, broadcast over heads and queries -----
    if key_padding_mask is not None:
        if _shape(key_padding_mask) != (bsz, src_len):
            raise ShapeError(f"{who}: key_padding_mask must be (N, S) = ({bsz}, {src_len}), got "
                             f"{_shape(key_padding_mask)}")
        kpm = ops.reshape(key_padding_mask, (bsz, 1, 1, src_len))
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    # ----- attention, then heads merged back into the input's layout for out_proj -----
    out, weights = _attend(q, k, v, attn_mask, dropout_p, generator)
    merged = ops.swapaxes(out, 1, 2) if batch_first else ops.transpose(out, (2, 0, 1, 3))
    out = _project(ops.reshape(merged, _shape(merged)[:2] + (embed_dim,)), out_proj_weight, out_proj_bias)
    if not batched:
        out = ops.squeeze(out, axis=0)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = ops.mean(weights, axis=1)
    if not batched:
        weights = ops.squeeze(weights, axis=0)
    return out, weights
