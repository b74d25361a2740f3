"""The outbound guard: which URLs envhub fetches, pinned to the address that was checked."""

import asyncio
import ipaddress
import time
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from core.errors import RefusedURLError
from core.outbound import OutboundGuard, OutboundSession, refusal_reason
from tests.checkservers import Served, serve


def fake_dns(table: dict[str, list[str]], calls: list[str] | None = None) -> object:
    """A resolver seam: names resolve from the table, as a DNS server answering the test would."""

    async def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return table[host]

    return resolve


def refused(guard: OutboundGuard, url: str) -> str:
    with pytest.raises(RefusedURLError) as caught:
        asyncio.run(guard.resolve(url))
    assert caught.value.status_code == 422
    return caught.value.message


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("[::1]", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("[fd12:3456::1]", "private"),
        ("169.254.1.1", "link-local"),
        ("[fe80::1]", "link-local"),
        ("224.0.0.1", "multicast"),
        ("[ff02::1]", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "not a public address"),
        ("169.254.169.254", "cloud metadata"),
        ("[fd00:ec2::254]", "cloud metadata"),
        ("168.63.129.16", "cloud metadata"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[64:ff9b::a00:1]", "private"),
        ("[2002:c0a8:101::1]", "private"),
    ],
)
def test_each_refused_address_class(address: str, reason: str) -> None:
    message = refused(OutboundGuard(), f"http://{address}:8000/")
    assert reason in message


def test_public_addresses_are_allowed() -> None:
    guard = OutboundGuard(resolver=fake_dns({"env.example.org": ["93.184.215.14", "2606:2800:21f:cb07::1"]}))  # type: ignore[arg-type]
    target = asyncio.run(guard.resolve("https://env.example.org/space/"))
    assert (target.url, target.host, target.port, target.address) == (
        "https://env.example.org/space",
        "env.example.org",
        443,
        "93.184.215.14",
    )
    assert asyncio.run(OutboundGuard().resolve("http://8.8.8.8")).address == "8.8.8.8"


def test_names_that_resolve_to_private_addresses_are_refused() -> None:
    guard = OutboundGuard(
        resolver=fake_dns(  # type: ignore[arg-type]
            {"internal.example.org": ["10.0.0.5"], "mixed.example.org": ["93.184.215.14", "127.0.0.1"]}
        )
    )
    assert "internal.example.org resolves to 10.0.0.5, which is a private address" in refused(
        guard, "http://internal.example.org/"
    )
    # one bad answer among good ones is enough: the connection could land on any of them
    assert "loopback" in refused(guard, "http://mixed.example.org/")
    assert "could not be resolved" in refused(guard, "http://nowhere.example.org/")
    # the real resolver: localhost is loopback
    assert "localhost resolves to" in refused(OutboundGuard(), "http://localhost:8000/")


def test_metadata_names_are_refused_before_any_lookup() -> None:
    calls: list[str] = []
    guard = OutboundGuard(allow_private=True, resolver=fake_dns({}, calls))  # type: ignore[arg-type]
    assert "cloud metadata" in refused(guard, "http://metadata.google.internal/computeMetadata/v1/")
    assert "cloud metadata" in refused(guard, "http://169.254.169.254/latest/meta-data/")
    assert calls == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.org/", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("javascript:alert(1)", "only http:// and https://"),
        ("http:///nohost", "has no host"),
        ("http://user:secret@example.org/", "user name or password"),
        ("http://example.org:99999/", "not a valid URL"),
        ("http://" + "a" * 3000 + ".org/", "longer than"),
    ],
)
def test_urls_that_are_not_http_are_refused(url: str, why: str) -> None:
    assert why in refused(OutboundGuard(allow_private=True), url)


def test_private_urls_can_be_allowed_for_local_use() -> None:
    guard = OutboundGuard(allow_private=True)
    assert asyncio.run(guard.resolve("http://127.0.0.1:8000")).address == "127.0.0.1"
    assert "ENVHUB_ALLOW_PRIVATE_URLS" in refused(OutboundGuard(), "http://127.0.0.1:8000")


def test_refusal_reason_is_none_for_global_addresses() -> None:
    assert refusal_reason(ipaddress.ip_address("1.1.1.1")) is None
    assert refusal_reason(ipaddress.ip_address("2606:4700:4700::1111")) is None


# -- fetching through the guard


async def _echo_host(request: Request) -> JSONResponse:
    return JSONResponse({"host": request.headers["host"], "path": request.url.path})


async def _auth(request: Request) -> JSONResponse:
    return JSONResponse({"host": request.headers["host"], "authorization": request.headers.get("authorization")})


async def _redirect(request: Request) -> RedirectResponse:
    return RedirectResponse(request.query_params["to"], status_code=307)


async def _huge(_: Request) -> StreamingResponse:
    async def chunks() -> object:
        for _ in range(800):  # 50 MB
            yield b"x" * 65536

    return StreamingResponse(chunks())  # type: ignore[arg-type]


async def _slow(_: Request) -> StreamingResponse:
    async def chunks() -> object:
        while True:
            yield b"."
            await asyncio.sleep(0.2)

    return StreamingResponse(chunks())  # type: ignore[arg-type]


