"""The package is a one-way stack (docs/architecture.md): no import cycle, no import that needs
another module imported first, and the layers contract in pyproject.toml holds."""
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import chainrule

try:
    import tomllib
except ImportError:                     # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(chainrule.__file__).parent.parent
MODULES = sorted(m.name for m in pkgutil.walk_packages(chainrule.__path__, "chainrule."))

# Imports each module of argv[2:] alone, from the package in argv[1]. Importing `chainrule.x` the
# ordinary way runs chainrule/__init__.py first, which loads every module in a working order, so a
# module that needs another one loaded first would pass. Here the packages above the module whose
# ordinary import loads it are empty shells (their __init__ does not run): the module loads with
# exactly its own imports. A package that does not load the module (chainrule for the tour) is
# always complete before the module runs, so it is imported for real.
_IMPORT_ALONE = """
import importlib, itertools, os, sys, types
root, jobs, names, loads, children = sys.argv[1], int(sys.argv[2]), sys.argv[3:], {}, {}

def report(name, problem):
    os.write(1, f"FAILED {name}: {problem}".replace("\\n", " ")[:4000].encode() + b"\\n")

def wait():
    pid, status = os.wait()
    if status:
        report(children.pop(pid), f"the child exited with status {status}")

def clear():
    for key in [k for k in sys.modules if k == "chainrule" or k.startswith("chainrule.")]:
        del sys.modules[key]

def loaded_by(package):
    if package not in loads:
        clear()
        importlib.import_module(package)
        loads[package] = {k for k in sys.modules if k.startswith("chainrule.")}
    return loads[package]

def import_alone(name):
    above = [name.rsplit(".", n)[0] for n in range(name.count("."), 0, -1)]
    real = list(itertools.takewhile(lambda p: name not in loaded_by(p), above))
    clear()
    pid = os.fork()
    if pid:
        children[pid] = name
        return
    try:
        if real:
            importlib.import_module(real[-1])
        for package in above[len(real):]:
            shell = types.ModuleType(package)
            shell.__path__ = [os.path.join(root, *package.split("."))]
            sys.modules[package] = shell
            parent, _, child = package.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, shell)
        assert importlib.import_module(name).__file__.startswith(root)
    except BaseException as e:
        report(name, f"{type(e).__name__}: {e}")
    os._exit(0)

# each module in a forked child of a process with NumPy and SciPy loaded, a few at a time
for i, name in enumerate(names):
    if i >= jobs:
        wait()
    import_alone(name)
for _ in range(min(jobs, len(names))):
    wait()
"""


def modules_that_fail_alone(root: Path, modules: list[str]) -> list[str]:
    """The modules that fail to import alone, each with its error."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_ALONE, str(root), str(os.cpu_count() or 1), *modules],
                         capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    return sorted(line[7:] for line in out.stdout.splitlines() if line.startswith("FAILED "))


NEEDS_FORK = pytest.mark.skipif(not hasattr(os, "fork"), reason="the check forks a child per module")

@NEEDS_FORK
def test_every_module_imports_alone():
    """Import order is not load-bearing: each module loads with only its own imports."""
    failed = modules_that_fail_alone(ROOT, MODULES)
    assert failed == []


@NEEDS_FORK
def test_importing_alone_finds_a_load_order_bug(tmp_path):
    """The check above can fail: a module that reads `Tensor.backward` without importing the engine
    (which attaches it) loads the ordinary way, chainrule/__init__ having loaded the engine first,
    and fails alone."""
    shutil.copytree(ROOT / "chainrule", tmp_path / "chainrule",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "chainrule" / "_planted.py").write_text(
        "from chainrule.core.tensor import Tensor\nBACKWARD = Tensor.backward\n")
    with open(tmp_path / "chainrule" / "__init__.py", "a") as f:
        f.write("\nfrom . import _planted\n")
    ordinary = subprocess.run([sys.executable, "-c", "import chainrule._planted as m; print(m.__file__)"],
                              capture_output=True, text=True, cwd=tmp_path)
    assert ordinary.stdout.strip() == str(tmp_path / "chainrule" / "_planted.py"), ordinary.stderr
    assert modules_that_fail_alone(tmp_path, ["chainrule._planted", "chainrule.core.tensor"]) == [
        "chainrule._planted: AttributeError: type object 'Tensor' has no attribute 'backward'"]


def test_no_import_cycle():
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")
    graph = grimp.build_graph("chainrule")
    cycles = []
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != "chainrule" and graph.chain_exists(imported, module) and module != imported:
                cycles.append((module, imported))
    assert cycles == []


def test_the_layers_contract_holds():
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                          "lint_imports_command()"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "1 kept, 0 broken" in out.stdout, out.stdout[-3000:]


def _contract_floors() -> list[set[str]]:
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contract if c["type"] == "layers")["layers"]
    return [{m.strip() for m in re.split(r"[|:]", layer)} for layer in layers]


def _map_floors() -> list[set[str]]:
    """The floors of docs/architecture.md's map: its first code block, module names in the first
    36 columns (comma-separated; a trailing comma continues the floor on the next line)."""
    block = (ROOT / "docs" / "architecture.md").read_text().split("```\n")[1]
    floors: list[set[str]] = []
    more = False
    for line in block.splitlines():
        names = line[:36].strip()
        if names:
            if not more:
                floors.append(set())
            floors[-1] |= {"chainrule." + n.strip().replace("/", ".") for n in names.split(",") if n.strip()}
            more = names.endswith(",")
    return floors


def test_the_map_in_the_docs_is_the_contract():
    """docs/architecture.md names the layers of pyproject.toml's contract, floor by floor, top first."""
    doc, contract = _map_floors(), _contract_floors()
    for floor, (shown, declared) in enumerate(zip(doc, contract)):
        assert shown == declared, (f"floor {floor} from the top: the map shows {sorted(shown - declared)} "
                                   f"and not {sorted(declared - shown)} (pyproject.toml's layers)")
    assert len(doc) == len(contract), f"the map shows {len(doc)} floors, the contract has {len(contract)}"


def test_a_folder_is_a_layer():
    """At most 8 floors, each naming packages (plus extend.py, the extension API, and the commands);
    at most 6 modules directly in chainrule/ besides __init__ and __main__; no file over 1,000 lines."""
    floors = _contract_floors()
    assert len(floors) <= 8
    top = sorted(p.stem for p in (ROOT / "chainrule").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= 6, top
    modules = {m for floor in floors for m in floor if not (ROOT / m.replace(".", "/")).is_dir()}
    assert modules <= {f"chainrule.{name}" for name in top} | {"chainrule.__main__"}, modules
    long = [str(p.relative_to(ROOT)) for p in (ROOT / "chainrule").rglob("*.py")
            if len(p.read_text().splitlines()) > 1000]
    assert long == []
