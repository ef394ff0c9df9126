"""The live-only note shown above every control that needs a kernel (inferbook.live)."""
from __future__ import annotations

from html.parser import HTMLParser

from inferbook.live import colab_url, live_note_html


def test_colab_url_points_at_the_chapter_notebook():
    assert colab_url("ch01_what_is_inference") == colab_url("ch01_what_is_inference.ipynb")
    assert colab_url("ch05_decoding_rules").startswith("https://colab.research.google.com/github/")
    assert colab_url("ch05_decoding_rules").endswith("/notebooks/ch05_decoding_rules.ipynb")


def test_the_note_is_well_formed_and_carries_the_link():
    class Collect(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack: list[str] = []
            self.links: list[str] = []
            self.classes: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.stack.append(tag)
            attrs = dict(attrs)
            self.classes.append(attrs.get("class", ""))
            if tag == "a":
                self.links.append(attrs["href"])

        def handle_endtag(self, tag):
            assert self.stack.pop() == tag

    parser = Collect()
    parser.feed(live_note_html("ch03_tokens"))
    assert parser.stack == [] and "live-only" in parser.classes
    assert parser.links == [colab_url("ch03_tokens")]
