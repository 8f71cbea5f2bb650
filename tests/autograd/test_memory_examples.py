"""The memory examples and tour sections run and print the figures the issue asks for."""
import importlib.util
import math
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flops_6nd_quick(capsys):
    rows = _load("flops_6nd").main(["--quick"])
    out = capsys.readouterr().out
    assert "total within 5% of 6ND and bwd/fwd within 2.0 +- 0.1: OK" in out
    wide = [r for r in rows if r["width"] >= 512]
    assert wide
    for r in wide:
        nd = r["N"] * r["D"]
        assert abs(r["total"] / (6 * nd) - 1) <= 0.05 and abs(r["bwd"] / r["fwd"] - 2) <= 0.1
        assert f"{6 * nd:,}" in out


def test_seed_checkpointing_quick(capsys, tmp_path):
    png = tmp_path / "ck.png"
    rows = _load("seed_checkpointing").main(["--quick", "--plot", str(png)])
    out = capsys.readouterr().out
    for line in ("checkpoint every  1 layers: about  28.8 GB of activations, extra forward passes 0",
                 "checkpoint every  4 layers: about   8.4 GB of activations, extra forward passes 1",
                 "checkpoint every  9 layers: about   5.9 GB of activations, extra forward passes 1",
                 "checkpoint every 24 layers: about   8.4 GB of activations, extra forward passes 1"):
        assert line in out
    sqrt_row = rows["float32"][2]
    assert sqrt_row["segments"] == round(math.sqrt(96))
    assert sqrt_row["layers_worth"] <= 2.5 * math.sqrt(96)
    assert rows["float32"][0]["layers_worth"] == 96
    assert max(r["diff"] for r in rows["float32"]) <= 1e-6
    assert all(r["diff"] == 0.0 for r in rows["float64"])
    assert re.search(r"sqrt\(L\) segments: peak [\d.]+ layers' worth <= 2\.5\*sqrt\(L\) = 24\.5: OK", out)
    assert "float64 gradients exactly equal: OK" in out
    assert "step time (median of 5 interleaved runs)" in out
    assert all(r["time"] > 0 and r["time_ratio"] > 0 for r in rows["float32"])
    assert png.exists() or "needs matplotlib" in out


def test_tour_sections(capsys):
    from chainrule import tour
    tour.run(fast=True, only=["activations", "checkpointing"])
    out = capsys.readouterr().out
    assert re.search(r"no_grad: forward +[\d.]+ MFLOP, saved for backward +0\.00 MB", out)
    assert "after backward: saved 0 B live" in out
    assert "checkpoint plan for 36 layers" in out and "6 segments" in out
    assert "step time: forward + backward, median of 5 interleaved runs" in out
