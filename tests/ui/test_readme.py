"""README rendering: Markdown kept, everything that could run code or frame a page removed."""

from html.parser import HTMLParser

import pytest

from app.ui.readme import render_inline, render_markdown, sanitize_html

HOSTILE = """---
title: Evil
---
# Evil environment

<script>window.pwned = 1</script>
<img src="x.png" onerror="window.pwned = 2">

[click](javascript:window.pwned=3) <a href="JaVaScRiPt:window.pwned=4">again</a>

<iframe src="https://example.com/"></iframe>

<div onclick="window.pwned=5" style="position: fixed">styled</div>

<a href="data:text/html,<script>alert(1)</script>">data link</a>

<svg onload="window.pwned=6"><circle r="5"/></svg>

<form action="https://example.com/"><input name="x"></form>
"""


class Markup(HTMLParser):
    """Every tag and attribute of a fragment, as a browser would parse them."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes += [(name, value or "") for name, value in attrs]


def assert_inert(html: str) -> None:
    markup = Markup(html)
    assert not markup.tags & {"script", "iframe", "svg", "form", "input", "style", "object", "embed"}, markup.tags
    for name, value in markup.attributes:
        assert not name.startswith("on") and name != "style", name
        assert not value.strip().lower().startswith(("javascript:", "data:text")), value


def test_hostile_markup_is_removed() -> None:
    html = render_markdown(HOSTILE).lower()
    assert_inert(html)
    assert "window.pwned" not in html.replace("(javascript:window.pwned=3)", "")  # only as inert link text
    assert "<h1>evil environment</h1>" in html
    assert "title: evil" not in html  # front matter is not content
    assert "styled" in html and "again" in html


def test_images_may_be_data_urls_but_nothing_else() -> None:
    png = "data:image/png;base64,iVBORw0KGgo="
    html = sanitize_html(f'<img src="{png}"><img src="data:image/svg+xml;base64,PHN2Zz4="><a href="{png}">x</a>')
    assert html.count("data:image/png") == 1
    assert "svg" not in html
    assert "<a" in html and "href" not in html


def test_relative_links_point_into_the_space() -> None:
    base = "https://huggingface.co/spaces/openenv/maze/resolve/main/"
    html = render_markdown(
        "![board](img/board.png) [code](server/app.py) [top](#rules) [hub](https://hf.co/x)", base_url=base
    )
    assert f'src="{base}img/board.png"' in html
    assert f'href="{base}server/app.py"' in html
    assert 'href="#rules"' in html and 'href="https://hf.co/x"' in html
    assert 'rel="noopener noreferrer nofollow"' in html and 'target="_blank"' in html


def test_markdown_features_survive() -> None:
    html = render_markdown("| a | b |\n|--:|---|\n| 1 | 2 |\n\n```python\nprint(1)\n```\n\n~~old~~ **bold**")
    assert "<table>" in html and 'style="text-align:right"' in html
    assert '<code class="language-python">' in html
    assert "<s>old</s>" in html and "<strong>bold</strong>" in html


@pytest.mark.parametrize("text", ["<b onmouseover=alert(1)>hi</b>", "<script>alert(1)</script>", "[x](javascript:1)"])
def test_inline_markdown_from_environments_has_no_html(text: str) -> None:
    html = render_inline(text)
    assert_inert(html)
    assert Markup(html).tags <= {"p"}
