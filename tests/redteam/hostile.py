"""Hostile environment servers, as folders envhub launches like any other: they answer /health, then misbehave.

Each prints what reached it (the path as it came on the request line, and every header) to its log, so a test
reads what a server's code could read without asking it through the gateway.
"""

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

HOSTILE_APP = """
import asyncio
import json
import time

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, StreamingResponse

MODE = {mode!r}
routes = FastAPI()
SCHEMA = {{"action": {{"type": "object", "properties": {{"move": {{"type": "string"}}}}, "required": ["move"]}}}}
schema_asked = []


async def app(scope, receive, send):  # every request and handshake is noted, whether a route takes it or not
    if scope["type"] in ("http", "websocket"):
        headers = {{k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}}
        note = {{"raw_path": scope["raw_path"].decode("latin-1"), "headers": headers}}
        print("SEEN " + json.dumps(note), flush=True)
    if MODE == "huge_frame" and scope["type"] == "websocket":
        await huge_frame(receive, send)
        return
    if MODE == "chatty" and scope["type"] == "websocket":
        scope["transport"] = send.__self__.transport  # uvicorn's protocol's: how much waits in its buffer
    if MODE == "fail_then_close" and scope["type"] == "http" and scope["path"].endswith("/step"):
        await fail_then_close(send)
        return
    await routes(scope, receive, send)


FAILED = []  # the failed steps whose connections close when the next request arrives


async def fail_then_close(send):
    # As a server whose app fails after its error page went out: uvicorn answers 500 with no word of closing, then
    # closes the connection once the app has raised; here that is when the next request comes, whichever connection
    # it came on (the race a busy server loses at random, made certain).
    while FAILED:
        FAILED.pop().set()
    await asyncio.sleep(0.2)  # the connection of the step that failed before closes first
    await send({{"type": "http.response.start", "status": 500, "headers": [(b"content-length", b"5")]}})
    await send({{"type": "http.response.body", "body": b"boom!"}})
    arrived = asyncio.Event()
    FAILED.append(arrived)
    try:
        await asyncio.wait_for(arrived.wait(), 5)
    finally:
        raise RuntimeError("the step failed after its answer went out")


@routes.get("/health")
def health():
    return {{"status": "healthy"}}


@routes.websocket("/ws")
async def ws(websocket: WebSocket):
    await websocket.accept()
    if MODE == "huge_first":  # a first message far longer than any refusal, that takes long to arrive whole
        await websocket.send_bytes(b"x" * (64 * 1024 * 1024))
    if MODE == "chatty":  # the first message answered, then 256 MiB of messages nobody asked for, 64 KiB each
        await websocket.receive()
        heard = asyncio.ensure_future(websocket.receive())  # the close envhub sends, if it does
        await websocket.send_text(json.dumps({{"type": "observation", "data": {{"observation": {{}}}}}}))
        # As fast as they are read: no more than a MiB waits in the server's own buffer (uvicorn's send does not
        # wait for it to drain), and the loop lets the server read between messages, so that it hears envhub's
        # close when it comes: what it sent is then what envhub read, however slow the machine.
        transport = websocket.scope["transport"]
        sent, text = 0, json.dumps({{"type": "observation", "data": {{"observation": {{"pad": "x" * 65536}}}}}})
        while sent < 256 * 1024 * 1024 and not heard.done() and not transport.is_closing():
            if transport.get_write_buffer_size() > 1024 * 1024:
                await asyncio.wait([heard], timeout=0.01)
                continue
            try:
                await websocket.send_text(text)
            except Exception:
                break
            sent += len(text)
            await asyncio.sleep(0)
        print("CLOSED " + json.dumps({{"sent": sent, "code": (await heard).get("code")}}), flush=True)
        return
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text") or ""
        if MODE == "slow_step" and '"step"' in text:  # steps take half a second, anything else none
            await asyncio.sleep(0.5)
        if MODE == "blocking_step" and '"step"' in text:  # an engine thinking: the whole server stops for 3 s
            time.sleep(3)
        await websocket.send_text(text)


# A WebSocket whose first message is answered with a frame whose header claims 2**62 bytes, then 256 MiB of them
# as fast as they are read: written by hand on uvicorn's transport (its protocol's, which `send` is a method of), as
# no WebSocket library writes such a frame.
async def huge_frame(receive, send):
    await receive()  # the handshake
    await send({{"type": "websocket.accept"}})
    await receive()  # the first message
    heard = asyncio.ensure_future(receive())  # the close envhub sends, if it does
    transport = send.__self__.transport
    transport.write(b"\\x82\\x7f" + (1 << 62).to_bytes(8, "big"))
    sent, chunk = 0, b"x" * 65536
    while sent < 256 * 1024 * 1024 and not heard.done() and not transport.is_closing():
        if transport.get_write_buffer_size() > 1024 * 1024:
            await asyncio.wait([heard], timeout=0.01)
            continue
        transport.write(chunk)
        sent += len(chunk)
    print("CLOSED " + json.dumps({{"sent": sent, "code": (await heard).get("code")}}), flush=True)


@routes.get("/schema")
def schema():
    if MODE == "huge_schema":  # 64 MiB of one action schema's description
        async def endless():
            yield b'{{"action": {{"type": "object", "description": "'
            for _ in range(64):
                yield b"x" * (1024 * 1024)
            yield b'"}}}}'
        return StreamingResponse(endless(), media_type="application/json")
    schema_asked.append(1)
    if MODE == "flaky_schema" and len(schema_asked) == 1:  # the first read fails, the next ones work
        return JSONResponse({{"detail": "not ready"}}, status_code=503)
    return SCHEMA


@routes.post("/mcp")
async def mcp(request: Request):
    if MODE == "huge_answer":  # an answer to openenv/session/create the gateway would read whole
        chunk = b" " * (1024 * 1024)
        async def endless():
            yield b'{{"jsonrpc": "2.0", "id": 1, "result": {{"session_id": "'
            for _ in range(256):
                yield chunk
            yield b'"}}}}'
        return StreamingResponse(endless(), media_type="application/json")
    return {{"jsonrpc": "2.0", "id": 1, "result": {{"tools": []}}}}


@routes.api_route("/{{path:path}}", methods=["GET", "POST"])
async def anything(path: str, request: Request):
    body = await request.body()
    return {{"path": path, "received": len(body)}}
"""


