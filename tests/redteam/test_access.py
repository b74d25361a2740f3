"""Who reaches what, attacked over the wire on an envhub with sign-in, by `mallory` against `victim`.

A private endpoint answers only its owner's Hub token or its own token; listings show strangers nothing of an
endpoint's variables, log or servers; a Space's own server never receives the Hub token it was launched with.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.settings import Settings
from tests.checkservers import count_app, serve
from tests.conftest import wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import oauth_settings

VICTIM = {"Authorization": "Bearer hf_victim"}
MALLORY = {"Authorization": "Bearer hf_mallory"}


@pytest.fixture
def public_envhub(settings: Settings, hub: FakeHub, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub as a public deployment runs it: sign-in on, anonymous launch off, private URLs refused."""
    hub.users |= {"hf_victim": "victim", "hf_mallory": "mallory"}
    configured = oauth_settings(
        settings, data_dir=tmp_path / "data", anonymous_launch=False, allow_private_urls=False, space_poll_s=0.05
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.stop()


def launch(envhub: Envhub, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    launched = envhub.http.post("/api/endpoints", json={"environment": "template:count", **body}, headers=headers)
    assert launched.status_code == 201, launched.text
    endpoint_id = launched.json()["id"]
    wait_until(
        lambda: envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=headers).json()["status"] != "starting",
        timeout_s=90,
    )
    endpoint: dict[str, Any] = envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=headers).json()
    assert endpoint["status"] == "running", endpoint["message"]
    return endpoint


def test_a_private_endpoint_answers_only_its_owner(public_envhub: Envhub) -> None:
    endpoint = launch(public_envhub, VICTIM, options={"private": True})
    base = f"/endpoints/{endpoint['id']}"
    token = endpoint["access_token"]
    assert token.startswith("envhub_ep_")

    anonymous = public_envhub.http.get(f"{base}/health")
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "bearer_required")
    assert public_envhub.http.get(f"{base}/health", headers=MALLORY).status_code == 403
    forged = public_envhub.http.get(f"{base}/health", headers={"Authorization": "Bearer envhub_ep_forged"})
    assert forged.status_code == 403
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    assert public_envhub.http.post(f"{base}/mcp", json=create).status_code == 401
    with pytest.raises(ConnectionClosed) as closed, connect(f"{endpoint['url'].replace('http', 'ws')}/ws") as ws:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008

    assert public_envhub.http.get(f"{base}/health", headers=VICTIM).status_code == 200
    for bearer in (VICTIM, {"Authorization": f"Bearer {token}"}):
        with GenericEnvClient(base_url=endpoint["url"], headers=bearer).sync() as env:
            env.reset()
            assert env.step({"add": 10}).done is True

    # Strangers do not find it, nor check it; its owner does.
    listed = [e["id"] for e in public_envhub.http.get("/api/endpoints", headers=MALLORY).json()["data"]]
    assert endpoint["id"] not in listed
    assert endpoint["id"] not in [e["id"] for e in public_envhub.http.get("/api/endpoints").json()["data"]]
    assert public_envhub.http.get(f"/api/endpoints/{endpoint['id']}", headers=MALLORY).status_code == 404
    check = {"endpoint": endpoint["id"]}
    assert public_envhub.http.post("/api/checks", json=check, headers=MALLORY).status_code == 404
    owners_check = public_envhub.http.post("/api/checks", json=check, headers=VICTIM)
    assert owners_check.status_code == 201 and owners_check.json()["conforms"] is True


def test_whoever_the_api_lets_manage_a_private_endpoint_its_url_answers(envhub: Envhub) -> None:
    """Without sign-in anyone manages what nobody launched: the API shows them its token, and the gateway, the MCP
    door and the WebSocket door take their Hub token as they take that token (one rule, core.callers.Access)."""
    endpoint = launch(envhub, {}, options={"private": True})
    alice = {"Authorization": "Bearer hf_test"}
    shown = envhub.http.get(f"/api/endpoints/{endpoint['id']}", headers=alice).json()
    assert shown["access_token"] == endpoint["access_token"] and shown["owner"] is None

    base = f"/endpoints/{endpoint['id']}"
    anonymous = envhub.http.get(f"{base}/health")
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "bearer_required")
    assert envhub.http.get(f"{base}/health", headers=alice).status_code == 200
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    assert envhub.http.post(f"{base}/mcp", json=create, headers=alice).status_code == 200
    with GenericEnvClient(base_url=endpoint["url"], headers=alice).sync() as env:
        env.reset()
        assert env.step({"add": 10}).done is True


