"""A Griffe extension for the API reference: docstring examples (``>>>`` lines and the output
that follows them) become fenced ``pycon`` blocks, so Markdown renders them as code instead of
nested block quotes. mkdocs.yml loads it (``extensions: [tools/griffe_doctests.py:DoctestFences]``).

>>> fence_doctests("Add.\\n\\n>>> 1 + 1\\n2\\n\\nDone.")
'Add.\\n\\n```pycon\\n>>> 1 + 1\\n2\\n```\\n\\nDone.'
>>> fence_doctests("    >>> eye(2)\\n    [[1, 0],\\n     [0, 1]]").splitlines()
['```pycon', '>>> eye(2)', '[[1, 0],', ' [0, 1]]', '```']
"""
from __future__ import annotations

from typing import Any

try:                                   # the docs extra; the function below needs nothing
    import griffe
except ImportError:                    # pragma: no cover - without mkdocs installed
    griffe = None


def fence_doctests(text: str) -> str:
    """Wrap each run of ``>>>`` lines and their output (up to a blank line) in a ``pycon`` fence;
    examples already inside a fence are left alone."""
    out: list[str] = []
    block: list[str] = []
    indent, fenced = 0, False
    for line in text.splitlines():
        if block:
            if line.strip():
                block.append(line[indent:] if not line[:indent].strip() else line.lstrip())
                continue
            out += ["```pycon", *block, "```"]
            block = []
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith(">>>"):
            indent = len(line) - len(line.lstrip())
            block = [line[indent:]]
            continue
        out.append(line)
    if block:
        out += ["```pycon", *block, "```"]
    return "\n".join(out)


if griffe is not None:
    class DoctestFences(griffe.Extension):
        """Rewrite every collected docstring with ``fence_doctests``."""

        def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
            if obj.docstring is not None and ">>>" in obj.docstring.value:
                obj.docstring.value = fence_doctests(obj.docstring.value)
