"""``Module`` and ``Parameter``: PyTorch's container semantics (registration, state dicts, hooks)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, NamedTuple

from chainrule.autograd.function import Function
from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor
from chainrule.numpy import raw

__all__ = ["Module", "Parameter", "RemovableHandle", "IncompatibleKeys", "zero_grads"]


class Parameter(Tensor):
    """A leaf tensor that a ``Module`` registers as trainable (``requires_grad=True`` by default).

    >>> import chainrule as cr
    >>> p = cr.nn.Parameter([1.0, 2.0]); p.requires_grad, p.is_leaf
    (True, True)
    """

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        arr = np.array(raw(data), copy=True)
        if arr.dtype == np.float64 and not isinstance(raw(data), np.ndarray):
            arr = arr.astype(np.float32)
        if not is_floating(arr.dtype):
            raise DTypeError(f"Parameter: needs a floating dtype, got {arr.dtype} with shape "
                             f"{arr.shape}; convert it first (e.g. data.astype('float32'))")
        super().__init__(arr, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter(" + super().__repr__() + ")"


def zero_grads(params: Any, set_to_none: bool = True) -> None:
    """Drop (``set_to_none``) or zero in place the ``.grad`` of ``params`` (PyTorch's semantics:
    the in-place variant keeps the same gradient tensor, detached from any graph)."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad = p.grad.detach_()
            p.grad.zero_()


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods; ``handle.remove()`` unregisters the hook."""

    def __init__(self, hooks: dict, key: int) -> None:
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        self._hooks.pop(self._key, None)


class IncompatibleKeys(NamedTuple):
    missing_keys: list
    unexpected_keys: list


_hook_ids = iter(range(1 << 62))


class Module:
    """Base class of layers and models: assign Parameters and Modules as attributes, define ``forward``.

    >>> import chainrule as cr
    >>> class Affine(cr.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = cr.nn.Parameter([2.0])
    ...     def forward(self, x):
    ...         return self.w * x
    >>> m = Affine(); [name for name, _ in m.named_parameters()], m(cr.tensor([3.0]))
    (['w'], tensor([6.], grad_fn=<MultiplyBackward>))
    """

    training: bool

    def __init__(self) -> None:
        for name in ("_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks",
                     "_backward_hooks"):
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} does not define forward(...); subclasses of "
                        f"cr.nn.Module must implement it")

    # ----- registration -----
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning "
                                 f"attributes in __init__")
        params, modules, buffers = self._parameters, self._modules, self._buffers
        if isinstance(value, (Parameter, Module)):        # registered: in its store, and only there
            store = params if isinstance(value, Parameter) else modules
            self.__dict__.pop(name, None)
            for other in (params, modules, buffers):
                if other is not store:
                    other.pop(name, None)
            store[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(f"{type(self).__name__}.{name} is a Parameter; assign a "
                                f"cr.nn.Parameter (or None), not {type(value).__name__}")
            params[name] = None
        elif name in buffers:
            buffers[name] = value
        elif name in modules and value is None:
            modules[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (or None) under ``name``."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter({name!r}): expected a cr.nn.Parameter or None, "
                            f"got {type(param).__name__}")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, value: Any, persistent: bool = True) -> None:
        """Register non-trainable state (saved in ``state_dict`` unless ``persistent=False``)."""
        self.__dict__.pop(name, None)
        self._buffers[name] = value if value is None or isinstance(value, Tensor) else Tensor(value)
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a child module under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module({name!r}): expected a Module, got {type(module).__name__}")
        self._modules[name] = module

    # ----- traversal -----
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Yield (qualified name, module) for this module and every descendant, each once."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            children = [(f"{name}.{k}" if name else k, c) for k, c in m._modules.items() if c is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named(self, store: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules() if recurse else iter([("", self)])
        for prefix, m in mods:
            for k, v in getattr(m, store).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield (f"{prefix}.{k}" if prefix else k), v

    def named_parameters(self, recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Yield (qualified name, parameter), each shared parameter once."""
        return self._named("_parameters", recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse):
            yield p

    def named_buffers(self, recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named("_buffers", recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse):
            yield b

    # ----- modes and gradients -----
    def train(self, mode: bool = True) -> Module:
        """Set training mode (Dropout active) on this module and all descendants."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Set evaluation mode: ``train(False)``."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of all parameters (to None, or to zeros in place)."""
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, flag: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad = flag
        return self

    # ----- state dicts -----
    def _state_items(self) -> OrderedDict:
        out: OrderedDict = OrderedDict()
        for prefix, m in self.named_modules():
            for k, p in m._parameters.items():
                if p is not None:
                    out[f"{prefix}.{k}" if prefix else k] = p
            for k, b in m._buffers.items():
                if b is not None and k not in m._non_persistent:
                    out[f"{prefix}.{k}" if prefix else k] = b
        return out

    def state_dict(self) -> OrderedDict:
        """Parameters and persistent buffers by qualified name (detached tensors sharing memory).

        >>> import chainrule as cr
        >>> list(cr.nn.Linear(2, 3).state_dict())
        ['weight', 'bias']
        """
        return OrderedDict((k, t.detach()) for k, t in self._state_items().items())

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` in place, after checking every key, shape and dtype first.

        Nothing is assigned unless the whole dict is valid. With ``strict=False`` missing and
        unexpected keys are reported in the result instead of raising; shape mismatches always raise.
        """
        own = self._state_items()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = []
        if strict and (missing or unexpected):
            problems.append(f"missing keys {missing}, unexpected keys {unexpected}")
        values = {}
        for k, target in own.items():
            if k not in state_dict:
                continue
            v = np.asarray(raw(state_dict[k]))
            if v.shape != target.shape:
                problems.append(f"{k!r}: shape {v.shape} in the state dict, {target.shape} in the model")
            elif not np.can_cast(v.dtype, target.dtype, casting="same_kind"):
                problems.append(f"{k!r}: dtype {v.dtype} cannot be stored in the model's {target.dtype}")
            values[k] = v
        if problems:
            err = ShapeError if any("shape" in p or "dtype" in p for p in problems) else KeyError
            msg = (f"load_state_dict for {type(self).__name__}: " + "; ".join(problems) +
                   ". Nothing was loaded. Check that the file was saved from the same architecture"
                   + (", or pass strict=False to skip missing/unexpected keys" if missing or unexpected
                      else ""))
            raise err(msg)
        for k, v in values.items():
            np.copyto(own[k].data, v, casting="same_kind")
            own[k]._bump()
        return IncompatibleKeys(missing, unexpected)

    # ----- hooks and calls -----
    def register_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, args)`` runs before ``forward``; a returned value replaces ``args``."""
        return _add_hook(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; a returned value replaces ``output``."""
        return _add_hook(self._forward_hooks, hook)

    def register_full_backward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients w.r.t. the module's tensor
        inputs are computed; a returned tuple replaces ``grad_input``."""
        return _add_hook(self._backward_hooks, hook)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for hook in list(self._forward_pre_hooks.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        bw = None
        if self._backward_hooks and STATE.grad_enabled:
            bw = _BackwardHookState(self)
            args = bw.wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            res = hook(self, args, out)
            if res is not None:
                out = res
        if bw is not None:
            out = bw.wrap_outputs(out)
        return out

    # ----- printing -----
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({k}): " + repr(m).replace("\n", "\n  ") for k, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _add_hook(hooks: dict, hook: Callable) -> RemovableHandle:
    key = next(_hook_ids)
    hooks[key] = hook
    return RemovableHandle(hooks, key)


# ----- full backward hooks: identity Functions around the module's inputs and outputs -----
class _BackwardHookState:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.n_inputs = 0
        self.grad_output: tuple | None = None
        self.inputs_tracked = False

    def wrap_inputs(self, args: tuple) -> tuple:
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(positions)
        tracked = [i for i in positions if args[i].requires_grad]
        self.slots = [positions.index(i) for i in tracked]
        if not tracked:
            return args
        self.inputs_tracked = True
        new = _HookIn.apply(self, *(args[i] for i in tracked))
        args = list(args)
        for i, t in zip(tracked, new):
            args[i] = t
        return tuple(args)

    def wrap_outputs(self, out: Any) -> Any:
        if isinstance(out, Tensor) and out.requires_grad:
            return _HookOut.apply(self, out)[0]
        if isinstance(out, tuple) and out and all(isinstance(o, Tensor) for o in out):
            return _HookOut.apply(self, *out)
        return out

    def call(self, grad_input: tuple) -> tuple:
        grad_output = self.grad_output or ()
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, grad_input, grad_output)
            if res is not None:
                res = res if isinstance(res, tuple) else (res,)
                if len(res) != len(grad_input):
                    raise ShapeError(f"backward hook of {type(self.module).__name__} returned "
                                     f"{len(res)} gradients for {len(grad_input)} inputs")
                grad_input = res
        return grad_input


class _HookEnd(Function):
    """An end of a module's backward hooks (its inputs, its outputs): the identity, keeping the state."""

    @staticmethod
    def forward(ctx: Any, state: _BackwardHookState, *xs: Any) -> tuple:
        ctx.state = state
        return tuple(xs)


class _HookIn(_HookEnd):
    @staticmethod
    def backward(ctx: Any, *gs: Any) -> tuple:
        state = ctx.state
        full: list = [None] * state.n_inputs
        for slot, g in zip(state.slots, gs):
            full[slot] = g
        res = state.call(tuple(full))
        return (None,) + tuple(res[slot] for slot in state.slots)


class _HookOut(_HookEnd):
    @staticmethod
    def backward(ctx: Any, *gs: Any) -> tuple:
        state = ctx.state
        state.grad_output = gs
        if not state.inputs_tracked:
            state.call((None,) * state.n_inputs)
        return (None,) + gs
