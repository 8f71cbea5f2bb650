"""The programs tour sections and examples run and print the figures the docs quote."""
import os
import re
import runpy

import pytest

from chainrule import tour

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_tour_sections_print_their_findings(capsys):
    tour.run(fast=True, only=["control-flow", "nan-trap", "implicit", "estimators"])
    out = capsys.readouterr().out
    assert "dz/da = 0.3535533906" in out
    assert "grad = [ nan  nan 0.25]" in out and "grad = [0.   0.   0.25]" in out
    assert "Function 'SqrtBackward' returned nan" in out
    assert re.search(r"unrolled k=20\s+\d\.\d+e-1[01]", out)          # agrees to ~1e-10
    assert "straight-through): value [0. 2.], gradient [1. 1.]" in out


def _run_example(name, argv, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", [name] + argv)
    runpy.run_path(os.path.join(ROOT, "examples", name), run_name="__main__")
    return capsys.readouterr().out


def test_deq_example_unrolled_memory_grows_and_gradients_converge(capsys, monkeypatch):
    out = _run_example("deq.py", ["--fast"], capsys, monkeypatch)
    rows = {m[0]: (float(m[1]), int(m[2].replace(",", "")))
            for m in re.findall(r"(unrolled k=\d+|implicit)\s+([\d.e+-]+)\s+([\d,]+) B", out)}
    assert rows["unrolled k=40"][0] < 1e-6 < rows["unrolled k=5"][0]
    saved = [rows[f"unrolled k={k}"][1] for k in (5, 10, 20, 40)]
    assert saved == sorted(saved) and saved[-1] - saved[-2] == 2 * (saved[-2] - saved[-3])  # linear
    assert rows["implicit"][1] < saved[0]


@pytest.mark.parametrize("name, argv, expected", [
    ("newton_sqrt.py", [], "gradcheck through the loop (reverse and forward mode): True"),
    ("ridge_implicit.py", [], "d val_loss/dλ: implicit -0.02149617, finite differences -0.02149617"),
    ("estimators.py", ["--samples", "4000"], "within 3 standard errors of the exact gradient: True"),
])
def test_examples_print_their_checks(name, argv, expected, capsys, monkeypatch):
    assert expected in _run_example(name, argv, capsys, monkeypatch)


def test_deq_hessian_example_matches_unrolled_and_closed_form(capsys, monkeypatch):
    out = _run_example("deq_hessian.py", ["--fast"], capsys, monkeypatch)
    assert "times: median of 3 interleaved runs" in out
    rows = {m[0]: float(m[1]) for m in re.findall(r"\| unrolled k = (\d+) \| ([\d.e+-]+) \|", out)}
    assert rows["40"] < 1e-9 < rows["10"]              # the unrolled Hessian converges to the implicit one
    sym = float(re.search(r"max \|H - Hᵀ\| = ([\d.e+-]+)", out).group(1))
    closed = float(re.search(r"\|difference\| = ([\d.e+-]+)", out).group(1))
    assert sym < 1e-10 and closed < 1e-9
