"""Reading an environment's card (README front matter) and manifest (openenv.yaml).

Everything here treats its input as hostile: a broken card becomes problems on the
entry, never an exception.
"""

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from catalog.text import active_content, decode, plain_text

README_LIMIT = 512 * 1024
MANIFEST_LIMIT = 64 * 1024
_YAML_NODE_BUDGET = 5_000
# libyaml's safe loader parses ten times faster than the pure-Python one, same rules.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*$\r?\n?", re.S | re.M)
_OPENS_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\r?\n")
_HEADING_OR_BADGE = re.compile(r"^\s*(#|!\[|\[!\[|<|---|\|)")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_MAX_VARIABLES = 100


@dataclass
class Readme:
    front_matter: dict[str, Any]
    body: str
    text: str
    problems: list[str] = field(default_factory=list)


@dataclass
class Manifest:
    data: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)


@dataclass
class CardFields:
    """The typed, cleaned values envhub takes from a card and a manifest."""

    title: str | None = None
    emoji: str | None = None
    description: str = ""
    license: str | None = None
    sdk: str | None = None
    app_port: int | None = None
    base_path: str | None = None
    tags: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class _YamlTooBig(ValueError):
    pass


def _jsonable(value: Any, budget: list[int]) -> Any:
    """YAML values as JSON values; refuses structures that explode through aliases."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _YamlTooBig
    if isinstance(value, dict):
        return {str(k): _jsonable(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, budget) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def load_yaml_mapping(source: str, name: str, problems: list[str]) -> dict[str, Any] | None:
    """A YAML document that must be a mapping, or None with a problem saying why."""
    try:
        loaded = yaml.load(source, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader, C when built)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or type(exc).__name__
        problems.append(f"{name} is not valid YAML{where}: {reason}")
        return None
    except RecursionError:
        problems.append(f"{name} nests too deeply to read")
        return None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        problems.append(f"{name} should be a mapping of keys to values, not {type(loaded).__name__}")
        return None
    try:
        result: dict[str, Any] = _jsonable(loaded, [_YAML_NODE_BUDGET])
    except (_YamlTooBig, RecursionError):
        problems.append(f"{name} has more than {_YAML_NODE_BUDGET} values; ignored")
        return None
    return result


def parse_readme(raw: bytes | None, *, cut: bool = False) -> Readme:
    """Split a README into front matter and body; `cut` says the bytes were truncated."""
    if raw is None:
        return Readme({}, "", "", ["README.md is missing"])
    problems: list[str] = []
    if cut:
        problems.append(f"README.md is larger than {README_LIMIT // 1024} KiB; stored cut at that size")
    text = decode(raw, "README.md", problems, cut=cut)
    match = _FRONT_MATTER.match(text)
    if match is None:
        if _OPENS_FRONT_MATTER.match(text):
            problems.append("README.md front matter opens with --- but never closes; card ignored")
        else:
            problems.append("README.md has no front matter (the --- block holding the Space card)")
        front_matter: dict[str, Any] = {}
        body = text
    else:
        front_matter = load_yaml_mapping(match.group(1), "README.md front matter", problems) or {}
        body = text[match.end() :]
    active = active_content(body)
    if active:
        problems.append(f"README.md carries executable HTML ({', '.join(active)}); it is removed when shown")
    return Readme(front_matter, body, text, problems)


def parse_manifest(raw: bytes | None) -> Manifest:
    """openenv.yaml as a mapping; None when the file is absent or unreadable."""
    if raw is None:
        return Manifest(None)
    problems: list[str] = []
    if len(raw) > MANIFEST_LIMIT:
        return Manifest(None, [f"openenv.yaml is larger than {MANIFEST_LIMIT // 1024} KiB; ignored"])
    data = load_yaml_mapping(decode(raw, "openenv.yaml", problems), "openenv.yaml", problems)
    if data is not None:
        if not isinstance(data.get("name"), str) or not data["name"].strip():
            problems.append("openenv.yaml has no name")
        app = data.get("app")
        if app is not None and (not isinstance(app, str) or ":" not in app):
            problems.append(f"openenv.yaml app should look like module.path:attribute, got {app!r}")
        port = data.get("port")
        if port is not None and _port(port) is None:
            problems.append(f"openenv.yaml port should be a number from 1 to 65535, got {port!r}")
    return Manifest(data, problems)


def _port(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and 0 < value < 65536:
        return value
    return None


def _string(card: dict[str, Any], key: str, limit: int, problems: list[str]) -> str | None:
    value = card.get(key)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        problems.append(f"card field {key} should be text, not {type(value).__name__}; ignored")
        return None
    return plain_text(value, f"card field {key}", limit, problems) or None


def _string_list(card: dict[str, Any], key: str, problems: list[str]) -> list[str]:
    value = card.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        problems.append(f"card field {key} should be a list of text, not {type(value).__name__}; ignored")
        return []
    items: list[str] = []
    for item in value[:100]:
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            cleaned = plain_text(str(item), f"card field {key}", 100, problems)
            if cleaned and cleaned not in items:
                items.append(cleaned)
        else:
            problems.append(f"card field {key} holds a {type(item).__name__}; that item is ignored")
    if len(value) > 100:
        problems.append(f"card field {key} has {len(value)} items; the first 100 are kept")
    return items


def _first_paragraph(body: str) -> str:
    lines: list[str] = []
    for line in body.splitlines():
        if not line.strip():
            if lines:
                break
            continue
        if _HEADING_OR_BADGE.match(line):
            if lines:
                break
            continue
        lines.append(line.strip())
    return plain_text(" ".join(lines), "description", 300, [])


def card_fields(readme: Readme, manifest: Manifest) -> CardFields:
    """Typed card values, falling back to the manifest and the README body."""
    card = readme.front_matter
    problems: list[str] = []
    fields = CardFields(
        title=_string(card, "title", 200, problems),
        emoji=_string(card, "emoji", 16, problems),
        license=_string(card, "license", 100, problems),
        sdk=_string(card, "sdk", 50, problems),
        tags=_string_list(card, "tags", problems),
        datasets=_string_list(card, "datasets", problems),
        problems=problems,
    )
    if "app_port" in card:
        fields.app_port = _port(card["app_port"])
        if fields.app_port is None:
            problems.append(f"card field app_port should be a port number, got {card['app_port']!r}")
    base_path = _string(card, "base_path", 200, problems)
    if base_path is not None and not base_path.startswith("/"):
        problems.append(f"card field base_path should start with /, got {base_path!r}; ignored")
        base_path = None
    fields.base_path = base_path
    manifest_data = manifest.data or {}
    if fields.title is None:
        fields.title = _string(manifest_data, "name", 200, problems)
    description = _string(card, "short_description", 300, problems)
    if description is None:
        description = _string(manifest_data, "description", 300, problems)
    fields.description = description or _first_paragraph(readme.body)
    return fields


def declared_variables(card: dict[str, Any], manifest: dict[str, Any] | None) -> list[str]:
    """The variables an environment says its server reads: `variables` in its manifest or its card, a list of
    names (or of {name: ...}) or a mapping of names to what they mean. Anything else there is ignored."""
    names: list[str] = []
    for source in (manifest or {}, card):
        listed = source.get("variables")
        if isinstance(listed, dict):
            listed = list(listed)
        if not isinstance(listed, list):
            continue
        for item in listed[:_MAX_VARIABLES]:
            name = item.get("name") if isinstance(item, dict) else item
            if isinstance(name, str) and _VARIABLE_NAME.match(name) and name not in names:
                names.append(name)
    return names


def card_values(readme: Readme, manifest: Manifest) -> tuple[dict[str, Any], CardFields]:
    """The catalog columns a card and a manifest decide, and the typed fields behind them."""
    fields = card_fields(readme, manifest)
    values = {
        "title": fields.title,
        "emoji": fields.emoji,
        "description": fields.description,
        "license": fields.license,
        "app_port": fields.app_port,
        "base_path": fields.base_path,
        "card": readme.front_matter,
        "manifest": manifest.data,
        "readme": readme.body,
        "problems": readme.problems + manifest.problems + fields.problems,
    }
    return values, fields
