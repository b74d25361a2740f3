"""A fence around the uvicorn internals envhub's server builds on (gateway/server.py subclasses two private
protocol classes and swaps the transport of the request cycles that answer the MCP door's calls; app/server.py the
server, whose shutdown it runs after stopping evaluations): an upgrade of uvicorn
that changes any method it overrides or calls fails here, naming it, so that the subclass is read again before the
new version is pinned. After reviewing it, update the digests below."""

import hashlib
import inspect

import pytest
from uvicorn import Server
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

# sha256 (first 16 hex digits) of each method's source, as of the pinned uvicorn (requirements.txt).
REVIEWED: dict[tuple[type, str], str] = {
    (WebSocketsSansIOProtocol, "__init__"): "631dcd744eab875f",
    (WebSocketsSansIOProtocol, "handle_connect"): "fc648c2161ff8e13",
    (WebSocketsSansIOProtocol, "data_received"): "c89d394077d8841d",
    (WebSocketsSansIOProtocol, "connection_lost"): "dd116afc4d8034e1",
    (WebSocketsSansIOProtocol, "shutdown"): "e8ace796ada616b7",
    (WebSocketsSansIOProtocol, "on_task_complete"): "f45490be9f809f51",
    (HttpToolsProtocol, "__init__"): "4f08999410347141",
    (HttpToolsProtocol, "connection_made"): "6efb565ff3d36b91",
    (HttpToolsProtocol, "on_message_begin"): "96d377fdc7c2baef",
    (HttpToolsProtocol, "on_headers_complete"): "1ea8589acfad92d8",
    (HttpToolsProtocol, "connection_lost"): "c91a4c9bf2e29c55",
    (HttpToolsProtocol, "handle_websocket_upgrade"): "179c4f769386ab89",
    (HttpToolsProtocol, "_start_asgi_task"): "9c08c2571ae9b038",
    (RequestResponseCycle, "__init__"): "4d2f220910c33c12",
    (RequestResponseCycle, "send"): "abdd8601b326a8da",
    (RequestResponseCycle, "receive"): "8124ae006be71184",
    (Server, "shutdown"): "9b33c50562992b1e",
}


@pytest.mark.parametrize(("owner", "name"), list(REVIEWED), ids=[f"{c.__name__}.{n}" for c, n in REVIEWED])
def test_the_uvicorn_methods_envhubs_server_builds_on_are_the_ones_reviewed(owner: type, name: str) -> None:
    digest = hashlib.sha256(inspect.getsource(getattr(owner, name)).encode()).hexdigest()[:16]
    assert digest == REVIEWED[(owner, name)], (
        f"uvicorn's {owner.__name__}.{name} changed: read envhub's subclass of it (gateway/server.py, app/server.py) "
        "against it, then update its digest"
    )
