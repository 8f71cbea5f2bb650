"""The pictures of the site are what the code draws today: the graph pictures' DOT text is
``cr.viz.to_dot``'s (tools/graph_pictures.py redraws them), and every picture a page shows exists."""
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tools import graph_pictures

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("name", graph_pictures.PICTURES)
def test_graph_pictures_are_current(name):
    dot = (graph_pictures.OUT / f"{name}.dot").read_text()
    assert dot == graph_pictures.dot_text(name), f"run `python tools/graph_pictures.py`: {name} changed"
    svg = ET.parse(graph_pictures.OUT / f"{name}.svg").getroot()
    texts = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    labels = re.findall(r'label="([^"\\]+)', dot)
    assert labels and all(label in texts for label in labels if label != "chainrule"), (labels, texts)


def test_every_picture_a_page_shows_exists():
    shown = {(page, m) for page in DOCS.rglob("*.md")
             for m in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text())}
    assert shown, "no page shows a picture"
    assert [(p.name, m) for p, m in shown if not (p.parent / m).resolve().exists()] == []
