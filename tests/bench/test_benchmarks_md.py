"""The figures the README quotes are those of the latest full run: every row of the README's
performance table stands, word for word, in BENCHMARKS.md (which `python tools/bench.py --out
BENCHMARKS.md` writes), and BENCHMARKS.md records the machine, the versions and its command."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text()
BENCHMARKS = (ROOT / "BENCHMARKS.md").read_text()


def readme_rows() -> list[str]:
    """The table rows of the README's ``## Performance`` section (its header and rule excluded)."""
    section = README.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [r for r in rows if not r.startswith(("| target |", "|---"))]


def test_every_row_the_readme_quotes_is_in_benchmarks_md():
    rows = readme_rows()
    assert len(rows) >= 8, rows
    lines = set(BENCHMARKS.splitlines())
    assert [r for r in rows if r not in lines] == []


def test_benchmarks_md_says_where_it_comes_from():
    head = BENCHMARKS.split("## Targets", 1)[0]
    assert re.search(r"Written by `python tools/bench\.py[^`]*--out BENCHMARKS\.md", head)
    for what in ("Machine: python", "cpu ", "cores ", "numpy ", "chainrule ", "torch ", "jax ", "Threads: "):
        assert what in head, what
    for case in ("1000-op elementwise chain", "MLP 784-512-512-10", "tiny 3-4-1", "HVP vs grad", "checkpointing",
                 "forward-mode JVP", "eager vs cr.compile", "per-example"):
        assert re.search(rf"^## .*{re.escape(case)}", BENCHMARKS, re.M | re.I), case
    assert "JAX jit" in BENCHMARKS and "PyTorch eager" in BENCHMARKS
