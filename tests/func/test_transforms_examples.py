"""The two examples print the seed's figures and the choice-rule table; the tour sections run."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_seed_forward_mode_prints_the_seed_lines():
    out = _run("examples/seed_forward_mode.py").splitlines()
    assert out[:3] == ["f(1.3) = 1.3009365751",
                       "forward-mode derivative  0.4485159825",
                       "central difference       0.4485159825"]
    assert out[3].startswith("reverse-mode derivative  0.4485159825")


def test_choice_rule_example_quick():
    out = _run("examples/choice_rule.py", "--quick")
    rows = re.findall(r"^\s*(\d+)\s+(\d+) .* (forward|reverse)\s+(forward|reverse)$", out, re.M)
    picked = {(int(n), int(m)): p for n, m, p, _ in rows}
    assert picked == {(1000, 4): "reverse", (4, 1000): "forward"}
    assert re.search(r"hvp/grad = \d+\.\d\d", out)
    error = float(re.search(r"max \|difference\| = (\S+)", out).group(1))
    assert error < 1e-10
    saved = {int(d): (int(r), int(f)) for d, r, f in re.findall(r"^\s*(\d+)\s+(\d+) B\s+(\d+) B$", out, re.M)}
    assert saved[100] == (100 * 8000, 0) and saved[10] == (10 * 8000, 0)


def test_tour_sections_run_fast(capsys):
    from chainrule import tour
    tour.run(fast=True, only=["modes", "hvp"])
    out = capsys.readouterr().out
    assert "auto picked" in out and "hvp/grad" in out
    assert re.search(r"200 -> 4 .* reverse", out) and re.search(r"4 -> 200 .* forward", out)
    error = float(re.search(r"max \|difference\| = (\S+)", out).group(1))
    assert error < 1e-10
