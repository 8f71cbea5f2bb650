"""examples/dp_sgd.py --quick: DP-SGD on the digits MLP learns (private test accuracy > 0.7), plain
training on the same batches does better, and the two private runs (per-example gradients by
vmap(grad), clipping factors by per_example_grad_norms) train the same model."""
import contextlib
import io
import os
import re
import runpy
import sys

import numpy as np
import pytest

import chainrule as cr
from chainrule import train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "dp_sgd.py")


@pytest.fixture(scope="module")
def output():
    buf, argv = io.StringIO(), sys.argv
    sys.argv = ["dp_sgd.py", "--quick"]
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(EXAMPLE, run_name="__main__")
    finally:
        sys.argv = argv
    return buf.getvalue()


def _accuracy(label: str, text: str) -> float:
    return float(re.search(label + r"\s+test accuracy ([0-9.]+)", text).group(1))


def test_private_training_learns_and_plain_training_does_better(output):
    plain = _accuracy("non-private", output)
    vmapped, ghost = _accuracy(r"private \(vmap ?\)", output), _accuracy(r"private \(ghost\)", output)
    assert vmapped > 0.7 and plain > vmapped
    assert abs(ghost - vmapped) <= 0.01
    assert re.search(r"private \(vmap ?\).*ms/step\s+\(\d+\.\dx plain\)", output)


def test_both_clipping_methods_give_the_same_clipped_sum():
    mod = runpy.run_path(EXAMPLE, run_name="dp_sgd")
    rng = np.random.default_rng(0)
    model = train.build_model("mlp", 64, 10, generator=rng)
    xb = cr.tensor(rng.random((16, 64)).astype(np.float32))
    yb = cr.tensor(rng.integers(0, 10, 16))
    sums = [mod["PrivateStep"](model, 0.5, 1.0, method, 0).clipped_sum(xb, yb) for method in ("vmap", "ghost")]
    for a, b in zip(*sums):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
