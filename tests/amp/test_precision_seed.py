"""The seed example prints the seed's figures; the tour section runs."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_seed_example_output():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "seed_precision.py")],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    lines = out.splitlines()
    assert lines[:3] == [
        "float16 smallest subnormal 6.0e-08; gradients flushed to zero: 33.8%",
        "with loss scaling by 2^14: zeros 0.0%, median relative error 1.8e-04",
        "bfloat16 (8 exponent bits): zeros 0.0%, median relative error 2.7e-03"]
    assert lines[3] == "cr.bfloat16 (round to nearest even): zeros 0.0%, median relative error 1.4e-03"
    unscaled = next(l for l in lines if l.startswith("float16 autocast, no scaling"))
    scaled = next(l for l in lines if l.startswith("float16 autocast + GradScaler"))
    assert float(unscaled.split("flushed to zero ")[1].split("%")[0]) > 5.0
    assert "flushed to zero 0.0%" in scaled


def test_tour_section(capsys):
    from chainrule.tour import run
    run(fast=True, only=["precision"])
    out = capsys.readouterr().out
    assert "gradients flushed to zero: 33.8%" in out and "per block of 32" in out
