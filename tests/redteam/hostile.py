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
from fastapi.responses import StreamingResponse

MODE = {mode!r}
routes = FastAPI()


async def app(scope, receive, send):  # every request and handshake is noted, whether a route takes it or not
    if scope["type"] in ("http", "websocket"):
        headers = {{k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}}
        note = {{"raw_path": scope["raw_path"].decode("latin-1"), "headers": headers}}
        print("SEEN " + json.dumps(note), flush=True)
    await routes(scope, receive, send)


@routes.get("/health")
def health():
    return {{"status": "healthy"}}


@routes.websocket("/ws")
async def ws(websocket: WebSocket):
    await websocket.accept()
    if MODE == "huge_first":  # a first message far longer than any refusal, that takes long to arrive whole
        await websocket.send_bytes(b"x" * (64 * 1024 * 1024))
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
    echoes each message, a step's after half a second), `blocking_step` (a step blocks the whole server 3 s)."""
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "server" / "app.py").write_text(dedent(HOSTILE_APP).format(mode=mode))
    (folder / "openenv.yaml").write_text(f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\n")
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\n---\nA hostile server.\n")
    return folder


def seen(log: Path) -> list[dict[str, Any]]:
    """What reached the server, from its log: each request's raw path and headers, in order."""
    if not log.exists():
        return []
    return [json.loads(line[5:]) for line in log.read_text().splitlines() if line.startswith("SEEN ")]
