"""The built book in a real browser: headless Chromium from Debian, no network.

Needs `_build/html` (scripts/build_book.sh) and /usr/bin/chromium (scripts/setup.sh). When
INFERLAB_BROWSER_TESTS=required (set by scripts/test.sh) a missing build or browser fails these
tests instead of skipping them.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = os.environ.get("INFERLAB_BROWSER_TESTS") == "required"

pytestmark = pytest.mark.browser


def _need(condition: bool, why: str) -> None:
    if not condition:
        (pytest.fail if REQUIRED else pytest.skip)(why)


@pytest.fixture(scope="module")
def browser():
    _need(HTML.is_dir(), "no built book: run scripts/build_book.sh")
    _need(CHROMIUM.exists(), "no /usr/bin/chromium: run scripts/setup.sh")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


def open_page(browser, relative: str):
    """Load a built page with every non-file request refused; return page, errors, refused URLs."""
    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    errors: list[str] = []
    refused: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))

    def offline(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto((HTML / relative).as_uri(), wait_until="load")
    page.wait_for_timeout(1500)
    return page, errors, refused


@pytest.fixture(scope="module")
def pages(browser):
    """``pages(relative)``: each built page loaded once for all the tests that read it, closed at the end."""
    opened: dict = {}

    def get(relative: str):
        if relative not in opened:
            opened[relative] = open_page(browser, relative)
        return opened[relative]

    yield get
    for page, _, _ in opened.values():
        page.close()


CHAPTER = "notebooks/ch01_what_is_inference.html"
FIGURES = ["fig-ch01-cost-model", "fig-ch01-stage-shares", "fig-ch01-step-explorer", "fig-ch01-trained-random"]


def test_chapter_1_figures_draw_offline(pages):
    page, errors, refused = pages(CHAPTER)
    page.wait_for_selector("#fig-ch01-trained-random .main-svg", timeout=10_000)
    for figure in FIGURES:
        assert page.locator(f"#{figure} .main-svg").count() >= 1, f"{figure} was not drawn"
        assert page.locator(f"#{figure} .main-svg .trace").count() >= 1, f"{figure} has no data"
    assert not errors, errors
    assert not refused, f"the page asked the network for {refused}"
    (ROOT / "_build" / "screenshots").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "_build" / "screenshots" / "ch01.png"), full_page=True)


def test_chapter_1_widgets_render_their_embedded_state(pages):
    page, errors, refused = pages(CHAPTER)
    page.wait_for_selector(".jupyter-widgets textarea", timeout=10_000)
    assert page.locator(".jupyter-widgets textarea").first.input_value() == "The fastest way to run a language model is"
    assert page.locator(".widget-button").count() >= 1 and page.locator(".widget-dropdown select").count() >= 1
    assert "stage" in page.locator(".jupyter-widgets-output-area, .widget-output").first.inner_text()
    assert not errors, errors
    assert not refused, refused


def test_chapter_1_prose_carries_glued_numbers_and_links(pages):
    page, errors, _ = pages(CHAPTER)
    text = page.locator("main").inner_text()
    assert "smollm2-135m, a model of 134,515,008 parameters" in text
    assert "{glue" not in text and "??" not in text
    assert page.locator("a[href*='glossary.html#term-Inference']").count() >= 1
    assert page.locator("a[href*='bibliography.html']").count() >= 5
    colab = page.locator("a[href*='colab.research.google.com']")
    assert colab.count() >= 1 and colab.first.get_attribute("href").endswith("ch01_what_is_inference.ipynb")
    assert not errors, errors


@pytest.mark.parametrize("relative", ["book/intro.html", "book/numbers.html", "book/glossary.html", "book/bibliography.html",
                                      "book/reproducibility.html"])
def test_back_matter_pages_load_without_errors(pages, relative):
    page, errors, refused = pages(relative)
    assert page.locator("article h1").count() == 1
    assert not errors, errors
    assert not refused, refused


def chapter_pages() -> list[str]:
    """Every chapter page the table of contents lists."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [entry["file"] + ".html" for part in toc["parts"] for entry in part["chapters"]
            if entry["file"].startswith("notebooks/")]


@pytest.mark.parametrize("relative", chapter_pages())
def test_every_chapter_renders_offline_with_all_its_figures(pages, relative):
    page, errors, refused = pages(relative)
    figures = page.locator(".plotly-graph-div")
    if figures.count():
        page.wait_for_selector(".plotly-graph-div .main-svg", timeout=10_000)
    undrawn = [figures.nth(i).get_attribute("id") for i in range(figures.count())
               if figures.nth(i).locator(".main-svg").count() == 0]
    assert not undrawn, f"figures not drawn: {undrawn}"
    text = page.locator("main").inner_text()
    assert "{glue" not in text
    assert page.locator(".cell_output .output.error, .output.traceback").count() == 0
    assert page.locator("a[href*='colab.research.google.com']").count() >= 1
    assert not errors, errors
    assert not refused, refused


@pytest.mark.parametrize("relative", chapter_pages())
def test_every_widget_on_a_static_page_is_marked_live_only(pages, relative):
    """A control with no kernel behind it does nothing: the reader must be told, with a way to run it."""
    page, errors, _ = pages(relative)
    cells = page.locator(".cell").filter(has=page.locator(".jupyter-widgets"))
    for i in range(cells.count()):
        cell = cells.nth(i)
        note = cell.locator(".live-only")
        assert note.count() == 1, f"a widget in cell {i} of {relative} has no live-only note"
        assert note.first.is_visible()
        link = note.first.locator("a[href*='colab.research.google.com']")
        assert link.count() == 1 and link.first.get_attribute("href").endswith(
            Path(relative).stem + ".ipynb")
    assert not errors, errors
