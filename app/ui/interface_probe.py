"""Run as `python -m app.ui.interface_probe APP CWD [PATH ...]`: serve an environment's ASGI app on a loopback port
for a moment, ask it what it serves (envclient.interface), and print that as the catalog row's columns in JSON.

A process of its own, so that the environment's modules (`server`, `models`, ...) never meet envhub's or another
template's, and the server is nobody's endpoint."""

import asyncio
import json
import os
import socket
import sys
import threading
import time

import uvicorn

from catalog.store import interface_columns
from core.outbound import OutboundGuard, live_session
from envclient.interface import read_interface

START_S = 60  # for the app to import and listen


def main(app: str, cwd: str, paths: list[str]) -> int:
    os.chdir(cwd)
    sys.path[:0] = [cwd, *paths]
    listener = socket.socket()  # handed to uvicorn bound: no other socket can take its port in between
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            print(f"{app} did not start serving", file=sys.stderr)
            return 1
        time.sleep(0.05)

    async def read() -> dict[str, object]:
        outbound = live_session(OutboundGuard(allow_private=True))  # its own loopback server
        try:
            return interface_columns(await read_interface(f"http://127.0.0.1:{port}", outbound))
        finally:
            await outbound.aclose()

    try:
        print(json.dumps(asyncio.run(read())))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
