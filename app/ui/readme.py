"""README and other Markdown from environments, rendered to HTML that is safe to show.

Markdown becomes HTML with markdown-it (raw HTML allowed, as on the Hub), then nh3 keeps
only harmless tags and attributes: no scripts, frames, forms, styles or event handlers,
only http(s) and mailto links, and data: URLs only for raster images.
"""

import re
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit

import nh3
from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_INLINE = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough"])
_IMAGE_DATA = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.IGNORECASE)
_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*(?:\n|\Z)", re.DOTALL)
_URL_ATTRIBUTES = {"href", "src", "cite"}
_TAGS = nh3.ALLOWED_TAGS - {"map", "area"}
_ATTRIBUTES = {tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()} | {
    "code": {"class"},  # language-xxx from fenced code blocks
    "th": nh3.ALLOWED_ATTRIBUTES["th"] | {"style"},
    "td": nh3.ALLOWED_ATTRIBUTES["td"] | {"style"},
}


def strip_front_matter(text: str) -> str:
    return _FRONT_MATTER.sub("", text, count=1)


def _url_filter(base: str | None) -> Callable[[str, str, str], str | None]:
    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute not in _URL_ATTRIBUTES:
            return value
        if value.lower().startswith("data:"):
            return value if tag == "img" and attribute == "src" and _IMAGE_DATA.match(value) else None
        if base and not urlsplit(value).scheme and not value.startswith(("#", "//")):
            return urljoin(base, value)
        return value

    return keep


def sanitize_html(html: str, *, base_url: str | None = None) -> str:
    """HTML with everything that could run code or load a frame removed."""
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        clean_content_tags={"script", "style"},
        url_schemes={"http", "https", "mailto", "data"},  # data: is narrowed to images by the filter
        attribute_filter=_url_filter(base_url),
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        filter_style_properties={"text-align"},
    )


def render_markdown(text: str, *, base_url: str | None = None) -> str:
    """A README (front matter dropped) as sanitized HTML; relative links resolve against base_url."""
    return sanitize_html(_MARKDOWN.render(strip_front_matter(text)), base_url=base_url)


def render_inline(text: str) -> str:
    """Short Markdown from an environment's own output: no raw HTML at all."""
    return sanitize_html(_INLINE.render(text))
