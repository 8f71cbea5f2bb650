"""Pictures of the graph behind a tensor: Graphviz DOT text, rendered to SVG/PNG when ``dot`` exists."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from .autograd.graph import _FREED, Packed
from .tensor import Tensor


def _nbytes(v: Any) -> int:
    if type(v) is Packed:
        v = v.source
    return int(getattr(v, "nbytes", 0) or 0)


def saved_bytes(node: Any) -> int:
    """Bytes a graph node keeps for its backward (0 once freed)."""
    saved = getattr(node, "saved", None)
    total = 0
    if saved is not None and saved is not _FREED:
        total += sum(_nbytes(v) for v in saved if v is not None)
    total += _nbytes(getattr(node, "out_data", None))
    ctx = getattr(node, "ctx", None)
    if ctx is not None and ctx._saved is not _FREED:
        total += sum(_nbytes(v) for v in ctx._saved)
    return total


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} MiB"


def _shape(metas: tuple) -> str:
    return ", ".join(str(tuple(s)) for s, _ in metas)


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
        lines.append(f'  labelloc=t; label="{title}";')
    lines.append(f'  out [label="output {tuple(t.shape)}", shape=box, style=filled, fillcolor="#e0e0e0"];')
    stack, order = [t.grad_fn], []
    while stack:
        node = stack.pop()
        if id(node) in ids:
            continue
        ids[id(node)] = f"n{len(ids)}"
        order.append(node)
        stack.extend(e[0] for e in getattr(node, "edges", ()) if e is not None)
    for node in order:
        nid = ids[id(node)]
        if getattr(node, "is_accumulator", False):
            var = node.variable()
            label = names.get(id(var), "leaf") if var is not None else "leaf (freed)"
            lines.append(f'  {nid} [label="{label}\\n{_shape(node.metas)}", shape=ellipse, '
                         f'style=filled, fillcolor="#cfe2ff"];')
            continue
        saved = saved_bytes(node)
        extra = f"\\nsaved {_fmt_bytes(saved)}" if saved else ""
        lines.append(f'  {nid} [label="{node.name}\\n{_shape(node.metas)}{extra}", shape=box];')
        for e in node.edges:
            if e is not None:
                lines.append(f"  {ids[id(e[0])]} -> {nid};")
    lines.append(f"  {ids[id(t.grad_fn)]} -> out;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(t: Tensor, path: str, params: dict | None = None, title: str | None = None) -> str:
    """Write the graph of ``t`` to ``path`` (``.svg``/``.png``/``.pdf`` with Graphviz, else ``.dot``).

    The ``.dot`` file is always written next to ``path``. Returns the path of the picture, or of the
    ``.dot`` file when the Graphviz ``dot`` program is not installed (a message says how to get it).
    """
    base, ext = os.path.splitext(os.fspath(path))
    fmt = ext.lstrip(".").lower() or "svg"
    dot_path = base + ".dot"
    os.makedirs(os.path.dirname(os.path.abspath(dot_path)), exist_ok=True)
    with open(dot_path, "w", encoding="utf-8") as f:
        f.write(to_dot(t, params, title))
    if fmt == "dot":
        return dot_path
    exe = shutil.which("dot")
    if exe is None:
        print(f"render: wrote {dot_path}; the Graphviz 'dot' program is not installed, so no {fmt.upper()} "
              f"was made. Install Graphviz (apt install graphviz, brew install graphviz, or conda "
              f"install graphviz) and run: dot -T{fmt} {dot_path} -o {base}.{fmt}")
        return dot_path
    out = f"{base}.{fmt}"
    subprocess.run([exe, f"-T{fmt}", dot_path, "-o", out], check=True, capture_output=True)
    return out
