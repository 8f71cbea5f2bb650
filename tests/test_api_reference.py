"""The API reference (docs/api/, written by tools/api_pages.py) covers every public name, each
public function and class has its own docstring, and every page is in the site's navigation."""
import inspect
import re
from pathlib import Path

import pytest

import chainrule as cr
from tools import api_pages
from tools.griffe_doctests import fence_doctests

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = (ROOT / "mkdocs.yml").read_text()


def own_docstring(obj) -> str:
    """The object's own docstring: a class does not inherit its base's (inspect.getdoc would)."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    return (doc or "").strip()


@pytest.mark.parametrize("space", api_pages.NAMESPACES)
def test_every_public_name_has_a_docstring_or_a_description(space):
    mod = api_pages.module(space)
    names = api_pages.public_names(space)
    assert names, space
    undocumented = [n for n in names if not api_pages.is_data(getattr(mod, n)) and not own_docstring(getattr(mod, n))]
    assert undocumented == [], f"{space}: public names without a docstring: {undocumented}"
    undescribed = [n for n in names if api_pages.is_data(getattr(mod, n)) and n not in api_pages.DATA]
    assert undescribed == [], f"{space}: data names without a description in tools/api_pages.py DATA"


@pytest.mark.parametrize("space", api_pages.NAMESPACES)
def test_every_public_name_is_on_its_page(space):
    page = (api_pages.API_DIR / f"{space}.md").read_text()
    modname = api_pages.NAMESPACES[space][0]
    listed = set(re.findall(rf"^::: {re.escape(modname)}\.(\w+)$", page, re.M))
    listed |= set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    assert set(api_pages.public_names(space)) - listed == set()


def test_the_pages_are_what_the_generator_writes():
    """A new or renamed public name changes a page: regenerate with `python tools/api_pages.py`."""
    stale = [p.name for p, text in api_pages.pages().items() if not p.exists() or p.read_text() != text]
    assert stale == [], f"docs/api/ is stale for {stale}: run `python tools/api_pages.py`"
    extra = {p.name for p in api_pages.API_DIR.glob("*.md")} - {p.name for p in api_pages.pages()}
    assert extra == set()


def test_every_namespace_of_cr_has_a_page():
    """Each sub-namespace reachable as cr.<name> has a page, except the op table (internal)."""
    covered = {api_pages.NAMESPACES[s][0] for s in api_pages.NAMESPACES}
    subs = {getattr(cr, n).__name__ for n in cr.__all__ if inspect.ismodule(getattr(cr, n))}
    assert subs - covered == {"chainrule.ops"}


def test_every_page_is_in_the_navigation():
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    assert [p for p in pages if not re.search(rf"(:|-)\s+{re.escape(p)}\s*$", MKDOCS, re.M)] == []


def test_doctest_examples_become_code_blocks():
    text = "Add.\n\n>>> x = 1\n>>> x + 1\n2\n\nThen:\n\n```python\n>>> kept\n```"
    assert fence_doctests(text).splitlines() == [
        "Add.", "", "```pycon", ">>> x = 1", ">>> x + 1", "2", "```", "", "Then:", "",
        "```python", ">>> kept", "```"]
    assert fence_doctests("no examples") == "no examples"
