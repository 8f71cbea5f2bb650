"""The benchmark figures (`python tools/bench.py --plots DIR --plots-only --quick`): six SVGs, and
sweep numbers that say what the figures claim (reverse mode wins wide, forward tall; checkpointing
saves memory; saved bytes grow with batch, sequence and depth; the three precisions agree)."""
import importlib
import json
import math
import sys
import xml.etree.ElementTree as ET

import pytest

from tools import bench

pytest.importorskip("matplotlib", reason="the plots need matplotlib (the plot extra)")

FIGURES = ("overhead", "mlp_step", "jacobian_crossover", "checkpoint_tradeoff", "transformer_saved_bytes",
           "loss_curves")
RECORD = {"_machine": {"cpu": "Test CPU", "cores": 2, "numpy": "x"},
          "elementwise_chain": {"chainrule": 0.009, "NumPy (hand-written)": 0.003, "PyTorch eager": 0.012},
          "mlp_step": {"chainrule": 0.0037, "NumPy (hand-written)": 0.0033},
          "deep_mlp": {"chainrule": 0.033, "NumPy (hand-written)": 0.038}}


def _plots():
    if str(bench.suite_dir()) not in sys.path:
        sys.path.insert(0, str(bench.suite_dir()))
    return importlib.import_module("plots")


@pytest.fixture(scope="module")
def quick_plots(tmp_path_factory):
    """One `--plots-only --quick` run through the CLI; its files and the numbers it plotted."""
    out = tmp_path_factory.mktemp("plots")
    record = out / "results.json"
    record.write_text(json.dumps(RECORD))
    plots, seen = _plots(), {}
    real = plots.write_all

    def spy(*args, **kwargs):
        seen.update(real(*args, **kwargs))
        return seen
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "write_all", spy)
        assert bench.main(["--plots-only", "--quick", "--plots", str(out), "--record", str(record)]) == 0
    assert json.loads(record.read_text()) == RECORD               # --plots-only never writes the record
    return out, seen["data"]


def _texts(path):
    root = ET.parse(path).getroot()                                # parses as XML, or raises
    assert root.tag.endswith("svg")
    return " ".join(t.strip() for t in root.itertext() if t.strip())


def test_six_svgs_with_titles_and_legends(quick_plots):
    out, _ = quick_plots
    assert sorted(p.stem for p in out.glob("*.svg")) == sorted(FIGURES)
    saved = json.loads((out / "figures.json").read_text())
    assert saved["quick"] and sorted(saved["figures"]) == sorted(FIGURES)
    expect = {"overhead": ["Per-op overhead: 1000-op elementwise chain", "chainrule", "PyTorch eager",
                           "time per op (µs/op)", "Test CPU, 2 cores", "source: benchmarks/results.json"],
              "mlp_step": ["MLP step: MLP 784-512-512-10", "deep MLP step: 96 layers x 256", "time per step (ms)"],
              "jacobian_crossover": ["Jacobian of tanh(A x)", "cr.jacfwd (forward)", "cr.jacrev (reverse)",
                                     'cr.jacobian(mode="auto")', "n (inputs)", "m (outputs)", "time per Jacobian (ms)"],
              "checkpoint_tradeoff": ["Gradient checkpointing: memory vs time", "no checkpointing", "k=1", "k=16",
                                      "peak saved-for-backward memory (MiB, log)", "step time, forward + backward"],
              "transformer_saved_bytes": ["Transformer saved-for-backward bytes", "measured", "last doubling: ×2.00",
                                          "batch (sequences)", "sequence length n_ctx (tokens)",
                                          "depth n_layer (blocks)"],
              "loss_curves": ["Training loss fp32 / bf16 / fp16", "fp32 (", "bf16 (", "fp16 (", "bf16 − fp32",
                              "cross-entropy (nats per character)", "quick (smoke) sizes"]}
    assert "Test CPU" not in _texts(out / "jacobian_crossover.svg")    # the sweeps ran here, not on the record's
    for name, labels in expect.items():
        text = _texts(out / f"{name}.svg")
        for label in labels:
            assert label in text, (name, label)


