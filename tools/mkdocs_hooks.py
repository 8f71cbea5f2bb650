"""MkDocs hooks (mkdocs.yml ``hooks:``): the site shows the repository's ``BENCHMARKS.md`` (written
by ``python tools/bench.py --out BENCHMARKS.md``) as its page ``benchmarks.md``, so the figures
have one file and the site never holds a stale copy."""
from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"benchmarks.md": ROOT / "BENCHMARKS.md"}


def on_files(files, config):
    """Add each repository file of ``PAGES`` to the site under its page name."""
    for page, path in PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(path)))
    return files
