"""``cr.nn.utils.parametrize``: a module's parameter computed from other tensors on access, as
``torch.nn.utils.parametrize``.

``register_parametrization(m, "weight", P)`` moves ``m.weight`` to
``m.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when ``P.right_inverse``
returns several tensors) and swaps ``m``'s class for a subclass of it, made for ``m`` alone, with a
``weight`` property: reading it calls ``P(original)``, assigning it calls ``P.right_inverse``. Only
parametrized modules pay for the property; ``Module``'s own attribute access is untouched.
"""
from __future__ import annotations

import copyreg
from collections.abc import Sequence
from contextlib import contextmanager
from copy import deepcopy
from typing import Any, Iterator

from chainrule import numpy as ops
from chainrule.core.grad_mode import no_grad
from chainrule.core.tensor import Tensor
from chainrule.nn.containers import ModuleDict, ModuleList
from chainrule.nn.module import Module, Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextmanager
def cached() -> Iterator[None]:
    """Compute each parametrized tensor once inside the block (then reuse it), as
    ``torch.nn.utils.parametrize.cached``: for a weight read several times in one forward.

    >>> import chainrule as cr
    >>> from chainrule.nn.utils import parametrize as P
    >>> m = cr.nn.utils.parametrizations.weight_norm(cr.nn.Linear(2, 2))
    >>> with P.cached():
    ...     m.weight is m.weight
    True
    """
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, x: Tensor) -> None:
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _maybe_set(dest: Tensor, src: Tensor) -> None:
    """``dest.set_(src)``: ``dest`` (the same object, so optimizers keep it) takes ``src``'s values,
    and its shape too when they differ (an ``unsafe`` parametrization)."""
    if src is dest:
        return
    with no_grad():
        if dest.shape == src.shape:
            ops.copyto(dest, src)
        else:
            dest.data = src.data.copy()
            dest._bump()


def _try_right_inverse(parametrization: Module, value: Any) -> Any:
    """``parametrization.right_inverse(value)``, or ``value`` itself when it has none (or raises
    NotImplementedError)."""
    if hasattr(parametrization, "right_inverse"):
        try:
            return parametrization.right_inverse(value)
        except NotImplementedError:
            pass
    return value


