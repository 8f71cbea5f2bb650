"""The benchmark suite's smoke run (`python tools/bench.py --quick`) and its harness."""
import importlib
import json
import sys

import numpy as np
import pytest

from tools import bench


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    md, record = out / "bench.md", out / "results.json"
    assert bench.main(["--quick", "--out", str(md), "--record", str(record)]) == 0
    return md.read_text(), record


def test_quick_run_covers_every_case_and_checks_every_peer(quick_run):
    text, record = quick_run
    for title in ("elementwise chain", "MLP 784-512-512-10", "layers x 256", "tiny 3-4-1",
                  "HVP vs grad", "wide: n = 100", "tall: n = 4", "checkpointing sqrt(L)",
                  "forward-mode JVP", "complex linear layer 32->32, batch 64, complex64",
                  "complex linear layer 32->32, batch 64, complex128",
                  "eigh of a symmetric 16x16", "rfft of 4 x 256 windowed signals",
                  "median + quantile + cov + diff + convolve(33 taps)", "Student-t log-likelihood of"):
        assert title in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "median" not in line]
    checks = {line.split("|")[5].strip() for line in rows if line.count("|") == 7}
    assert checks <= {"ok", "reference", "-"} and "ok" in checks
    assert "| MLP step vs hand-written NumPy |" in text
    assert not record.exists()            # a quick run never overwrites the record


def test_a_slower_case_is_flagged_as_a_regression(quick_run):
    harness = importlib.import_module("_harness")        # importable after the run
    case = harness.Case("demo", "demo case", [], unit="ms")
    res = harness.Result(case, [harness.Row("chainrule", "chainrule", 0.0023, 0.01, 5, "reference"),
                                harness.Row("NumPy (hand-written)", "numpy", 0.0020, 0.01, 5, "ok")], {})
    record = {"demo": {"chainrule": 0.0020, "NumPy (hand-written)": 0.0020}}
    text = harness.markdown([res], {"cores": 2}, "1 thread", record)
    line = next(li for li in text.splitlines() if li.startswith("| chainrule |"))
    assert "+15%" in line and "REGRESSION" in line and "| 2.3 |" in line and "| 1.15 |" in line
    numpy_line = next(li for li in text.splitlines() if li.startswith("| NumPy"))
    assert "+0%" in numpy_line and "REGRESSION" not in numpy_line


def test_record_round_trip_and_target_ratios(tmp_path, quick_run):
    harness = importlib.import_module("_harness")
    case = harness.Case("demo", "demo", [], targets=[harness.Target("t", "a", ("b", "c"), 1.5)])
    res = harness.Result(case, [harness.Row(n, "x", t, 0.0, 3, "ok")
                                for n, t in (("a", 3.0), ("b", 4.0), ("c", 2.0))], {})
    assert harness.target_lines([res]) == [("t", 1.5, 1.5, True)]
    path = tmp_path / "r.json"
    harness.save_record(str(path), [res], {"cores": 2})
    assert json.loads(path.read_text())["demo"] == {"a": 3.0, "b": 4.0, "c": 2.0}


def test_a_wrong_peer_result_is_caught():
    harness = importlib.import_module("_harness")
    good = harness.Contender("chainrule", "chainrule", lambda: (lambda: None, [np.ones(3)]))
    bad = harness.Contender("peer", "peer", lambda: (lambda: None, [np.array([1.0, 1.0, 1.5])]))
    with pytest.raises(AssertionError, match="peer's result 0 differs from chainrule's"):
        harness.run_case(harness.Case("demo", "demo", [good, bad]), 1, 0.0, 0.0)


def test_missing_suite_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CHAINRULE_BENCHMARKS", str(tmp_path))
    assert bench.main(["--quick"]) == 2
    assert "benchmark suite was not found" in capsys.readouterr().err


def _rows_of(text: str, title: str) -> dict:
    """{row name: result check} of the table under ``## title...``."""
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return {line.split("|")[1].strip(): line.split("|")[5].strip()
            for line in section.splitlines() if line.startswith("| ") and "median" not in line}


def test_jax_eager_and_jit_rows_match_chainrule(quick_run):
    pytest.importorskip("jax", reason="jax is not installed: the suite skips its JAX rows")
    text, _ = quick_run
    for title in ("MLP 784-512-512-10, batch 64", "forward-mode JVP", "HVP vs grad", "checkpointing"):
        jax_rows = {n: c for n, c in _rows_of(text, title).items() if n.startswith("JAX")}
        assert any(n.startswith("JAX eager") for n in jax_rows), title
        assert any(n.startswith("JAX jit") for n in jax_rows), title
        assert set(jax_rows.values()) == {"ok"}, (title, jax_rows)
    threads = next(line for line in text.splitlines() if line.startswith("Threads:"))
    assert "jax/XLA:" in threads and "jax_enable_x64 on" in threads


def test_without_jax_no_jax_row_and_a_skip_note(monkeypatch, quick_run):
    harness = importlib.import_module("_harness")
    jvp = importlib.import_module("bench_jvp")
    monkeypatch.setitem(sys.modules, "jax", None)           # import jax now raises ImportError
    assert harness.jax_rows(lambda jax: None) == []
    (case,) = jvp.cases(quick=True)
    assert not [c for c in case.contenders if c.library == "jax"]
    assert "jax: not installed, skipped" in case.notes
    assert "jax" not in harness.set_threads(1)
    harness.restore_threads()


def test_jax_rows_from_one_function_keep_float32():
    pytest.importorskip("jax", reason="jax is not installed: the suite skips its JAX rows")
    harness = importlib.import_module("_harness")
    x = np.linspace(0, 1, 5, dtype=np.float32)
    ref = harness.Contender("chainrule", "chainrule", lambda: (lambda: None, [2 * np.sin(x)]))
    rows = harness.jax_rows(lambda jax: (lambda a: 2.0 * jax.numpy.sin(a), (x,)))
    assert [(r.name, r.library) for r in rows] == [("JAX eager", "jax"), ("JAX jit", "jax")]
    try:
        for r in rows:
            value = r.setup()[1]
            assert value[0].dtype == np.float32 and np.allclose(value[0], 2 * np.sin(x))
        res = harness.run_case(harness.Case("demo", "demo", [ref] + rows), 1, 0.0, 0.0)
    finally:
        harness.restore_threads()                          # jax_enable_x64 back to its old value
    assert [r.checked for r in res.rows] == ["reference", "ok", "ok"]