async def _ws_host(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text(websocket.headers["host"])
    await websocket.close()


async def _ws_auth(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text(websocket.headers.get("authorization", "none"))
    await websocket.close()


@pytest.fixture
def site() -> Iterator[Served]:
    app = Starlette(
        routes=[
            Route("/host", _echo_host),
            Route("/auth", _auth),
            Route("/redirect", _redirect),
            Route("/huge", _huge),
            Route("/slow", _slow),
            WebSocketRoute("/ws", _ws_host),
            WebSocketRoute("/ws-auth", _ws_auth),
        ]
    )
    with serve(app) as served:
        yield served


def test_requests_are_pinned_to_the_first_answer(site: Served) -> None:
    calls: list[str] = []
    table = {"env.test": ["127.0.0.1"]}
    session = OutboundSession(OutboundGuard(allow_private=True, resolver=fake_dns(table, calls)))  # type: ignore[arg-type]

    async def twice() -> list[dict[str, str]]:
        first = await session.fetch("GET", f"http://env.test:{site.port}/host")
        table["env.test"] = ["10.255.255.1"]  # the name now points elsewhere (DNS rebinding)
        second = await session.fetch("GET", f"http://env.test:{site.port}/host")
        await session.aclose()
        return [__import__("json").loads(f.body) for f in (first, second)]

    answers = asyncio.run(twice())
    assert answers == [{"host": f"env.test:{site.port}", "path": "/host"}] * 2
    assert calls == ["env.test"]


def test_websockets_are_pinned_and_keep_the_host_name(site: Served) -> None:
    session = OutboundSession(OutboundGuard(allow_private=True, resolver=fake_dns({"env.test": ["127.0.0.1"]})))  # type: ignore[arg-type]

    async def host_seen() -> str:
        socket = await session.websocket(f"ws://env.test:{site.port}/ws")
        seen = await socket.recv()
        await socket.close()
        return str(seen)

    assert asyncio.run(host_seen()) == f"env.test:{site.port}"


def test_a_redirect_to_a_private_address_is_refused(site: Served) -> None:
    # The site itself is trusted (as envhub's own gateway is); where it redirects to is checked again.
    guard = OutboundGuard(trusted=[site.url])
    session = OutboundSession(guard)

    async def follow(to: str) -> object:
        try:
            return await session.fetch("GET", f"{site.url}/redirect?to={to}")
        finally:
            await session.aclose()

    for target in ("http://127.0.0.1:1/secret", "http://10.0.0.1/", "http://169.254.169.254/latest/", "/host"):
        with pytest.raises(RefusedURLError) as caught:
            asyncio.run(follow(target if target != "/host" else f"http://localhost:{site.port}/host"))
        assert "refused" in caught.value.message


def test_redirects_within_a_trusted_prefix_are_followed(site: Served) -> None:
    session = OutboundSession(OutboundGuard(trusted=[site.url]))

    async def follow() -> bytes:
        fetched = await session.fetch("GET", f"{site.url}/redirect?to=/host")
        await session.aclose()
        return fetched.body

    assert b'"path":"/host"' in asyncio.run(follow())


def test_responses_are_cut_at_the_size_limit(site: Served) -> None:
    session = OutboundSession(OutboundGuard(allow_private=True))

    async def fetch() -> tuple[int, bool]:
        fetched = await session.fetch("GET", f"{site.url}/huge")
        await session.aclose()
        return len(fetched.body), fetched.cut

    started = time.monotonic()
    assert asyncio.run(fetch()) == (1024 * 1024, True)
    assert time.monotonic() - started < 5


def test_a_trickling_response_is_cut_at_the_time_limit(site: Served) -> None:
    session = OutboundSession(OutboundGuard(allow_private=True), timeout_s=1)

    async def fetch() -> None:
        try:
            await session.fetch("GET", f"{site.url}/slow")
        finally:
            await session.aclose()

    started = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(fetch())
    assert time.monotonic() - started < 3


def test_a_check_resolves_its_host_once(site: Served) -> None:
    from conformance import check_url

    calls: list[str] = []
    guard = OutboundGuard(allow_private=True, resolver=fake_dns({"env.test": ["127.0.0.1"]}, calls))  # type: ignore[arg-type]
    report = asyncio.run(check_url(f"http://env.test:{site.port}", guard, timeout_s=2, deadline_s=5))
    assert report.target == f"http://env.test:{site.port}"
    assert calls == ["env.test"]


def test_credentials_go_to_their_origin_only(site: Served) -> None:
    dns = fake_dns({"space.test": ["127.0.0.1"], "elsewhere.test": ["127.0.0.1"]})
    space = f"http://space.test:{site.port}"
    session = OutboundSession(
        OutboundGuard(allow_private=True, resolver=dns),  # type: ignore[arg-type]
        credentials={space: {"Authorization": "Bearer secret"}},
    )

    async def seen() -> list[object]:
        try:
            direct = await session.fetch("GET", f"{space}/auth")
            redirected = await session.fetch("GET", f"{space}/redirect?to=http://elsewhere.test:{site.port}/auth")
            other = await session.fetch("GET", f"http://elsewhere.test:{site.port}/auth")
            socket = await session.websocket(f"ws://space.test:{site.port}/ws-auth")
            on_socket = await socket.recv()
            await socket.close()
            other_socket = await session.websocket(f"ws://elsewhere.test:{site.port}/ws-auth")
            on_other_socket = await other_socket.recv()
            await other_socket.close()
        finally:
            await session.aclose()
        answers = [__import__("json").loads(f.body) for f in (direct, redirected, other)]
        return [a["authorization"] for a in answers] + [on_socket, on_other_socket]

    assert asyncio.run(seen()) == ["Bearer secret", None, None, "Bearer secret", "none"]
