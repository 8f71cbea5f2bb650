"""What a compiled step can read besides its arguments (``cr.compile``): the tensors, arrays and Python
values reachable from its closure, globals and bound ``self``, each with the path that finds it
again at the next call; and the comparisons the guards make (docs/compile.md, "Guards")."""
from __future__ import annotations

import functools
import math
import types
from typing import Any, Callable

from chainrule.core._backend import ndarray, np
from chainrule.core.tensor import Tensor

_SCAN_LIMIT = 4000            # objects visited when looking for the tensors a step can read
_SCAN_DEPTH = 6
_SEQ_LIMIT = 256              # a longer list/tuple is not looked into (and its values not guarded)
_SCALARS = (bool, int, float, complex, str, type(None))
_GONE = object()              # what a path finds when its object is gone


# ----- where a value the step reads comes from: a path from a root, re-walked at every call -----
def _walk(root: Any, steps: tuple) -> Any:
    """The object at ``steps`` from ``root`` (attributes and items), or ``_GONE``."""
    obj = root
    try:
        for attr, key in steps:
            obj = len(obj) if attr is None else obj.__dict__[key] if attr else obj[key]
    except Exception:
        return _GONE
    return obj


def _path_name(root_name: str, steps: tuple) -> str:
    return root_name + "".join(f".{k}" if attr else f"[{k!r}]" for attr, k in steps if attr is not None)


class _Scan:
    """The tensors, arrays and Python values reachable from a step's closure, globals and bound
    ``self`` (and from the objects among its arguments), each with the path that finds it again."""

    def __init__(self) -> None:
        self.tensors: dict[int, tuple] = {}     # id(tensor) -> (tensor, root index, steps, name)
        self.arrays: dict[int, tuple] = {}      # id(ndarray) -> (array, root index, steps, name, via tensor)
        self.values: list[tuple] = []           # (root index, steps, name, value): guarded by value
        self.objects: dict[int, tuple] = {}     # id(object) -> (object, root index, steps, name)
        self.roots: list[Callable[[], Any]] = []
        self.root_names: list[str] = []
        self.seen: set[int] = set()
        self.generators: list[tuple] = []       # (NumPy generator, name): its state is compared around a capture

    def add_root(self, getter: Callable[[], Any], name: str) -> None:
        self.roots.append(getter)
        self.root_names.append(name)
        try:
            obj = getter()
        except Exception:
            return
        self._visit(obj, len(self.roots) - 1, (), name, 0)

    def _visit(self, obj: Any, root: int, steps: tuple, name: str, depth: int) -> None:
        if isinstance(obj, _SCALARS):
            self.values.append((root, steps, name, obj))
            return
        if id(obj) in self.seen or len(self.seen) > _SCAN_LIMIT or depth > _SCAN_DEPTH:
            return
        self.seen.add(id(obj))
        if isinstance(obj, (np.random.Generator, np.random.RandomState)):
            self.generators.append((obj, name))    # drawn from by cr.random.draw only (see on_draw)
            self.values.append((root, steps, name, (obj,)))     # by identity: a replay draws from it
            return
        # the step may read len(); (an empty dict may be an optimizer's state, which its island fills)
        if isinstance(obj, (list, tuple)) or (isinstance(obj, dict) and obj
                                              and all(isinstance(k, _SCALARS) for k in obj)):
            self.values.append((root, steps + ((None, "len"),), f"len({name})", len(obj)))
        through = getattr(type(obj), "_scan_through", None)
        if through is not None:          # a compiled step: its function is what it reads, not its cache
            self._visit(getattr(obj, through), root, steps + ((True, through),), f"{name}.{through}", depth + 1)
            return
        d = getattr(obj, "__dict__", None)
        if isinstance(obj, Tensor):
            self.tensors.setdefault(id(obj), (obj, root, steps, name,
                                              (obj, obj._version, obj.__dict__.get("grad"), obj.data)))
            self.arrays.setdefault(id(obj.data), (obj.data, root, steps, name, True))
        elif isinstance(obj, ndarray):
            self.arrays.setdefault(id(obj), (obj, root, steps, name, False))
        elif isinstance(obj, dict):
            for k, v in list(obj.items()):
                if isinstance(k, _SCALARS):
                    self._visit(v, root, steps + ((False, k),), _path_name(name, ((False, k),)), depth + 1)
        elif isinstance(obj, (list, tuple)) and len(obj) <= _SEQ_LIMIT:
            for i, v in enumerate(obj):
                self._visit(v, root, steps + ((False, i),), f"{name}[{i}]", depth + 1)
        elif isinstance(obj, (types.FunctionType, types.MethodType)):
            self.values.append((root, steps, name, (obj,)))      # by identity: rebinding it is a miss
            if isinstance(obj, types.MethodType):
                self.add_root(lambda m=obj: m.__self__, f"{name}.__self__")
            if not (obj.__module__ or "").startswith(("chainrule", "numpy")):
                self._function(obj, depth + 1)
        elif isinstance(d, dict) and not isinstance(obj, (types.ModuleType, type)) \
                and not type(obj).__module__.startswith(("numpy", "builtins")):
            self.objects.setdefault(id(obj), (obj, root, steps, name))
            self._class_values(type(obj))
            for k, v in list(d.items()):
                self._visit(v, root, steps + ((True, k),), f"{name}.{k}", depth + 1)

    def _class_values(self, cls: type) -> None:
        """The Python values a user's class holds (``self.scale`` found on the class)."""
        for klass in cls.__mro__:
            if klass.__module__.startswith(("chainrule", "numpy", "builtins")) or id(klass) in self.seen:
                continue
            self.seen.add(id(klass))
            for k, v in list(vars(klass).items()):
                if isinstance(v, _SCALARS) and not k.startswith("__"):
                    self.add_root(lambda klass=klass, k=k: vars(klass)[k], f"{klass.__name__}.{k}")

    def _function(self, fn: Any, depth: int) -> None:
        """A function's closure cells and the globals its code names (as new roots)."""
        if isinstance(fn, functools.partial):
            self.add_root(lambda p=fn: (p.args, p.keywords), "partial's arguments")
            fn = fn.func
        if isinstance(fn, types.MethodType):
            self.add_root(lambda m=fn: m.__self__, "self")
            fn = fn.__func__
        code = getattr(fn, "__code__", None)
        if code is None:
            obj = fn
            if getattr(obj, "__dict__", None) is not None:        # a callable object (a Module)
                self.add_root(lambda: obj, type(obj).__name__)
                for name in ("__call__", "forward"):
                    method = getattr(type(obj), name, None)
                    if isinstance(method, types.FunctionType) and not method.__module__.startswith("chainrule"):
                        self._function(method, depth)
            return
        if fn.__defaults__ or fn.__kwdefaults__:
            self.add_root(lambda f=fn: (f.__defaults__, f.__kwdefaults__), f"{code.co_name}'s defaults")
        for i, cell in enumerate(fn.__closure__ or ()):
            self.add_root(lambda cell=cell: cell.cell_contents, code.co_freevars[i])
        glob = fn.__globals__
        names = _code_names(code)
        for nm in names:
            if nm not in glob:
                continue
            obj = glob[nm]
            if isinstance(obj, types.ModuleType):   # ``cfg.SCALE``: the module's attributes the code names
                if not obj.__name__.startswith(("chainrule", "numpy")):
                    for attr in names & obj.__dict__.keys():
                        self.add_root(lambda obj=obj, attr=attr: obj.__dict__[attr], f"{nm}.{attr}")
            else:
                self.add_root(lambda nm=nm: glob[nm], nm)


