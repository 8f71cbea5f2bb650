"""The package is a one-way stack (docs/architecture.md): no import cycle, no import that needs
another module imported first, and the layers contract in pyproject.toml holds."""
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import chainrule

ROOT = Path(chainrule.__file__).parent.parent
MODULES = sorted(m.name for m in pkgutil.walk_packages(chainrule.__path__, "chainrule."))


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Import order is not load-bearing: each module loads when it is the first one imported."""
    script = (
        "import sys, importlib\n"
        f"for m in {MODULES!r}:\n"
        "    for k in [k for k in sys.modules if k == 'chainrule' or k.startswith('chainrule.')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(m)\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


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
