"""``python tools/graph_pictures.py``: draw the graph pictures of the core guide with ``cr.viz``.

Each picture is a small program; ``cr.viz.render`` writes its DOT text and, with Graphviz's ``dot``
installed, the SVG beside it in ``docs/assets/graphs/``. ``tests/test_site_assets.py`` checks that
the committed DOT files are what ``cr.viz.to_dot`` draws today, so a picture cannot go stale.

>>> sorted(PICTURES)
['backward_frees', 'mlp_loss', 'sin_times_x']
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import chainrule as cr

OUT = Path(__file__).resolve().parent.parent / "docs" / "assets" / "graphs"


def sin_times_x():
    """``(sin(x) * x).sum()``: each op a node, each node the bytes it saves for its derivative."""
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    return (cr.sin(x) * x).sum(), {"x": x}, "(sin(x) * x).sum()"


def mlp_loss():
    """The cross-entropy loss of a 4-3-2 tanh MLP: the parameters are the leaves."""
    rng = np.random.default_rng(0)
    model = cr.nn.Sequential(cr.nn.Linear(4, 3, generator=rng), cr.nn.Tanh(), cr.nn.Linear(3, 2, generator=rng))
    x = cr.tensor(rng.normal(size=(5, 4)).astype(np.float32))
    loss = cr.nn.functional.cross_entropy(model(x), np.array([0, 1, 0, 1, 1]))
    return loss, dict(model.named_parameters()), "a 4-3-2 tanh MLP's loss"


def backward_frees():
    """The same expression after ``backward()``: the saved tensors are freed (0 B)."""
    loss, params, _ = sin_times_x()
    loss.backward()
    return loss, params, "(sin(x) * x).sum() after backward()"


PICTURES = {f.__name__: f for f in (sin_times_x, mlp_loss, backward_frees)}


def dot_text(name: str) -> str:
    """The DOT text of one picture, as ``cr.viz.to_dot`` draws it now."""
    loss, params, title = PICTURES[name]()
    return cr.viz.to_dot(loss, params, title)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in PICTURES.items():
        loss, params, title = build()
        print(cr.viz.render(loss, str(OUT / f"{name}.svg"), params, title=title), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