def _code_names(code: Any) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


# ----- the guards' comparisons (compile.py checks them at every call) -----
def _hooked(t: Tensor) -> bool:
    node = t.grad_fn if t.grad_fn is not None else (t._leaf_edge[0] if t._leaf_edge else None)
    return bool(node is not None and node.pre_hooks)


def _same(a: Any, b: Any) -> bool:
    """Python values equal bitwise: -0.0 is not 0.0, NaN is NaN; ``b`` a 1-tuple: ``a`` is its item."""
    if type(b) is tuple:
        return a is b[0]
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b) or (a != a and b != b)
    if type(a) is complex:
        return _same(a.real, b.real) and _same(a.imag, b.imag)
    return a == b                         # (only Python scalars are guarded by value)


def _leaf_guard(x: Any) -> tuple:
    if isinstance(x, Tensor):
        return ("tensor", type(x), x.data.shape, x.data.dtype, x._requires_grad)
    if isinstance(x, ndarray):
        return ("array", type(x), x.shape, x.dtype)
    if isinstance(x, _SCALARS):
        return ("value", x)
    return ("object", x)


def _describe_miss(name: str, want: tuple, x: Any) -> str | None:
    """None if ``x`` passes the guard ``want`` of ``name``, else the message naming the guard."""
    kind = want[0]
    if kind == "value":
        return None if _same(x, want[1]) else f"{name}: value {x!r} != {want[1]!r}"
    if kind == "object":
        return None if x is want[1] else f"{name}: a different {type(want[1]).__name__} object"
    if type(x) is not want[1]:
        return f"{name}: type {type(x).__name__} != {want[1].__name__}"
    d = x.data if kind == "tensor" else x
    for what, now, was in (("shape", d.shape, want[2]), ("dtype", d.dtype, want[3])):
        if now != was:
            return f"{name}: {what} {now} != {was}"
    if kind == "tensor" and x._requires_grad != want[4]:
        return f"{name}: requires_grad {x._requires_grad} != {want[4]}"
    if kind == "tensor" and want[4] and x.grad_fn is not None:
        return f"{name}: a non-leaf tensor that requires grad (captured: a leaf)"
    if kind == "tensor" and _hooked(x):
        return f"{name}: a tensor hook is registered on it now"
    return None


def _alias(values: list) -> tuple:
    """Which of the arrays (of the tensors) among ``values`` are one: the first index of each."""
    arrays = [x.data if isinstance(x, Tensor) else x for x in values if isinstance(x, (Tensor, ndarray))]
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(a), i) for i, a in enumerate(arrays))