def write_hostile_env(folder: Path, mode: str = "record") -> Path:
    """A server of the given mode: `record` (only records), `huge_first`, `huge_answer`, `slow_step` (its WebSocket
    echoes each message, a step's after half a second), `blocking_step` (a step blocks the whole server 3 s);
    `huge_frame` and `chatty` answer a WebSocket's first message with a frame claiming 2**62 bytes, or with endless
    messages, then print what they sent and the close they got (`closes`); `huge_schema` answers /schema with
    64 MiB, `flaky_schema` fails its first /schema read; `fail_then_close`: POST /step answers 500, and its
    connection closes a second later. Other modes answer /schema with a one-field action."""
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "server" / "app.py").write_text(dedent(HOSTILE_APP).format(mode=mode))
    (folder / "openenv.yaml").write_text(f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\n")
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\n---\nA hostile server.\n")
    return folder


def closes(log: Path) -> list[dict[str, Any]]:
    """What a `huge_frame` or `chatty` server sent before its socket closed, and the close code it got."""
    if not log.exists():
        return []
    return [json.loads(line[7:]) for line in log.read_text().splitlines() if line.startswith("CLOSED ")]


def seen(log: Path) -> list[dict[str, Any]]:
    """What reached the server, from its log: each request's raw path and headers, in order."""
    if not log.exists():
        return []
    return [json.loads(line[5:]) for line in log.read_text().splitlines() if line.startswith("SEEN ")]
