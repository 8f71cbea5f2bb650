"""The digits, user files, the batch iterator, the train command (and empty data), the tour sections,
graph pictures (and DOT escaping)."""
import os
import re
import shutil

import numpy as np
import pytest

import chainrule as cr
from chainrule import data, nn, train, viz
from chainrule.__main__ import main as cli
from chainrule.tour import run as run_tour

PLOT = "the PNG plots need the 'plot' extra (matplotlib)"


def test_embedded_digits():
    images, labels = data.load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == np.uint8
    assert images.max() == 16 and images.min() == 0
    assert np.bincount(labels).tolist()[:3] == [178, 182, 177] and labels.dtype == np.int64
    readme = open(os.path.join(os.path.dirname(data.DIGITS_PATH), "README.txt")).read()
    assert "CC BY 4.0" in readme and "Alpaydin" in readme


def test_dataloader_shuffles_reproducibly_and_drops_last():
    x, y = np.arange(10.0)[:, None], np.arange(10)
    first = [yb.data.tolist() for _, yb in data.DataLoader(x, y, 4, shuffle=True,
                                                            generator=np.random.default_rng(5))]
    again = [yb.data.tolist() for _, yb in data.DataLoader(x, y, 4, shuffle=True,
                                                            generator=np.random.default_rng(5))]
    assert first == again and [len(b) for b in first] == [4, 4, 2]
    assert sorted(sum(first, [])) == list(range(10)) and first != [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    loader = data.DataLoader(x, y, 4, drop_last=True)
    assert len(loader) == 2 and [yb.data.tolist() for _, yb in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(data.DataError, match="x has 10 examples but y has 3"):
        data.DataLoader(x, y[:3])


def test_load_arrays_npz_and_csv(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.ones((4, 3)), y=np.array([0, 1, 1, 0]))
    x, y = data.load_arrays(str(tmp_path / "d.npz"))
    assert x.shape == (4, 3) and y.tolist() == [0, 1, 1, 0]
    (tmp_path / "d.csv").write_text("a,b,label\n1,2,0\n3,4,1\n5,6,2\n")
    x, y = data.load_arrays(str(tmp_path / "d.csv"))
    np.testing.assert_array_equal(x, [[1, 2], [3, 4], [5, 6]])
    assert y.tolist() == [0, 1, 2]


@pytest.mark.parametrize("name,content,message", [
    ("ragged.csv", "1,2,0\n3,1\n", "same number"),
    ("text.csv", "1,2,0\n3,x,1\n", "line 2 has a non-numeric value"),
    ("frac.csv", "1,2,0.5\n3,4,1\n", "whole class numbers"),
    ("neg.csv", "1,2,-1\n3,4,1\n", "must be >= 0"),
    ("data.txt", "1,2,0\n", "must end in .npz or .csv"),
])
def test_load_arrays_clear_errors(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(data.DataError, match=message):
        data.load_arrays(str(tmp_path / name))


def test_load_arrays_npz_wrong_keys(tmp_path):
    np.savez(tmp_path / "d.npz", features=np.ones((2, 2)), target=np.zeros(2))
    with pytest.raises(data.DataError, match=r"expected 'x' and 'y'"):
        data.load_arrays(str(tmp_path / "d.npz"))


def _accuracy(text):
    return float(re.search(r"test accuracy ([\d.]+)%", text).group(1))


def test_train_command_reduced_budget_reaches_95_percent(capsys, tmp_path):
    assert cli(["train", "--epochs", "8", "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert _accuracy(out) >= 95.0                     # 97.8% measured (seed 0)
    assert "wall time" in out and "epoch   8/8" in out
    pytest.importorskip("matplotlib", reason=PLOT)
    assert os.path.getsize(tmp_path / "loss.png") > 1000 and os.path.exists(tmp_path / "accuracy.png")


def test_train_command_cnn_and_csv(capsys, tmp_path):
    images, labels = data.load_digits()
    rows = np.column_stack([images.reshape(len(images), -1)[:400], labels[:400]])
    np.savetxt(tmp_path / "digits.csv", rows, fmt="%d", delimiter=",")
    train.main(["--model", "cnn", "--epochs", "2", "--batch-size", "16", "--quiet",
                "--data", str(tmp_path / "digits.csv")])
    out = capsys.readouterr().out
    assert "training a CNN" in out and "on 320 examples, testing on 80" in out
    assert _accuracy(out) >= 60.0                     # two epochs on 320 digits; 80%+ measured
    with pytest.raises(ValueError, match="square images"):
        train.build_model("cnn", 10, 3)


def test_fit_takes_a_custom_step_function():
    x_tr, y_tr, x_te, y_te, n_features, n_classes = train.prepare(None, "mlp", seed=1)
    model = train.build_model("mlp", n_features, n_classes, generator=np.random.default_rng(0))
    opt = cr.optim.SGD(model.parameters(), lr=0.1)
    calls = []

    def step(model, optimizer, xb, yb):
        calls.append(len(yb))
        return train.train_step(model, optimizer, xb, yb)

    loader = data.DataLoader(x_tr[:256], y_tr[:256], 64)
    hist = train.fit(model, opt, loader, x_te, y_te, 2, step=step, progress=False, log=lambda s: None)
    assert calls == [64] * 8 and len(hist["val_acc"]) == 2
    assert hist["train_loss"][1] < hist["train_loss"][0]
    loss, acc = train.evaluate(model, x_te, y_te)
    assert acc == hist["val_acc"][-1] and model.training


def test_evaluate_on_an_empty_dataset_raises_a_clear_error():
    model = nn.Linear(3, 2, generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"evaluate: the dataset is empty \(0 examples\)"):
        train.evaluate(model, np.zeros((0, 3), np.float32), np.zeros(0, np.int64))
    assert model.training                                     # mode untouched by the failed call
    cr.nn.init.zeros_(model.weight), cr.nn.init.zeros_(model.bias)
    loss, acc = train.evaluate(model, np.ones((2, 3), np.float32), np.array([0, 1]))
    np.testing.assert_allclose(loss, np.log(2), rtol=1e-6)   # equal logits
    assert acc == 0.5                                         # argmax of a tie is class 0


def test_fit_on_a_loader_without_batches_raises_a_clear_error():
    model = nn.Linear(3, 2, generator=np.random.default_rng(0))
    opt = cr.optim.SGD(model.parameters(), lr=0.1)
    loader = data.DataLoader(np.zeros((2, 3), np.float32), np.zeros(2, np.int64), batch_size=4,
                             drop_last=True)
    with pytest.raises(ValueError, match=r"fit: the loader yields no batches \(2 examples, "
                                         r"batch_size=4, drop_last=True\)"):
        train.fit(model, opt, loader, np.zeros((1, 3), np.float32), np.array([0]), epochs=1,
                  progress=False, log=lambda s: None)


def test_tour_training_sections_fast(capsys, tmp_path):
    run_tour(fast=True, out=str(tmp_path), only=["training", "graph_picture"])
    out = capsys.readouterr().out
    acc = float(re.search(r"test accuracy after 3 epochs: ([\d.]+)%", out).group(1))
    assert acc >= 85.0                                # 95.3% measured
    assert "under no_grad: grad_fn=None" in out
    m = re.search(r"(\d+) op nodes, (\d+) leaves \(the parameters\), (\d+) bytes saved", out)
    # linear, relu, linear, and the fused softmax cross-entropy with its mean
    assert m and int(m.group(2)) == 4 and int(m.group(1)) == 4 and int(m.group(3)) > 0
    assert os.path.exists(tmp_path / "graph.dot")                   # written with or without a picture
    pytest.importorskip("matplotlib", reason=PLOT)
    assert os.path.exists(tmp_path / "loss.png")


def test_to_dot_marks_leaves_shapes_and_saved_bytes():
    w = cr.nn.Parameter(np.ones((3, 2)))
    x = cr.tensor(np.ones((4, 3)), dtype=cr.float64, requires_grad=True)
    y = cr.tanh(x @ w).sum()
    dot = viz.to_dot(y, params={"w": w})
    assert dot.startswith("digraph chainrule {") and dot.rstrip().endswith("}")
    assert '[label="w\\n(3, 2)", shape=ellipse' in dot
    assert '[label="leaf\\n(4, 3)", shape=ellipse' in dot
    assert "TanhBackward\\n(4, 2)\\nsaved 64 B" in dot            # tanh saves its (4, 2) float64 output
    assert "MatmulBackward\\n(4, 2)\\nsaved 144 B" in dot         # x (96 B) and w (48 B)
    assert dot.count("->") == 5                                   # 4 edges + the output arrow
    with pytest.raises(ValueError, match="no graph"):
        viz.to_dot(cr.ones(2))


def test_render_writes_dot_and_a_picture(tmp_path, capsys):
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    assert viz.render((cr.exp(x) * x).sum(), str(tmp_path / "h.dot")) == str(tmp_path / "h.dot")
    path = viz.render((cr.exp(x) * x).sum(), str(tmp_path / "g.png"))
    assert os.path.exists(tmp_path / "g.dot")
    no_dot = shutil.which("dot") is None
    if no_dot:                                      # render falls back to matplotlib
        pytest.importorskip("matplotlib", reason="a picture needs Graphviz's 'dot' or matplotlib")
    assert path == str(tmp_path / "g.png") and os.path.getsize(path) > 1000
    assert ("Graphviz 'dot' not found" in capsys.readouterr().out) == no_dot


# ----- DOT escaping -----
_QUOTED = r'"(?:[^"\\\n]|\\.)*"'                          # a DOT string: no raw quote or newline
_TOKENS = re.compile(rf"\s*({_QUOTED}|->|[\w.]+|[\[\]{{}}=,;])")


def _valid_dot_line(line):
    """True if the line splits into DOT tokens only (an unescaped quote or backslash leaves a rest)."""
    pos = 0
    while pos < len(line):
        m = _TOKENS.match(line, pos)
        if m is None:
            return False
        pos = m.end()
    return True


def test_to_dot_escapes_quotes_backslashes_and_newlines_in_labels():
    w = nn.Parameter(np.ones(2))
    x = cr.tensor(np.ones(2), requires_grad=True)
    name, title = 'a"b\\c', 'my "graph"\nline 2 \\'
    dot = viz.to_dot((w * x).sum(), params={name: w, "multi\nline": x}, title=title)
    for line in dot.splitlines():
        assert _valid_dot_line(line), line
    labels = [re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s[1:-1])
              for s in re.findall(r'label=(' + _QUOTED + ')', dot)]
    assert title in labels
    assert f"{name}\n(2,)" in labels and "multi\nline\n(2,)" in labels


def test_to_dot_escapes_custom_function_names():
    class Odd(cr.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Odd.__name__ = 'Odd"\\'
    x = cr.tensor([1.0], requires_grad=True)
    dot = viz.to_dot(Odd.apply(x).sum())
    assert all(_valid_dot_line(line) for line in dot.splitlines())
    assert 'Odd\\"\\\\' in dot


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_compiled_training_gives_bitwise_the_same_weights(kind):
    x_tr, y_tr, x_te, y_te, n_features, n_classes = train.prepare(None, kind, seed=0)

    def run(step):
        model = train.build_model(kind, n_features, n_classes, generator=np.random.default_rng(0))
        opt = cr.optim.Adam(model.parameters(), lr=3e-3)
        scheduler = cr.optim.CosineAnnealingLR(opt, T_max=3)
        loader = data.DataLoader(x_tr[:200], y_tr[:200], 32)          # 7 batches, the last of 8
        hist = train.fit(model, opt, loader, x_te[:50], y_te[:50], 2, step=step, scheduler=scheduler,
                         progress=False, log=lambda s: None)
        return [p.data.tobytes() for p in model.parameters()], hist
    compiled = train.CompiledStep()
    got, ref = run(compiled), run(train.train_step)
    assert got == ref
    # the last batch of 8 is a new shape: two captures, every other call replays (the step's
    # zero_grad() drops the .grad a later call finds, and the scheduler's new learning rate is read by
    # the taped opt.step(): neither is a miss)
    assert compiled.compiled.cache_info() == (2, 12, 0, 1)


def test_train_command_compile_prints_eager_and_compiled_epoch_times(capsys):
    assert cli(["train", "--epochs", "1", "--quiet", "--compile"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"epoch time: eager [\d.]+ s, compiled [\d.]+ s", out) and "replays=" in out
    with pytest.raises(SystemExit):
        cli(["train", "--compile", "--precision", "bf16"])
