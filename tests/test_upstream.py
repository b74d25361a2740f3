"""The door's socket to a replica (gateway/mcp/upstream.py) against real WebSocket servers: `websockets`' own, which
fragments, pings and closes as RFC 6455 lets a server, and a raw one that accepts and then says nothing."""

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from websockets.asyncio.server import ServerConnection, serve

from gateway.mcp.upstream import Upstream, UpstreamClosed, connect_upstream

Handler = Callable[[ServerConnection], Awaitable[None]]


@asynccontextmanager
async def replica(handler: Handler) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"http://127.0.0.1:{port}"


async def opened(url: str, *, ping_s: float = 20, max_size: int = 1 << 20) -> Upstream:
    return await connect_upstream(url, {}, timeout_s=5, ping_s=ping_s, max_size=max_size)


def test_messages_arrive_whole_however_the_server_cuts_them() -> None:
    big = "x" * 300_000  # many TCP chunks

    async def handler(socket: ServerConnection) -> None:
        assert socket.request is not None and socket.request.path == "/ws"
        question = await socket.recv()
        assert isinstance(question, str)
        await socket.send(["fragmented ", "into ", "three"])
        await socket.send(big)
        await socket.send(f"you said {question}")
        await socket.wait_closed()

    async def main() -> list[str]:
        async with replica(handler) as url:
            upstream = await opened(url)
            await upstream.send("héllo")
            got = [await upstream.recv() for _ in range(3)]
            await upstream.close()
            return got

    assert asyncio.run(main()) == ["fragmented into three", big, "you said héllo"]


def test_the_servers_pings_are_answered_and_its_close_is_told_with_its_code() -> None:
    async def handler(socket: ServerConnection) -> None:
        pong = await socket.ping(b"are you there")
        await asyncio.wait_for(pong, 5)  # answered by the door's socket
        await socket.send("pong came")
        await socket.close(4001, "session over")

    async def main() -> tuple[str, UpstreamClosed]:
        async with replica(handler) as url:
            upstream = await opened(url)
            said = await upstream.recv()
            with pytest.raises(UpstreamClosed) as closed:
                await upstream.recv()
            return said, closed.value

    said, closed = asyncio.run(main())
    assert said == "pong came"
    assert (closed.code, closed.reason) == (4001, "session over")


def test_a_message_over_the_limit_closes_the_socket_with_1009() -> None:
    closes: list[int | None] = []

    async def handler(socket: ServerConnection) -> None:
        await socket.send("y" * 5000)
        await socket.wait_closed()
        closes.append(socket.close_code)

    async def main() -> UpstreamClosed:
        async with replica(handler) as url:
            upstream = await opened(url, max_size=4096)
            with pytest.raises(UpstreamClosed) as closed:
                await upstream.recv()
            await upstream.close()
            return closed.value

    closed = asyncio.run(main())
    assert closed.code == 1009 and "4,096" in closed.reason
    assert closes == [1009]


def test_a_server_that_stops_answering_pings_is_given_up() -> None:
    done = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        key = next(
            line.split(b":", 1)[1].strip()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key")
        )
        accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
        writer.write(b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        await done.wait()  # and never reads again, as a hung server
        writer.close()

    async def main() -> UpstreamClosed:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            upstream = await opened(f"http://127.0.0.1:{port}", ping_s=0.4)
            with pytest.raises(UpstreamClosed) as closed:
                await asyncio.wait_for(upstream.recv(), 10)
            done.set()
            await asyncio.sleep(0)
            return closed.value

    closed = asyncio.run(main())
    assert closed.code == 1011 and "pings" in closed.reason
