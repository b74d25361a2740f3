"""OpenEnv servers for checker tests: a real openenv app, and copies of it broken in one way each.

Each server is the counting environment served by openenv's own `create_app`, with one
route replaced, removed or wrapped, and runs on loopback with uvicorn in a thread.
"""

import asyncio
import itertools
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import uvicorn
from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from protocol import frames
from tests.conftest import wait_until
from tests.serving import free_port


class CountAction(Action):  # type: ignore[misc]
    add: int = Field(ge=0, le=10, description="how much to add")


class CountObservation(Observation):  # type: ignore[misc]
    total: int = 0


class CountEnvironment(Environment):  # type: ignore[misc]
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._total = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._total = 0
        return CountObservation(total=0, reward=0.0)

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        self._state.step_count += 1
        self._total += action.add
        done = self._total >= 10
        return CountObservation(total=self._total, done=done, reward=1.0 if done else 0.0)

    @property
    def state(self) -> State:
        return self._state


class TaskCountEnvironment(CountEnvironment):
    """The counting game with a Task API: targets to count to, in a train split."""

    TASKS = ({"target": 5}, {"target": 10}, {"target": 20})

    def list_splits(self) -> list[str]:
        return ["train"]

    def num_tasks(self, split: str) -> int:
        return len(self.TASKS)

    def list_tasks(self, split: str) -> list[dict[str, int]]:
        return list(self.TASKS)

    def get_task(self, split: str, index: int) -> dict[str, int]:
        if not 0 <= index < len(self.TASKS):
            raise IndexError(index)
        return self.TASKS[index]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, int]]:
        return list(self.TASKS[start:stop])


class ForgetfulEnvironment(CountEnvironment):
    """Ignores the episode_id it is given (a quality problem, not a protocol break)."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        return super().reset(seed=seed, episode_id=None)


class NoisyEnvironment(CountEnvironment):
    """Starts each episode where the last one started plus one (mod 5), whatever the seed: state left by earlier
    episodes, so no two resets in a row agree."""

    resets: ClassVar[Iterator[int]] = itertools.count()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        super().reset(seed=seed, episode_id=episode_id)
        self._total = next(self.resets) % 5  # deliberately not from the seed
        return CountObservation(total=self._total, reward=0.0)


class SharedEnvironment(CountEnvironment):
    """Counts on one total for all its sessions (a class attribute): sessions see each other's steps."""

    shared: ClassVar[dict[str, int]] = {"total": 0}

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        super().reset(seed=seed, episode_id=episode_id)
        self.shared["total"] = 0
        return CountObservation(total=0, reward=0.0)

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        self._state.step_count += 1
        self.shared["total"] += action.add
        done = self.shared["total"] >= 10
        return CountObservation(total=self.shared["total"], done=done, reward=1.0 if done else 0.0)


class FailingEnvironment(CountEnvironment):
    """Raises on every step, whatever the action (over HTTP its server answers 500; over WS, EXECUTION_ERROR)."""

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        raise RuntimeError("the counter is jammed")


class EndlessEnvironment(CountEnvironment):
    """Never ends an episode."""

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        observation = super().step(action)
        return CountObservation(total=observation.total, done=False, reward=0.0)


def count_app(*, max_sessions: int = 4, mode: str | None = None, environment: type = CountEnvironment) -> FastAPI:
    app: FastAPI = create_app(
        environment, CountAction, CountObservation, env_name="count", max_concurrent_envs=max_sessions, mode=mode
    )
    return app


class AnswerAction(Action):  # type: ignore[misc]
    answer: str = Field(default="", description="the answer")


class QuestionObservation(Observation):  # type: ignore[misc]
    question: str = "What is six times seven?"


