"""``python tools/coverage.py``: which of NumPy's functions chainrule differentiates, checked.

Walks NumPy's main namespace (its public functions and ufuncs; classes, constants and submodules are
skipped, np.linalg and np.fft have their own pages) and chainrule's dispatch tables, classifies
each function (a: differentiable math, b: not differentiable by nature, c: not array math; the table
is ``chainrule.ops.numpy_class``), *probes* each differentiable one on sample arguments (forward value
against NumPy's, forward mode, reverse mode and second order against central differences), finds the
op-table row or test file that checks it, and writes ``docs/coverage.md``. Where JAX and autograd
are installed, the same probe asks whether ``jax.numpy`` and ``autograd.numpy`` differentiate the
function (without them the committed columns are kept).

    python tools/coverage.py            # regenerate docs/coverage.md
    python tools/coverage.py --check    # exit 1 when docs/coverage.md is out of date
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from chainrule import numpy as ops
from chainrule.core.grad_mode import no_grad
from chainrule.core.tensor import Tensor
from chainrule.core.tensor import tensor as _tensor
from chainrule.func.transforms import grad as _grad
from chainrule.func.transforms import jvp as _jvp

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "coverage.md"

# Differentiable NumPy functions chainrule does not differentiate, each with the reason.
REASONS: dict = {}

# Sample arguments for the probe, by function: float ndarrays are the differentiable inputs.
_RNG = np.random.default_rng(20240601)
_U = _RNG.uniform(0.2, 0.8, size=(3, 4))
_V = _RNG.uniform(0.2, 0.8, size=(3, 4))
_S = _RNG.uniform(-0.5, 0.5, size=(3, 3)) + 2.0 * np.eye(3)
_v = _RNG.uniform(0.2, 0.8, size=5)
_w = _RNG.uniform(0.2, 0.8, size=5)
_s0, _s1 = np.array(0.3), np.array(0.7)
_GENERIC: tuple = ((_U,), (_U, _V), (_v,), (_v, _w), (_S,), (_U, 1), (_v, 2), (_s0, _s1), (_U + 1.5,),
                   (_U, _V, _V), ([_U, _V],), (_U, 0.5))
_ARGS: dict = {
    "clip": (_U, 0.3, 0.6), "take": (_U, [0, 5, 5]), "take_along_axis": (_U, np.array([[0], [2], [1]]), 1),
    "einsum": ("ij,kj->ik", _U, _V), "tensordot": (_U, _V.T, 1), "interp": (np.array([0.3, 1.5]), np.arange(5.0), _v),
    "polyval": (_v, _U), "polyfit": (np.arange(5.0), _v, 2), "polyder": (_v,), "polyint": (_v,),
    "polyadd": (_v, _w[:3]), "polysub": (_v, _w[:3]), "polymul": (_v, _w[:3]), "polydiv": (_v, _w[:3] + 1),
    "roots": (_v,), "poly": (_v,), "linspace": (_s0, _s1, 5), "logspace": (_s0, _s1, 5),
    "geomspace": (np.array(1.3), np.array(2.7), 5), "astype": (_U, np.float64),
    "apply_along_axis": (np.cumsum, 1, _U), "apply_over_axes": (np.sum, _U, [0]),
    "piecewise": (_U, [_U > 0.5], [np.sin, np.cos]), "reshape": (_U, (4, 3)), "resize": (_U, (2, 5)), "tile": (_U, 2),
    "repeat": (_U, 2), "split": (_U, 2, 1), "array_split": (_U, 3, 1), "hsplit": (_U, 2), "vsplit": (_U[:2], 2),
    "dsplit": (_U.reshape(3, 2, 2), 2), "pad": (_U, 2, "reflect"), "roll": (_U, 2), "rot90": (_U,),
    "moveaxis": (_U, 0, 1), "swapaxes": (_U, 0, 1), "expand_dims": (_U, 1), "insert": (_v, 2, 0.5),
    "delete": (_v, 2), "append": (_v, _w), "where": (_U > 0.5, _U, _V), "select": ([_U > 0.5], [_U], 0.1),
    "choose": (np.array([0, 1, 0, 1]), [_v[:4], _w[:4]]), "compress": ([True, False, True], _U, 0),
    "extract": (_U > 0.5, _U), "diff": (_U,), "ediff1d": (_v,), "gradient": (_v,), "trapezoid": (_U,),
    "cross": (_U[:, :3], _V[:, :3]), "convolve": (_v, _w), "correlate": (_v, _w), "kron": (_U[:2, :2], _V[:2, :2]),
    "outer": (_v, _w), "inner": (_U, _V), "dot": (_U, _V.T), "vdot": (_U, _V), "matmul": (_U, _V.T),
    "vecdot": (_U, _V), "matvec": (_U, _v[:4]), "vecmat": (_v[:3], _U), "trace": (_S,), "diagonal": (_S,),
    "diag": (_S,), "diagflat": (_v,), "tril": (_S,), "triu": (_S,), "vander": (_v,),
    "percentile": (_U, 30.0), "nanpercentile": (_U, 30.0), "quantile": (_U, 0.3), "nanquantile": (_U, 0.3),
    "power": (_U, _V), "float_power": (_U, _V), "ldexp": (_U, 2), "average": (_U, 0, _V),
    "histogram": (_v,), "bincount": (np.array([0, 1, 1, 3]), _v[:4]), "searchsorted": (np.sort(_v), _w),
    "digitize": (_w, np.sort(_v)), "isin": (_v, _w), "unwrap": (_v * 5,), "sinc": (_U,),
    "cov": (_U,), "corrcoef": (_U,), "block": ([[_U, _V]],), "concatenate": ([_U, _V],), "concat": ([_U, _V],),
    "stack": ([_U, _V],), "hstack": ([_U, _V],), "vstack": ([_U, _V],), "dstack": ([_U, _V],),
    "column_stack": ([_v, _w],), "row_stack": ([_U, _V],), "unstack": (_U,), "meshgrid": (_v, _w),
    "broadcast_arrays": (_U, _v[:4]), "broadcast_to": (_v[:4], (3, 4)), "atleast_1d": (_s0,),
    "atleast_2d": (_v,), "atleast_3d": (_v,), "full_like": (_U, 0.5), "nan_to_num": (_U,),
    "real_if_close": (_U,), "trim_zeros": (np.concatenate([[0.0], _v, [0.0]]),), "sort_complex": (_v,),
    "arccosh": (_U + 1.5,), "acosh": (_U + 1.5,), "heaviside": (_U - 0.5, _V), "modf": (_U * 3,),
    "frexp": (_U * 3,), "fmod": (_U, _V), "remainder": (_U, _V), "mod": (_U, _V), "divmod": (_U, _V),
    "floor_divide": (_U * 3, _V), "copysign": (_U, _V - 0.5), "nextafter": (_U, _V), "i0": (_U,),
    "cumulative_sum": (_v,), "cumulative_prod": (_v,), "matrix_transpose": (_U,), "permute_dims": (_U, (1, 0)),
    "squeeze": (_U[None],), "flip": (_U,), "fliplr": (_U,), "flipud": (_U,), "histogram2d": (_v, _w),
    "histogramdd": (_U,), "histogram_bin_edges": (_v,), "lexsort": ((_v, _w),), "bartlett": (5,),
    "blackman": (5,), "hamming": (5,), "hanning": (5,), "kaiser": (5, 2.0), "argpartition": (_v, 2),
    "partition": (_v, 2), "unravel_index": (np.array([3, 5]), (3, 4)), "ravel_multi_index": (
        (np.array([0, 1]), np.array([2, 3])), (3, 4)), "packbits": (np.array([1, 0, 1], dtype=np.uint8),),
    "unpackbits": (np.array([7], dtype=np.uint8),), "gcd": (np.array([4, 6]), np.array([6, 9])),
    "lcm": (np.array([4, 6]), np.array([6, 9])), "mask_indices": (3, np.triu), "tril_indices_from": (_S,),
    "triu_indices_from": (_S,), "diag_indices_from": (_S,), "ix_": ([0, 1], [2, 3]),
}
_SKIP_PROBE = frozenset("""test show_config show_runtime info load save savetxt savez savez_compressed loadtxt
    genfromtxt fromfile fromregex frompyfunc seterr seterrcall setbufsize set_printoptions printoptions
    nested_iters""".split())


def _in_place(f: Callable) -> Callable:
    """NumPy's in-place functions probed on a copy of their target: the copy is returned."""
    def call(a: Any, *rest: Any) -> Any:
        a = a.copy()
        f(a, *rest)
        return a
    return call


