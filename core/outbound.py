"""The outbound guard: every URL a user supplies is fetched through it, over HTTP and WebSocket.

A URL must be http(s) without credentials; its host is resolved once and each address
it resolves to is refused when it is loopback, private, link-local, multicast, reserved,
not globally routable or a cloud metadata service (the last always, the others unless
private URLs are allowed). Connections are then pinned to the address that was checked,
with the original Host header and TLS name, so a DNS answer that changes between the
check and the use (rebinding) reaches nothing new. Redirects pass through the same
check, and every response is cut at a size and a time limit.
"""

import asyncio
import functools
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect

from core.errors import RefusedURLError

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Fetched",
    "OutboundGuard",
    "OutboundSession",
    "Resolver",
    "origin",
    "read_capped",
    "refusal_reason",
]

MAX_RESPONSE_BYTES = 1024 * 1024
_MAX_REDIRECTS = 3
_MAX_URL_LENGTH = 2048

# Instance metadata services hand out cloud credentials: never reachable, whatever the settings.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, DigitalOcean, Oracle, OpenStack
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.170.23",  # AWS EKS pod identity
        "168.63.129.16",  # Azure wire server (a public address)
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (legacy)
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity over IPv6
    )
)
METADATA_HOSTNAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.tencentyun.com",
    }
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses it resolves to, as strings
Resolver = Callable[[str, int], Awaitable[list[str]]]


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64), if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal_reason(ip: IPAddress, *, allow_private: bool = False) -> str | None:
    """Why an address may not be fetched, or None when it may."""
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        reason = refusal_reason(embedded, allow_private=allow_private)
        return f"{reason} (inside the IPv6 address {ip})" if reason else None
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if allow_private:
        return None
    checks = (
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a public address"),
    )
    return next((reason for refused, reason in checks if refused), None)


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for host (A and AAAA)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Target:
    """A checked URL: where its host was resolved to, and the parts a connection needs."""

    url: str
    scheme: str
    host: str
    port: int
    address: str


def _default_port(scheme: str) -> int:
    return 443 if scheme in ("https", "wss") else 80


class OutboundGuard:
    """The policy: which URLs may be fetched. `trusted` URL prefixes (envhub's own gateway) skip the address check."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        trusted: Iterable[str] = (),
        resolve_timeout_s: float = 5,
        credentials: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver or system_resolver
        self.trusted = tuple(trusted)
        self.resolve_timeout_s = resolve_timeout_s
        self.credentials = credentials or {}  # trusted prefix -> headers sent under it only (envhub's own gateway)

    def with_trusted(self, *prefixes: str, credentials: dict[str, str] | None = None) -> "OutboundGuard":
        """The guard, trusting these prefixes too; `credentials` are headers sent to URLs under them, and only
        there (a private endpoint's token, to its own gateway path)."""
        scoped = {prefix: credentials for prefix in prefixes} if credentials else {}
        return OutboundGuard(
            allow_private=self.allow_private,
            resolver=self.resolver,
            trusted=(*self.trusted, *prefixes),
            resolve_timeout_s=self.resolve_timeout_s,
            credentials=self.credentials | scoped,
        )

    def credentials_for(self, url: str) -> dict[str, str]:
        """The headers scoped to the trusted prefix the URL is under, if any."""
        return next(
            (h for prefix, h in self.credentials.items() if url == prefix or url.startswith(prefix.rstrip("/") + "/")),
            {},
        )

    def normalize(self, url: str) -> str:
        """The URL as envhub will use it (no trailing slash), or RefusedURLError saying what is wrong with it."""
        url = url.strip()
        if len(url) > _MAX_URL_LENGTH:
            raise RefusedURLError(f"the URL is longer than {_MAX_URL_LENGTH} characters")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (raises on a port that is not a number)
        except ValueError as exc:
            raise RefusedURLError(f"{url[:200]!r} is not a valid URL: {exc}") from exc
        if parts.scheme not in ("http", "https"):
            raise RefusedURLError(f"only http:// and https:// URLs can be checked, not {url[:200]!r}")
        if not parts.hostname:
            raise RefusedURLError(f"{url[:200]!r} has no host")
        if parts.username is not None or parts.password is not None:
            raise RefusedURLError("URLs with a user name or password are not accepted; remove the credentials")
        if parts.fragment:
            url = url.split("#", 1)[0]
        return url.rstrip("/")

    def is_trusted(self, url: str) -> bool:
        return any(url == prefix or url.startswith(prefix.rstrip("/") + "/") for prefix in self.trusted)

    async def resolve(self, url: str) -> Target:
        """Check a URL and pin its host to one address; RefusedURLError when it may not be fetched."""
        url = self.normalize(url)
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".").lower()
        port = parts.port or _default_port(parts.scheme)
        where = f"{host}:{port}"
        if host in METADATA_HOSTNAMES:
            raise RefusedURLError(f"{host} is a cloud metadata service; envhub never fetches it")
        try:
            literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [str(literal)]
        elif self.is_trusted(url):
            # envhub's own URLs need no pin: the connection resolves the name itself, trying every address.
            return Target(url, parts.scheme, host, port, host)
        else:
            try:
                async with asyncio.timeout(self.resolve_timeout_s):
                    addresses = await self.resolver(host, port)
            except (OSError, TimeoutError, UnicodeError) as exc:
                raise RefusedURLError(f"the host {host} could not be resolved: {exc or 'timed out'}") from exc
            if not addresses:
                raise RefusedURLError(f"the host {host} resolves to no address")
        if self.is_trusted(url):
            return Target(url, parts.scheme, host, port, addresses[0])
        for address in addresses:
            try:
                ip = ipaddress.ip_address(address.split("%", 1)[0])
            except ValueError as exc:
                raise RefusedURLError(f"{host} resolved to {address!r}, which is not an IP address") from exc
            reason = refusal_reason(ip, allow_private=self.allow_private)
            if reason is not None:
                subject = where if literal is not None else f"{host} resolves to {ip}, which"
                hint = "" if "metadata" in reason else "; set ENVHUB_ALLOW_PRIVATE_URLS=true to allow such addresses"
                raise RefusedURLError(f"refused {url[:200]}: {subject} is {reason}{hint}")
        return Target(url, parts.scheme, host, port, addresses[0])


