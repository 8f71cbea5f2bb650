"""``functional_call`` (a module run with other tensors), ``replace_all_batch_norm_modules_`` (batch
norm without running statistics, for ``cr.vmap``) and ``per_example_grad_norms`` (ghost norms), the
module half of ``cr.func``."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from chainrule.autograd import engine
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.core.grad_mode import enable_grad
from chainrule.core.tensor import Tensor
from chainrule.nn.layers import Linear
from chainrule.nn.module import Module
from chainrule.nn.normalization import _BatchNorm
from chainrule.numpy import raw

__all__ = ["functional_call", "per_example_grad_norms", "replace_all_batch_norm_modules_"]

_MISSING = object()


# ----- functional_call -----
def functional_call(module: Module, params_and_buffers: Any, args: Any = (), kwargs: dict | None = None, *,
                    strict: bool = False, tie_weights: bool = True) -> Any:
    """Call ``module(*args, **kwargs)`` with the tensors of ``params_and_buffers`` (a dict of
    qualified name -> tensor, or a tuple of such dicts) in place of its parameters and buffers,
    as ``torch.func.functional_call``. The module is unchanged afterwards, also if forward raises.

    ``args``: a tuple of positional arguments, or a single one. ``strict=True``: the names must be
    exactly the module's parameters and buffers. ``tie_weights=True``: a tensor registered under
    several names (tied weights) is replaced under all of them by the one value given for it.
    Names the module does not have are set as plain attributes for the call (``strict=False``).

    >>> import chainrule as cr
    >>> model = cr.nn.Linear(2, 1)
    >>> w = {"weight": cr.tensor([[1.0, 2.0]]), "bias": cr.tensor([0.5])}
    >>> cr.func.functional_call(model, w, cr.tensor([[1.0, 1.0]]))
    tensor([[3.5]])
    """
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: module must be a cr.nn.Module, got {type(module).__name__}")
    values = _merge(params_and_buffers)
    args = args if isinstance(args, tuple) else (args,)
    kwargs = {} if kwargs is None else kwargs
    slots = _slots(module)
    if strict:
        _check_strict(module, values, slots)
    untied = _untie(values, slots) if tie_weights else values
    swapped: list = []
    try:
        for name, value in untied.items():
            swapped.append((name, *_swap(module, name, value)))
        return module(*args, **kwargs)
    finally:
        left = {}
        for name, owner, store, key, old in reversed(swapped):
            left[name] = _restore(owner, store, key, old)
        # as torch: a forward that re-assigned a buffer (a running statistic) hands the new value back
        if isinstance(params_and_buffers, dict):
            for name, new in left.items():
                if name in params_and_buffers and new is not _MISSING:
                    params_and_buffers[name] = new


def _merge(params_and_buffers: Any) -> dict:
    if isinstance(params_and_buffers, dict):
        return dict(params_and_buffers)
    if isinstance(params_and_buffers, (tuple, list)) and all(isinstance(d, dict) for d in params_and_buffers):
        merged: dict = {}
        for d in params_and_buffers:
            twice = sorted(set(merged) & set(d))
            if twice:
                raise ValueError(f"functional_call: {twice} appear in more than one of the dicts of "
                                 f"params_and_buffers; give each name once")
            merged.update(d)
        return merged
    raise TypeError(f"functional_call: params_and_buffers must be a dict (name -> tensor) or a tuple of "
                    f"dicts, got {type(params_and_buffers).__name__}; e.g. dict(model.named_parameters())")


def _walk(module: Module, prefix: str = "", path: tuple = ()) -> Iterator[tuple[str, Module]]:
    """Every (qualified name, module), a shared submodule under each of its names."""
    yield prefix, module
    for name, child in module._modules.items():
        if child is not None and child not in path:
            yield from _walk(child, f"{prefix}.{name}" if prefix else name, path + (module,))


def _slots(module: Module) -> dict:
    """Qualified name -> (owner module, "_parameters" or "_buffers", key) for every parameter and
    buffer, tied ones under each of their names."""
    out = {}
    for prefix, m in _walk(module):
        for store in ("_parameters", "_buffers"):
            for k, v in getattr(m, store).items():
                if v is not None:
                    out[f"{prefix}.{k}" if prefix else k] = (m, store, k)
    return out


def _check_strict(module: Module, values: dict, slots: dict) -> None:
    missing = [k for k in slots if k not in values]
    unexpected = [k for k in values if k not in slots]
    if missing or unexpected:
        raise KeyError(f"functional_call(strict=True) on {type(module).__name__}: missing keys {missing}, "
                       f"unexpected keys {unexpected}; pass exactly its named_parameters() and "
                       f"named_buffers(), or strict=False")


def _untie(values: dict, slots: dict) -> dict:
    """The values with each given tensor also under the other names of the tensor it replaces."""
    groups: dict = {}
    for name, (m, store, k) in slots.items():
        groups.setdefault(id(getattr(m, store)[k]), []).append(name)
    out = dict(values)
    for names in groups.values():
        given = [n for n in names if n in values]
        if len(names) < 2 or not given:
            continue
        first = values[given[0]]
        clash = [n for n in given if values[n] is not first]
        if clash:
            raise ValueError(f"functional_call: {given} are tied (one tensor in the module) but got "
                             f"different values; give one of them, the same tensor for all, or pass "
                             f"tie_weights=False")
        for n in names:
            out[n] = first
    return out


def _owner(module: Module, name: str) -> tuple[Module, str]:
    *path, key = name.split(".")
    m = module
    for i, part in enumerate(path):
        child = m._modules.get(part) if isinstance(m, Module) else None
        if child is None:
            raise KeyError(f"functional_call: {name!r} names a submodule {'.'.join(path[:i + 1])!r} that "
                           f"{type(module).__name__} does not have; see dict(model.named_parameters())")
        m = child
    return m, key


def _swap(module: Module, name: str, value: Any) -> tuple:
    m, key = _owner(module, name)
    for store in ("_parameters", "_buffers"):
        if key in getattr(m, store):
            d = getattr(m, store)
            old, d[key] = d[key], value
            return m, store, key, old
    old = m.__dict__.get(key, _MISSING)
    object.__setattr__(m, key, value)
    return m, None, key, old


def _restore(m: Module, store: str | None, key: str, old: Any) -> Any:
    """Put ``old`` back; return what the call left there (``_MISSING`` for a plain attribute)."""
    if store is not None:
        d = getattr(m, store)
        new, d[key] = d.get(key, _MISSING), old
        return new
    if old is _MISSING:
        m.__dict__.pop(key, None)
    else:
        object.__setattr__(m, key, old)
    return _MISSING


# ----- replace_all_batch_norm_modules_ -----
def replace_all_batch_norm_modules_(root: Module) -> Module:
    """Make every BatchNorm in ``root`` (itself included) normalise with its batch's statistics and
    keep no running ones (``running_mean``, ``running_var``, ``num_batches_tracked`` to None,
    ``track_running_stats=False``), in place, as ``torch.func.replace_all_batch_norm_modules_``: the
    way to run a model with batch norm in training mode under ``cr.vmap``, where an update in place
    of running statistics shared by the examples has no meaning. Returns ``root``.

    >>> import chainrule as cr
    >>> from chainrule.func.module_calls import replace_all_batch_norm_modules_
    >>> net = replace_all_batch_norm_modules_(cr.nn.Sequential(cr.nn.BatchNorm1d(2)))
    >>> net[0].running_mean is None, net[0].track_running_stats, list(net.state_dict())
    (True, False, ['0.weight', '0.bias'])
    """
    if not isinstance(root, Module):
        raise TypeError(f"replace_all_batch_norm_modules_: root must be a cr.nn.Module, got {type(root).__name__}")
    for m in root.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                m.register_buffer(name, None)
            m.track_running_stats = False
    return root


# ----- per-example gradient norms ("ghost clipping") -----
def per_example_grad_norms(loss_fn: Callable, module: Module, x: Any, y: Any) -> np.ndarray:
    """The norm of each example's gradient over all trainable parameters, for a ``module`` whose
    parameters all live in ``cr.nn.Linear`` layers, without per-example gradients: one forward and
    one backward of the summed loss (to the layers' outputs only), then for each layer with input
    rows ``a_i`` and output-gradient rows ``g_i`` (``T`` rows per example: ``T = 1`` for an MLP)
    ``|dW_i|^2 = sum_{t,s} (a_it . a_is)(g_it . g_is)`` and ``|db_i|^2 = |sum_t g_it|^2``.

    ``loss_fn(module(x), y)`` must return the N per-example losses (shape (N,), e.g.
    ``F.cross_entropy(out, y, reduction="none")``) or their sum (a scalar, ``reduction="sum"``;
    not the mean, which scales every norm by 1/N). Example i's loss must depend on example i
    only (no batch statistics). Returns a float ndarray of shape (N,); ``.grad`` is not touched.

    >>> import chainrule as cr
    >>> model = cr.nn.Sequential(cr.nn.Linear(3, 4), cr.nn.ReLU(), cr.nn.Linear(4, 2))
    >>> loss = lambda out, y: cr.nn.functional.cross_entropy(out, y, reduction="none")
    >>> cr.func.per_example_grad_norms(loss, model, cr.ones((5, 3)), cr.tensor([0, 1, 0, 1, 1])).shape
    (5,)
    """
    layers = _linear_layers(module)
    seen: dict = {id(m): [] for m in layers}

    def record(m: Module, args: tuple, out: Any) -> None:
        if isinstance(out, Tensor) and out.requires_grad:
            seen[id(m)].append((raw(args[0]), out))

    handles = [m.register_forward_hook(record) for m in layers]
    try:
        with enable_grad():
            losses = loss_fn(module(x), y)
    finally:
        for h in handles:
            h.remove()
    n = int(np.shape(raw(x))[0])
    total = _summed(losses, n)
    outs = [out for m in layers for _, out in seen[id(m)]]
    sq = np.zeros(n, dtype=np.result_type(*[p.dtype for p in module.parameters()], np.float32))
    if not outs or not total.requires_grad:
        return sq
    # gradients for the layers' outputs only: the weight gradients (and .grad) are never formed
    gs = iter(engine.grad([total], outs, allow_unused=True))
    for m in layers:
        calls = [(a, next(gs)) for a, _ in seen[id(m)]]
        calls = [(a, g) for a, g in calls if g is not None]
        if calls:
            sq += _layer_sq_norms(m, calls, n)
    return np.sqrt(sq)


def _linear_layers(module: Module) -> list:
    layers = [m for m in module.modules() if isinstance(m, Linear)]
    owned = {id(p) for m in layers for p in m._parameters.values() if p is not None}
    outside = [name for name, p in module.named_parameters() if p.requires_grad and id(p) not in owned]
    if outside:
        raise TypeError(f"per_example_grad_norms: parameters {outside} are not in cr.nn.Linear layers, "
                        f"and the norm identity holds for Linear layers only; use per-example "
                        f"gradients instead: cr.vmap(cr.grad(loss), in_axes=(None, 0, 0))(params, x, y) "
                        f"with cr.func.functional_call, or freeze them (requires_grad_(False))")
    ids = [id(p) for m in layers for p in m._parameters.values() if p is not None]
    if len(ids) != len(set(ids)):
        raise TypeError("per_example_grad_norms: two Linear layers share a parameter (tied weights); "
                        "their per-example gradients add before the norm, which this identity does not "
                        "cover: use cr.vmap(cr.grad(loss)) with cr.func.functional_call")
    return layers


def _summed(losses: Any, n: int) -> Tensor:
    if not isinstance(losses, Tensor):
        raise TypeError(f"per_example_grad_norms: loss_fn returned {type(losses).__name__}; it must "
                        f"return a Tensor: the {n} per-example losses or their sum")
    if losses.ndim == 0:
        return losses
    if losses.shape == (n,):
        return losses.sum()
    raise ShapeError(f"per_example_grad_norms: loss_fn returned shape {losses.shape}; it must return the "
                     f"{n} per-example losses (shape ({n},), e.g. reduction='none') or their sum (a scalar, "
                     f"reduction='sum')")


def _layer_sq_norms(m: Module, calls: list, n: int) -> np.ndarray:
    """Example i's squared gradient norm for layer ``m`` from its (input, output gradient) per call;
    several calls of one layer act as more rows ``t`` of each example."""
    a = np.concatenate([np.reshape(np.asarray(a), (n, -1, np.shape(a)[-1])) for a, _ in calls], axis=1)
    g = np.concatenate([np.reshape(np.asarray(raw(g)), (n, -1, np.shape(raw(g))[-1])) for _, g in calls],
                       axis=1)
    out = np.zeros(n, dtype=np.result_type(a, g))
    if m.weight is not None and m.weight.requires_grad:
        t, n_in, n_out = a.shape[1], a.shape[2], g.shape[2]
        if t == 1:
            out += np.einsum("ni,ni->n", a[:, 0], a[:, 0]) * np.einsum("ni,ni->n", g[:, 0], g[:, 0])
        elif t * t <= n_in * n_out:
            out += np.einsum("nts,nts->n", a @ a.transpose(0, 2, 1), g @ g.transpose(0, 2, 1))
        else:                                   # long sequences: the per-example gradient is smaller
            dw = a.transpose(0, 2, 1) @ g
            out += np.einsum("nio,nio->n", dw, dw)
    if m.bias is not None and m.bias.requires_grad:
        db = g.sum(axis=1)
        out += np.einsum("no,no->n", db, db)
    return out