class VerifierEnvironment(Environment):  # type: ignore[misc]
    """One question, one answer: reward 1.0 for 42, EMPTY_REWARD for an empty answer, 0.0 otherwise. Its README
    (in /metadata) declares the range."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    EMPTY_REWARD: ClassVar[float] = 0.0

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> QuestionObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return QuestionObservation(reward=0.0)

    def step(self, action: AnswerAction, timeout_s: float | None = None, **kwargs: Any) -> QuestionObservation:
        self._state.step_count += 1
        answer = action.answer.strip()
        reward = 1.0 if answer == "42" else 0.0 if answer else self.EMPTY_REWARD
        return QuestionObservation(done=True, reward=reward)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        readme = "# Verifier\n\nAnswer the question. Rewards lie in [0, 1].\n"
        return EnvironmentMetadata(name="verifier", description="one question", readme_content=readme)


def verifier_app(empty_reward: float) -> FastAPI:
    """A verifier whose reward for an empty answer is empty_reward (the bug RFC 008 begins with, at 1.0)."""
    environment = type("Verifier", (VerifierEnvironment,), {"EMPTY_REWARD": empty_reward})
    app: FastAPI = create_app(
        environment, AnswerAction, QuestionObservation, env_name="verifier", max_concurrent_envs=4
    )
    return app


def _replace(app: FastAPI, route: BaseRoute) -> FastAPI:
    """Put a route in front of the app's own for the same path."""
    app.router.routes.insert(0, route)
    return app


def _remove(app: FastAPI, *paths: str) -> FastAPI:
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in paths]
    return app


def _original(app: FastAPI, path: str, method: str) -> Callable[[Request], Awaitable[Any]]:
    for route in app.router.routes:
        if getattr(route, "path", None) == path and method in (getattr(route, "methods", None) or ()):
            endpoint: Callable[[Request], Awaitable[Any]] = route.endpoint  # type: ignore[attr-defined]
            return endpoint
    raise LookupError(path)


# -- broken in one way each


def wrong_health() -> FastAPI:
    return _replace(count_app(), Route("/health", lambda _: JSONResponse({"status": "ok"})))


def missing_schema() -> FastAPI:
    return _remove(count_app(), "/schema")


def invalid_schema() -> FastAPI:
    app = count_app()

    async def broken(_: Request) -> JSONResponse:
        body = {
            "action": CountAction.model_json_schema(),
            "observation": CountObservation.model_json_schema(),
            "state": State.model_json_schema(),
            "reset_observation": CountObservation.model_json_schema(),
        }
        body["observation"]["properties"]["total"]["type"] = "integr"  # not a JSON Schema type
        return JSONResponse(body)

    return _replace(app, Route("/schema", broken))