def test_jacobian_sweep_shows_the_crossover_and_auto_follows_it(quick_plots):
    jac = quick_plots[1]["jacobian_crossover"]
    wide, tall = jac["by_n"], jac["by_m"]
    assert jac["sizes"][-1] > 8 * jac["fixed"]
    assert wide["jacrev"][-1] < wide["jacfwd"][-1]                 # n >> m: reverse mode wins
    assert tall["jacfwd"][-1] < tall["jacrev"][-1]                 # m >> n: forward mode wins
    assert wide["auto_mode"][-1] == "reverse" and tall["auto_mode"][-1] == "forward"
    assert wide["auto"][-1] < wide["jacfwd"][-1] and tall["auto"][-1] < tall["jacrev"][-1]
    assert all(t > 0 for s in (wide, tall) for k in ("jacfwd", "jacrev", "auto") for t in s[k])


def test_checkpoint_sweep_trades_memory_for_time(quick_plots):
    ck = quick_plots[1]["checkpoint_tradeoff"]
    assert ck["segments"] == [1, 2, 4, 8, 16] and ck["layers"] == 16
    root = ck["peak"][ck["segments"].index(4)]                     # sqrt(L) segments
    assert root < 0.5 * ck["plain_peak"]
    assert min(ck["peak"]) < ck["plain_peak"] and ck["peak"][0] <= ck["plain_peak"]
    assert ck["plain_time"] > 0 and all(t > 0 for t in ck["time"])


def test_transformer_saved_bytes_grow_with_batch_sequence_and_depth(quick_plots):
    tb = quick_plots[1]["transformer_saved_bytes"]
    batch = tb["batch"]
    b0, v0 = batch["bytes"][0], batch["values"][0]
    assert batch["bytes"] == [b0 * v // v0 for v in batch["values"]]     # exactly proportional to batch
    seq = tb["n_ctx"]["bytes"]
    assert all(b > 2 * a for a, b in zip(seq, seq[1:]))                # doubling T: more than 2x (T x T scores)
    depth = tb["n_layer"]["bytes"]
    steps = [b - a for a, b in zip(depth, depth[1:])]
    assert all(s > 0 for s in steps) and steps[1] == 2 * steps[0]      # a + b * n_layer (n_layer 1, 2, 4)


def test_loss_curves_of_the_three_precisions_agree(quick_plots):
    lc = quick_plots[1]["loss_curves"]
    steps = lc["config"]["steps"]
    for prec in ("fp32", "bf16", "fp16"):
        h = lc[prec]
        assert h["step"] == list(range(1, steps + 1)) and len(h["train_loss"]) == steps
        assert all(math.isfinite(v) for v in h["train_loss"]) and h["train_loss"][-1] < h["train_loss"][0]
        assert abs(h["val_loss"][-1] - lc["fp32"]["val_loss"][-1]) < 0.02
        assert h["median_step_s"] > 0


def test_redrawn_from_figures_json_the_svgs_are_byte_for_byte_the_same(quick_plots, tmp_path):
    out, _ = quick_plots
    saved = json.loads((out / "figures.json").read_text())
    paths = _plots().draw_all(str(tmp_path), saved)                # no date, fixed hash salt: stable files
    assert sorted(paths) == sorted(FIGURES)
    for name in FIGURES:
        again = (tmp_path / f"{name}.svg").read_bytes()
        assert again == (out / f"{name}.svg").read_bytes() and b"<dc:date" not in again, name


def test_bars_from_a_run_and_the_crossover_helper():
    plots = _plots()
    harness = importlib.import_module("_harness")
    case = harness.Case("elementwise_chain", "chain", [], unit="us/op", per=1000)
    res = harness.Result(case, [harness.Row("chainrule", "chainrule", 0.01, 0.0, 3, "reference")], {})
    assert plots.timings_from_results([res]) == {"elementwise_chain": {
        "title": "chain", "unit": "us/op", "per": 1000, "rows": {"chainrule": 0.01}, "source": "this run"}}
    assert plots.crossover([1, 2, 4, 8], [1, 1, 1, 1], [2, 0.5, 2, 0.5]) == pytest.approx(math.sqrt(32))
    assert plots.crossover([1, 2], [1, 1], [2, 2]) is None
    assert plots.machine_line({"cpu": "C", "cores": 2, "numpy": "2.0"}, "BLAS: 1 thread; torch: 1") == \
        "C, 2 cores; numpy 2.0; BLAS: 1 thread"
