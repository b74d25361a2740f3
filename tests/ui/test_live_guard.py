"""The playground and the environment page reach live URLs only through the outbound guard,
at the address it checked; envhub's own endpoints are trusted."""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import pytest
from sqlalchemy import Engine
from sqlmodel import Session
from starlette.requests import Request

from app.services import Services
from app.settings import Settings
from app.ui.live import Live, outbound_refusal
from app.ui.requests import Visitors
from app.usecases.play import PlaySessions
from catalog.hub import HubClient
from catalog.models import Environment, EnvironmentDetail, Source
from catalog.sync import Syncer
from core.leases import Leases
from core.outbound import OutboundGuard, Resolver, live_session
from envclient.interface import Interface, read_interface
from hosting.assembly import build_hosting
from hosting.limits import EndpointLimits
from hosting.monitor import HealthMonitor
from tests import checkservers
from tests.checkservers import authorizations, counting, serve
from tests.conftest import space_files
from tests.fakehub import FakeHub
from tests.serving import Envhub, free_port

OWN = "http://envhub.test/endpoints/"


def refusal(url: str, *, allow_private: bool = False) -> str | None:
    async def ask() -> str | None:
        outbound = live_session(OutboundGuard(allow_private=allow_private), OWN)
        try:
            return await outbound_refusal(outbound, url)
        finally:
            await outbound.aclose()

    return asyncio.run(ask())


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000 is a loopback address; set ENVHUB_ALLOW_PRIVATE_URLS=true"),
        ("http://10.0.0.7", "10.0.0.7:80 is a private address; set ENVHUB_ALLOW_PRIVATE_URLS=true"),
        ("http://169.254.169.254/latest", "169.254.169.254:80 is a cloud metadata address"),
        ("http://[::1]:8000", "::1:8000 is a loopback address"),
        ("file:///etc", "only http:// and https:// URLs can be checked"),
    ],
)
def test_private_and_metadata_addresses_are_refused(url: str, why: str) -> None:
    assert why in (refusal(url) or "")


def test_envhubs_own_endpoints_and_public_hosts_are_allowed() -> None:
    assert refusal(OWN + "3f9c1a2b7d") is None  # envhub.test resolves nowhere: its own URLs are not looked up
    assert refusal("https://93.184.216.34") is None


def test_local_development_may_allow_private_addresses() -> None:
    assert refusal("http://127.0.0.1:8000", allow_private=True) is None
    assert refusal("http://169.254.169.254", allow_private=True) is not None  # metadata: never


# -- DNS rebinding: the name answers one address when checked, another afterwards


@dataclass
class Rebinding:
    """Two servers on one port: the one at the checked address, and a decoy where the name points later."""

    url: str
    checked: list[str]
    decoy: list[str]
    lookups: list[str]
    resolver: Resolver


@pytest.fixture
def rebinding() -> Iterator[Rebinding]:
    port = free_port()
    checked_app, checked = counting(checkservers.count_app())
    decoy_app, decoy = counting(checkservers.count_app())
    lookups: list[str] = []

    async def resolve(host: str, _port: int) -> list[str]:
        # The first answer stands for the public address the guard checks; every later one is
        # loopback, as the system resolver also says for "localhost" to any client that asks it.
        lookups.append(host)
        return ["127.0.0.2"] if len(lookups) == 1 else ["127.0.0.1"]

    with serve(decoy_app, port=port), serve(checked_app, port=port, host="127.0.0.2"):
        yield Rebinding(f"http://localhost:{port}", checked, decoy, lookups, resolve)


def test_the_probe_reaches_only_the_checked_address(rebinding: Rebinding) -> None:
    async def run() -> Interface:
        outbound = live_session(OutboundGuard(allow_private=True, resolver=rebinding.resolver), OWN)
        try:
            assert await outbound_refusal(outbound, rebinding.url) is None
            return await read_interface(rebinding.url, outbound)
        finally:
            await outbound.aclose()

    info = asyncio.run(run())
    assert info.schema is not None and "action" in info.schema, info.problems
    assert "/schema" in rebinding.checked and "/mcp" in rebinding.checked
    assert rebinding.decoy == []
    assert rebinding.lookups == ["localhost"]


def test_a_play_session_reaches_only_the_checked_address(rebinding: Rebinding) -> None:
    sessions = PlaySessions()

    async def play() -> tuple[dict[str, object], dict[str, object]]:
        outbound = live_session(OutboundGuard(allow_private=True, resolver=rebinding.resolver), OWN)
        assert await outbound_refusal(outbound, rebinding.url) is None
        info = await read_interface(rebinding.url, outbound)
        session = await sessions.open("tab", "alice/count", rebinding.url, info, outbound)
        try:
            first = await session.reset({})
            await session._drop_client()  # as after a lost socket: the next step connects again
            second = await session.step({"add": 4})
            return first.observation, second.observation
        finally:
            await sessions.close_all()

    first, second = asyncio.run(play())
    assert first["total"] == 0 and second["total"] == 4
    assert rebinding.checked.count("/ws") == 2
    assert rebinding.decoy == []
    assert rebinding.lookups == ["localhost"]


