"""python -m app serve: the API, the web page and the gateway, on envhub's own uvicorn server."""

import argparse
import logging
import os
import socket
import sys

from app import logs
from app.settings import Settings


def _listen(host: str, port: int) -> socket.socket | None:
    """The server's socket, bound before anything else starts: a busy port is said at once, not after the catalog
    and the endpoints have started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        print(
            f"envhub: cannot serve on {host}:{port}: {exc.strerror or exc}. Stop what listens there, or choose "
            "another port: python -m app serve --port 8080 (make run PORT=8080)",
            file=sys.stderr,
        )
        return None


def serve(settings: Settings, args: argparse.Namespace) -> int:
    from app.main import create_app
    from app.server import envhub_server

    listening = _listen(args.host, args.port)
    if listening is None:
        return 1
    page = "" if settings.ui else "; no web page (ENVHUB_UI=false): the API and the gateway only"
    print(f"envhub: serving on http://{args.host}:{args.port} (catalog {settings.database_url}{page})", flush=True)
    # Behind a proxy (a Space): uvicorn takes the scheme from X-Forwarded-Proto, the app the host. The gateway
    # pings the WebSocket sessions it relays: a client that leaves a ping unanswered for an interval is let go.
    server = envhub_server(create_app(settings), host=args.host, port=args.port)
    logs.quiet_page_requests()
    with listening:
        server.run(sockets=[listening])
    # Everything is stopped and written. The interpreter's own finalisation would collect the whole heap (gradio,
    # pyarrow, numpy...), seconds on a busy machine between the last line and the prompt, for nothing left to free.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("serve", help="serve the API and UI")
    command.add_argument("--host", default="127.0.0.1")
    command.add_argument("--port", type=int, default=7860)
    command.set_defaults(handler=serve)
