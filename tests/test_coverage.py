"""docs/coverage.md is current, and every differentiable NumPy function is covered or listed with a
reason (tools/coverage.py). JAX and autograd are not needed: their columns are read from the page."""
import numpy as np
import pytest

import chainrule as cr
from tools import coverage


@pytest.fixture(scope="module")
def table():
    return coverage.rows(peers=False)


def test_every_numpy_math_function_is_covered_or_has_a_reason(table):
    missing = [r["function"] for r in table if r["class"] == "a" and r["chainrule"] == "missing"
               and r["function"] not in coverage.REASONS]
    assert not missing, f"differentiable NumPy functions without a chainrule version or a reason: {missing}"


def test_covered_functions_pass_their_probe(table):
    broken = [(r["function"], r["value"], r["forward"], r["reverse"], r["2nd order"]) for r in table
              if r["class"] == "a" and "wrong" in (r["value"], r["forward"], r["reverse"], r["2nd order"])]
    assert not broken, f"probes that disagree with NumPy or with central differences: {broken}"


def test_the_committed_page_is_current(table):
    committed = {r["function"]: r for r in coverage.read_doc()}
    assert committed, "docs/coverage.md is missing: run python tools/coverage.py"
    now = {r["function"]: r for r in table}
    assert set(now) == set(committed), f"functions added/removed: {sorted(set(now) ^ set(committed))}"
    stale = {name: {c: (committed[name].get(c), r[c]) for c in coverage.CHECKED if committed[name].get(c) != r[c]}
             for name, r in now.items()}
    stale = {k: v for k, v in stale.items() if v}
    assert not stale, f"docs/coverage.md is stale (run python tools/coverage.py): {stale}"


def test_the_classes_are_one_table_and_cover_the_namespace(table):
    assert {r["class"] for r in table} == {"a", "b", "c"}
    assert cr.numpy.numpy_class(np.argwhere) == "b" and cr.numpy.numpy_class(np.save) == "c"
    assert cr.numpy.numpy_class(np.sin) == "a" and cr.numpy.numpy_class(np.linalg.eigh) == "a"
    names = {name for name, _ in coverage.numpy_functions()}
    assert (cr.numpy.NOT_DIFFERENTIABLE | cr.numpy.NOT_MATH) <= names | {"row_stack"}


def test_the_command_line(table, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(coverage, "rows", lambda peers=True: [dict(r) for r in table])
    out = tmp_path / "coverage.md"
    out.write_text(coverage.DOC.read_text())
    assert coverage.main(["--check", "--output", str(out)]) == 0
    out.write_text(coverage.DOC.read_text().replace("| `sin` | a |", "| `sin` | b |"))
    assert coverage.main(["--check", "--output", str(out)]) == 1
    assert "out of date" in capsys.readouterr().out
