"""The public API is published one way and checked: every namespace's ``__all__`` is unique and
resolves, NumPy's names reach ``cr.*``, ``np.<name>(tensor)`` and ``Tensor.<name>``, every primitive
reaches a public function, and tests/public_api.txt (the whole list) changes only on purpose.

After an intended change of the API, rewrite the list with ``python -m tests.test_public_api``."""
import importlib
import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.special

import chainrule as cr
from chainrule import numpy as N
from chainrule.func import transforms
from chainrule.nn import layers as nn_layers
from chainrule.nn import module as nn_module
from chainrule.ops import special as special_ops
from chainrule.scipy import stats
from tools import api_pages

API_FILE = Path(__file__).with_name("public_api.txt")
# the namespaces of the API reference (tools/api_pages.py: one list for both)
NAMESPACES = {space: importlib.import_module(name) for space, (name, _) in api_pages.NAMESPACES.items()}
CHAPTERS = list(N.CHAPTERS)
# NumPy functions that take no array to dispatch on (they build from sizes), or that wrap another one
NO_DISPATCH = {"full": "np.full(shape, fill): no array argument", "indices": "from sizes", "tri": "from sizes",
               "mask_indices": "from a size and a function", "row_stack": "NumPy's wrapper of vstack, which dispatches",
               # NumPy's signatures in front of the same primitive: np.astype copies by default where cr.astype,
               # as torch's .to, returns the tensor itself when the dtype matches; np.copy takes order, subok
               "astype": "chainrule.numpy.indexing._numpy_astype", "copy": "chainrule.numpy.indexing._numpy_copy"}
# ndarray methods that NumPy runs in place (chainrule's namesakes return a new tensor), or whose
# arguments come in another order than the function's (a.compress(condition) is np.compress(condition, a))
NOT_METHODS = {"partition": "in place in NumPy", "put": "in place in NumPy", "resize": "in place in NumPy",
               "compress": "np.compress(condition, a): the method's first argument is not the array"}
# primitives that serve a public function of another name
INTERNAL_PRIMITIVES = {"logdet": "cr.linalg.slogdet", "eigvalsh_vjp": "eigvalsh's VJP (second order)",
                       "svdvals_vjp": "svdvals' VJP (second order)", "lstm_scan": "cr.nn.LSTM",
                       "gru_scan": "cr.nn.GRU", "rnn_scan": "cr.nn.RNN",
                       "conv": "cr.nn.functional.conv1d/2d/3d",
                       "conv_transpose": "cr.nn.functional.conv_transpose1d/2d/3d; conv's VJP in its input",
                       "conv_weight": "conv's VJP in its weight",
                       "batch_norm_train": "cr.nn.functional.batch_norm (training mode), cr.nn.BatchNorm1d/2d/3d",
                       "gelu_tanh": "cr.nn.functional.gelu(x, approximate='tanh'), cr.nn.GELU('tanh')",
                       "gelu_tanh_backward": "gelu_tanh's VJP (second order)",
                       "layer_norm_backward": "layer_norm's VJP and JVP (second order)"}


def public_api() -> list[str]:
    """Every public name: each namespace's ``__all__`` and Tensor's public attributes."""
    names = [f"{prefix}.{name}" for prefix, space in NAMESPACES.items() for name in space.__all__]
    names += [f"Tensor.{name}" for name in dir(cr.Tensor) if not name.startswith("_")]
    return sorted(names)


@pytest.mark.parametrize("prefix", NAMESPACES)
def test_every_all_is_unique_and_resolves(prefix):
    space = NAMESPACES[prefix]
    assert len(space.__all__) == len(set(space.__all__)), sorted(n for n in space.__all__ if space.__all__.count(n) > 1)
    assert [n for n in space.__all__ if not hasattr(space, n)] == []


def test_the_committed_list_is_the_api():
    """A new, renamed or removed public name shows in review as a diff of tests/public_api.txt."""
    assert API_FILE.read_text().split() == public_api(), (
        "the public API changed: if on purpose, run `python -m tests.test_public_api` and commit the list")


def test_numpy_chapters_reach_cr():
    """chainrule/__init__ star-imports chainrule.numpy and, for type checkers, each chapter of N.CHAPTERS."""
    stars = set(re.findall(r"^from (chainrule\.numpy\.\w+) import \*", Path(cr.__file__).read_text(), re.M))
    assert stars == {chapter.__name__ for chapter in CHAPTERS}
    for chapter in CHAPTERS:
        assert [n for n in chapter.__all__ if getattr(cr, n, None) is not getattr(chapter, n)] == [], chapter.__name__
    assert set(N.__all__) <= set(cr.__all__)


