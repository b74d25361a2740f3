"""Gradio's front-end bundles, served from memory in front of the app.

A page load fetches about sixty of them (`/assets/*`). Through envhub's routers, the UI's mount and Gradio's file
route, each costs a few milliseconds of the one event loop and a file read in a worker thread; here it is a
dictionary lookup. Only files of Gradio's own build folder are served, by exact name; any other path, and every
request but GET and HEAD, goes on to the app. Names carrying a content hash never change in place, so browsers may
keep them.
"""

import mimetypes
import re
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["FRONTEND_BUILD", "FrontendAssets"]

FRONTEND_BUILD = "templates/frontend/assets"  # within the gradio package: what it serves at /assets/
PREFIX = "/assets/"
# The bundles' own types, whatever the machine's MIME table says (libraries add .js there as application/javascript).
_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css"}
_HASHED = re.compile(r"-[A-Za-z0-9_-]{8}\.[a-z0-9]+$")  # Vite's build names: Index-reaEz31n.js


class FrontendAssets:
    def __init__(self, app: ASGIApp, directory: Path) -> None:
        self.app = app
        self.files = {p.relative_to(directory).as_posix(): p for p in directory.rglob("*") if p.is_file()}
        self.read: dict[str, bytes] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        path = path.removeprefix(scope.get("root_path", "")) if path else path
        name = path[len(PREFIX) :] if path.startswith(PREFIX) else ""
        found = self.files.get(name) if scope.get("method") in ("GET", "HEAD") else None
        if found is None:
            await self.app(scope, receive, send)
            return
        body = self.read.get(name)
        if body is None:
            body = self.read[name] = found.read_bytes()
        kind = _TYPES.get(Path(name).suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith(("text/", "application/javascript", "application/json")):
            kind += "; charset=utf-8"
        keep = "public, max-age=31536000, immutable" if _HASHED.search(name) else "no-cache"
        headers = [
            (b"content-type", kind.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", keep.encode()),
            (b"x-content-type-options", b"nosniff"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
