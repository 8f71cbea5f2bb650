"""The documentation site, looked at in a real browser: built strictly (``mkdocs build --strict``),
served on localhost and loaded in headless Chromium: the home page, a guide, an API page and a
search. Screenshots are kept under ``artifacts/screenshots/`` (or ``$CHAINRULE_ARTIFACTS``).

Needs the ``docs`` extra (mkdocs-material, mkdocstrings, selenium) and Chromium with its driver
(Debian: ``apt install chromium chromium-driver``; ``.ci/run`` installs them when missing)."""
import functools
import http.server
import os
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("CHAINRULE_ARTIFACTS", ROOT / "artifacts")) / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,900")

pytest.importorskip("mkdocs", reason="the site needs the docs extra: pip install -e '.[docs]'")
pytest.importorskip("mkdocstrings", reason="the site needs the docs extra: pip install -e '.[docs]'")
webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium (the docs extra)")
if CHROMIUM is None or DRIVER is None:
    pytest.skip("Chromium and chromedriver are not installed (Debian: apt install chromium chromium-driver)",
                allow_module_level=True)

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built strictly into a temporary folder and served on a free localhost port."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


def screenshot(driver, name: str) -> tuple[int, int]:
    """Save a screenshot as an artefact; return its size in pixels after checking it is a real page."""
    png = driver.get_screenshot_as_png()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert len(png) > 20_000, f"{name}: a {len(png)}-byte screenshot is a blank page"
    return width, height


def test_home_page(site, browser):
    browser.get(site + "/")
    assert browser.title == "chainrule"
    assert "vmap" in browser.find_element(By.TAG_NAME, "body").text
    assert screenshot(browser, "home")[0] >= 1000


def test_a_guide(site, browser):
    browser.get(site + "/vmap/")
    assert browser.title.endswith("- chainrule")
    assert "cr.vmap" in browser.find_element(By.TAG_NAME, "h1").text
    code = browser.find_elements(By.CSS_SELECTOR, "div.highlight code")
    assert len(code) >= 3 and "cr.vmap(" in " ".join(c.text for c in code)
    screenshot(browser, "guide_vmap")


def test_an_api_page_shows_vmaps_signature(site, browser):
    browser.get(site + "/api/cr.func/")
    assert browser.title == "cr.func - chainrule"
    heading = browser.find_element(By.ID, "chainrule.func.vmap")
    signature = heading.find_element(By.XPATH, "following-sibling::div[1]").text
    assert signature.startswith("vmap(") and "in_axes=0" in signature and "out_axes=0" in signature, signature
    browser.execute_script("arguments[0].scrollIntoView()", heading)
    screenshot(browser, "api_cr_func")


def test_search_finds_vmap_for_batching(site, browser):
    browser.get(site + "/?q=batching")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")]
    assert any("/vmap/" in href for href in links), links
    screenshot(browser, "search_batching")