def test_numpy_names_dispatch_from_numpy():
    """``np.<name>(tensor)`` reaches chainrule's function for every NumPy name chainrule has."""
    def targets(space, prefix, functions):
        return [f"{prefix}.{name}" for name in space.__all__ if callable(getattr(functions, name, None))
                and not isinstance(getattr(functions, name), type) and name not in NO_DISPATCH
                and (N._UFUNCS if isinstance(getattr(functions, name), np.ufunc) else N._FUNCTIONS)
                .get(getattr(functions, name)) is not getattr(space, name)]
    assert all(f"{N._FUNCTIONS[getattr(np, name)].__module__}.{N._FUNCTIONS[getattr(np, name)].__name__}"
               == NO_DISPATCH[name] for name in ("astype", "copy"))
    assert targets(N, "np", np) == []
    assert targets(cr.linalg, "np.linalg", np.linalg) == []
    assert targets(cr.fft, "np.fft", np.fft) == []
    ufuncs = [n for n in cr.special.__all__ if isinstance(getattr(scipy.special, n, None), np.ufunc)]
    assert [n for n in ufuncs if getattr(scipy.special, n) not in N._UFUNCS] == []
    t = cr.tensor([0.5, 1.5], requires_grad=True)
    assert np.median(t).grad_fn is not None and np.linalg.norm(t).grad_fn is not None


def test_numpy_method_names_are_tensor_methods():
    """Every ndarray method that chainrule has as a function is a Tensor method, the same function."""
    names = [m for m in dir(np.ndarray) if not m.startswith("_") and callable(getattr(np.ndarray, m))
             and callable(getattr(N, m, None))
             and m not in NOT_METHODS and m in N.__all__]
    assert [m for m in names if m not in vars(cr.Tensor)] == []
    special = {"reshape", "transpose"}              # ndarray's *shape / *axes forms
    assert [m for m in names if m not in special and vars(cr.Tensor)[m] is not getattr(N, m)] == []
    x = cr.tensor([[1.0, 0.0], [2.0, 3.0]])
    assert x.any().item() and not x.all().item() and [a.tolist() for a in x.nonzero()] == [[0, 1, 1], [0, 0, 1]]


def test_every_primitive_reaches_a_public_function():
    spaces = [cr, cr.linalg, cr.fft, cr.special, cr.nn.functional, N]
    unreached = sorted(p for p in cr.PRIMITIVES
                       if p not in INTERNAL_PRIMITIVES and not any(hasattr(s, p) for s in spaces))
    assert unreached == []


NN_FAMILIES = [cr.nn.activation, cr.nn.containers, cr.nn.conv, cr.nn.loss, cr.nn.normalization, cr.nn.pooling,
               cr.nn.resampling, cr.nn.rnn, cr.nn.transformer]
F_FAMILIES = [cr.nn.functional.basic, cr.nn.functional.activation, cr.nn.functional.loss,
              cr.nn.functional.normalization, cr.nn.functional.attention, cr.nn.functional.conv,
              cr.nn.functional.padding, cr.nn.functional.pooling, cr.nn.functional.resampling]
# the modules whose public functions and classes are all published: by their own __all__ or their area's
PUBLISHING = {**{chapter: chapter for chapter in CHAPTERS}, nn_layers: cr.nn, nn_module: cr.nn,
              transforms: cr, stats: cr.stats, N.linalg_more: cr.linalg, special_ops: cr.special,
              **{family: cr.nn for family in NN_FAMILIES}, **{family: cr.nn.functional for family in F_FAMILIES}}


@pytest.mark.parametrize("module", PUBLISHING, ids=lambda m: m.__name__)
def test_what_a_module_defines_is_published(module):
    """A new function, layer or transform cannot be forgotten in a list: the functions (and nn
    Modules) a module defines publicly (not starting with _) are in its own __all__ or its namespace's."""
    space = PUBLISHING[module]
    defined = [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None)
               == module.__name__ and (inspect.isfunction(v) or isinstance(v, type) and issubclass(v, cr.nn.Module))]
    assert [n for n in defined if n not in space.__all__ and n not in getattr(module, "__all__", ())] == []


if __name__ == "__main__":
    API_FILE.write_text("\n".join(public_api()) + "\n")
    print(f"wrote {API_FILE} ({len(public_api())} names)")
    sys.exit(0)
