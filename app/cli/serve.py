"""python -m app serve: the API, the web page and the gateway, on envhub's own uvicorn server."""

import argparse

from app import logs
from app.settings import Settings


def serve(settings: Settings, args: argparse.Namespace) -> int:
    from app.main import create_app
    from app.server import envhub_server

    page = "" if settings.ui else "; no web page (ENVHUB_UI=false): the API and the gateway only"
    print(f"envhub: serving on http://{args.host}:{args.port} (catalog {settings.database_url}{page})", flush=True)
    # Behind a proxy (a Space): uvicorn takes the scheme from X-Forwarded-Proto, the app the host. The gateway
    # pings the WebSocket sessions it relays: a client that leaves a ping unanswered for an interval is let go.
    server = envhub_server(create_app(settings), host=args.host, port=args.port)
    logs.quiet_page_requests()
    server.run()
    return 0


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("serve", help="serve the API and UI")
    command.add_argument("--host", default="127.0.0.1")
    command.add_argument("--port", type=int, default=7860)
    command.set_defaults(handler=serve)
