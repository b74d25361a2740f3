"""A local fake of the Hugging Face Hub HTTP API, served on 127.0.0.1 for the real huggingface_hub client.

Reads (listings, repo info, runtime, file downloads) are open to anyone, except a private repo's files: its tree,
its files and its info at a revision answer 401 without a token, and 404 to a user outside its namespace (as the
Hub does; its info and runtime stay open, as the tests of other modules expect). A repo keeps every revision it had:
reads at an earlier commit's sha answer with that commit's files, as they do on the Hub. Writes behave like the Hub:
they need ``Authorization: Bearer <token>`` with a token from ``users`` (else 401) and a namespace that is the
user's own or one of their ``orgs`` (else 403). Repos can be created, deleted and duplicated, committed to the way
``HfApi.upload_folder``/``create_commit`` do it (preupload + NDJSON commit, every file inline), and Spaces carry
secrets, variables, hardware, sleep time and a runtime stage that walks ``boot_sequence`` one step per runtime poll;
``GET /api/spaces/{id}/jwt`` gives whoever may read a Space a short-lived token for its own host (``space_jwts``).
``oauth`` serves the Hub's OAuth/OpenID routes (see tests/fakeoauth.py); the tokens it mints work as above.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import hashlib
import json
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import yaml

from tests.fakeoauth import FakeOAuth

# The libyaml loader is ~10x faster; adding 10,000 Spaces parses 10,000 READMEs.
_YAML_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

__all__ = ["EMPTY_TREE_SHA", "FakeHub", "Fault", "Request", "SpaceSettings", "Write"]

SPACE_PROPERTIES: tuple[str, ...] = (
    "author",
    "cardData",
    "createdAt",
    "datasets",
    "disabled",
    "lastModified",
    "likes",
    "models",
    "private",
    "runtime",
    "sdk",
    "sha",
    "siblings",
    "subdomain",
    "tags",
    "trendingScore",
)
DATASET_PROPERTIES: tuple[str, ...] = (
    "author",
    "cardData",
    "createdAt",
    "description",
    "disabled",
    "downloads",
    "lastModified",
    "likes",
    "private",
    "sha",
    "siblings",
    "tags",
    "trendingScore",
)
# The sha of git's empty tree: what a freshly created (empty) repo reports.
EMPTY_TREE_SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

_SPACE_DEFAULT: tuple[str, ...] = (
    "author",
    "likes",
    "private",
    "sdk",
    "tags",
    "createdAt",
    "trendingScore",
)
_DATASET_DEFAULT: tuple[str, ...] = (
    "author",
    "likes",
    "downloads",
    "private",
    "tags",
    "createdAt",
    "trendingScore",
    "lastModified",
)
_REPO_SORT_KEYS = frozenset({"likes", "trendingScore", "lastModified", "createdAt", "downloads"})
_SORT_KEYS: dict[str, frozenset[str]] = {
    "space": frozenset({"likes", "trendingScore", "lastModified", "createdAt"}),
    "dataset": _REPO_SORT_KEYS,
    "model": _REPO_SORT_KEYS,
}
_UPDATABLE = frozenset(
    {
        "likes",
        "trending_score",
        "stage",
        "tags",
        "sdk",
        "last_modified",
        "private",
        "author",
    }
)
# URL segment -> repo kind, and kind -> the prefix of its web URL (models have none).
_KINDS: dict[str, str] = {"spaces": "space", "datasets": "dataset", "models": "model"}
_URL_PREFIX: dict[str, str] = {"space": "spaces/", "dataset": "datasets/", "model": ""}
_SDKS = frozenset({"gradio", "streamlit", "docker", "static"})
# huggingface_hub/_space_api.py SpaceHardware (2.4.0).
_HARDWARE = frozenset(
    {
        "cpu-basic",
        "cpu-upgrade",
        "zero-a10g",
        "t4-small",
        "t4-medium",
        "l4x1",
        "l4x4",
        "l40sx1",
        "l40sx4",
        "l40sx8",
        "a10g-small",
        "a10g-large",
        "a10g-largex2",
        "a10g-largex4",
        "a100-large",
        "a100x4",
        "a100x8",
        "rtx-pro-6000",
        "rtx-pro-6000x2",
        "rtx-pro-6000x4",
        "rtx-pro-6000x8",
    }
)
_ERROR_STAGES = frozenset({"BUILD_ERROR", "RUNTIME_ERROR", "CONFIG_ERROR"})
_STOPPED_STAGES = frozenset({"PAUSED", "STOPPED"})
_SPACE_ACTIONS = frozenset({"secrets", "variables", "hardware", "sleeptime", "pause", "restart"})
_FREE_SLEEP_S = 172800  # cpu-basic Spaces sleep after 48 h; not configurable
_REPO_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EPOCH = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\r?\n(.*?)^---[ \t]*$", re.DOTALL | re.MULTILINE)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_HARNESSES = b'{"standardEnvVars":[],"harnesses":{}}'
_VALID_YAML = b'{"errors":[],"warnings":[]}'
_EMPTY_OBJECT = b"{}"
_BAD_TOKEN = "Invalid credentials in Authorization header"
_DEFAULT_VIEW = ("\0default",)
_FULL_VIEW = ("\0full",)
_INFO_VIEW = ("\0info",)
_RUNTIME_VIEW = ("\0runtime",)

_Headers = list[tuple[str, str]]


@dataclass(frozen=True)
class _Response:
    status: int
    body: bytes
    headers: _Headers = field(default_factory=list)
    content_type: str = "application/json"


@dataclass(frozen=True)
class Fault:
    """What the server does instead of answering one matching request.

    Precedence: ``reset``, then ``hang_s``, then ``status``/``body`` (``body`` with ``status`` 0 means 200).
    A hang ends early when ``released`` is set.
    """

    status: int = 0
    retry_after: float | None = None
    hang_s: float = 0.0
    body: bytes | None = None
    reset: bool = False
    released: threading.Event | None = None

    def __post_init__(self) -> None:
        if not (self.status or self.hang_s > 0 or self.body is not None or self.reset):
            raise ValueError("a Fault needs one of status, hang_s, body or reset")


@dataclass(frozen=True)
class Request:
    """One request the fake received; ``user`` is whom its bearer token names (None without a known token)."""

    method: str
    path: str
    query: dict[str, list[str]]
    user: str | None = None
    body: bytes = b""


@dataclass(frozen=True)
class Write:
    """One successful write: who did what to which repo.

    ``action`` is one of create, delete, duplicate, commit, secrets, variables, hardware, sleeptime, pause,
    restart; ``detail`` is the commit summary, the secret/variable key, the hardware flavor or the duplicate's source.
    """

    user: str
    action: str
    repo_type: str
    repo_id: str
    detail: str = ""


@dataclass(frozen=True)
class SpaceSettings:
    """A Space's settings as the fake holds them; ``sleep_time`` is the runtime's ``gcTimeout``."""

    private: bool
    visibility: str
    sdk: str
    hardware: str
    sleep_time: int | None
    stage: str
    error_message: str | None
    host: str


def _iso(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _dumps(obj: object) -> bytes:
    # default=str: YAML front matter may contain dates, which json cannot encode natively.
    return json.dumps(obj, separators=(",", ":"), default=str).encode()


def _front_matter(readme: bytes | None) -> dict[str, Any] | None:
    if readme is None:
        return None
    match = _FRONT_MATTER.match(readme.decode("utf-8", errors="replace"))
    if match is None:
        return None
    try:
        data = yaml.load(match.group(1), Loader=_YAML_LOADER)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _error(status: int, message: str, code: str | None = None, extra: _Headers | None = None) -> _Response:
    headers: _Headers = list(extra or [])
    if code is not None:
        headers.append(("X-Error-Code", code))
        headers.append(("X-Error-Message", message))
    return _Response(status, _dumps({"error": message}), headers)


def _bad_request(message: str) -> _Response:
    return _error(400, message)


def _unauthorized() -> _Response:
    return _error(401, _BAD_TOKEN)


def _forbidden(user: str, namespace: str) -> _Response:
    return _error(403, f'You don\'t have the rights to write to the namespace "{namespace}" (signed in as "{user}")')


def _repo_not_found() -> _Response:
    return _error(404, "Repository not found", "RepoNotFound")


def _revision_not_found(revision: str) -> _Response:
    return _error(404, f"Invalid rev id: {revision}", "RevisionNotFound")


def _subdomain(repo_id: str) -> str:
    return _NON_ALNUM.sub("-", repo_id.lower())


def _blob_oid(content: bytes) -> str:
    """The git blob sha1, which is what huggingface_hub compares to decide a regular file is unchanged."""
    digest = hashlib.sha1(b"blob %d\0" % len(content))
    digest.update(content)
    return digest.hexdigest()


def _commit_sha(parent: str, files: Mapping[str, bytes], summary: str, tick: int) -> str:
    tree = sorted((path, _blob_oid(content)) for path, content in files.items())
    return hashlib.sha1(_dumps(["commit", parent, tree, summary, tick])).hexdigest()


def _card_tags(card: Mapping[str, Any] | None, sdk: str | None) -> list[str]:
    """Tags the Hub derives for a repo from its README front matter (and, for Spaces, the SDK)."""
    tags: list[str] = [sdk] if sdk else []
    raw = card.get("tags") if card is not None else None
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list):
        tags.extend(str(tag) for tag in raw if isinstance(tag, (str, int, float)) and not isinstance(tag, bool))
    return list(dict.fromkeys(tags))


def _runtime_json(fields: Mapping[str, Any], domain: str) -> dict[str, Any]:
    stage = str(fields["stage"])
    hardware = str(fields.get("hardware") or "cpu-basic")
    sleep_time = fields.get("sleep_time")
    runtime: dict[str, Any] = {
        "stage": stage,
        "hardware": {"current": None if stage in _STOPPED_STAGES else hardware, "requested": hardware},
        "gcTimeout": sleep_time if sleep_time is not None else (_FREE_SLEEP_S if hardware == "cpu-basic" else None),
        "domains": [{"domain": domain, "stage": "READY"}],
    }
    if fields.get("error_message"):
        runtime["errorMessage"] = fields["error_message"]
    return runtime


@dataclass(slots=True)
class _Repo:
    kind: str
    id: str
    fields: dict[str, Any]
    files: dict[str, bytes]
    etags: dict[str, str]
    sha: str
    props: dict[str, Any]
    tagset: frozenset[str]
    id_lower: str
    author_lower: str
    cache: dict[tuple[str, ...], bytes]

    def at(self, revision: str) -> _Repo | None:
        """The repo as it was at ``revision`` (main, or a commit it has had); None for one it never had."""
        if revision in ("main", self.sha):
            return self
        files = self.fields.get("history", {}).get(revision)
        if files is None:
            return None
        props = {**self.props, "sha": revision, "siblings": [{"rfilename": path} for path in sorted(files)]}
        etags = {path: hashlib.sha1(content).hexdigest() for path, content in files.items()}
        return replace(self, files=files, etags=etags, sha=revision, props=props, cache={})

    def view(self, keys: tuple[str, ...]) -> bytes:
        """JSON of ``_id``, ``id`` and the given properties; cached since repos are rebuilt on every change."""
        cached = self.cache.get(keys)
        if cached is not None:
            return cached
        props = self.props
        if keys == _INFO_VIEW:
            obj = props
        elif keys == _RUNTIME_VIEW:
            obj = props["runtime"]
        else:
            if keys == _DEFAULT_VIEW:
                names = _SPACE_DEFAULT if self.kind == "space" else _DATASET_DEFAULT
            elif keys == _FULL_VIEW:
                names = SPACE_PROPERTIES if self.kind == "space" else DATASET_PROPERTIES
            else:
                names = keys
            obj = {"_id": props["_id"], "id": self.id}
            obj.update((name, props[name]) for name in names if name in props)
        cached = self.cache[keys] = _dumps(obj)
        return cached


def _build(kind: str, repo_id: str, fields: dict[str, Any], files: dict[str, bytes]) -> _Repo:
    etags = {path: hashlib.sha1(content).hexdigest() for path, content in files.items()}
    card = fields.get("card_data")
    if card is None:
        card = _front_matter(files.get("README.md"))
    sdk = fields.get("sdk")
    if fields.get("derive"):
        # Created through the API: like on the Hub, tags (and a Space's SDK) follow the README.
        if kind == "space" and card is not None and card.get("sdk") in _SDKS:
            sdk = card["sdk"]
        tags = _card_tags(card, sdk if kind == "space" else None)
    else:
        tags = list(fields["tags"])
    sha = fields.get("sha")
    if sha is None:
        meta = {k: fields.get(k) for k in ("tags", "sdk", "card_data", "description")}
        sha = hashlib.sha1(_dumps([kind, repo_id, sorted(etags.items()), meta])).hexdigest()
    author = str(fields["author"])
    props: dict[str, Any] = {
        "_id": hashlib.sha1(f"{kind}:{repo_id}".encode()).hexdigest()[:24],
        "id": repo_id,
        "author": author,
        "createdAt": fields["created_at"],
        "disabled": False,
        "lastModified": fields["last_modified"],
        "likes": fields["likes"],
        "private": fields["private"],
        "sha": sha,
        "siblings": [{"rfilename": path} for path in sorted(files)],
        "tags": tags,
        "trendingScore": fields["trending_score"],
    }
    if card is not None:
        props["cardData"] = dict(card)
    if kind == "space":
        subdomain = _subdomain(repo_id)
        custom_host = fields.get("host")
        domain = urlsplit(custom_host).netloc if custom_host else f"{subdomain}.hf.space"
        host = custom_host or f"https://{domain}"
        props["datasets"] = []
        props["models"] = []
        props["sdk"] = sdk
        props["subdomain"] = subdomain
        props["host"] = host
        props["runtime"] = _runtime_json(fields, domain)
    else:
        props["downloads"] = fields["downloads"]
        if fields.get("description") is not None:
            props["description"] = fields["description"]
    return _Repo(
        kind=kind,
        id=repo_id,
        fields=fields,
        files=files,
        etags=etags,
        sha=sha,
        props=props,
        tagset=frozenset(tags),
        id_lower=repo_id.lower(),
        author_lower=author.lower(),
        cache={},
    )


def _remembered(old: _Repo, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a repo's next version, keeping the old version's files under its sha."""
    return {**fields, "history": {**old.fields.get("history", {}), old.sha: old.files}}


