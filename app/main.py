"""Building the envhub application: the services, the routers, the gateway and the UI, as `serve` runs it."""

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline

from app import gateway
from app.api import (
    agent_run_exports,
    agent_runs,
    agent_sessions,
    checks,
    datasets,
    environments,
    health,
    presets,
    publications,
    signin,
    statistics,
    submissions,
    sync,
    validation,
)
from app.api import endpoints as endpoints_api
from app.api import evaluations as evaluations_api
from app.api.deps import require_csrf
from app.forwarded import ForwardedHostMiddleware
from app.mcp_door import McpApp
from app.services import Services
from app.settings import Settings
from catalog.hub import Hub
from core.errors import EnvhubError
from core.outbound import OutboundGuard
from gateway.modeldoor import ModelDoor
from gateway.timers import LOOP_TIMERS, Timers
from gateway.wiring import Gateway
from hosting.models import Backend
from hosting.runtimes.base import AnyRuntime

log = logging.getLogger("envhub")


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = " ".join(str(p) for p in error.get("loc", ()) if p != "body")
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Each failure as programs tell them apart: where it is, and pydantic's type of it (or envhub's own code)."""
    return [
        {"loc": [p for p in error.get("loc", ()) if p != "body"], "type": error.get("type", "")}
        for error in exc.errors()
    ]


def create_app(
    settings: Settings | None = None,
    *,
    hub: Hub | None = None,
    runtimes: dict[Backend, AnyRuntime] | None = None,
    guard: OutboundGuard | None = None,
    timers: Timers = LOOP_TIMERS,
) -> FastAPI:
    """The envhub app, middleware included, with its web page unless settings.ui is off. Nothing connects until it
    starts serving."""
    services = Services.build(settings or Settings(), hub=hub, runtimes=runtimes, guard=guard, timers=timers)

    ui_ready: list[Callable[[], None]] = []  # what the web page does once the catalog is ready (app.ui.page)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Gateway | McpApp | ModelDoor]]:
        # Blocking work (the database, Docker, launches, builds) runs in the loop's default executor, which Python
        # sizes by cores (6 threads on 2): a few slow launches would hold every page's reads behind them.
        threads = ThreadPoolExecutor(services.settings.blocking_threads, thread_name_prefix="envhub-blocking")
        asyncio.get_running_loop().set_default_executor(threads)
        await services.start()
        for ready in ui_ready:
            await asyncio.to_thread(ready)
        try:
            # What envhub's server hands the data plane (gateway.server): the gateway, and the apps of requests to
            # /mcp and to /model.
            mcp = McpApp(services.gateway, services.door)
            yield {"gateway": services.gateway, "mcp": mcp, "model": services.model_door}
        finally:
            await services.stop()

    # The API's pages (/docs, /redoc) load Swagger UI and ReDoc from envhub itself, not a CDN: they work offline.
    app = FastAPIOffline(title="envhub", summary="Find, try and launch OpenEnv environments.", lifespan=lifespan)
    app.state.services = services  # read through app.api.deps only (and app.server, for its settings and runner)
    # Behind a proxy (a Space): the host from X-Forwarded-Host; uvicorn takes the scheme from X-Forwarded-Proto.
    app.add_middleware(ForwardedHostMiddleware)

    @app.exception_handler(EnvhubError)
    async def envhub_error(_request: Request, exc: EnvhubError) -> JSONResponse:
        return JSONResponse(exc.payload(), status_code=exc.status_code, headers=exc.headers())

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        answer = {"detail": _describe_validation(exc), "code": "invalid_request", "errors": _validation_errors(exc)}
        return JSONResponse(answer, status_code=422)

    # Every state-changing API call that rides on a session cookie must carry its CSRF token.
    modules = (
        validation,  # before environments: its /api/environments/{id}/validation is not an environment's id
        environments,
        datasets,
        sync,
        endpoints_api,
        agent_sessions,
        agent_run_exports,  # before any /api/agent-runs/{id} route: its /sft.jsonl is not a run's id
        evaluations_api,
        agent_runs,
        presets,
        checks,
        statistics,
        submissions,
        health,
        publications,
    )
    for module in modules:
        app.include_router(module.router, dependencies=[Depends(require_csrf)])
    app.include_router(signin.router)
    app.include_router(gateway.router)
    # A harness's model calls: an ASGI app of its own, past FastAPI's routing (it answers in each model API's shapes).
    app.mount("/model", services.model_door)
    if services.settings.ui:
        from app.ui.page import mount_ui  # imported only when a page is served: building one takes seconds

        # Last: the UI's mount at / takes every path the routes above do not.
        ui_ready.append(mount_ui(app, services))
    return app