# -- envhub's own gateway: trusted, and a session through it works end to end


def test_a_play_session_through_envhubs_gateway(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.launch(count_template)
    assert envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=120)["status"] == "running"
    own = f"{envhub.url}/endpoints/"
    url = own + endpoint["id"]
    sessions = PlaySessions()

    async def play() -> tuple[Interface, list[dict[str, object]]]:
        outbound = live_session(OutboundGuard(), own)  # the hosted configuration: loopback refused, except here
        assert await outbound_refusal(outbound, "http://127.0.0.1:1") is not None
        assert await outbound_refusal(outbound, url) is None
        info = await read_interface(url, outbound)
        session = await sessions.open("tab", count_template, url, info, outbound)
        try:
            outcomes = [await session.reset({"seed": 1}), await session.step({"add": 3})]
            return info, [o.observation for o in outcomes]
        finally:
            await sessions.close_all()

    info, observations = asyncio.run(play())
    assert info.schema is not None and info.problems == []
    assert [o.get("total") for o in observations] == [0, 3]


# -- a private Hub Space: its host gets a short-lived key of its own, and nothing else gets anything

SPACE = "alice/count"
TOKEN = "hf_test_secret"


async def loopback_dns(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def test_a_private_space_is_probed_and_played_with_a_key_of_its_own_at_its_host(
    engine: Engine, hub: FakeHub, tmp_path: Path
) -> None:
    hub.users[TOKEN] = SPACE.split("/")[0]
    hub.add_space(SPACE, files=space_files("Count"), private=True)
    Syncer(engine, HubClient(hub.url), workers=2).run()
    with Session(engine) as db:
        db.add(Environment(id="url:count", source=Source.URL, title="count", host="https://bob-count.hf.space"))
        db.commit()
    guard = OutboundGuard(allow_private=True, resolver=loopback_dns)
    leases = Leases(engine)
    endpoints = build_hosting(engine, {}, tmp_path / "endpoints", EndpointLimits(), leases).endpoints
    monitor = HealthMonitor(engine, HubClient(hub.url), endpoints, leases, guard, hub_token=TOKEN)
    app, seen = authorizations(checkservers.count_app())
    sessions = PlaySessions()

    async def run(space: str, other: str) -> None:
        assert await monitor.spaces.space_credentials("url:count") == {}  # registered by URL: not a Hub Space
        outbound = live_session(guard, OWN, credentials=await monitor.spaces.space_credentials(SPACE))
        info = await read_interface(space, outbound)
        assert info.schema is not None, info.problems
        await read_interface(other, outbound)
        session = await sessions.open("tab", SPACE, space, info, outbound)
        try:
            await session.reset({})
        finally:
            await sessions.close_all()

    with serve(app) as served:
        space_host, other_host = f"alice-count.hf.space:{served.port}", f"other.test:{served.port}"
        hub.set_host(SPACE, f"http://{space_host}")
        asyncio.run(run(f"http://{space_host}", f"http://{other_host}"))
    # The Space's host gets its own key, issued by the Hub; the Hub token reaches no Space, nor any other host.
    keys = {auth for host, _, auth in seen if host == space_host}
    assert len(keys) == 1 and hub.space_jwts[next(iter(keys)).removeprefix("Bearer ")] == SPACE  # type: ignore[union-attr]
    assert {auth for host, _, auth in seen if host == other_host} == {None}
    assert all(TOKEN not in (auth or "") for _, _, auth in seen)
    assert any(host == space_host and path == "/ws" for host, path, _ in seen)


def test_envhub_reaches_its_own_endpoints_at_its_own_address_whatever_the_host_header(
    settings: Settings, engine: Engine, hub: FakeHub, tmp_path: Path
) -> None:
    services = Services.build(settings, runtimes={})
    visitors = Visitors(services.identities, settings)
    live = Live(services.endpoints, visitors, services.monitor.spaces, services.guard)
    scope = {
        "type": "http",
        "scheme": "http",
        "server": ("127.0.0.1", 7860),
        "path": "/",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"169.254.169.254")],  # forged
    }
    request = gr.Request(request=Request(scope))
    shown = visitors.endpoint_url(request, "abc")
    assert shown == "http://169.254.169.254/endpoints/abc"  # what the page shows, from the Host header
    assert live.connection_url(shown, request) == "http://127.0.0.1:7860/endpoints/abc"
    assert live.connection_url("https://alice-count.hf.space", request) == "https://alice-count.hf.space"

    async def refusals() -> tuple[str | None, str | None]:
        environment = EnvironmentDetail(id="template:count", source=Source.TEMPLATE, title="Count")
        outbound = await live.outbound_for(environment, request)
        try:
            return await outbound_refusal(outbound, shown), await outbound_refusal(
                outbound, live.connection_url(shown, request)
            )
        finally:
            await outbound.aclose()

    forged, own = asyncio.run(refusals())
    assert forged is not None and "metadata" in forged
    assert own is None