def _must_be_tensor(value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise ValueError(f"register_parametrization: {what} must return a tensor, got {type(value).__name__}")
    return value


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor and its originals: ``module.parametrizations[name]``, made by
    ``register_parametrization`` (not meant to be built by hand). Calling it computes the tensor.

    >>> import chainrule as cr
    >>> m = cr.nn.utils.parametrizations.weight_norm(cr.nn.Linear(3, 2))
    >>> type(m.parametrizations.weight).__name__, m.parametrizations.weight.original0.shape
    ('ParametrizationList', (2, 1))
    """

    original: Tensor
    unsafe: bool

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with no_grad():
            new: Any = original
            for module in reversed(list(self)):
                new = _try_right_inverse(module, new)
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError(f"register_parametrization: 'right_inverse' must return a Tensor or a sequence of "
                             f"tensors (list, tuple...), got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(f"register_parametrization: when `right_inverse` outputs one tensor, it may not "
                                 f"change the dtype: original.dtype {original.dtype}, "
                                 f"right_inverse(original).dtype {new.dtype}")
            _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, originali in enumerate(new):
                if not isinstance(originali, Tensor):
                    raise ValueError(f"register_parametrization: 'right_inverse' must return a Tensor or a "
                                     f"sequence of tensors, got element {i} of type {type(originali).__name__}")
                if isinstance(original, Parameter):
                    originali = Parameter(originali, original.requires_grad)
                else:
                    originali = originali.detach()
                    originali.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", originali)
        if not self.unsafe:
            z = _must_be_tensor(self(), "a parametrization")
            if z.dtype != original_dtype or z.shape != original_shape:
                raise ValueError(f"register_parametrization: registering a parametrization may not change the "
                                 f"dtype or the shape of the tensor, unless unsafe=True: unparametrized "
                                 f"{original_dtype} {original_shape}, parametrized {z.dtype} {z.shape}")

    def right_inverse(self, value: Tensor) -> None:
        """Run the parametrizations' ``right_inverse`` in reverse registration order and store the result
        in the originals (in place): what assigning ``module.<name> = value`` does."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement "
                                       f"right_inverse, so the parametrized tensor cannot be assigned")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor, got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"the tensor returned by `right_inverse` has dtype {value.dtype} while "
                                     f"`original` has dtype {self.original.dtype}")
                _maybe_set(self.original, value)
                return
            if not isinstance(value, Sequence) or len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of {self.ntensors} tensors, got "
                                 f"{type(value).__name__}"
                                 + (f" of length {len(value)}" if isinstance(value, Sequence) else ""))
            for i, tensor in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors, got element {i} of "
                                     f"type {type(tensor).__name__}")
                if original_i.dtype != tensor.dtype:
                    raise ValueError(f"tensor {i} returned by `right_inverse` has dtype {tensor.dtype} while "
                                     f"`original{i}` has dtype {original_i.dtype}")
                _maybe_set(original_i, tensor)

    def forward(self) -> Tensor:
        first, *rest = self._modules.values()
        if self.is_tensor:
            x = first(self.original)
        else:
            x = first(*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in rest:
            x = module(x)
        return x


def _default_deepcopy(self: Module, memo: dict) -> Module:
    obj = memo.get(id(self))
    if obj is not None:
        return obj
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    # object's __setattr__: Module's refuses attributes before the replica has its _parameters
    object.__setattr__(replica, "__dict__", deepcopy(self.__dict__, memo))
    for slot in copyreg._slotnames(self.__class__):     # type: ignore[attr-defined]
        if hasattr(self, slot):
            object.__setattr__(replica, slot, deepcopy(getattr(self, slot), memo))
    return replica


def _getstate(self: Module) -> Any:
    raise RuntimeError(f"{type(self).__name__}: serialization of parametrized modules is only supported "
                       f"through state_dict(); save module.state_dict() and load it into a module "
                       f"parametrized the same way")


def _setattr(self: Module, name: str, value: Any) -> None:
    # Module.__setattr__ would register a Parameter/Module under a parametrized name, where the
    # property hides it; PyTorch refuses that (KeyError), and so do we
    if isinstance(value, (Parameter, Module)) and name in self.__dict__["_modules"].get("parametrizations", ()):
        raise KeyError(f"{type(self).__name__}: attribute {name!r} is parametrized; assign a plain tensor "
                       f"(it goes through right_inverse), or remove_parametrizations(module, {name!r}) first")
    Module.__setattr__(self, name, value)


def _inject_new_class(module: Module) -> None:
    """Swap ``module``'s class for ``Parametrized<Class>``, a subclass made for this module alone."""
    cls = module.__class__
    dct: dict[str, Any] = {"__getstate__": _getstate, "__setattr__": _setattr}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = _default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module: Module, tensor_name: str) -> None:
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        try:
            if not _cache_enabled:
                return parametrization()
            key = (id(self), tensor_name)
            tensor = _cache.get(key)
            if tensor is None:
                tensor = _cache[key] = parametrization()
            return tensor
        except AttributeError as e:
            # raised from a property, it would be swallowed: Python falls back to __getattr__,
            # which reports a missing attribute instead of the parametrization's error
            raise RuntimeError(f"{type(self).__name__}.{tensor_name}: the parametrization raised "
                               f"AttributeError: {e}") from e

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_same(what: str, a: Tensor, b: Tensor, tensor_name: str) -> None:
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"register_parametrization: {what} must keep the dtype and shape of module."
                         f"{tensor_name} ({b.dtype} {b.shape}), got {a.dtype} {a.shape}; unless the "
                         f"`unsafe` flag is enabled")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` (a Module) applied to the
    original tensor, as ``torch.nn.utils.parametrize.register_parametrization``. A second call on the
    same name chains the new parametrization after the first. Returns ``module``.

    >>> import chainrule as cr
    >>> from chainrule.nn.utils import parametrize as P
    >>> class Symmetric(cr.nn.Module):
    ...     def forward(self, x):
    ...         return cr.triu(x) + cr.triu(x, 1).T
    >>> m = P.register_parametrization(cr.nn.Linear(3, 3), "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all()), list(m.state_dict())
    (True, ['bias', 'parametrizations.weight.original'])
    """
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: the parametrization must be a cr.nn.Module, got "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = _must_be_tensor(parametrization(y), "a parametrization")
            _check_same("the parametrization", x, y, tensor_name)
            z = _try_right_inverse(parametrization, x)
            if z is not x:                  # x itself when there is none: already checked
                _must_be_tensor(z, "parametrization.right_inverse")
                _check_same("parametrization.right_inverse", z, y, tensor_name)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"register_parametrization: module.{tensor_name} is None; there is no tensor to "
                             f"parametrize")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"register_parametrization: module {type(module).__name__} does not have a parameter, "
                         f"a buffer, or a parametrized element with name {tensor_name!r}; its parameters are "
                         f"{list(module._parameters)} and its buffers {list(module._buffers)}")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, or on any tensor if None).

    >>> import chainrule as cr
    >>> m = cr.nn.utils.parametrizations.weight_norm(cr.nn.Linear(2, 2))
    >>> from chainrule.nn.utils import parametrize as P
    >>> P.is_parametrized(m), P.is_parametrized(m, "bias")
    (True, False)
    """
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo ``register_parametrization`` on ``tensor_name``: the tensor becomes a plain parameter (or
    buffer) again, holding its current parametrized value (``leave_parametrized=True``) or the original
    (only possible when there is one original). When the last one goes, the module gets its class back.

    >>> import chainrule as cr
    >>> from chainrule.nn.utils import parametrize as P
    >>> m = cr.nn.utils.parametrizations.weight_norm(cr.nn.Linear(2, 2))
    >>> type(P.remove_parametrizations(m, "weight")).__name__, list(m.state_dict())
    ('Linear', ['bias', 'weight'])
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"remove_parametrizations: module {type(module).__name__} does not have a "
                         f"parametrization on {tensor_name!r}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            _maybe_set(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("remove_parametrizations: cannot leave unparametrized (leave_parametrized=False) "
                             "a tensor that is parametrized in terms of a sequence of tensors")
        t = getattr(module, tensor_name)
        original = Parameter(t) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before parametrizations were registered (its class if there are none).

    >>> import chainrule as cr
    >>> from chainrule.nn.utils import parametrize as P
    >>> P.type_before_parametrizations(cr.nn.utils.parametrizations.weight_norm(cr.nn.Linear(2, 2))).__name__
    'Linear'
    """
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module`` too, sharing
    the same parametrization modules and originals, as torch's function of that name. Returns ``to_module``.

    >>> import chainrule as cr
    >>> from chainrule.nn.utils import parametrize, parametrizations
    >>> a = parametrizations.weight_norm(cr.nn.Linear(3, 2))
    >>> b = parametrize.transfer_parametrizations_and_params(a, cr.nn.Linear(3, 2))
    >>> wa, wb = a.parametrizations.weight, b.parametrizations.weight
    >>> parametrize.is_parametrized(b, "weight"), wb.original0 is wa.original0
    (True, True)
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        source = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for param_func in source:
            register_parametrization(to_module, name, param_func)
        target = to_module.parametrizations[name]
        for i in [None] if source.is_tensor else range(source.ntensors):
            key = "original" if i is None else f"original{i}"
            setattr(target, key, getattr(source, key))
    return to_module