@dataclass(frozen=True)
class Fetched:
    """One HTTP exchange, its body cut at the limit."""

    status: int
    headers: httpx.Headers
    body: bytes
    cut: bool
    seconds: float
    url: str

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every connection: building one takes ~20 ms of CPU."""
    return httpx.create_ssl_context()


def _as_http(url: str) -> str:
    """A ws(s) URL as the http(s) one it upgrades from, as trusted prefixes name them."""
    scheme, sep, rest = url.partition("://")
    return {"ws": "http", "wss": "https"}.get(scheme.lower(), scheme) + sep + rest


def origin(url: str) -> tuple[str, str, int]:
    """A URL's scheme, host and port, ws(s) counted as http(s): what credentials are scoped to."""
    parts = urlsplit(url.strip())
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return scheme, (parts.hostname or "").rstrip(".").lower(), parts.port or _default_port(scheme)


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address its host was checked and pinned to."""

    def __init__(self, session: "OutboundSession") -> None:
        self.session = session
        self._inner: dict[tuple[str, str, int], httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = await self.session.pin(str(request.url))
        # One pool per host name, so a connection opened with one TLS name never serves another host.
        key = (target.scheme, target.host, target.port)
        inner = self._inner.get(key)
        if inner is None:
            inner = self._inner[key] = httpx.AsyncHTTPTransport(retries=0, verify=_tls_context())
        extensions = dict(request.extensions)
        if target.scheme == "https":
            extensions["sni_hostname"] = target.host
        headers = request.headers.copy()
        headers.update(self.session.credentials_for(str(request.url)))
        # A new request: the caller's keeps the host name, so redirects resolve against it.
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=target.address),
            headers=headers,
            stream=request.stream,
            extensions=extensions,
        )
        return await inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        for inner in self._inner.values():
            await inner.aclose()


@dataclass
class OutboundSession:
    """The guard applied for one job (a check, a probe): hosts pinned once, responses bounded."""

    guard: OutboundGuard
    timeout_s: float = 10
    max_bytes: int = MAX_RESPONSE_BYTES
    headers: dict[str, str] = field(default_factory=dict)
    # Headers sent to one origin only (a private Space's token to its host), never across a redirect.
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    _pins: dict[tuple[str, int, bool], Target] = field(default_factory=dict)
    _client: httpx.AsyncClient | None = None

    async def pin(self, url: str) -> Target:
        """The checked address of the URL's host: resolved on first use, the same for every later request."""
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port or _default_port(parts.scheme)
        key = (host, port, self.guard.is_trusted(url))
        pinned = self._pins.get(key)
        if pinned is not None:
            return Target(url, parts.scheme, pinned.host, pinned.port, pinned.address)
        target = await self.guard.resolve(url)
        self._pins[key] = target
        return target

    def credentials_for(self, url: str) -> dict[str, str]:
        """The scoped headers for a URL's origin, if any."""
        where = origin(url)
        scoped = next((h for scope, h in self.credentials.items() if origin(scope) == where), {})
        return {**scoped, **self.guard.credentials_for(_as_http(url))}

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self.new_client(self.timeout_s)
        return self._client

    def new_client(self, timeout_s: float) -> httpx.AsyncClient:
        """An HTTP client of this session (its pins, its credentials) whose requests may take `timeout_s`; the
        caller closes it."""
        return httpx.AsyncClient(
            transport=_PinnedTransport(self),
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5)),
            headers={"accept-encoding": "identity", **self.headers},
            follow_redirects=False,
            trust_env=False,  # a proxy would resolve names itself, around the pin
        )

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        content: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
        follow_redirects: bool = True,
        max_bytes: int | None = None,
    ) -> Fetched:
        """One request, redirects followed through the guard, the body read up to max_bytes."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        timeout = self.timeout_s if timeout_s is None else timeout_s
        started = time.perf_counter()
        redirected_from: str | None = None
        async with asyncio.timeout(timeout):
            for _ in range(_MAX_REDIRECTS + 1):
                request = self.client.build_request(
                    method, url, json=json, content=content, headers=headers, timeout=timeout
                )
                try:
                    response = await self.client.send(request, stream=True)
                except RefusedURLError as exc:
                    if redirected_from is None:
                        raise
                    # Nothing was sent there: all the caller learns is the guard's reason.
                    raise RefusedURLError(
                        f"{redirected_from[:200]} redirected to a refused address: {exc.message}"
                    ) from exc
                try:
                    location = response.headers.get("location")
                    if follow_redirects and response.is_redirect and location:
                        redirected_from = url
                        url = str(request.url.join(location).copy_with(fragment=None))
                        if response.status_code in (301, 302, 303) and method != "HEAD":
                            method, json, content = "GET", None, None
                        continue
                    body, cut = await read_capped(response, limit)
                finally:
                    await response.aclose()
                return Fetched(
                    response.status_code,
                    response.headers,
                    body,
                    cut,
                    time.perf_counter() - started,
                    str(request.url),
                )
        raise RefusedURLError(f"more than {_MAX_REDIRECTS} redirects from {url[:200]}")

    async def websocket(self, url: str, *, open_timeout_s: float | None = None, **options: Any) -> ClientConnection:
        """A WebSocket connection to a ws(s):// URL, pinned like HTTP requests."""
        http_url = "http" + url.removeprefix("ws") if url.startswith("ws") else url
        target = await self.pin(http_url)
        settings: dict[str, Any] = {
            "open_timeout": self.timeout_s if open_timeout_s is None else open_timeout_s,
            "max_size": self.max_bytes,
            "ping_interval": None,
            "close_timeout": 1,
            "compression": None,
            **options,
        }
        headers = {**self.headers, **(options.get("additional_headers") or {}), **self.credentials_for(url)}
        settings["additional_headers"] = headers or None
        # Connect to the checked address; the URL keeps the Host header, TLS name and certificate check.
        settings |= {"host": target.address, "port": target.port, "proxy": None}
        if target.scheme == "https":
            settings |= {"server_hostname": target.host, "ssl": _tls_context()}
        return await connect(url, **settings)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most limit bytes of the body; True when there was more."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


LIVE_TIMEOUT_S = 5.0


def live_session(
    guard: OutboundGuard,
    *trusted: str,
    credentials: dict[str, dict[str, str]] | None = None,
    timeout_s: float = LIVE_TIMEOUT_S,
) -> OutboundSession:
    """The outbound session for one live URL (the UI's playground, an evaluation): the trusted prefixes (envhub's
    own gateway) skip the guard, every other URL goes through it (like checks and registration), and every request
    and WebSocket of the session goes to the address the guard checked."""
    return OutboundSession(guard.with_trusted(*trusted), timeout_s=timeout_s, credentials=credentials or {})
