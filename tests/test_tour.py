"""The main job, end to end: `python -m chainrule tour --fast` runs every section and prints the
figures the seeds print (checked here), in seconds."""
import re
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def tour_output():
    run = subprocess.run([sys.executable, "-m", "chainrule", "tour", "--fast"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_every_section_ran(tour_output):
    import chainrule.tour as tour
    n = len(tour.SECTIONS)
    assert n >= 14
    for i, section in enumerate(tour.SECTIONS, 1):
        assert f"[{i}/{n}] {section.title}" in tour_output
    assert f"tour finished: {n} sections" in tour_output


def test_seed_figures_are_printed(tour_output):
    for line in ["loss 0.016675",
                 "dL/dW1[2][1]: reverse mode -0.04870060, finite difference -0.04870060",
                 "float16 smallest subnormal 6.0e-08; gradients flushed to zero: 33.8%",
                 "with loss scaling by 2^14: zeros 0.0%, median relative error 1.8e-04",
                 "bfloat16 (8 exponent bits): zeros 0.0%, median relative error 2.7e-03"]:
        assert line in tour_output


def test_measured_claims_hold(tour_output):
    picks = re.findall(r"auto picked\s*\n.*?(reverse).*?\n.*?(forward)", tour_output, re.S)
    assert picks, "the choice rule picks reverse for n > m and forward for n < m"
    hvp = float(re.search(r"hvp/grad = ([\d.]+)", tour_output).group(1))
    assert 0.5 < hvp < 6
    assert re.search(r"no_grad: forward .* saved for backward\s+0\.00 MB", tour_output)
    assert "forward 0 B" in tour_output
    acc = float(re.search(r"test accuracy after \d+ epochs: ([\d.]+)%", tour_output).group(1))
    assert acc > 85
    assert "chainrule default (a zero cotangent stays zero): grad = [0.   0.   0.25]" in tour_output
    assert "gradcheck (reverse mode): Jacobian mismatch" in tour_output
