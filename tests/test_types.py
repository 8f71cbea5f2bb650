"""Type information for users (issue 27 point 4): ``chainrule/core/tensor.pyi`` declares Tensor's
operators and the methods attached to it at import time, so mypy checks a user script that uses
them, and reports a real mistake in one. The stub must agree with the live class (both ways)."""
import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import chainrule
from chainrule.core.tensor import Tensor

ROOT = Path(chainrule.__file__).parent.parent
STUB = ROOT / "chainrule" / "core" / "tensor.pyi"
SOURCE = ROOT / "chainrule" / "core" / "tensor.py"
# Class-body names that Python makes, not the stub's to declare.
PYTHON = {"__annotations__", "__dict__", "__doc__", "__module__", "__weakref__", "__slots__"}

USER_SCRIPT = textwrap.dedent('''\
    """A typical chainrule user script: mypy should report nothing on it."""
    import numpy as np

    import chainrule as cr
    from chainrule import nn

    t = cr.tensor(np.arange(12.0), requires_grad=True)
    u = t * 2 + 1.0
    u = 3 - u / 2.0
    u = 1 / (u ** 2 + t) - t // 3 % 2 + 2 * t - 0.5 * t
    m = t.reshape(3, 4)
    m2 = m.reshape((4, 3))
    total = m.sum()
    col = m.mean(axis=0)
    kept = m.sum(axis=1, keepdims=True)
    prod = m @ m.T
    neg = -m + abs(m)
    mask = (m > 0.5) & (m != 3.0)
    first = m[0]
    rows: int = m.shape[0]
    loss = (prod.sum() + col.sum() + kept.sum() + neg.sum() + u.sum() + m2.sum()) * (mask.sum() + first.sum())
    loss.backward()
    g = t.grad
    if g is not None:
        print(g.shape, g.numpy().shape)
    med = cr.median(t)
    U, S, Vh = cr.linalg.svd(m)
    with cr.no_grad():
        w = t.detach() * 2
        w += 1
        w[0] = 0.0

    model = nn.Linear(4, 2)
    opt = cr.optim.Adam(model.parameters(), lr=1e-3)
    x = cr.tensor(np.ones((8, 4)))
    y = cr.tensor(np.zeros((8, 2)))
    for _ in range(3):
        opt.zero_grad()
        out = model(x)
        step_loss = ((out - y) ** 2).mean()
        step_loss.backward()
        opt.step()
    value: float = step_loss.item()
    n: int = m.ndim
    print(value, n, rows, total.item(), float(med), U.shape, S.shape, Vh.shape, t.requires_grad, t.is_leaf, m.dtype)
''')

# Real mistakes: a misspelled method, a tensor where an int is declared.
BAD_SCRIPT = textwrap.dedent('''\
    import chainrule as cr

    t = cr.tensor([1.0, 2.0, 3.0, 4.0])
    m = t.reshpe(2, 2)
    n: int = t.sum()
''')


def mypy(script: Path, cache: Path) -> subprocess.CompletedProcess:
    """mypy on ``script`` as a user runs it, from the repository root (where it finds ./chainrule)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                           "--cache-dir", str(cache), str(script)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e .[dev])")
    return tmp_path_factory.mktemp("mypy_cache")


def test_user_script_runs(tmp_path):
    """The script mypy checks below is a working program, not only well-typed text."""
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_reports_nothing_on_a_user_script(tmp_path, mypy_cache):
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    done = mypy(script, mypy_cache)
    assert done.returncode == 0, f"mypy on a typical user script:\n{done.stdout}{done.stderr}"


def test_mypy_reports_a_real_type_error(tmp_path, mypy_cache):
    """The check above is not vacuous: the same run flags a misspelled method and a wrong type."""
    script = tmp_path / "bad_script.py"
    script.write_text(BAD_SCRIPT)
    done = mypy(script, mypy_cache)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert '"Tensor" has no attribute "reshpe"' in output, output
    assert 'Incompatible types in assignment (expression has type "Tensor", variable has type "int")' in output, output


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text())


def _class(tree: ast.Module, name: str = "Tensor") -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _declared(body: list, assignments: bool = True) -> dict:
    """The names a class or module body declares: functions (a property and its setter once),
    annotated names and (with ``assignments``) plainly assigned ones."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.setdefault(node.name, node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif assignments and isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return names


def test_the_stub_declares_exactly_the_live_tensor_class():
    """Every attribute, method and operator of the live Tensor (its own, from tensor.py, and those
    other modules attach at import time) is in the stub, and the stub declares nothing it lacks."""
    live = set(vars(Tensor)) - PYTHON
    stub = set(_declared(_class(_stub()).body))
    missing, extra = sorted(live - stub), sorted(stub - live)
    assert not missing, (f"Tensor has {missing}, which chainrule/core/tensor.pyi does not declare: run "
                         f"python tools/gen_tensor_stub.py (or declare them by hand)")
    assert not extra, f"chainrule/core/tensor.pyi declares {extra}, which the live Tensor lacks"
    public = {name for name in dir(Tensor) if not name.startswith("_")}
    assert public <= stub


def test_the_stub_declares_the_module_names():
    """A .pyi replaces tensor.py for type checkers: every name tensor.py defines (and other modules
    import: Tensor, tensor, wrap, _new, graph_role, NUMPY_CALL, ...) is in it."""
    source = set(_declared(ast.parse(SOURCE.read_text()).body))
    stub_tree = _stub()
    stub = set(_declared(stub_tree.body))
    assert not source - stub, f"chainrule/core/tensor.pyi lacks tensor.py's {sorted(source - stub)}"
    declared = set(_declared(stub_tree.body, assignments=False))   # (its own helpers are assigned: _T, ...)
    assert not declared - source, f"chainrule/core/tensor.pyi declares {sorted(declared - source)}, not in tensor.py"


def _stub_params(fn: ast.FunctionDef) -> list:
    a = fn.args
    params = [(p.arg, "positional") for p in a.posonlyargs + a.args][1:]
    params += [(a.vararg.arg, "*")] if a.vararg else []
    params += [(p.arg, "keyword") for p in a.kwonlyargs]
    params += [(a.kwarg.arg, "**")] if a.kwarg else []
    return params


def _live_params(fn) -> list:
    kinds = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "keyword",
             inspect.Parameter.VAR_KEYWORD: "**"}
    return [(p.name, kinds.get(p.kind, "positional")) for p in list(inspect.signature(fn).parameters.values())[1:]]


def test_the_stub_methods_take_the_parameters_of_the_live_ones():
    """Each method's parameters in the stub are those of the function on the live class (names and
    kinds; an operator's only by kind: it is called positionally), so ``t.sum(axis=0, keepdims=True)``
    type-checks exactly when it runs."""
    stub = _declared(_class(_stub()).body)
    wrong = []
    for name, value in vars(Tensor).items():
        node = stub.get(name)
        if not inspect.isfunction(value) or not isinstance(node, ast.FunctionDef) or \
                any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
            continue
        ours, theirs = _stub_params(node), _live_params(value)
        if name.startswith("__") and name.endswith("__"):
            ours, theirs = [kind for _, kind in ours], [kind for _, kind in theirs]
        if ours != theirs:
            wrong.append(f"Tensor.{name}: stub {ours}, live {theirs}")
    assert not wrong, "run python tools/gen_tensor_stub.py:\n" + "\n".join(wrong)