# (name: (function to probe, sample arguments)) for the functions that write into their argument
_WRAPPED = {"put": (_in_place(np.put), (_U, [0, 5], _v[:2])),
            "putmask": (_in_place(np.putmask), (_U, _U > 0.5, _V)),
            "place": (_in_place(np.place), (_U, _U > 0.5, _v)),
            "copyto": (_in_place(np.copyto), (_U, _V)),
            "fill_diagonal": (_in_place(np.fill_diagonal), (_S, 0.5)),
            "put_along_axis": (_in_place(np.put_along_axis), (_U, np.array([[0], [2], [1]]), _v[:3, None], 1))}


# ----- NumPy's namespace -----
def numpy_functions() -> list[tuple[str, Any]]:
    """NumPy's public callables of its main namespace: functions, ufuncs and array-function dispatchers."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(dir(np)):
            if name.startswith("_"):
                continue
            obj = getattr(np, name, None)
            if obj is None or isinstance(obj, (types.ModuleType, type)) or not callable(obj):
                continue
            out.append((name, obj))
    return out


def chainrule_version(obj: Any) -> Any:
    """The chainrule function NumPy dispatches ``obj`` to, or None."""
    return ops._UFUNCS.get(obj) if isinstance(obj, np.ufunc) else ops._FUNCTIONS.get(obj)


# ----- the probe -----
def _leaves(tree: Any, out: list) -> None:
    if isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
        out.append(tree)
    elif isinstance(tree, (list, tuple)):
        for t in tree:
            _leaves(t, out)


def _rebuild(tree: Any, values: Any) -> Any:
    if isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
        return next(values)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rebuild(t, values) for t in tree)
    return tree


def _copies(tree: Any) -> Any:
    if isinstance(tree, np.ndarray):
        return tree.copy()
    if isinstance(tree, (list, tuple)):
        return type(tree)(_copies(t) for t in tree)
    return tree


def _outputs(res: Any) -> list:
    if isinstance(res, (list, tuple)):
        return [o for r in res for o in _outputs(r)]
    return [res]


def _float_data(o: Any) -> Any:
    d = o.data if isinstance(o, Tensor) else np.asarray(o)
    return d if d.dtype.kind in "fc" else None


class _Probe:
    """One sample call of a NumPy function on float64 arguments, and the checks built on it."""

    def __init__(self, name: str, fn: Any, args: tuple) -> None:
        args = _copies(args)                # (a function that writes into its argument cannot spoil the samples)
        self.name, self.fn, self.args = name, fn, args
        leaves: list = []
        _leaves(args, leaves)
        self.leaves = leaves
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            self.ref = _outputs(fn(*args))
        rng = np.random.default_rng(0)
        self.weights = [rng.standard_normal(np.shape(o)) if _float_data(o) is not None else None for o in self.ref]
        self.direction = [rng.standard_normal(x.shape) for x in leaves]

    def loss(self, call: Callable, xs: list, real: Callable, total: Callable) -> Any:
        outs = _outputs(call(*_rebuild(self.args, iter(xs))))
        terms = [total(real(o) * w) for o, w in zip(outs, self.weights) if w is not None]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out

    def numpy_loss(self, xs: list) -> float:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return float(self.loss(self.fn, xs, np.real, np.sum))

    def finite_difference(self, h: float = 1e-6) -> float:
        plus = [x + h * d for x, d in zip(self.leaves, self.direction)]
        minus = [x - h * d for x, d in zip(self.leaves, self.direction)]
        return (self.numpy_loss(plus) - self.numpy_loss(minus)) / (2 * h)

    def along(self, gs: Any) -> float:
        return float(sum(np.sum(np.asarray(getattr(g, "data", g)) * d) for g, d in zip(gs, self.direction)))


def _close(a: float, b: float) -> bool:
    return bool(np.isfinite(a)) and abs(a - b) <= 1e-4 * max(1.0, abs(b))


def _sample_args(name: str, fn: Any, floats: bool = True) -> tuple | None:
    """The first sample on which NumPy runs and gives finite float results (None: none does);
    ``floats=False``: any result will do."""
    candidates = [_ARGS[name]] if name in _ARGS else list(_GENERIC)
    for args in candidates:
        if not floats:
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    fn(*_copies(args))
                return args
            except Exception:
                continue
        try:
            probe = _Probe(name, fn, args)
        except Exception:
            continue
        data = [_float_data(o) for o in probe.ref]
        if probe.leaves and any(d is not None for d in data) and all(
                d is None or (d.size and np.isfinite(d).all()) for d in data):
            return args
    return None


def _cr_loss(probe: _Probe) -> Callable:
    return lambda *xs: probe.loss(probe.fn, list(xs), ops.real, ops.sum)


def probe_chainrule(name: str, fn: Any, args: tuple | None = None) -> dict:
    """value (against NumPy's), forward mode, reverse mode and second order, for chainrule."""
    res = {"value": "untested", "forward": "untested", "reverse": "untested", "second": "untested"}
    args = _sample_args(name, fn) if args is None else args
    if args is None:
        return res
    probe = _Probe(name, fn, args)
    args = probe.args
    loss = _cr_loss(probe)
    tensors = [_tensor(x) for x in probe.leaves]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            with no_grad():
                outs = _outputs(fn(*_rebuild(args, iter(tensors))))
            ok = len(outs) == len(probe.ref) and all(
                isinstance(o, Tensor) or _float_data(r) is None for o, r in zip(outs, probe.ref))
            ok = ok and all(_float_data(r) is None or np.allclose(
                _float_data(o), _float_data(r), rtol=1e-10, atol=1e-12) for o, r in zip(outs, probe.ref))
            res["value"] = "yes" if ok else "wrong"
        except Exception:
            res["value"] = "no"
            return {k: "no" for k in res}
        try:
            fd = probe.finite_difference()
        except Exception:                  # the output's shape moves with the input (unique, trim_zeros)
            return res
        argnums = tuple(range(len(tensors)))
        res["reverse"] = _attempt(lambda: probe.along(_as_tuple(_grad(loss, argnums=argnums)(*probe.leaves))), fd)
        res["forward"] = _attempt(lambda: float(np.asarray(getattr(t := _jvp(
            loss, tuple(probe.leaves), tuple(probe.direction))[1], "data", t))), fd)
        if res["reverse"] == "yes":
            first = _grad(loss, argnums=argnums)

            def along(*xs: Any) -> Any:
                gs = _as_tuple(first(*xs))
                out = 0
                for g, d in zip(gs, probe.direction):
                    out = out + ops.sum(g * d)
                return out

            def fd2(h: float = 1e-5) -> float:
                plus = [x + h * d for x, d in zip(probe.leaves, probe.direction)]
                minus = [x - h * d for x, d in zip(probe.leaves, probe.direction)]
                return (float(np.asarray(getattr(a := along(*plus), "data", a)))
                        - float(np.asarray(getattr(b := along(*minus), "data", b)))) / (2 * h)
            res["second"] = _attempt(lambda: probe.along(_as_tuple(_grad(along, argnums=argnums)(*probe.leaves))),
                                     None, fd2)
    return res


def _as_tuple(g: Any) -> tuple:
    return g if isinstance(g, tuple) else (g,)


def _attempt(compute: Callable, expected: float | None, expected_fn: Callable | None = None) -> str:
    try:
        got = compute()
        want = expected if expected_fn is None else expected_fn()
    except Exception:
        return "no"
    return "yes" if _close(got, want) else "wrong"


def probe_peer(module: Any, grad: Callable, name: str, fn: Any, args: tuple | None = None) -> str:
    """Whether ``module.<name>`` (jax.numpy or autograd.numpy) gives the reverse-mode derivative."""
    peer = getattr(module, name, None)
    if peer is None:
        return "absent"
    args = _sample_args(name, fn) if args is None else args
    if args is None:
        return "untested"
    probe = _Probe(name, fn, args)
    try:
        fd = probe.finite_difference()
    except Exception:
        return "untested"

    def loss(*xs: Any) -> Any:
        return probe.loss(peer, list(xs), module.real, module.sum)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _attempt(lambda: probe.along([np.asarray(g) for g in grad(loss, probe.leaves)]), fd)


def _jax_grad(loss: Callable, xs: list) -> list:
    jax = importlib.import_module("jax")          # optional: only to regenerate the JAX column
    jax.config.update("jax_enable_x64", True)
    return list(jax.grad(loss, argnums=tuple(range(len(xs))))(*xs))


def _autograd_grad(loss: Callable, xs: list) -> list:
    autograd = importlib.import_module("autograd")   # optional: only to regenerate the autograd column
    return [autograd.grad(loss, i)(*xs) for i in range(len(xs))]


def _peer(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except Exception:
        return None


# ----- where each function is checked -----
def checked_by(name: str) -> str:
    """The op-table row that checks ``name`` (its id or primitive name), else a test file naming it."""
    tests = ROOT / "tests"
    for path in sorted((tests / "op_specs").glob("*.py")):
        text = path.read_text()
        ids = re.findall(r'id="([^"]+)"', text)
        for row in ids:
            if row == name or row.startswith(name + "-"):
                return f"tests/op_specs/{path.name}::{row}"
        if re.search(r'OpSpec\(\s*"' + re.escape(name) + r'"', text):
            return f"tests/op_specs/{path.name}::{name}"
    pattern = re.compile(r"(np|cr|numpy|ops)\." + re.escape(name) + r"\b")
    for path in sorted(tests.rglob("test_*.py")):
        if pattern.search(path.read_text()):
            return str(path.relative_to(ROOT))
    return "—"


# ----- the table -----
COLUMNS = ("function", "class", "chainrule", "value", "forward", "reverse", "2nd order", "checked by", "JAX",
           "autograd")
CHECKED = ("function", "class", "chainrule", "value", "forward", "reverse", "2nd order")   # what the test compares


def rows(peers: bool = True) -> list[dict]:
    """One row per NumPy function (see COLUMNS); ``peers=False`` leaves the JAX/autograd columns empty."""
    jnp = _peer("jax.numpy") if peers else None
    anp = _peer("autograd.numpy") if peers else None
    seen: dict = {}
    out = []
    for name, obj in numpy_functions():
        cls = ops.numpy_class(name if getattr(np, name) is obj else obj)
        mine = chainrule_version(obj)
        python = cls == "a" and mine is None and isinstance(obj, types.FunctionType)   # NumPy's own code
        row = {"function": name, "class": cls,
               "chainrule": f"cr.{_short_name(mine)}" if mine is not None else "NumPy's code on cr ops" if python
               else ("NumPy on the data" if cls != "a" else "missing")}
        if cls == "a" and (mine is not None or python) and name not in _SKIP_PROBE:
            key = id(obj)
            if key not in seen:
                seen[key] = probe_chainrule(name, *_WRAPPED[name]) if name in _WRAPPED else probe_chainrule(name, obj)
            found = seen[key]
            row.update({"value": found["value"], "forward": found["forward"], "reverse": found["reverse"],
                        "2nd order": found["second"]})
        elif cls == "a":
            row.update({"value": "—", "forward": "—", "reverse": "—", "2nd order": "—"})
        else:
            row.update({"value": "data", "forward": "—", "reverse": "—", "2nd order": "—"})
        row["checked by"] = checked_by(name) if mine is not None or python else "—"
        for col, module, grad in (("JAX", jnp, _jax_grad), ("autograd", anp, _autograd_grad)):
            if cls != "a" or name in _SKIP_PROBE:
                row[col] = "—"
            elif module is None:
                row[col] = ""
            else:
                try:
                    row[col] = probe_peer(module, grad, name, *_WRAPPED.get(name, (obj, None)))
                except Exception:
                    row[col] = "no"
        out.append(row)
    return out


def _short_name(fn: Any) -> str:
    module = getattr(fn, "__module__", "") or ""
    name = getattr(fn, "__name__", str(fn))
    for sub in ("linalg", "fft", "special"):
        if module.endswith("." + sub):
            return f"{sub}.{name}"
    return name


def read_doc(path: Path = DOC) -> list[dict]:
    """The rows of a written coverage table."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        row = dict(zip(COLUMNS, cells))
        row["function"] = row["function"].strip("`")
        out.append(row)
    return out


def summary(table: list[dict]) -> dict:
    math = [r for r in table if r["class"] == "a"]
    return {
        "functions": len(table), "a": len(math), "b": sum(r["class"] == "b" for r in table),
        "c": sum(r["class"] == "c" for r in table),
        "covered": sum(r["reverse"] == "yes" for r in math),
        "dispatched": sum(r["chainrule"] != "missing" for r in math),
        "jax": sum(r["JAX"] == "yes" for r in math), "autograd": sum(r["autograd"] == "yes" for r in math),
        "missing": [r["function"] for r in math if r["chainrule"] == "missing"],
    }


def render(table: list[dict]) -> str:
    s = summary(table)
    lines = [
        "# NumPy coverage",
        "",
        "Generated by `python tools/coverage.py` (tools/coverage.py); `tests/test_coverage.py` fails",
        "when this page is stale or a differentiable NumPy function is neither covered nor listed with a",
        "reason. np.linalg and np.fft have their own pages (docs/linalg.md, docs/complex.md).",
        "",
        "**class**: a = differentiable math; b = not differentiable by nature (integer, boolean or index",
        "results; results that do not depend on the values); c = not array math (creation from sizes, I/O,",
        "printing, dtype and memory queries). On a Tensor, a (b) or (c) function without a chainrule version",
        "runs NumPy on the data; an (a) function without one refuses an input that requires grad.",
        "",
        "**value / forward / reverse / 2nd order**: a probe calls `np.<function>` on Tensors at sample",
        "arguments and compares the value with NumPy's and the forward-mode, reverse-mode and second-order",
        "directional derivatives with central differences: yes, wrong (disagrees), no (raises), untested",
        "(no sample arguments), — (not applicable). **JAX / autograd**: the same reverse-mode probe on",
        "`jax.numpy.<function>` and `autograd.numpy.<function>` (absent: no such function).",
        "",
        f"- {s['functions']} functions: {s['a']} class a, {s['b']} class b, {s['c']} class c",
        f"- class a: {s['dispatched']} dispatched to chainrule, {s['covered']} with a checked reverse-mode "
        f"derivative; JAX differentiates {s['jax']}, autograd {s['autograd']}",
        f"- class a without a chainrule version ({len(s['missing'])}): "
        + (", ".join(f"`{n}` ({REASONS.get(n, 'no reason recorded')})" for n in s["missing"]) or "none"),
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    for r in table:
        cells = [f"`{r['function']}`"] + [r[c] or "" for c in COLUMNS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def generate(peers: bool = True, path: Path = DOC) -> list[dict]:
    """The table, with the JAX/autograd columns probed where installed, else kept from ``path``."""
    table = rows(peers)
    old = {r["function"]: r for r in read_doc(path)}
    for r in table:
        for col in ("JAX", "autograd"):
            if r[col] == "" and r["function"] in old:
                r[col] = old[r["function"]].get(col, "")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/coverage.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/coverage.md is out of date")
    parser.add_argument("--no-peers", action="store_true", help="keep the committed JAX/autograd columns")
    parser.add_argument("--output", default=str(DOC), help="where to write the table")
    opts = parser.parse_args(argv)
    path = Path(opts.output)
    table = generate(peers=not opts.no_peers and not opts.check, path=path)
    if opts.check:
        stale = [r["function"] for r, o in zip(table, read_doc(path)) if any(r[c] != o.get(c) for c in CHECKED)]
        if stale or len(table) != len(read_doc(path)):
            print(f"{path} is out of date ({len(stale)} rows differ, e.g. {stale[:5]}); run python -m chainrule "
                  f"coverage")
            return 1
        return 0
    path.write_text(render(table))
    s = summary(table)
    print(f"wrote {path}: {s['functions']} functions (a {s['a']}, b {s['b']}, c {s['c']}); class a: "
          f"{s['covered']} covered, JAX {s['jax']}, autograd {s['autograd']}; missing {len(s['missing'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
