"""The model door's stack with nothing of envhub's: uvicorn and httpx passing a chat call on to a model server as it is.

    .venv/bin/python -m bench.bare_proxy PORT MODEL_URL

bench.modeldoor times it beside the door and the model server itself: what this costs is the floor of the door's
own hop (uvicorn reading the request and writing the answer, httpx sending it on and reading it, on the same loop).
"""

import json
import sys
from typing import Any

import httpx
import uvicorn
from starlette.types import Receive, Scope, Send


class BareProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=30)
        body = b""
        more = True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        if scope["method"] != "POST":  # the bench's readiness probe
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        request: dict[str, Any] = json.loads(body) | {"model": "m"}  # as the door names the preset's model
        upstream = self.client.build_request(
            "POST",
            self.upstream + scope["path"],
            content=json.dumps(request).encode(),
            headers={"content-type": "application/json"},
        )
        response = await self.client.send(upstream, stream=True)
        try:
            kind = response.headers.get("content-type", "application/json").encode()
            if request.get("stream"):
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": [(b"content-type", kind)],
                    }
                )
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
                return
            data = await response.aread()
            head = [(b"content-type", kind), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": response.status_code, "headers": head})
            await send({"type": "http.response.body", "body": data})
        finally:
            await response.aclose()


if __name__ == "__main__":
    uvicorn.run(BareProxy(sys.argv[2]), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