def _encode_files(
    files: Mapping[str, bytes | str | None] | None,
) -> dict[str, bytes | None]:
    if not files:
        return {}
    return {path: (c.encode() if isinstance(c, str) else c) for path, c in files.items()}


def _last(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values else None


def _json_object(body: bytes) -> dict[str, Any] | _Response:
    try:
        data = json.loads(body) if body.strip() else {}
    except ValueError:
        return _bad_request("The request body is not valid JSON")
    return data if isinstance(data, dict) else _bad_request("The request body must be a JSON object")


def _valid_name(name: object) -> bool:
    return isinstance(name, str) and _REPO_NAME.fullmatch(name) is not None and "--" not in name and ".." not in name


def _clean_path(path: object) -> str | None:
    """A repo-relative file path, or None when it is empty, absolute or climbs out of the repo."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path:
        return None
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts) or parts[0] == ".git":
        return None
    return path


def _visibility(payload: Mapping[str, Any], kind: str) -> str | _Response | None:
    visibility = payload.get("visibility")
    if visibility is not None:
        if visibility not in ("public", "private", "protected") or (visibility == "protected" and kind != "space"):
            return _bad_request(f"Invalid visibility: {visibility!r}")
        return str(visibility)
    private = payload.get("private")
    if private is None:
        return None
    if not isinstance(private, bool):
        return _bad_request("private must be a boolean")
    return "private" if private else "public"


def _env_entry(item: object, stamp: str) -> tuple[str, dict[str, str]] | _Response:
    """One secret or variable from ``{"key", "value", "description"?}``."""
    if not isinstance(item, dict):
        return _bad_request("Each secret or variable must be an object with key and value")
    key, value, description = item.get("key"), item.get("value"), item.get("description")
    if not isinstance(key, str) or _ENV_KEY.fullmatch(key) is None:
        return _bad_request(f"Invalid key {key!r}: use letters, digits and underscores, not starting with a digit")
    if not isinstance(value, str):
        return _bad_request(f"The value of {key} must be a string")
    entry = {"value": value, "updatedAt": stamp}
    if description is not None:
        if not isinstance(description, str):
            return _bad_request(f"The description of {key} must be a string")
        entry["description"] = description
    return key, entry


def _space_options(payload: Mapping[str, Any]) -> dict[str, Any] | _Response:
    """Fields from the Space options of repos/create and duplicate: hardware, sleepTimeSeconds, secrets, variables."""
    options: dict[str, Any] = {}
    hardware = payload.get("hardware")
    if hardware is not None:
        if hardware not in _HARDWARE:
            return _bad_request(f"Invalid hardware: {hardware!r}")
        options["hardware"] = hardware
    sleep_time = payload.get("sleepTimeSeconds")
    if sleep_time is not None:
        if not isinstance(sleep_time, int) or isinstance(sleep_time, bool):
            return _bad_request("sleepTimeSeconds must be an integer")
        options["sleep_time"] = sleep_time
    stamp = _now()
    for name in ("secrets", "variables"):
        items = payload.get(name)
        if items is None:
            continue
        if not isinstance(items, list):
            return _bad_request(f"{name} must be a list")
        entries: dict[str, dict[str, str]] = {}
        for item in items:
            parsed = _env_entry(item, stamp)
            if isinstance(parsed, _Response):
                return parsed
            entries[parsed[0]] = parsed[1]
        options[name] = entries
    return options


# One commit operation: ("file", path, content) or ("deletedFile" | "deletedFolder", path, None).
_Operation = tuple[str, str, bytes | None]


def _parse_commit(body: bytes) -> tuple[dict[str, Any], list[_Operation]] | _Response:
    """The NDJSON payload of ``POST /api/{type}s/{id}/commit/{rev}``: a header line, then one line per operation."""
    header: dict[str, Any] | None = None
    operations: list[_Operation] = []
    for number, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            return _bad_request(f"Commit line {number} is not valid JSON")
        if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
            return _bad_request(f'Commit line {number} must be {{"key": ..., "value": {{...}}}}')
        key, value = item.get("key"), item["value"]
        if key == "header":
            if header is not None or operations:
                return _bad_request("The commit header must come once, on the first line")
            summary = value.get("summary")
            if not isinstance(summary, str) or not summary.strip():
                return _bad_request("The commit header needs a non-empty summary")
            header = value
            continue
        if header is None:
            return _bad_request("The first line of a commit must be its header")
        path = _clean_path(value.get("path"))
        if path is None and key != "deletedFolder":
            return _bad_request(f"Commit line {number}: invalid path {value.get('path')!r}")
        if key == "file":
            content = value.get("content")
            if not isinstance(content, str):
                return _bad_request(f"Commit line {number}: file content must be a string")
            if value.get("encoding") == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError):
                    return _bad_request(f"Commit line {number}: content is not valid base64")
            else:
                data = content.encode()
            operations.append(("file", cast(str, path), data))
        elif key == "lfsFile":
            return _bad_request(
                f"Commit line {number}: lfsFile ({value.get('path')!r}) is not supported: this fake Hub stores every"
                ' file inline and answers uploadMode "regular" at preupload, so send "file" lines with base64 content'
            )
        elif key == "deletedFile":
            operations.append(("deletedFile", cast(str, path), None))
        elif key == "deletedFolder":
            folder = value.get("path")
            folder = folder.strip("/") if isinstance(folder, str) else None
            if not folder or _clean_path(folder) is None:
                return _bad_request(f"Commit line {number}: invalid folder path {value.get('path')!r}")
            operations.append(("deletedFolder", folder, None))
        else:
            return _bad_request(f"Commit line {number}: unsupported operation {key!r}")
    if header is None:
        return _bad_request("The commit payload is empty: no header line")
    return header, operations


def _apply(files: dict[str, bytes], operations: list[_Operation]) -> _Response | None:
    """Apply the operations to ``files`` in place; an error response if one cannot apply."""
    for kind, path, content in operations:
        if kind == "file":
            files[path] = cast(bytes, content)
        elif kind == "deletedFile":
            if files.pop(path, None) is None:
                return _error(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
        else:
            prefix = path + "/"
            doomed = [p for p in files if p.startswith(prefix)]
            if not doomed:
                return _error(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
            for p in doomed:
                del files[p]
    for path in files:
        head, sep, _ = path.rpartition("/")
        while sep:
            if head in files:
                return _bad_request(f"{path} cannot be added: {head} is a file")
            head, sep, _ = head.rpartition("/")
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The default backlog of 5 drops SYNs when several client threads connect at once (1 s retransmit stalls).
    request_queue_size = 128

    def __init__(self, hub: FakeHub) -> None:
        self.hub = hub
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Header and body go out in one write, but keep NODELAY so no small write ever waits on a delayed ACK.
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.hub._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.hub._track(self.connection, False)

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length)) if length.isdigit() and int(length) > 0 else b""
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return b""
        chunks: list[bytes] = []
        try:
            while True:
                size = int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        except ValueError:
            self.close_connection = True
            return b""

    def _handle(self) -> None:
        hub = self.server.hub
        raw_path, _, raw_query = self.path.partition("?")
        body = self._read_body()
        query = parse_qs(raw_query, keep_blank_values=True) if raw_query else {}
        path = unquote(raw_path)
        user = hub._user_of(self.headers)
        hub._record(Request(self.command, path, query, user, body))
        fault = hub._take_fault(self.command, path)
        if fault is not None:
            self._apply_fault(fault)
            return
        oauth = hub.oauth.handle(self.command, path, query, self.headers, body)
        if oauth is not None:
            self._send(_Response(*oauth))
            return
        self._send(hub._route(self.command, raw_path, query, user, body))

    def _apply_fault(self, fault: Fault) -> None:
        self.close_connection = fault.reset or fault.hang_s > 0 or self.close_connection
        if fault.reset:
            # Linger 0 and a close without shutdown() make the kernel send RST instead of FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()
            return
        if fault.hang_s > 0:
            deadline = time.monotonic() + fault.hang_s
            released = fault.released or self.server.hub._stopping
            while not (released.is_set() or self.server.hub._stopping.is_set()) and time.monotonic() < deadline:
                released.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            return
        headers: _Headers = []
        if fault.retry_after is not None:
            headers.append(("Retry-After", str(int(fault.retry_after))))
        if fault.body is not None:
            self._send(_Response(fault.status or 200, fault.body, headers))
        else:
            self._send(
                _Response(
                    fault.status,
                    _dumps({"error": f"injected fault {fault.status}"}),
                    headers,
                )
            )

    def _send(self, response: _Response) -> None:
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [
            f"HTTP/1.1 {response.status} {reason}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
        ]
        lines.extend(f"{name}: {value}" for name, value in response.headers)
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")
        # Never a body on HEAD: the client would read it as the start of the next response.
        self.wfile.write(head if self.command == "HEAD" else head + response.body)


class FakeHub:
    """A real HTTP server on 127.0.0.1 that answers like the Hugging Face Hub for Spaces, datasets and models.

    ``users`` maps bearer tokens to user names, ``orgs`` user names to the organisations they may write to.
    ``boot_sequence`` is the stages a created, duplicated or restarted Space goes through: it starts at the first
    and each ``GET /api/spaces/{id}/runtime`` moves it one step on. An ``*_ERROR`` stage reached that way carries
    ``boot_error_message`` as the runtime's ``errorMessage``.
    """

    def __init__(
        self,
        *,
        page_size: int = 1000,
        users: Mapping[str, str] | None = None,
        orgs: Mapping[str, Sequence[str]] | None = None,
        boot_sequence: Sequence[str] = ("BUILDING", "RUNNING"),
    ) -> None:
        self.url: str = ""
        self.page_size: int = page_size
        self.users: dict[str, str] = dict(users) if users is not None else {"hf_test": "alice"}
        self.orgs: dict[str, list[str]] = {user: list(names) for user, names in (orgs or {}).items()}
        self.boot_sequence: list[str] = list(boot_sequence)
        self.boot_error_message: str = "Build failed with exit code: 1"
        self.requests: list[Request] = []
        self.writes: list[Write] = []
        self.space_jwts: dict[str, str] = {}  # JWT -> the Space it opens, for the tests' fake Space hosts to check
        self._lock = threading.Lock()
        self._req_lock = threading.Lock()
        self._repos: dict[str, dict[str, _Repo]] = {kind: {} for kind in _URL_PREFIX}
        self._lower: dict[str, dict[str, str]] = {kind: {} for kind in _URL_PREFIX}
        self._ids: dict[str, list[str]] = {kind: [] for kind in _URL_PREFIX}
        self._faults: list[tuple[str, str, deque[Fault]]] = []
        self._clock = 0
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.oauth = FakeOAuth(lambda: self.users, lambda: self.url)

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError("FakeHub already started")
        self._stopping.clear()
        self._server = _Server(self)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        # A short poll interval keeps stop() prompt; serve_forever only checks for shutdown between polls.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fakehub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ test-side setup and inspection

    def add_space(
        self,
        space_id: str,
        *,
        files: Mapping[str, bytes | str] | None = None,
        tags: Sequence[str] = ("openenv",),
        likes: int = 0,
        trending_score: int = 0,  # the Hub scores trending in whole numbers
        sdk: str = "docker",
        stage: str = "RUNNING",
        author: str | None = None,
        last_modified: str | None = None,
        private: bool = False,
    ) -> None:
        """Add (or replace) a Space; ``createdAt`` comes from a logical clock, one second per add."""
        fields: dict[str, Any] = {
            "tags": list(tags),
            "likes": likes,
            "trending_score": trending_score,
            "sdk": sdk,
            "stage": stage,
            "author": author,
            "last_modified": last_modified,
            "private": private,
        }
        self._add("space", space_id, fields, files)

    def add_dataset(
        self,
        dataset_id: str,
        *,
        tags: Sequence[str] = ("openenv",),
        card_data: Mapping[str, object] | None = None,
        likes: int = 0,
        downloads: int = 0,
        description: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
    ) -> None:
        """Add (or replace) a dataset; without ``card_data`` its README front matter is used."""
        fields: dict[str, Any] = {
            "tags": list(tags),
            "likes": likes,
            "downloads": downloads,
            "card_data": dict(card_data) if card_data is not None else None,
            "description": description,
            "trending_score": 0,
            "author": None,
            "last_modified": None,
            "private": False,
        }
        self._add("dataset", dataset_id, fields, files)

    def update_space(
        self,
        space_id: str,
        *,
        files: Mapping[str, bytes | str | None] | None = None,
        **fields: object,
    ) -> None:
        """Change a Space; ``files`` merges (a None value deletes that path).

        When the sha changes and no ``last_modified`` is given, ``lastModified`` advances on the logical clock.
        A ``stage`` given here is set like ``set_stage`` does (no error message, boot sequence abandoned).
        """
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise TypeError(f"update_space() got unexpected fields: {sorted(unknown)}")
        with self._lock:
            old = self._get("space", space_id)
            if old is None:
                raise KeyError(space_id)
            new_fields = _remembered(old, dict(old.fields))
            new_fields.update(fields)
            if "tags" in fields:
                new_fields["tags"] = list(cast(Sequence[str], fields["tags"]))
                new_fields["derive"] = False
            if "stage" in fields:
                new_fields["boot"] = ()
                new_fields["error_message"] = None
            if "author" in fields and fields["author"] is None:
                new_fields["author"] = old.id.split("/", 1)[0]
            new_files = dict(old.files)
            for path, content in _encode_files(files).items():
                if content is None:
                    new_files.pop(path, None)
                else:
                    new_files[path] = content
            if old.fields.get("sha") is not None and new_files != old.files:
                # A repo with real commits (created or committed to through the API) gets a new commit.
                new_fields["sha"] = _commit_sha(old.sha, new_files, "update_space", self._clock + 1)
            repo = _build("space", old.id, new_fields, new_files)
            if repo.sha != old.sha and "last_modified" not in fields:
                self._clock += 1
                new_fields["last_modified"] = _iso(self._clock)
                repo = _build("space", old.id, new_fields, new_files)
            self._repos["space"][old.id] = repo

    def remove_space(self, space_id: str) -> None:
        with self._lock:
            repo = self._get("space", space_id)
            if repo is None:
                raise KeyError(space_id)
            self._remove("space", repo)

    def set_stage(self, space_id: str, stage: str, error_message: str | None = None) -> None:
        """Put a Space in ``stage`` now (abandoning any boot sequence), with ``errorMessage`` if given."""
        with self._lock:
            repo = self._require("space", space_id)
            self._rebuild("space", repo, {"stage": stage, "boot": (), "error_message": error_message})

    def set_host(self, space_id: str, url: str | None) -> None:
        """Make the Space's ``host`` (space_info) and runtime domain point at ``url``; None restores hf.space."""
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"host must be an absolute http(s) URL, got {url!r}")
            url = url.rstrip("/")
        with self._lock:
            repo = self._require("space", space_id)
            self._rebuild("space", repo, {"host": url})

    def files(self, repo_id: str, *, repo_type: str = "space") -> dict[str, bytes]:
        """The repo's current files (a copy); KeyError if there is no such repo."""
        with self._lock:
            return dict(self._require(repo_type, repo_id).files)

    def secrets(self, space_id: str) -> dict[str, str]:
        """The Space's secrets with their values (which the HTTP API never returns)."""
        with self._lock:
            entries = self._require("space", space_id).fields.get("secrets") or {}
            return {key: entry["value"] for key, entry in entries.items()}

    def variables(self, space_id: str) -> dict[str, str]:
        with self._lock:
            entries = self._require("space", space_id).fields.get("variables") or {}
            return {key: entry["value"] for key, entry in entries.items()}

    def settings(self, space_id: str) -> SpaceSettings:
        with self._lock:
            repo = self._require("space", space_id)
        fields, props = repo.fields, repo.props
        private = bool(fields["private"])
        visibility = fields.get("visibility")
        if visibility not in ("private", "protected") or not private:
            visibility = "private" if private else "public"
        runtime = props["runtime"]
        return SpaceSettings(
            private=private,
            visibility=str(visibility),
            sdk=str(props["sdk"]),
            hardware=str(runtime["hardware"]["requested"]),
            sleep_time=runtime["gcTimeout"],
            stage=str(runtime["stage"]),
            error_message=runtime.get("errorMessage"),
            host=str(props["host"]),
        )

    # ------------------------------------------------------------------ storage (callers hold self._lock)

    def _add(
        self,
        kind: str,
        repo_id: str,
        fields: dict[str, Any],
        files: Mapping[str, bytes | str] | None,
    ) -> None:
        namespace, sep, name = repo_id.partition("/")
        if not sep or not namespace or not name or "/" in name:
            raise ValueError(f"repo id must be 'namespace/name', got {repo_id!r}")
        encoded = {path: content for path, content in _encode_files(files).items() if content is not None}
        with self._lock:
            self._clock += 1
            fields["created_at"] = _iso(self._clock)
            if fields["last_modified"] is None:
                fields["last_modified"] = fields["created_at"]
            if fields["author"] is None:
                fields["author"] = namespace
            self._insert(kind, _build(kind, repo_id, fields, encoded))

    def _insert(self, kind: str, repo: _Repo) -> None:
        old = self._get(kind, repo.id)
        if old is not None:
            self._remove(kind, old)
        self._repos[kind][repo.id] = repo
        self._lower[kind][repo.id_lower] = repo.id
        bisect.insort(self._ids[kind], repo.id)

    def _remove(self, kind: str, repo: _Repo) -> None:
        del self._repos[kind][repo.id]
        self._lower[kind].pop(repo.id_lower, None)
        ids = self._ids[kind]
        del ids[bisect.bisect_left(ids, repo.id)]

    def _rebuild(
        self, kind: str, repo: _Repo, changes: Mapping[str, Any], files: dict[str, bytes] | None = None
    ) -> _Repo:
        fields = _remembered(repo, {**repo.fields, **changes})
        new = _build(kind, repo.id, fields, repo.files if files is None else files)
        self._repos[kind][repo.id] = new
        return new

    def _get(self, kind: str, repo_id: str) -> _Repo | None:
        repos = self._repos[kind]
        repo = repos.get(repo_id)
        if repo is None:
            canonical = self._lower[kind].get(repo_id.lower())
            repo = repos.get(canonical) if canonical is not None else None
        return repo

    def _require(self, kind: str, repo_id: str) -> _Repo:
        if kind not in self._repos:
            raise ValueError(f"repo_type must be one of {sorted(self._repos)}, got {kind!r}")
        repo = self._get(kind, repo_id)
        if repo is None:
            raise KeyError(repo_id)
        return repo

    def _boot_fields(self) -> dict[str, Any]:
        sequence = list(self.boot_sequence) or ["RUNNING"]
        return self._stage_fields(sequence[0], tuple(sequence[1:]))

    def _stage_fields(self, stage: str, boot: tuple[str, ...]) -> dict[str, Any]:
        message = self.boot_error_message if stage in _ERROR_STAGES else None
        return {"stage": stage, "boot": boot, "error_message": message}

    def _repo_url(self, kind: str, repo_id: str) -> str:
        return f"{self.url}/{_URL_PREFIX[kind]}{repo_id}"

    # ------------------------------------------------------------------ faults and request log

    def fail(self, method: str, path_prefix: str, *faults: Fault) -> None:
        """Queue faults for requests with this method (``"*"`` for any) whose path starts with ``path_prefix``."""
        method = method.upper()
        with self._lock:
            for rule_method, rule_prefix, queue in self._faults:
                if rule_method == method and rule_prefix == path_prefix:
                    queue.extend(faults)
                    return
            self._faults.append((method, path_prefix, deque(faults)))

    def _take_fault(self, method: str, path: str) -> Fault | None:
        if not self._faults:
            return None
        with self._lock:
            for rule_method, rule_prefix, queue in self._faults:
                if queue and rule_method in (method, "*") and path.startswith(rule_prefix):
                    return queue.popleft()
        return None

    def _record(self, request: Request) -> None:
        with self._req_lock:
            self.requests.append(request)

    def count(self, path_prefix: str = "", method: str | None = None) -> int:
        with self._req_lock:
            snapshot = list(self.requests)
        wanted = method.upper() if method is not None else None
        return sum(1 for r in snapshot if r.path.startswith(path_prefix) and (wanted is None or r.method == wanted))

    def clear_requests(self) -> None:
        with self._req_lock:
            self.requests.clear()

    def _track(self, conn: socket.socket, alive: bool) -> None:
        with self._lock:
            if alive:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _user_of(self, headers: Message) -> str | None:
        auth = headers.get("Authorization")
        if not auth:
            return None
        scheme, _, token = auth.partition(" ")
        return self.users.get(token.strip()) if scheme.lower() == "bearer" else None

    def _hidden(self, repo: _Repo, user: str | None) -> _Response | None:
        """How the Hub answers a read of a private repo's files by someone outside its namespace; None for a reader."""
        if not repo.fields["private"] or (user is not None and self._can_write(user, repo.id.split("/", 1)[0])):
            return None
        return _error(401 if user is None else 404, "Repository not found", "RepoNotFound")

    def _can_write(self, user: str, namespace: str) -> bool:
        wanted = namespace.lower()
        return wanted == user.lower() or any(org.lower() == wanted for org in self.orgs.get(user, ()))

    def _log_write(self, user: str, action: str, kind: str, repo_id: str, detail: str = "") -> None:
        self.writes.append(Write(user, action, kind, repo_id, detail))

    # ------------------------------------------------------------------ routing

    def _route(
        self,
        method: str,
        raw_path: str,
        query: dict[str, list[str]],
        user: str | None,
        body: bytes,
    ) -> _Response:
        parts = raw_path.split("/")
        if len(parts) >= 3 and parts[1] == "api":
            rest = parts[2:]
            if method in ("GET", "HEAD"):
                return self._route_read(raw_path, rest, query, user)
            if method == "POST" and rest == ["repos", "create"]:
                return self._create(user, body)
            if method == "DELETE" and rest == ["repos", "delete"]:
                return self._delete(user, body)
            if method == "POST" and rest == ["validate-yaml"]:
                return _Response(200, _VALID_YAML)
            kind = _KINDS.get(rest[0])
            if kind is not None and len(rest) >= 4 and method in ("POST", "DELETE"):
                repo_id = f"{unquote(rest[1])}/{unquote(rest[2])}"
                action, tail = rest[3], [unquote(p) for p in rest[4:]]
                if method == "POST" and action == "preupload" and len(tail) == 1:
                    return self._preupload(kind, repo_id, tail[0], user, body)
                if method == "POST" and action == "commit" and len(tail) == 1:
                    return self._commit(kind, repo_id, tail[0], query, user, body)
                if method == "POST" and action == "duplicate" and not tail:
                    return self._duplicate(kind, repo_id, user, body)
                if kind == "space" and action in _SPACE_ACTIONS and not tail:
                    return self._space_action(method, action, repo_id, user, body)
        elif method in ("GET", "HEAD"):
            if len(parts) >= 7 and parts[1] in ("spaces", "datasets") and parts[4] == "resolve":
                repo_id = f"{unquote(parts[2])}/{unquote(parts[3])}"
                return self._resolve(parts[1][:-1], repo_id, unquote(parts[5]), unquote("/".join(parts[6:])), user)
            if len(parts) >= 6 and parts[3] == "resolve" and parts[1] not in ("spaces", "datasets"):
                repo_id = f"{unquote(parts[1])}/{unquote(parts[2])}"
                return self._resolve("model", repo_id, unquote(parts[4]), unquote("/".join(parts[5:])), user)
        return _error(404, "Not found")

    def _route_read(self, raw_path: str, rest: list[str], query: dict[str, list[str]], user: str | None) -> _Response:
        if rest == ["whoami-v2"]:
            return self._whoami(user)
        if rest == ["agent-harnesses"]:
            return _Response(200, _HARNESSES)
        kind = _KINDS.get(rest[0])
        if kind is not None:
            sub = rest[1:]
            if not sub or sub == [""]:
                return self._list(kind, raw_path, query)
            if len(sub) >= 2:
                repo_id = f"{unquote(sub[0])}/{unquote(sub[1])}"
                tail = sub[2:]
                if not tail or tail == [""]:
                    return self._info(kind, repo_id, None, query, user)
                if len(tail) == 2 and tail[0] == "revision":
                    return self._info(kind, repo_id, unquote(tail[1]), query, user)
                if len(tail) >= 2 and tail[0] == "tree":
                    path = "/".join(unquote(p) for p in tail[2:])
                    return self._tree(kind, repo_id, unquote(tail[1]), path, raw_path, query, user)
                if kind == "space" and tail == ["runtime"]:
                    return self._runtime(repo_id)
                if kind == "space" and tail == ["jwt"]:
                    return self._space_jwt(repo_id, user)
                if kind == "space" and tail in (["secrets"], ["variables"]):
                    return self._space_action("GET", tail[0], repo_id, user, b"")
        return _error(404, "Not found")

    def _whoami(self, user: str | None) -> _Response:
        if user is None:
            return _unauthorized()
        orgs = [
            {
                "type": "org",
                "name": org,
                "fullname": org,
                "avatarUrl": f"https://example.invalid/{org}.png",
                "roleInOrg": "write",
            }
            for org in self.orgs.get(user, ())
        ]
        return _Response(
            200,
            _dumps(
                {
                    "type": "user",
                    "id": hashlib.sha1(f"user:{user}".encode()).hexdigest()[:24],
                    "name": user,
                    "fullname": user[:1].upper() + user[1:],
                    "email": f"{user}@example.invalid",
                    "avatarUrl": f"https://example.invalid/{user}.png",
                    "orgs": orgs,
                    "auth": {"type": "access_token", "accessToken": {"displayName": "fakehub", "role": "write"}},
                }
            ),
        )

    # ------------------------------------------------------------------ reads

    def _list(self, kind: str, raw_path: str, query: dict[str, list[str]]) -> _Response:
        filters = query.get("filter", [])
        author = _last(query, "author")
        author_lower = author.lower() if author else None
        searches = [s.lower() for s in query.get("search", []) if s]
        sort = _last(query, "sort")
        if sort is not None and sort not in _SORT_KEYS[kind]:
            return _error(400, f"Invalid sort parameter: {sort}")
        limit_raw = _last(query, "limit")
        limit: int | None = None
        if limit_raw is not None:
            if not limit_raw.isdigit():
                return _error(400, f"Invalid limit parameter: {limit_raw}")
            limit = int(limit_raw)
        expand = query.get("expand", [])
        if expand:
            properties = SPACE_PROPERTIES if kind == "space" else DATASET_PROPERTIES
            view = tuple(dict.fromkeys(p for p in expand if p in properties))
        elif (_last(query, "full") or "").lower() in ("true", "1"):
            view = _FULL_VIEW
        else:
            view = _DEFAULT_VIEW
        cursor = _last(query, "cursor")
        size = max(self.page_size, 1) if limit is None else min(max(self.page_size, 1), limit)

        def matches(repo: _Repo) -> bool:
            return (
                all(tag in repo.tagset for tag in filters)
                and (author_lower is None or repo.author_lower == author_lower)
                and all(s in repo.id_lower for s in searches)
            )

        page: list[_Repo] = []
        more = False
        with self._lock:
            repos = self._repos[kind]
            ids = self._ids[kind]
            if size == 0:
                pass
            elif sort is None:
                start = bisect.bisect_right(ids, cursor) if cursor else 0
                for index in range(start, len(ids)):
                    repo = repos[ids[index]]
                    if matches(repo):
                        if len(page) == size:
                            more = True
                            break
                        page.append(repo)
                next_cursor = page[-1].id if page else ""
            else:
                ordered = [repos[i] for i in ids if matches(repos[i])]
                # sort() is stable, so ties stay in id order.
                ordered.sort(key=lambda r: r.props[sort], reverse=True)
                offset = int(cursor) if cursor and cursor.isdigit() else 0
                page = ordered[offset : offset + size]
                more = offset + size < len(ordered)
                next_cursor = str(offset + len(page))
            body = b"[" + b",".join(repo.view(view) for repo in page) + b"]"
        headers: _Headers = []
        remaining = None if limit is None else limit - len(page)
        if more and remaining != 0:
            params = [(k, v) for k, values in query.items() if k not in ("cursor", "limit") for v in values]
            if remaining is not None:
                params.append(("limit", str(remaining)))
            params.append(("cursor", next_cursor))
            headers.append(("Link", f'<{self.url}{raw_path}?{urlencode(params)}>; rel="next"'))
        return _Response(200, body, headers)

    def _info(
        self, kind: str, repo_id: str, revision: str | None, query: dict[str, list[str]], user: str | None
    ) -> _Response:
        with self._lock:
            repo = self._get(kind, repo_id)
            if repo is None:
                return _repo_not_found()
            if revision is not None:
                hidden = self._hidden(repo, user)
                if hidden is not None:
                    return hidden
                repo = repo.at(revision)
                if repo is None:
                    return _revision_not_found(revision)
            expand = query.get("expand", [])
            if expand:
                properties = SPACE_PROPERTIES if kind == "space" else DATASET_PROPERTIES
                body = repo.view(tuple(dict.fromkeys(p for p in expand if p in properties)))
            else:
                body = repo.view(_INFO_VIEW)
        return _Response(200, body)

    def _space_jwt(self, repo_id: str, user: str | None) -> _Response:
        """A short-lived token that opens one Space's own host (what the Hub's Space iframes and gradio's client
        use): ``{"token": <JWT>}`` for whoever may read the Space, with its ``sub`` naming the Space."""
        with self._lock:
            repo = self._get("space", repo_id)
            if repo is None:
                return _repo_not_found()
            if user is None:
                return _unauthorized()
            hidden = self._hidden(repo, user)
            if hidden is not None:
                return hidden
            claims = {"sub": f"/spaces/{repo.id}", "onBehalfOf": {"user": user}, "exp": int(time.time()) + 600}
            header = base64.urlsafe_b64encode(b'{"alg":"EdDSA","typ":"JWT"}').rstrip(b"=")
            payload = base64.urlsafe_b64encode(_dumps(claims)).rstrip(b"=")
            signature = base64.urlsafe_b64encode(hashlib.sha256(header + payload).digest()).rstrip(b"=")
            jwt = b".".join((header, payload, signature)).decode()
            self.space_jwts[jwt] = repo.id
        return _Response(200, _dumps({"token": jwt}))

    def _runtime(self, repo_id: str) -> _Response:
        """The runtime as it is now; a Space on its boot sequence then moves one stage on."""
        with self._lock:
            repo = self._get("space", repo_id)
            if repo is None:
                return _repo_not_found()
            body = repo.view(_RUNTIME_VIEW)
            boot: tuple[str, ...] = repo.fields.get("boot") or ()
            if boot:
                self._rebuild("space", repo, self._stage_fields(boot[0], boot[1:]))
        return _Response(200, body)

    def _tree(
        self,
        kind: str,
        repo_id: str,
        revision: str,
        path: str,
        raw_path: str,
        query: dict[str, list[str]],
        user: str | None,
    ) -> _Response:
        with self._lock:
            found = self._get(kind, repo_id)
        if found is None:
            return _repo_not_found()
        hidden = self._hidden(found, user)
        if hidden is not None:
            return hidden
        repo = found.at(revision)
        if repo is None:
            return _revision_not_found(revision)
        prefix = path.strip("/")
        recursive = (_last(query, "recursive") or "").lower() in ("true", "1")
        entries: dict[str, dict[str, Any]] = {}

        def add_folder(folder: str) -> None:
            if folder not in entries:
                oid = hashlib.sha1(f"tree\0{repo.sha}\0{folder}".encode()).hexdigest()
                entries[folder] = {"type": "directory", "oid": oid, "size": 0, "path": folder}

        for file_path, content in repo.files.items():
            if prefix and not file_path.startswith(prefix + "/"):
                continue
            relative = file_path[len(prefix) + 1 :] if prefix else file_path
            segments = relative.split("/")
            base = f"{prefix}/" if prefix else ""
            if not recursive and len(segments) > 1:
                add_folder(base + segments[0])
                continue
            for depth in range(1, len(segments)):
                add_folder(base + "/".join(segments[:depth]))
            entries[file_path] = {"type": "file", "oid": _blob_oid(content), "size": len(content), "path": file_path}
        if prefix and not entries:
            return _error(404, f"{prefix} does not exist on {revision}", "EntryNotFound")
        ordered = [entries[key] for key in sorted(entries)]
        cursor = _last(query, "cursor")
        offset = int(cursor) if cursor and cursor.isdigit() else 0
        size = max(self.page_size, 1)
        page = ordered[offset : offset + size]
        headers: _Headers = []
        if offset + size < len(ordered):
            params = [(k, v) for k, values in query.items() if k != "cursor" for v in values]
            params.append(("cursor", str(offset + size)))
            headers.append(("Link", f'<{self.url}{raw_path}?{urlencode(params)}>; rel="next"'))
        return _Response(200, _dumps(page), headers)

    def _resolve(self, kind: str, repo_id: str, revision: str, path: str, user: str | None) -> _Response:
        with self._lock:
            found = self._get(kind, repo_id)
        if found is None:
            return _repo_not_found()
        hidden = self._hidden(found, user)
        if hidden is not None:
            return hidden
        repo = found.at(revision)
        if repo is None:
            return _revision_not_found(revision)
        commit = ("X-Repo-Commit", repo.sha)
        content = repo.files.get(path)
        if content is None:
            return _error(404, "Entry not found", "EntryNotFound", [commit])
        return _Response(
            200,
            content,
            [commit, ("ETag", f'"{repo.etags[path]}"')],
            "application/octet-stream",
        )

    # ------------------------------------------------------------------ writes

    def _create(self, user: str | None, body: bytes) -> _Response:
        if user is None:
            return _unauthorized()
        payload = _json_object(body)
        if isinstance(payload, _Response):
            return payload
        kind = payload.get("type") or "model"
        if kind not in _URL_PREFIX:
            return _bad_request(f"Invalid repo type: {kind!r}")
        name, organization = payload.get("name"), payload.get("organization")
        namespace = user if organization is None else organization
        if not _valid_name(name) or not _valid_name(namespace):
            return _bad_request(f"Invalid repo name: {namespace!r}/{name!r}")
        repo_id = f"{namespace}/{name}"
        if not self._can_write(user, namespace):
            return _forbidden(user, namespace)
        visibility = _visibility(payload, kind)
        if isinstance(visibility, _Response):
            return visibility
        fields: dict[str, Any] = {
            "tags": [],
            "likes": 0,
            "trending_score": 0,
            "author": namespace,
            "private": visibility not in (None, "public"),
            "visibility": visibility,
            "derive": True,
            "sha": EMPTY_TREE_SHA,
        }
        if kind == "space":
            sdk = payload.get("sdk")
            if sdk not in _SDKS:
                return _bad_request(f"Invalid sdk {sdk!r}: expected one of {sorted(_SDKS)}")
            options = _space_options(payload)
            if isinstance(options, _Response):
                return options
            fields.update(sdk=sdk, **options)
        else:
            fields.update(downloads=0, card_data=None, description=None)
        with self._lock:
            existing = self._get(kind, repo_id)
            if existing is not None:
                url = self._repo_url(kind, existing.id)
                return _Response(409, _dumps({"error": f"You already created this {kind} repo", "url": url}))
            self._clock += 1
            fields["created_at"] = fields["last_modified"] = _iso(self._clock)
            if kind == "space":
                fields.update(self._boot_fields())
            repo = _build(kind, repo_id, fields, {})
            self._insert(kind, repo)
            self._log_write(user, "create", kind, repo_id)
        url = self._repo_url(kind, repo_id)
        return _Response(200, _dumps({"url": url, "name": repo_id, "id": repo.props["_id"]}))

    def _delete(self, user: str | None, body: bytes) -> _Response:
        if user is None:
            return _unauthorized()
        payload = _json_object(body)
        if isinstance(payload, _Response):
            return payload
        kind = payload.get("type") or "model"
        name, organization = payload.get("name"), payload.get("organization")
        namespace = user if organization is None else organization
        if kind not in _URL_PREFIX or not isinstance(name, str) or not isinstance(namespace, str):
            return _bad_request("The body needs name, organization and a valid type")
        if not self._can_write(user, namespace):
            return _forbidden(user, namespace)
        with self._lock:
            repo = self._get(kind, f"{namespace}/{name}")
            if repo is None:
                return _repo_not_found()
            self._remove(kind, repo)
            self._log_write(user, "delete", kind, repo.id)
        return _Response(200, _EMPTY_OBJECT)

    def _duplicate(self, kind: str, from_id: str, user: str | None, body: bytes) -> _Response:
        if user is None:
            return _unauthorized()
        payload = _json_object(body)
        if isinstance(payload, _Response):
            return payload
        target = payload.get("repository")
        namespace, _, name = target.partition("/") if isinstance(target, str) else ("", "", "")
        if not _valid_name(namespace) or not _valid_name(name):
            return _bad_request(f"Invalid target repository: {target!r}")
        visibility = _visibility(payload, kind)
        if isinstance(visibility, _Response):
            return visibility
        options = _space_options(payload) if kind == "space" else {}
        if isinstance(options, _Response):
            return options
        to_id = f"{namespace}/{name}"
        with self._lock:
            source = self._get(kind, from_id)
            if source is None:
                return _repo_not_found()
            if not self._can_write(user, namespace):
                return _forbidden(user, namespace)
            existing = self._get(kind, to_id)
            if existing is not None:
                url = self._repo_url(kind, existing.id)
                return _Response(409, _dumps({"error": f"You already created this {kind} repo", "url": url}))
            self._clock += 1
            stamp = _iso(self._clock)
            private = bool(source.fields["private"]) if visibility is None else visibility != "public"
            fields: dict[str, Any] = {
                key: value
                for key, value in source.fields.items()
                if key not in ("secrets", "variables", "host", "hardware", "sleep_time", "visibility")
            }
            fields.update(
                author=namespace,
                likes=0,
                trending_score=0,
                created_at=stamp,
                last_modified=stamp,
                private=private,
                visibility=visibility,
                sha=source.sha,  # the git history comes along
            )
            if kind == "space":
                fields.update(options)
                fields.update(self._boot_fields())
            else:
                fields["downloads"] = 0
            self._insert(kind, _build(kind, to_id, fields, dict(source.files)))
            self._log_write(user, "duplicate", kind, to_id, source.id)
        return _Response(200, _dumps({"url": self._repo_url(kind, to_id)}))

    def _writable(self, kind: str, repo_id: str, user: str | None) -> _Repo | _Response:
        """The repo if ``user`` may write to it, else the 401/404/403 answer (caller holds the lock)."""
        if user is None:
            return _unauthorized()
        repo = self._get(kind, repo_id)
        if repo is None:
            return _repo_not_found()
        namespace = repo.id.split("/", 1)[0]
        if not self._can_write(user, namespace):
            return _forbidden(user, namespace)
        return repo

    def _preupload(self, kind: str, repo_id: str, revision: str, user: str | None, body: bytes) -> _Response:
        payload = _json_object(body)
        if isinstance(payload, _Response):
            return payload
        files = payload.get("files")
        if not isinstance(files, list) or not all(
            isinstance(f, dict) and isinstance(f.get("path"), str) for f in files
        ):
            return _bad_request('The body needs "files": [{"path", "sample", "size"}, ...]')
        with self._lock:
            repo = self._writable(kind, repo_id, user)
        if isinstance(repo, _Response):
            return repo
        if revision not in ("main", repo.sha):
            return _revision_not_found(revision)
        answer = []
        for item in files:
            content = repo.files.get(item["path"])
            answer.append(
                {
                    "path": item["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": None if content is None else _blob_oid(content),
                }
            )
        return _Response(200, _dumps({"files": answer, "commitOid": repo.sha}))

    def _commit(
        self, kind: str, repo_id: str, revision: str, query: dict[str, list[str]], user: str | None, body: bytes
    ) -> _Response:
        if user is None:
            return _unauthorized()
        if (_last(query, "create_pr") or "").lower() in ("1", "true"):
            return _bad_request("This fake Hub does not support pull requests (create_pr)")
        parsed = _parse_commit(body)
        if isinstance(parsed, _Response):
            return parsed
        header, operations = parsed
        summary = str(header["summary"])
        with self._lock:
            repo = self._writable(kind, repo_id, user)
            if isinstance(repo, _Response):
                return repo
            if revision != "main":
                return _revision_not_found(revision)
            parent = header.get("parentCommit")
            if parent is not None and (
                not isinstance(parent, str) or len(parent) < 5 or not repo.sha.startswith(parent)
            ):
                return _error(412, f"A commit has happened since {parent}. Please refresh and try again.")
            files = dict(repo.files)
            failed = _apply(files, operations)
            if failed is not None:
                return failed
            self._clock += 1
            sha = _commit_sha(repo.sha, files, summary, self._clock)
            self._rebuild(kind, repo, {"sha": sha, "last_modified": _iso(self._clock)}, files)
            self._log_write(user, "commit", kind, repo.id, summary)
            url = f"{self._repo_url(kind, repo.id)}/commit/{sha}"
        return _Response(200, _dumps({"commitUrl": url, "commitOid": sha, "pullRequestUrl": None}))

    def _space_action(self, method: str, action: str, repo_id: str, user: str | None, body: bytes) -> _Response:
        payload = _json_object(body)
        if isinstance(payload, _Response):
            return payload
        with self._lock:
            repo = self._writable("space", repo_id, user)
            if isinstance(repo, _Response):
                return repo
            user = cast(str, user)
            if action in ("secrets", "variables"):
                return self._env_action(method, action, repo, user, payload)
            if method != "POST":
                return _error(405, f"{method} is not allowed on {action}")
            changes: dict[str, Any]
            detail = ""
            if action == "hardware":
                flavor, sleep_time = payload.get("flavor"), payload.get("sleepTimeSeconds")
                if flavor not in _HARDWARE:
                    return _bad_request(f"Invalid hardware flavor: {flavor!r}")
                changes = {"hardware": flavor}
                if sleep_time is not None:
                    if not isinstance(sleep_time, int) or isinstance(sleep_time, bool):
                        return _bad_request("sleepTimeSeconds must be an integer")
                    changes["sleep_time"] = sleep_time
                detail = str(flavor)
            elif action == "sleeptime":
                seconds = payload.get("seconds")
                if not isinstance(seconds, int) or isinstance(seconds, bool):
                    return _bad_request("seconds must be an integer")
                changes = {"sleep_time": seconds}
                detail = str(seconds)
            elif repo.props["sdk"] == "static":
                return _bad_request(f"Static Spaces are always running: they cannot {action}")
            elif action == "pause":
                changes = {"stage": "PAUSED", "boot": (), "error_message": None}
            else:  # restart
                changes = self._boot_fields()
            repo = self._rebuild("space", repo, changes)
            self._log_write(user, action, "space", repo.id, detail)
            return _Response(200, repo.view(_RUNTIME_VIEW))

    def _env_action(self, method: str, action: str, repo: _Repo, user: str, payload: Mapping[str, Any]) -> _Response:
        """GET/POST/DELETE of a Space's secrets or variables; secret values never leave the fake."""
        entries: dict[str, dict[str, str]] = dict(repo.fields.get(action) or {})
        if method == "POST":
            parsed = _env_entry(dict(payload), _now())
            if isinstance(parsed, _Response):
                return parsed
            entries[parsed[0]] = parsed[1]
        elif method == "DELETE":
            key = payload.get("key")
            if not isinstance(key, str):
                return _bad_request("The body needs the key to delete")
            entries.pop(key, None)
        if method in ("POST", "DELETE"):
            repo = self._rebuild("space", repo, {action: entries})
            self._log_write(user, action, "space", repo.id, str(payload.get("key")))
        if action == "secrets":
            if method != "GET":
                return _Response(200, _EMPTY_OBJECT)
            hidden = {key: {k: v for k, v in entry.items() if k != "value"} for key, entry in entries.items()}
            return _Response(200, _dumps(hidden))
        return _Response(200, _dumps(entries))
