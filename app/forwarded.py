"""The public host behind a proxy: X-Forwarded-Host becomes the request's Host, as uvicorn does for the scheme.

A Space sits behind the Hub's TLS-terminating proxy. uvicorn (`proxy_headers`) takes the scheme from
X-Forwarded-Proto, but not the host; this takes the host, so the URLs envhub hands out (endpoint gateway URLs,
snippets) name `https://<the Space's host>` and WebSocket clients use wss on it. The header claims no more than a
Host header a client sends directly could, so it is honoured from any peer, like `--forwarded-allow-ips '*'`.
"""

from starlette.types import ASGIApp, Receive, Scope, Send


class ForwardedHostMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers: list[tuple[bytes, bytes]] = list(scope["headers"])
            forwarded = next((v for k, v in headers if k == b"x-forwarded-host"), None)
            # A proxy chain lists hosts nearest-client first.
            host = forwarded.split(b",")[0].strip() if forwarded else b""
            if host and b"/" not in host and b" " not in host:
                headers = [(k, v) for k, v in headers if k != b"host"] + [(b"host", host)]
                scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)
