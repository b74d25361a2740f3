"""The gateway at /endpoints/{id}: what it passes on to an environment's server, and what it keeps inside."""

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.sync.client import connect
from websockets.uri import parse_uri

from app.settings import Settings
from tests.clock import ManualTimers
from tests.environments import write_echo_env
from tests.serving import Envhub


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Envhub, dict[str, Any]]]:
    """envhub with the echo server launched: (envhub, its endpoint)."""
    scratch = tmp_path_factory.mktemp("gateway")
    write_echo_env(scratch / "templates" / "echo")
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=scratch / "templates",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
    )
    envhub = Envhub(settings)
    try:
        yield envhub, envhub.running("template:echo")
    finally:
        envhub.stop()


def raw_get(envhub: Envhub, path: str) -> tuple[int, bytes]:
    """A GET with the path exactly as written: HTTP clients resolve dot segments before sending, attackers do not."""
    with socket.create_connection(("127.0.0.1", envhub.port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_envhubs_credentials_stay_out_of_forwarded_requests(echo: tuple[Envhub, dict[str, Any]]) -> None:
    envhub, endpoint = echo
    sent = {
        "Authorization": "Bearer hf_secret",
        "Cookie": "envhub_session=abc",
        "X-CSRF-Token": "the-csrf-token",
        "X-Trace": "kept",
    }
    seen = envhub.http.get(f"/endpoints/{endpoint['id']}/headers", headers=sent).json()
    assert seen["x-trace"] == "kept"
    assert not {"authorization", "cookie", "x-csrf-token"} & set(seen), seen
    assert seen["x-forwarded-prefix"] == f"/endpoints/{endpoint['id']}"


@pytest.mark.parametrize(
    ("to", "kept"),
    [
        ("/web/", "/endpoints/{id}/web/"),
        ("{upstream}/web/?tab=1", "/endpoints/{id}/web/?tab=1"),  # the server's own origin becomes a path
        ("/endpoints/{id}/web/", "/endpoints/{id}/web/"),  # a server that knows its root path says it already
        ("web/", "/endpoints/{id}/web/"),  # relative to /endpoints/{id}/go
    ],
)
def test_redirects_stay_inside_the_endpoint(echo: tuple[Envhub, dict[str, Any]], to: str, kept: str) -> None:
    envhub, endpoint = echo
    target = to.format(id=endpoint["id"], upstream=endpoint["internal_url"])
    answer = envhub.http.get(f"/endpoints/{endpoint['id']}/go", params={"to": target})
    assert answer.status_code == 307
    assert answer.headers["location"] == kept.format(id=endpoint["id"])


@pytest.mark.parametrize(
    "to", ["https://elsewhere.example/login", "//elsewhere.example/x", "/endpoints/{id}/../../api/me", "../../api/me"]
)
def test_a_redirect_out_of_the_endpoint_is_refused(echo: tuple[Envhub, dict[str, Any]], to: str) -> None:
    envhub, endpoint = echo
    answer = envhub.http.get(f"/endpoints/{endpoint['id']}/go", params={"to": to.format(id=endpoint["id"])})
    assert answer.status_code == 502
    assert "location" not in answer.headers
    assert answer.json()["code"] == "redirect_outside"


def test_dot_segments_never_leave_the_endpoint(echo: tuple[Envhub, dict[str, Any]]) -> None:
    envhub, endpoint = echo
    base = f"/endpoints/{endpoint['id']}"
    for escaping in (f"{base}/../../api/me", f"{base}/%2e%2e/%2e%2e/api/me", f"{base}/a/../../../api/me"):
        status, body = raw_get(envhub, escaping)
        assert status == 400, (escaping, body)
        assert b"leaves endpoint" in body
    status, body = raw_get(envhub, f"{base}/a/b/../../health")  # resolved within the endpoint
    assert status == 200 and b'{"status":"healthy"}' in body
    status, body = raw_get(envhub, f"{base}/a/./b")
    assert status == 200 and b'{"path":"a/b"}' in body


def test_websocket_messages_pass_through_the_relay_whole(echo: tuple[Envhub, dict[str, Any]]) -> None:
    """Once a replica takes a session, the gateway passes its bytes on as they come: every kind of message arrives
    as sent, however it is cut into frames and chunks."""
    envhub, endpoint = echo
    url = f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/echo"
    big = os.urandom(5 * 1024 * 1024)  # many TCP chunks, each passed on before the frame is whole
    with connect(url, max_size=None) as ws:
        for message in ("hello", "héllo wörld ✓", b"\x00\x01\x02", big, "x" * 70_000):
            ws.send(message)
            assert ws.recv() == message
        ws.send(["in ", "three ", "fragments"])
        assert ws.recv() == "in three fragments"
        assert ws.ping(b"are you there").wait(timeout=10)  # a client's ping goes through and is answered
        ws.send("still here")
        assert ws.recv() == "still here"


def test_a_servers_close_code_and_reason_reach_the_client(echo: tuple[Envhub, dict[str, Any]]) -> None:
    envhub, endpoint = echo
    with connect(f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/echo") as ws:
        ws.send("close:4001:episode over")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, "episode over")


def test_under_another_asgi_server_a_session_is_refused_with_what_to_do(client: TestClient) -> None:
    """Only envhub's own server relays sessions; under another (here Starlette's test client) the client is told."""
    with client.websocket_connect("/endpoints/abc/ws") as ws, pytest.raises(WebSocketDisconnect) as closed:
        ws.receive_text()
    assert closed.value.code == 1011
    assert "python -m app serve" in closed.value.reason


class QuietClient:
    """websockets' own client on a socket the test writes: it answers pings only when the test sends for it."""

    def __init__(self, url: str, port: int) -> None:
        self.protocol = ClientProtocol(parse_uri(url))
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._events: list[Any] = []
        self.protocol.send_request(self.protocol.connect())
        self._send()
        assert isinstance(self.event(), Response)

    def send_text(self, text: str) -> None:
        self.protocol.send_text(text.encode())
        self._send()

    def event(self) -> Any:
        """The next thing the socket says, as websockets reads it; ConnectionError once it is shut."""
        while not self._events:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the socket was shut")
            self.protocol.receive_data(data)
            self._events = self.protocol.events_received()
        return self._events.pop(0)

    def until_shut(self) -> list[Opcode]:
        """The opcodes of the frames it hears until its socket is shut."""
        heard = []
        try:
            while True:
                heard.append(self.event().opcode)
        except ConnectionError:
            return heard

    def _send(self) -> None:
        self.sock.sendall(b"".join(self.protocol.data_to_send()))


def test_envhub_pings_a_quiet_client_and_drops_one_that_leaves_the_ping_unanswered(
    settings: Settings, count_template: str
) -> None:
    timers = ManualTimers()
    envhub = Envhub(settings.model_copy(update={"ws_ping_s": 20}), timers=timers)
    try:
        endpoint = envhub.running(count_template)
        client = QuietClient(endpoint["url"].replace("http://", "ws://", 1) + "/ws", envhub.port)
        with client.sock:
            client.send_text(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(client.event().data)["type"] == "observation"
            timers.advance(10)  # quiet for half an interval: envhub pings it
            assert client.event() == Frame(Opcode.PING, b"envhub")
            timers.advance(10)  # unanswered for half an interval: still there
            timers.advance(10)  # for a whole one: gone
            assert set(client.until_shut()) <= {Opcode.PONG}  # the replica's answer to envhub's own ping, if any
    finally:
        envhub.stop()
