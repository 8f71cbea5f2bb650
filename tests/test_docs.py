"""Every ```python block of README.md and docs/*.md runs as written, alone.

Each block runs as a user would paste it: in a fresh namespace, in a temporary working directory
(blocks that save files write there), with chainrule's global settings restored afterwards. A
block whose first line is ``# continues`` runs after the page's previous block, in its namespace
(the page says so to its reader with that line). The id is ``FILE:N``, N counting the file's python
blocks from 1. A block whose first line is ``# not run: <reason>`` is skipped with that reason; a
block that imports an optional package (matplotlib, torch, jax, HIPS autograd, mpi4py) is skipped
when that package is not installed. Shell commands belong in ```bash blocks, output in plain ```
blocks: neither is run.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NOT_RUN = re.compile(r"#\s*not run:\s*(.+)")
NEEDS_MATPLOTLIB = re.compile(r"\bmatplotlib\b|\bcr\.viz\.render\(|--plot\b|\.plot\(")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
CONTINUES = re.compile(r"#\s*continues\b")
OPTIONAL = re.compile(r"^\s*(?:import|from)\s+(torch|jax|autograd|mpi4py|tqdm)\b", re.M)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """The ```python blocks of a Markdown file: (line of the opening fence, source) each."""
    blocks, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2), i
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path.name}:{start + 1}: code block never closed")
        i += 1
        if lang == "python":
            blocks.append((start + 1, "\n".join(body) + "\n"))
    return blocks


def runnable_blocks(path: Path) -> list[tuple[int, str]]:
    """Each python block as it runs: a ``# continues`` block is preceded by the blocks it continues
    (blank lines keep every line where it is in the Markdown file, for tracebacks)."""
    out: list[tuple[int, str]] = []
    for line, src in python_blocks(path):
        first = src.lstrip().splitlines()[0] if src.strip() else ""
        if CONTINUES.match(first):
            if not out:
                raise ValueError(f"{path.name}:{line}: '# continues' on the page's first block")
            prev_line, prev = out[-1]
            gap = line - prev_line - prev.count("\n")
            src = prev + "\n" * gap + src
            line = prev_line
        out.append((line, src))
    return out


CASES = [pytest.param(path, n, line, src, id=f"{path.name}:{n}")
         for path in DOCS for n, (line, src) in enumerate(runnable_blocks(path), start=1)]


def test_docs_have_python_blocks():
    assert len(CASES) >= 10, [c.id for c in CASES]


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """A temporary working directory; chainrule's and NumPy's global state put back afterwards
    (default dtype, grad mode, the zero-cotangent setting, the RNGs, the op table)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    dtype, grad_mode, np_err = cr.get_default_dtype(), cr.is_grad_enabled(), np.geterr()
    safe = cr.set_safe_zero_cotangents(True)
    rng_state = cr.random.get_rng_state()
    primitives = dict(cr.PRIMITIVES)          # a block may declare a primitive (chainrule.extend)
    yield tmp_path
    cr.set_default_dtype(dtype)
    cr.set_grad_enabled(grad_mode)
    cr.set_safe_zero_cotangents(safe)
    np.seterr(**np_err)
    cr.random.set_rng_state(rng_state)
    cr.PRIMITIVES.clear()
    cr.PRIMITIVES.update(primitives)


@pytest.mark.parametrize("path, n, line, src", CASES)
def test_doc_block_runs(path, n, line, src, isolated):
    first = src.lstrip().splitlines()[0] if src.strip() else ""
    m = NOT_RUN.match(first)
    if m:
        pytest.skip(f"{path.name}:{n}: {m.group(1).strip()}")
    if NEEDS_MATPLOTLIB.search(src):
        pytest.importorskip("matplotlib", reason=f"{path.name}:{n} draws with matplotlib")
    for package in sorted(set(OPTIONAL.findall(src))):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{path.name}:{n} needs {package}, which is not installed")
    # line numbers in tracebacks are the Markdown file's: pad with the fence's lines
    code = compile("\n" * line + src, str(path), "exec")
    exec(code, {"__name__": "__main__"})


def test_continued_blocks_share_the_previous_namespace(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 2\n```\n\ntext\n\n```python\n# continues\nassert x == 2\n```\n"
                    "```python\nassert 'x' not in dir()\n```\n")
    blocks = runnable_blocks(page)
    assert [line for line, _ in blocks] == [1, 1, 11]   # the fences' lines
    for line, src in blocks:                       # each runs alone; the second sees the first's x
        exec(compile("\n" * line + src, str(page), "exec"), {})
    with pytest.raises(NameError):                 # without the marker the name is not there
        exec(python_blocks(page)[1][1], {})
