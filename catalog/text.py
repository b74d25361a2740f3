"""Making untrusted text from cards and READMEs safe to store and to show."""

import codecs
import re
from html.parser import HTMLParser

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACE = re.compile(r"\s+")
_INERT_CONTENT = {"script", "style", "template", "noscript", "iframe", "object"}
_ACTIVE_TAGS = {"script", "iframe", "object", "embed", "frame", "frameset", "applet", "base", "meta"}
_URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "data", "poster"}
_BAD_SCHEMES = ("javascript:", "vbscript:")


def decode(raw: bytes, name: str, problems: list[str], *, cut: bool = False) -> str:
    """UTF-8 text from bytes; undecodable bytes are replaced and noted.

    With `cut`, the bytes are a prefix of a longer file, so a character split at
    the end is dropped rather than reported.
    """
    try:
        value = codecs.getincrementaldecoder("utf-8-sig")().decode(raw, final=not cut)
    except UnicodeDecodeError as exc:
        problems.append(
            f"{name} is not valid UTF-8 (first bad byte at offset {exc.start}); bad bytes were replaced with U+FFFD"
        )
        decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        value = decoder.decode(raw, final=not cut)
    return strip_controls(value)


def strip_controls(value: str) -> str:
    """Drop NUL and other control characters no database or browser wants."""
    return _CONTROL.sub("", value)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.saw_markup = False
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.saw_markup = True
        if tag in _INERT_CONTENT:
            self._skip_depth += 1

    def handle_endtag(self, tag: str) -> None:
        self.saw_markup = True
        if tag in _INERT_CONTENT and self._skip_depth:
            self._skip_depth -= 1

    def handle_comment(self, data: str) -> None:
        self.saw_markup = True

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def plain_text(value: str, name: str, limit: int, problems: list[str]) -> str:
    """A one-line plain-text field: markup removed, whitespace collapsed, length capped."""
    parser = _TextExtractor()
    parser.feed(strip_controls(value))
    parser.close()
    result = _SPACE.sub(" ", "".join(parser.parts)).strip()
    if parser.saw_markup:
        problems.append(f"{name} contained HTML markup; it is stored as plain text")
    if len(result) > limit:
        problems.append(f"{name} is {len(result)} characters long; stored cut to {limit}")
        result = result[: limit - 1].rstrip() + "…"
    return result


class _ActiveContentFinder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _ACTIVE_TAGS:
            self.found.add(f"<{tag}>")
        for attr, attr_value in attrs:
            if attr.startswith("on"):
                self.found.add(f"{attr}= handler")
            elif attr in _URL_ATTRS and attr_value:
                url = _SPACE.sub("", attr_value).lower()
                if url.startswith(_BAD_SCHEMES):
                    self.found.add(url.split(":", 1)[0] + ": URL")
                elif url.startswith("data:") and not (tag == "img" and url.startswith("data:image/")):
                    self.found.add("data: URL")


def active_content(markdown: str) -> list[str]:
    """The kinds of executable HTML a README carries (scripts, handlers, script URLs)."""
    finder = _ActiveContentFinder()
    finder.feed(markdown)
    finder.close()
    return sorted(finder.found)
