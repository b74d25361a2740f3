"""A local fake of the Hugging Face Hub HTTP API, served on 127.0.0.1 for the real huggingface_hub client."""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import re
import socket
import struct
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast
from urllib.parse import parse_qs, unquote, urlencode

import yaml

# The libyaml loader is ~10x faster; adding 10,000 Spaces parses 10,000 READMEs.
_YAML_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

__all__ = ["FakeHub", "Fault", "Request"]

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
_SORT_KEYS: dict[str, frozenset[str]] = {
    "space": frozenset({"likes", "trendingScore", "lastModified", "createdAt"}),
    "dataset": frozenset({"likes", "trendingScore", "lastModified", "createdAt", "downloads"}),
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
_EPOCH = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\r?\n(.*?)^---[ \t]*$", re.DOTALL | re.MULTILINE)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_WHOAMI = json.dumps(
    {
        "type": "user",
        "name": "alice",
        "fullname": "Alice",
        "avatarUrl": "https://example.invalid/a.png",
    }
).encode()
_HARNESSES = b'{"standardEnvVars":[],"harnesses":{}}'
_DEFAULT_VIEW = ("\0default",)
_FULL_VIEW = ("\0full",)
_INFO_VIEW = ("\0info",)

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
    """

    status: int = 0
    retry_after: float | None = None
    hang_s: float = 0.0
    body: bytes | None = None
    reset: bool = False

    def __post_init__(self) -> None:
        if not (self.status or self.hang_s > 0 or self.body is not None or self.reset):
            raise ValueError("a Fault needs one of status, hang_s, body or reset")


@dataclass(frozen=True)
class Request:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, list[str]]


def _iso(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


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


def _subdomain(repo_id: str) -> str:
    return _NON_ALNUM.sub("-", repo_id.lower())


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

    def view(self, keys: tuple[str, ...]) -> bytes:
        """JSON of ``_id``, ``id`` and the given properties; cached since repos are rebuilt on every change."""
        cached = self.cache.get(keys)
        if cached is not None:
            return cached
        props = self.props
        if keys == _INFO_VIEW:
            obj = dict(props)
            if self.kind == "space":
                obj["host"] = f"https://{props['subdomain']}.hf.space"
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
        "tags": list(fields["tags"]),
        "trendingScore": fields["trending_score"],
    }
    card = fields.get("card_data")
    if card is None:
        card = _front_matter(files.get("README.md"))
    if card is not None:
        props["cardData"] = dict(card)
    if kind == "space":
        subdomain = _subdomain(repo_id)
        props["datasets"] = []
        props["models"] = []
        props["sdk"] = fields["sdk"]
        props["subdomain"] = subdomain
        props["runtime"] = {
            "stage": fields["stage"],
            "hardware": {"current": "cpu-basic", "requested": "cpu-basic"},
            "gcTimeout": 172800,
            "domains": [{"domain": f"{subdomain}.hf.space", "stage": "READY"}],
        }
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
        tagset=frozenset(props["tags"]),
        id_lower=repo_id.lower(),
        author_lower=author.lower(),
        cache={},
    )


def _encode_files(
    files: Mapping[str, bytes | str | None] | None,
) -> dict[str, bytes | None]:
    if not files:
        return {}
    return {path: (c.encode() if isinstance(c, str) else c) for path, c in files.items()}


def _last(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values else None


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

    def _drain_body(self) -> None:
        length = self.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) > 0:
            self.rfile.read(int(length))
        elif "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True

    def _handle(self) -> None:
        hub = self.server.hub
        raw_path, _, raw_query = self.path.partition("?")
        self._drain_body()
        query = parse_qs(raw_query, keep_blank_values=True) if raw_query else {}
        path = unquote(raw_path)
        hub._record(Request(self.command, path, query))
        fault = hub._take_fault(self.command, path)
        if fault is not None:
            self._apply_fault(fault)
            return
        self._send(hub._route(self.command, raw_path, query, self.headers))

    def _apply_fault(self, fault: Fault) -> None:
        self.close_connection = fault.reset or fault.hang_s > 0 or self.close_connection
        if fault.reset:
            # Linger 0 and a close without shutdown() make the kernel send RST instead of FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()
            return
        if fault.hang_s > 0:
            self.server.hub._stopping.wait(fault.hang_s)
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
    """A real HTTP server on 127.0.0.1 that answers like the Hugging Face Hub for Spaces and datasets."""

    def __init__(self, *, page_size: int = 1000) -> None:
        self.url: str = ""
        self.page_size: int = page_size
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._req_lock = threading.Lock()
        self._repos: dict[str, dict[str, _Repo]] = {"space": {}, "dataset": {}}
        self._lower: dict[str, dict[str, str]] = {"space": {}, "dataset": {}}
        self._ids: dict[str, list[str]] = {"space": [], "dataset": []}
        self._faults: list[tuple[str, str, deque[Fault]]] = []
        self._clock = 0
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

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

    def add_space(
        self,
        space_id: str,
        *,
        files: Mapping[str, bytes | str] | None = None,
        tags: Sequence[str] = ("openenv",),
        likes: int = 0,
        trending_score: float = 0.0,
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
            "trending_score": 0.0,
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
        """
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise TypeError(f"update_space() got unexpected fields: {sorted(unknown)}")
        with self._lock:
            old = self._get("space", space_id)
            if old is None:
                raise KeyError(space_id)
            new_fields = dict(old.fields)
            new_fields.update(fields)
            if "tags" in fields:
                new_fields["tags"] = list(cast(Sequence[str], fields["tags"]))
            if "author" in fields and fields["author"] is None:
                new_fields["author"] = old.id.split("/", 1)[0]
            new_files = dict(old.files)
            for path, content in _encode_files(files).items():
                if content is None:
                    new_files.pop(path, None)
                else:
                    new_files[path] = content
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
            del self._repos["space"][repo.id]
            del self._lower["space"][repo.id_lower]
            ids = self._ids["space"]
            del ids[bisect.bisect_left(ids, repo.id)]

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
            repo = _build(kind, repo_id, fields, encoded)
            old = self._get(kind, repo_id)
            if old is not None:
                del self._repos[kind][old.id]
                ids = self._ids[kind]
                del ids[bisect.bisect_left(ids, old.id)]
            self._repos[kind][repo_id] = repo
            self._lower[kind][repo.id_lower] = repo_id
            bisect.insort(self._ids[kind], repo_id)

    def _get(self, kind: str, repo_id: str) -> _Repo | None:
        repos = self._repos[kind]
        repo = repos.get(repo_id)
        if repo is None:
            canonical = self._lower[kind].get(repo_id.lower())
            repo = repos.get(canonical) if canonical is not None else None
        return repo

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

    def _route(self, method: str, raw_path: str, query: dict[str, list[str]], headers: Message) -> _Response:
        if method not in ("GET", "HEAD"):
            return _error(404, "Not found")
        parts = raw_path.split("/")
        if len(parts) >= 3 and parts[1] == "api":
            rest = parts[2:]
            if rest == ["whoami-v2"]:
                auth = headers.get("Authorization", "")
                if auth.startswith("Bearer ") and auth[7:].strip():
                    return _Response(200, _WHOAMI)
                return _error(401, "Invalid credentials in Authorization header")
            if rest == ["agent-harnesses"]:
                return _Response(200, _HARNESSES)
            if rest[0] in ("spaces", "datasets"):
                kind = rest[0][:-1]
                sub = rest[1:]
                if not sub or sub == [""]:
                    return self._list(kind, raw_path, query)
                if len(sub) >= 2:
                    repo_id = f"{unquote(sub[0])}/{unquote(sub[1])}"
                    tail = sub[2:]
                    if not tail or tail == [""]:
                        return self._info(kind, repo_id, None, query)
                    if len(tail) == 2 and tail[0] == "revision":
                        return self._info(kind, repo_id, unquote(tail[1]), query)
                    if kind == "space" and tail == ["runtime"]:
                        return self._runtime(repo_id)
        elif len(parts) >= 7 and parts[1] in ("spaces", "datasets") and parts[4] == "resolve":
            repo_id = f"{unquote(parts[2])}/{unquote(parts[3])}"
            return self._resolve(parts[1][:-1], repo_id, unquote(parts[5]), unquote("/".join(parts[6:])))
        return _error(404, "Not found")

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

    def _info(self, kind: str, repo_id: str, revision: str | None, query: dict[str, list[str]]) -> _Response:
        with self._lock:
            repo = self._get(kind, repo_id)
            if repo is None:
                return _error(404, "Repository not found", "RepoNotFound")
            if revision is not None and revision not in ("main", repo.sha):
                return _error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
            expand = query.get("expand", [])
            if expand:
                properties = SPACE_PROPERTIES if kind == "space" else DATASET_PROPERTIES
                body = repo.view(tuple(dict.fromkeys(p for p in expand if p in properties)))
            else:
                body = repo.view(_INFO_VIEW)
        return _Response(200, body)

    def _runtime(self, repo_id: str) -> _Response:
        with self._lock:
            repo = self._get("space", repo_id)
            if repo is None:
                return _error(404, "Repository not found", "RepoNotFound")
            body = repo.cache.get(("\0runtime",))
            if body is None:
                body = repo.cache[("\0runtime",)] = _dumps(repo.props["runtime"])
        return _Response(200, body)

    def _resolve(self, kind: str, repo_id: str, revision: str, path: str) -> _Response:
        with self._lock:
            repo = self._get(kind, repo_id)
        if repo is None:
            return _error(404, "Repository not found", "RepoNotFound")
        if revision not in ("main", repo.sha):
            return _error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
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
