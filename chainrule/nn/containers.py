"""Containers (``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``) and the small
shape layers ``Identity`` and ``Unflatten``, with ``torch.nn``'s methods, keys and iteration order."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections import abc as container_abcs
from itertools import chain
from typing import Any, Iterable, Iterator

from chainrule import numpy as ops
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.nn.module import Module, Parameter, _addindent

__all__ = ["Identity", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Unflatten"]


def _abs_index(owner: Any, idx: Any) -> str:
    idx = operator.index(idx)
    n = len(owner)
    if not -n <= idx < n:
        raise IndexError(f"{type(owner).__name__}: index {idx} is out of range for a container of length {n}")
    return str(idx + n if idx < 0 else idx)


def _as_parameter(value: Any) -> Any:
    # PyTorch converts a plain Tensor put in a parameter container into a Parameter
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _pop(container: Any, key: Any) -> Any:
    value = container[key]
    del container[key]
    return value


def _tensor_line(key: Any, p: Any) -> str:
    if isinstance(p, Tensor):
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        return f"  ({key}): {kind} containing: [{p.dtype} of size {'x'.join(str(s) for s in p.shape)}]"
    return f"  ({key}): Object of type: {type(p).__name__}"


class _ModuleSequence(Module):
    """Submodules in order, numbered ``"0"``, ``"1"``, ...: length, iteration and renumbering after a delete."""

    def _renumber(self) -> None:
        # every name becomes its position, as PyTorch
        object.__setattr__(self, "_modules", OrderedDict((str(i), m) for i, m in enumerate(self._modules.values())))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __dir__(self) -> list:
        return [k for k in super().__dir__() if not k.isdigit()]


class ModuleList(_ModuleSequence):
    """Hold submodules in a list, registered as ``"0"``, ``"1"``, ... (so state_dict keys are ``"0.weight"``).

    >>> import chainrule as cr
    >>> layers = cr.nn.ModuleList([cr.nn.Linear(2, 2) for _ in range(3)])
    >>> _ = layers.append(cr.nn.Tanh()); len(layers), list(layers.state_dict())[:2]
    (4, ['0.weight', '0.bias'])
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[_abs_index(self, idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, _abs_index(self, idx), module)

    def __delitem__(self, idx: int | slice) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, _abs_index(self, idx))
        self._renumber()

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        combined = ModuleList()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index`` (negative counts from the end, as ``list.insert``)."""
        n = len(self._modules)
        index = operator.index(index)
        index = max(0, min(n, index + n if index < 0 else index))
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"ModuleList.insert: expected a Module, got {type(module).__name__}")
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module: Module) -> ModuleList:
        """Append ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key: int | slice) -> Any:
        """Remove and return the module at ``key`` (later ones are renumbered)."""
        return _pop(self, key)

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append every module of an iterable; returns self."""
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def __repr__(self) -> str:
        # PyTorch compresses runs of equal reprs: "(0-2): 3 x Linear(...)"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list = []
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = []
        for start, end, r in blocks:
            line = f"({start}): {r}" if start == end else f"({start}-{end}): {end - start + 1} x {r}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("ModuleList has no forward: index or iterate it and call its modules "
                        "(for layer in self.layers: x = layer(x))")


class ModuleDict(Module):
    """Hold submodules in an ordered dict (insertion order; a plain dict's order when built from one).

    >>> import chainrule as cr
    >>> heads = cr.nn.ModuleDict({"cls": cr.nn.Linear(4, 3), "reg": cr.nn.Linear(4, 1)})
    >>> list(heads), heads["reg"](cr.ones((2, 4))).shape, list(heads.state_dict())[-1]
    (['cls', 'reg'], (2, 1), 'reg.bias')
    """

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        try:
            return self._modules[key]
        except KeyError:
            raise KeyError(f"ModuleDict has no key {key!r}; its keys are {list(self._modules)}") from None

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove ``key`` and return its module."""
        return _pop(self, key)

    def keys(self) -> Any:
        """The keys, in order."""
        return self._modules.keys()

    def items(self) -> Any:
        """The (key, module) pairs, in order."""
        return self._modules.items()

    def values(self) -> Any:
        """The modules, in order."""
        return self._modules.values()

    def update(self, modules: Any) -> None:
        """Add (or overwrite) from a mapping or an iterable of (key, module) pairs, in their order."""
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError(f"ModuleDict.update should be called with an iterable of key/value pairs, "
                            f"but got {type(modules).__name__}")
        if isinstance(modules, (OrderedDict, ModuleDict, container_abcs.Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        for j, m in enumerate(modules):
            if not isinstance(m, container_abcs.Iterable):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                f"{type(m).__name__}")
            if len(m) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(m)}; 2 is required")
            self[m[0]] = m[1]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("ModuleDict has no forward: look a module up and call it (self.heads[name](x))")


class ParameterList(Module):
    """Hold parameters in a list, registered as ``"0"``, ``"1"``, ...; a plain Tensor put in becomes
    a Parameter (a copy of its values).

    >>> import chainrule as cr
    >>> ps = cr.nn.ParameterList([cr.nn.Parameter(cr.ones(2)), cr.zeros(3)])
    >>> len(ps), type(ps[1]).__name__, list(ps.state_dict())
    (2, 'Parameter', ['0', '1'])
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, _abs_index(self, idx))

    def __setitem__(self, idx: int, param: Any) -> None:
        setattr(self, _abs_index(self, idx), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self) -> list:
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value: Any) -> ParameterList:
        """Append ``value`` (a Tensor becomes a Parameter); returns self."""
        new_idx = len(self)
        object.__setattr__(self, "_size", new_idx + 1)
        self[new_idx] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """Append every value of an iterable (not a Tensor); returns self."""
        if not isinstance(values, container_abcs.Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_tensor_line(k, p) for k, p in enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called; index it (self.params[i]) instead")


class ParameterDict(Module):
    """Hold parameters in an ordered dict; a plain Tensor put in becomes a Parameter. As PyTorch, a
    plain ``dict`` given to the constructor or ``update`` is added in sorted key order.

    >>> import chainrule as cr
    >>> pd = cr.nn.ParameterDict({"b": cr.ones(2), "a": cr.zeros(1)})
    >>> list(pd), list(pd.state_dict()), "a" in pd
    (['a', 'b'], ['a', 'b'], True)
    """

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        object.__setattr__(self, "_keys", {})
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key_to_attr(key: Any) -> str:
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is not a string "
                            f"(type is '{type(key).__name__}'); use str keys")
        return key

    def __getitem__(self, key: str) -> Any:
        attr = self._key_to_attr(key)
        if attr not in self._keys:
            raise KeyError(f"ParameterDict has no key {key!r}; its keys are {list(self._keys)}")
        return getattr(self, attr)

    def __setitem__(self, key: str, value: Any) -> None:
        attr = self._key_to_attr(key)
        self._keys[key] = None
        setattr(self, attr, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters (not copies of them)."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``self[key]``, first setting it to ``default`` if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for k in list(self._keys):
            del self[k]

    def pop(self, key: str) -> Any:
        """Remove ``key`` and return its value."""
        return _pop(self, key)

    def popitem(self) -> tuple:
        """Remove and return the last inserted (key, parameter) pair."""
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        k = list(self._keys)[-1]
        return k, self.pop(k)

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]`` if present, else ``default``."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ParameterDict with ``keys``, each set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def keys(self) -> Any:
        """The keys, in order."""
        return self._keys.keys()

    def items(self) -> Iterator[tuple]:
        """The (key, value) pairs, in order."""
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterator[Any]:
        """The values, in order."""
        return (self[k] for k in self._keys)

    def update(self, parameters: Any) -> None:
        """Add (or overwrite) from an OrderedDict/ParameterDict or pairs (in order), or a plain mapping
        (sorted by key, as PyTorch)."""
        if not isinstance(parameters, container_abcs.Iterable):
            raise TypeError(f"ParameterDict.update should be called with an iterable of key/value pairs, "
                            f"but got {type(parameters).__name__}")
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for key, parameter in parameters.items():
                self[key] = parameter
        elif isinstance(parameters, container_abcs.Mapping):
            for key, parameter in sorted(parameters.items(), key=lambda kv: kv[0]):
                self[key] = parameter
        else:
            for j, p in enumerate(parameters):
                if not isinstance(p, container_abcs.Iterable):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                    f"{type(p).__name__}")
                if len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(p)}; "
                                     f"2 is required")
                self[p[0]] = p[1]

    def extra_repr(self) -> str:
        return "\n".join(_tensor_line(k, p) for k, p in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called; look a parameter up (self.params[key])")

    @staticmethod
    def _union(first: ParameterDict, second: ParameterDict) -> ParameterDict:
        out = first.copy()
        out.update(second)
        return out

    def __or__(self, other: ParameterDict) -> ParameterDict:
        return self._union(self, other)

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        return self._union(other, self)

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self


class Identity(Module):
    """Return the input unchanged; any constructor arguments are ignored (as PyTorch).

    >>> import chainrule as cr
    >>> cr.nn.Identity(54, unused="x")(cr.tensor([1.0, 2.0]))
    tensor([1., 2.])
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Unflatten(Module):
    """Expand axis ``dim`` into ``unflattened_size`` (one entry may be -1), the inverse of ``Flatten``.

    >>> import chainrule as cr
    >>> cr.nn.Unflatten(1, (2, 5))(cr.ones((3, 10))).shape
    (3, 2, 5)
    """

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"Unflatten: invalid argument type for dim parameter: {type(dim).__name__}; "
                            f"pass an int axis")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, s in enumerate(unflattened_size):
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError(f"Unflatten: unflattened_size must be tuple of ints, but found element of "
                                f"type {type(s).__name__} at pos {i}")
        if sum(s == -1 for s in unflattened_size) > 1 or any(s < -1 for s in unflattened_size):
            raise ValueError(f"Unflatten: unflattened_size {tuple(unflattened_size)} may hold at most one -1 "
                             f"and no other negative size")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input: Any) -> Any:
        shape = tuple(input.shape)
        nd = len(shape)
        if not -nd <= self.dim < nd:
            raise ShapeError(f"Unflatten: dim={self.dim} is out of range for input of shape {shape} "
                             f"({nd} axes); pass a dim in [{-nd}, {nd - 1}]")
        d = self.dim % nd
        sizes = list(self.unflattened_size)
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        if -1 in sizes:
            if known == 0 or shape[d] % known:
                raise ShapeError(f"Unflatten: sizes {tuple(sizes)} cannot unflatten dim {self.dim} of size "
                                 f"{shape[d]} in the input of shape {shape}")
            sizes[sizes.index(-1)] = shape[d] // known
        elif known != shape[d]:
            raise ShapeError(f"Unflatten: sizes {tuple(sizes)} don't multiply up to the size of dim "
                             f"{self.dim} ({shape[d]}) in the input of shape {shape}; their product must be "
                             f"{shape[d]}")
        return ops.reshape(input, shape[:d] + tuple(sizes) + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
