"""The HTTP client the gateway reaches replicas with: connections kept alive, but never one a failed answer came on.

A server whose app fails after its error page went out answers 500 without `Connection: close` and closes the
connection a moment later (uvicorn does once the app has raised). Lent again before that close arrives, the
connection would carry the next request, a POST that may not be sent twice, into a reset, and the gateway would
answer 502 for a server that is fine. So a 5xx answer's connection is closed as its last byte is read, before the
pool would lend it again: the next request opens a fresh one.
"""

from collections.abc import AsyncIterator

import httpx

__all__ = ["replica_client"]


def replica_client(timeout: httpx.Timeout, limits: httpx.Limits) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=timeout, transport=_KeepsNoFailed(httpx.AsyncHTTPTransport(limits=limits)))


class _KeepsNoFailed(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncHTTPTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        connection = response.extensions.get("network_stream")
        if (
            response.status_code >= 500
            and connection is not None
            and isinstance(response.stream, httpx.AsyncByteStream)
        ):
            response.stream = _ClosedAtEnd(response.stream, connection)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _ClosedAtEnd(httpx.AsyncByteStream):
    """A body whose connection is closed once it has been read whole, so that the pool drops it when it is handed
    back (on the body's close) instead of lending it again."""

    def __init__(self, body: httpx.AsyncByteStream, connection: object) -> None:
        self.body, self.connection = body, connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.body:
            yield chunk
        await self.connection.aclose()  # type: ignore[attr-defined]  # httpcore's network stream

    async def aclose(self) -> None:
        await self.body.aclose()