def test_strangers_see_nothing_of_an_endpoints_variables_log_or_servers(public_envhub: Envhub) -> None:
    endpoint = launch(public_envhub, VICTIM, options={"env": {"COUNT_START": "secret-ish"}})
    path = f"/api/endpoints/{endpoint['id']}"
    owners = public_envhub.http.get(path, headers=VICTIM).json()
    assert owners["options"]["env"] == {"COUNT_START": "secret-ish"} and owners["log_tail"] and owners["internal_url"]

    for headers, owner in (({}, None), (MALLORY, "victim")):
        for shown in (public_envhub.http.get(path, headers=headers).json(), _listed(public_envhub, headers, path)):
            text = json.dumps(shown)
            assert "secret-ish" not in text and "127.0.0.1:" not in text.replace(public_envhub.url, "")
            assert shown["log_tail"] == [] and shown["internal_url"] is None and shown["owner"] == owner
            assert "env" not in shown["options"]
            assert all(r["internal_url"] is None and r["host"] == "" for r in shown["pool"]["replicas"])


def _listed(envhub: Envhub, headers: dict[str, str], path: str) -> dict[str, Any]:
    endpoint_id = path.rsplit("/", 1)[1]
    listed: list[dict[str, Any]] = envhub.http.get("/api/endpoints", headers=headers).json()["data"]
    [shown] = [e for e in listed if e["id"] == endpoint_id]
    return shown


def recording(app: ASGIApp) -> tuple[ASGIApp, list[dict[str, str]]]:
    """A Space's server that notes every header of every request and handshake it receives."""
    received: list[dict[str, str]] = []

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            received.append({k.decode(): v.decode() for k, v in scope["headers"]} | {":path": scope["path"]})
        await app(scope, receive, send)

    return recorded, received


@pytest.mark.parametrize("private", [False, True])
def test_a_spaces_server_never_receives_the_launchers_hub_token(
    public_envhub: Envhub, hub: FakeHub, private: bool
) -> None:
    app, received = recording(count_app())
    with serve(app) as space:
        hub.boot_sequence = ["BUILDING"]
        options = {"private": private}
        launched = public_envhub.http.post(
            "/api/endpoints",
            json={"environment": "template:count", "backend": "space", "options": options},
            headers=VICTIM,
        )
        assert launched.status_code == 201, launched.text
        endpoint_id = launched.json()["id"]
        wait_until(lambda: "victim/count" in {w.repo_id for w in hub.writes})
        hub.set_host("victim/count", space.url)
        hub.set_stage("victim/count", "RUNNING")
        wait_until(
            lambda: (
                public_envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=VICTIM).json()["status"] == "running"
            ),
            timeout_s=60,
        )
        endpoint = public_envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=VICTIM).json()
        bearer = VICTIM if private else {}
        with GenericEnvClient(base_url=endpoint["url"], headers=bearer).sync() as env:
            env.reset()
            env.step({"add": 10})
        assert httpx.get(f"{endpoint['url']}/health", headers=bearer).status_code == 200
        served = len(received)
        if private:  # nobody else gets through to it, so nothing of theirs reaches it either
            assert httpx.get(f"{endpoint['url']}/health").status_code == 401
            assert httpx.get(f"{endpoint['url']}/health", headers=MALLORY).status_code == 403
            assert len(received) == served

    assert any(r[":path"] == "/ws" for r in received) and any(r[":path"] == "/health" for r in received)
    assert not any("hf_victim" in value for r in received for value in r.values()), "the Hub token reached the Space"
    keys = {r.get("authorization") for r in received}
    if private:  # every request carried the Space's own short-lived key, issued by the Hub for it alone
        assert None not in keys and all(hub.space_jwts.get(k.removeprefix("Bearer ")) == "victim/count" for k in keys)  # type: ignore[union-attr]
    else:
        assert keys == {None}