async def _silent(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            await websocket.receive_text()
    except WebSocketDisconnect:
        pass


async def _garbage(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            await websocket.send_text("garbage")
    except WebSocketDisconnect:
        pass


async def _closes_early(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        await websocket.receive_text()
        await websocket.close(code=1011)
    except WebSocketDisconnect:
        pass


async def _full(websocket: WebSocket) -> None:
    # As a server that is full: its refusal goes out, and the socket closes, before the client's message is read.
    await websocket.accept()
    await websocket.send_text(json.dumps(frames.capacity_frame("no free session", 1, 1)))
    await websocket.close(code=1013)


async def _huge_frame(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        await websocket.receive_text()
        await websocket.send_text(json.dumps({"type": "observation", "data": {"observation": {"x": "x" * 2_000_000}}}))
        await websocket.receive_text()
    except WebSocketDisconnect:
        pass


def ws_silent(connected: threading.Event | None = None) -> FastAPI:
    """A server whose WebSocket accepts and never answers; `connected` is set when a client has opened one."""

    async def silent(websocket: WebSocket) -> None:
        if connected is not None:
            connected.set()
        await _silent(websocket)

    return _replace(count_app(), WebSocketRoute("/ws", silent))


def ws_garbage() -> FastAPI:
    return _replace(count_app(), WebSocketRoute("/ws", _garbage))


def ws_closes_early() -> FastAPI:
    return _replace(count_app(), WebSocketRoute("/ws", _closes_early))


def ws_full() -> FastAPI:
    return _replace(count_app(), WebSocketRoute("/ws", _full))


def ws_huge_frame() -> FastAPI:
    return _replace(count_app(), WebSocketRoute("/ws", _huge_frame))


def forgets_episode_id() -> FastAPI:
    return count_app(environment=ForgetfulEnvironment)


def noisy() -> FastAPI:
    return count_app(environment=NoisyEnvironment)


def shared_state() -> FastAPI:
    return count_app(environment=SharedEnvironment)


def endless() -> FastAPI:
    return count_app(environment=EndlessEnvironment)


def failing_steps() -> FastAPI:
    return count_app(environment=FailingEnvironment)


def mcp_bad_errors() -> FastAPI:
    """POST /mcp answers results as it should, but every error as a bare string."""
    app = count_app()
    original = _original(app, "/mcp", "POST")

    async def mcp(request: Request) -> JSONResponse:
        reply = await original(request)
        if "error" in reply:
            reply = {"jsonrpc": "2.0", "error": str(reply["error"].get("message"))}
        return JSONResponse(reply)

    return _replace(app, Route("/mcp", mcp, methods=["POST"]))


def huge_metadata() -> FastAPI:
    """GET /metadata streams 50 MB."""

    async def chunks() -> Any:
        yield b'{"name": "big", "description": "'
        block = b"x" * 65536
        for _ in range(50 * 16):
            yield block
            await asyncio.sleep(0)
        yield b'"}'

    return _replace(
        count_app(), Route("/metadata", lambda _: StreamingResponse(chunks(), media_type="application/json"))
    )


class _StripResetMetadata:
    """openenv-core 0.3 envelopes have no metadata key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in ("/reset", "/step"):
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold(message: Message) -> None:
            held.append(message)

        await self.app(scope, receive, hold)
        start = next(m for m in held if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in held if m["type"] == "http.response.body")
        if start["status"] == 200:
            envelope = json.loads(body)
            envelope.pop("metadata", None)
            body = json.dumps(envelope).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": start["status"], "headers": headers})
        await send({"type": "http.response.body", "body": body})


def legacy_server() -> ASGIApp:
    """What openenv-core 0.3 serves: no Task API, no reset_observation, no MCP sessions, no envelope metadata."""
    app = count_app()
    _remove(
        app,
        "/list_environments",
        "/{env_name}/splits",
        "/{env_name}/tasks",
        "/{env_name}/num_tasks",
        "/{env_name}/task",
        "/{env_name}/task_range",
    )
    original_mcp = _original(app, "/mcp", "POST")

    async def schema(_: Request) -> JSONResponse:
        return JSONResponse(
            {
                "action": CountAction.model_json_schema(),
                "observation": CountObservation.model_json_schema(),
                "state": State.model_json_schema(),
            }
        )

    async def mcp(request: Request) -> JSONResponse:
        try:
            method = json.loads(await request.body()).get("method", "")
        except (ValueError, AttributeError):
            method = ""
        if isinstance(method, str) and method.startswith("openenv/session/"):
            rpc_id = json.loads(await request.body()).get("id")
            error = {"code": -32601, "message": f"Method not found: {method}", "data": None}
            return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "error": error})
        return JSONResponse(await original_mcp(request))

    _replace(app, Route("/schema", schema))
    _replace(app, Route("/mcp", mcp, methods=["POST"]))
    return _StripResetMetadata(app)


class Served:
    """An ASGI app served by uvicorn on loopback in a thread."""

    def __init__(self, app: ASGIApp, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="critical")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, timeout_s=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@contextmanager
def serve(app: ASGIApp, port: int | None = None, host: str = "127.0.0.1") -> Iterator[Served]:
    served = Served(app, port, host)
    try:
        yield served
    finally:
        served.stop()


def counting(app: ASGIApp) -> tuple[ASGIApp, list[str]]:
    """The app, and the list of request paths it has seen."""
    seen: list[str] = []

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            seen.append(scope["path"])
        await app(scope, receive, send)

    return counted, seen


def authorizations(app: ASGIApp) -> tuple[ASGIApp, list[tuple[str, str, str | None]]]:
    """The app, and (Host header, path, Authorization header) of each request it has seen."""
    seen: list[tuple[str, str, str | None]] = []

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            seen.append((headers.get("host", ""), scope["path"], headers.get("authorization")))
        await app(scope, receive, send)

    return recorded, seen


def plain(status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None) -> ASGIApp:
    """A server that answers every request the same way."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            return
        await Response(body, status_code=status, headers=headers)(scope, receive, send)

    return app
