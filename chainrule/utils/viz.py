"""Pictures of the graph behind a tensor: Graphviz DOT text, rendered to SVG/PNG when ``dot`` exists."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from chainrule.core.graph import FREED, Packed, walk
from chainrule.core.tensor import Tensor
from chainrule.utils._plotting import pyplot

__all__ = ["nodes", "render", "saved_bytes", "to_dot"]


def _nbytes(v: Any) -> int:
    if type(v) is Packed:
        v = v.source
    return int(getattr(v, "nbytes", 0) or 0)


def saved_bytes(node: Any) -> int:
    """Bytes a graph node keeps for its backward (0 once freed)."""
    saved = getattr(node, "saved", None)
    total = 0
    if saved is not None and saved is not FREED:
        total += sum(_nbytes(v) for v in saved if v is not None)
    total += _nbytes(getattr(node, "out_data", None))
    ctx = getattr(node, "ctx", None)
    if ctx is not None and ctx.saved_values is not FREED:
        total += sum(_nbytes(v) for v in ctx.saved_values)
    return total


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} MiB"


def _quote(text: str) -> str:
    """A DOT string literal: backslashes and quotes escaped, newlines as DOT's ``\\n`` line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shape(metas: tuple) -> str:
    return ", ".join(str(tuple(s)) for s, _ in metas)


def nodes(t: Tensor) -> list:
    """Every graph node reachable from ``t.grad_fn`` (ops and leaves), each once, outputs first."""
    return walk([t.grad_fn])[::-1]


def to_dot(t: Tensor, params: dict | None = None, title: str | None = None) -> str:
    """Graphviz DOT text of the graph that produced ``t``.

    Ops are boxes named by ``grad_fn`` with their output shape and saved-tensor bytes; leaves
    (``AccumulateGrad``) are blue ellipses, named from ``params`` (e.g. ``dict(model.named_parameters())``).

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> dot = cr.viz.to_dot((cr.exp(x) * x).sum())
    >>> "ExpBackward" in dot and "leaf" in dot
    True
    """
    if not isinstance(t, Tensor) or t.grad_fn is None:
        raise ValueError("to_dot: the tensor has no graph (grad_fn is None); compute it from inputs "
                         "with requires_grad=True and outside cr.no_grad()")
    names = {id(p): n for n, p in (params or {}).items()}
    ids: dict[int, str] = {}
    lines = ["digraph chainrule {", '  rankdir=BT; node [fontname="Helvetica", fontsize=10];']
    if title:
        lines.append(f"  labelloc=t; label={_quote(title)};")
    lines.append(f'  out [label={_quote(f"output {tuple(t.shape)}")}, shape=box, style=filled, '
                 f'fillcolor="#e0e0e0"];')
    order = nodes(t)
    for node in order:
        ids[id(node)] = f"n{len(ids)}"
    for node in order:
        nid = ids[id(node)]
        label = _quote(_label(node, names))
        if node.is_accumulator:
            lines.append(f'  {nid} [label={label}, shape=ellipse, style=filled, fillcolor="#cfe2ff"];')
            continue
        lines.append(f"  {nid} [label={label}, shape=box];")
        for e in node.edges:
            if e is not None:
                lines.append(f"  {ids[id(e[0])]} -> {nid};")
    lines.append(f"  {ids[id(t.grad_fn)]} -> out;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _label(node: Any, names: dict) -> str:
    if node.is_accumulator:
        var = node.variable()
        return f"{names.get(id(var), 'leaf') if var is not None else 'leaf'}\n{_shape(node.metas)}"
    saved = saved_bytes(node)
    return f"{node.name}\n{_shape(node.metas)}" + (f"\nsaved {_fmt_bytes(saved)}" if saved else "")


def _draw_matplotlib(t: Tensor, path: str, params: dict | None, title: str | None) -> bool:
    """A layered drawing (depth from the output) for machines without Graphviz; False if no matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    order = nodes(t)
    depth = {id(n): 0 for n in order}
    for _ in range(len(order)):               # longest path from the output: relax until stable
        changed = False
        for node in order:
            for e in getattr(node, "edges", ()):
                if e is not None and depth[id(e[0])] <= depth[id(node)]:
                    depth[id(e[0])] = depth[id(node)] + 1
                    changed = True
        if not changed:
            break
    layers: dict[int, list] = {}
    for node in order:
        layers.setdefault(depth[id(node)], []).append(node)
    pos = {id(n): (i - (len(ns) - 1) / 2, -d) for d, ns in layers.items() for i, n in enumerate(ns)}
    names = {id(p): n for n, p in (params or {}).items()}
    width = max(len(ns) for ns in layers.values())
    fig, ax = plt.subplots(figsize=(max(4, 2.2 * width), max(3, 1.0 * len(layers))))
    for node in order:
        x1, y1 = pos[id(node)]
        for e in getattr(node, "edges", ()):
            if e is not None:
                x0, y0 = pos[id(e[0])]
                ax.annotate("", xy=(x1, y1 - 0.25), xytext=(x0, y0 + 0.25),
                            arrowprops=dict(arrowstyle="->", color="0.4"))
        leaf = node.is_accumulator
        ax.text(x1, y1, _label(node, names), ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round" if leaf else "square", fc="#cfe2ff" if leaf else "white",
                          ec="0.3"))
    ax.set_xlim(-width / 2 - 0.5, width / 2 + 0.5)
    ax.set_ylim(-len(layers) + 0.4, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def render(t: Tensor, path: str, params: dict | None = None, title: str | None = None) -> str:
    """Write the graph of ``t`` to ``path`` (``.svg``/``.png``/``.pdf``); the ``.dot`` text always too.

    Uses the Graphviz ``dot`` program when installed; otherwise draws a simpler layered picture with
    matplotlib and says how to install Graphviz; with neither, only the ``.dot`` file is written.
    Returns the path of the picture (or of the ``.dot`` file when no picture could be made).
    """
    base, ext = os.path.splitext(os.fspath(path))
    fmt = ext.lstrip(".").lower() or "svg"
    dot_path = base + ".dot"
    os.makedirs(os.path.dirname(os.path.abspath(dot_path)), exist_ok=True)
    with open(dot_path, "w", encoding="utf-8") as f:
        f.write(to_dot(t, params, title))
    if fmt == "dot":
        return dot_path
    out = f"{base}.{fmt}"
    exe = shutil.which("dot")
    if exe is not None:
        subprocess.run([exe, f"-T{fmt}", dot_path, "-o", out], check=True, capture_output=True)
        return out
    how = (f"install Graphviz (apt install graphviz, brew install graphviz or conda install graphviz) "
           f"and run: dot -T{fmt} {dot_path} -o {out}")
    if _draw_matplotlib(t, out, params, title):
        print(f"render: Graphviz 'dot' not found; drew {out} with matplotlib. For the Graphviz layout, {how}")
        return out
    print(f"render: wrote {dot_path}; no {fmt.upper()} was made (neither Graphviz nor matplotlib is "
          f"installed). To draw it, {how}")
    return dot_path
