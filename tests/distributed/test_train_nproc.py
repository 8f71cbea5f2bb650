"""``python -m chainrule train --nproc N``: re-launched under mpiexec, metrics printed once, and the
same numbers as one process with the whole batch."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from test_distributed import LAUNCHER_VARS, MPIEXEC, ROOT, needs_mpi

from chainrule import train
from chainrule.distributed import collectives

EPOCH = re.compile(r"epoch +(\d+)/\d+ +train loss ([\d.]+) +test loss ([\d.]+) +test acc ([\d.]+)%")


def run_cli(*argv: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-c", code, *argv] if code else [sys.executable, "-m", "chainrule", "train", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


def epochs(text: str) -> list[tuple[float, float, float]]:
    return [(float(a), float(b), float(c)) for _, a, b, c in EPOCH.findall(text)]


@needs_mpi
def test_nproc_2_prints_once_and_matches_one_process(capsys, monkeypatch):
    for k in LAUNCHER_VARS:
        monkeypatch.delenv(k)
    out = run_cli("--nproc", "2", "--epochs", "2", "--quiet")
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert text.count("training a MLP") == 1 and text.count("test accuracy") == 1, text
    assert "batch 32 (16 on each of 2 processes)" in text
    assert train.main(["--epochs", "2", "--quiet"]) == 0
    one = capsys.readouterr().out
    many, ref = epochs(text), epochs(one)
    assert len(many) == len(ref) == 2, (text, one)
    # 1438 training examples split evenly over 2 ranks: the same batches, in the same order, as one
    # process; only the float32 summation order of the gradient differs (~1e-7 relative per step),
    # which after 90 Adam steps stays far below the printed 1e-4 of the losses. Accuracy may move by
    # at most one borderline test example of 359.
    for (l2, v2, a2), (l1, v1, a1) in zip(many, ref):
        assert abs(l2 - l1) <= 2e-4 and abs(v2 - v1) <= 2e-4 and abs(a2 - a1) <= 100 / 359 + 1e-9, (text, one)


def test_nproc_needs_a_batch_that_splits(capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--nproc", "3", "--batch-size", "32"])
    assert e.value.code == 2
    assert "--batch-size 32 does not split evenly over --nproc 3" in capsys.readouterr().err


def test_nproc_without_the_mpi_extra_names_it():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "from chainrule.__main__ import main\n"
            "sys.exit(main(['train', '--nproc', '2']))\n")
    out = run_cli(code=code)
    assert out.returncode == 2 and 'pip install "chainrule[mpi]"' in out.stderr, out.stderr[-2000:]


@pytest.mark.skipif(collectives.mpi4py is None or MPIEXEC is None, reason="needs the mpi extra")
def test_find_mpiexec_prefers_the_wheels():
    assert train.find_mpiexec() == MPIEXEC


@needs_mpi
def test_transformer_nproc_2_follows_one_process_with_the_same_global_batch(tmp_path, monkeypatch):
    import json
    for k in LAUNCHER_VARS:
        monkeypatch.delenv(k, raising=False)
    args = ["--model", "transformer", "--steps", "6", "--batch-size", "8", "--n-ctx", "16", "--d-model", "16",
            "--n-layer", "1", "--n-head", "2", "--eval-every", "3", "--quiet", "--no-figures", "--generate", "0"]
    two = run_cli(*args, "--nproc", "2", "--history", str(tmp_path / "two.json"))
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("validation:") == 1 and "batch 8 (4 on each of 2 processes)" in two.stdout
    one = run_cli(*args, "--history", str(tmp_path / "one.json"))
    assert one.returncode == 0, one.stderr[-3000:]
    h2, h1 = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("two", "one"))
    # each rank's mean loss over its 4 rows, averaged: the global batch's mean; the gradients differ
    # from one process's only in float32 summation order
    np.testing.assert_allclose(h2["train_loss"], h1["train_loss"], rtol=1e-5)
    np.testing.assert_allclose(h2["val_loss"], h1["val_loss"], rtol=1e-5)
