"""Building the envhub application: database, Hub adapter, routers and background sync."""

import asyncio
import logging
import random
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import httpx
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import Engine
from sqlmodel import Session

from app import gateway
from app.api import checks, datasets, environments, health, publications, sync
from app.api import endpoints as endpoints_api
from app.auth import Identities, SessionStore, require_csrf, session_secret
from app.auth import routes as auth_routes
from app.auth.routes import Provider
from app.settings import Preload, Settings
from app.ui import PlaySessions, UiContext, mount_ui
from catalog.hub import Hub, HubClient
from catalog.store import count_listed
from catalog.sync import Syncer, close_interrupted_runs
from catalog.templates import index_templates
from conformance.checker import Checker
from core.callers import Access
from core.db import create_db_engine, init_db
from core.errors import ConflictError, EnvhubError
from core.leases import Leases
from core.outbound import OutboundGuard
from core.sealing import Sealer
from hosting.endpoints import EndpointManager
from hosting.limits import EndpointLimits
from hosting.models import Backend
from hosting.monitor import HealthMonitor
from hosting.publish import Publisher
from hosting.runtimes import AnyRuntime
from hosting.runtimes.containers import ContainerRuntime
from hosting.runtimes.process import ProcessRuntime
from hosting.runtimes.spaces import SpaceRuntime

log = logging.getLogger("envhub")


def hub_from_settings(settings: Settings) -> HubClient:
    return HubClient(
        settings.hf_endpoint,
        settings.hf_token.get_secret_value() if settings.hf_token else None,
        timeout_s=settings.hub_timeout_s,
        max_retries=settings.hub_max_retries,
        backoff_s=settings.hub_backoff_s,
    )


_HTTP_LIMITS = httpx.Limits(max_connections=512, max_keepalive_connections=128)
_WATCH_INTERVAL_S = 2
SYNC_LEASE = "sync"  # held by the one replica that runs the background sync


def runtimes_from_settings(
    settings: Settings, sealer: Sealer | None = None, replica: str = ""
) -> dict[Backend, AnyRuntime]:
    """The launch backends this server offers; sealer keeps users' Hub tokens in Space handles.

    replica names this envhub process among those sharing the database: its spare containers carry it.
    """
    return {
        Backend.PROCESS: ProcessRuntime(
            settings.data_dir / "runtime",
            ready_timeout_s=settings.launch_timeout_s,
            preload=settings.process_preload != Preload.OFF,
        ),
        Backend.DOCKER: ContainerRuntime(
            base_image=settings.docker_base_image,
            memory=settings.docker_memory,
            cpus=settings.docker_cpus,
            pids=settings.docker_pids,
            ready_timeout_s=settings.launch_timeout_s,
            catalog=settings.catalog_id(),
            replica=replica,
            spares=settings.docker_spares,
        ),
        Backend.SPACE: SpaceRuntime(
            settings.hf_endpoint,
            settings.hf_token.get_secret_value() if settings.hf_token else None,
            sealer=sealer,
            poll_s=settings.space_poll_s,
        ),
    }


async def _watch_endpoints(endpoints: EndpointManager) -> None:
    while True:
        try:
            await asyncio.to_thread(endpoints.keeper.watch)
        except Exception:  # a failed check must not end the watching
            log.exception("checking endpoints failed")
        await asyncio.sleep(_WATCH_INTERVAL_S)


def prepare_catalog(settings: Settings, engine: Engine, leases: Leases) -> None:
    """Schema, leftovers of a crashed sync, and the template folders: all local, no network."""
    init_db(engine)
    close_interrupted_runs(engine, leases)
    index_templates(engine, settings.template_roots())


def _count_listed(engine: Engine) -> int:
    with Session(engine) as session:
        return count_listed(session)


async def _sync_periodically(syncer: Syncer, interval_s: float, poll_s: float) -> None:
    """On the replica holding the sync lease: a sync whenever the catalog's last one is `interval_s` old."""
    while True:
        try:
            if await asyncio.to_thread(syncer.leases.acquire, SYNC_LEASE) and await asyncio.to_thread(
                syncer.due, interval_s
            ):
                await _sync_once(syncer)
        except Exception:  # the database away for a moment must not end the schedule
            log.exception("the background sync could not start")
        await asyncio.sleep(min(poll_s, interval_s) * random.uniform(0.9, 1.1))


async def _sync_once(syncer: Syncer) -> None:
    try:
        run = await asyncio.to_thread(syncer.run)
    except ConflictError:
        return  # a sync asked for through the API is running; this round is covered
    if run.error:
        listed = await asyncio.to_thread(_count_listed, syncer.engine)
        plural = "" if listed == 1 else "s"
        log.warning("Hub sync failed; serving the %d environment%s in the catalog. %s", listed, plural, run.error)
    else:
        log.info(run.summary())


async def _monitor_periodically(monitor: HealthMonitor, interval_s: float) -> None:
    # The first round soon after start-up, so a fresh server shows status within a minute.
    await asyncio.sleep(min(interval_s, 60) * random.uniform(0.1, 0.3))
    while True:
        try:
            done = await monitor.run_round()
            log.info("health: %d probed in %.1f s %s", done.probed, done.seconds, done.statuses)
        except Exception:  # a failed round must not end the monitoring
            log.exception("a health round failed")
        await asyncio.sleep(interval_s * random.uniform(0.9, 1.1))


def _error_response(status_code: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status_code)


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = " ".join(str(p) for p in error.get("loc", ()) if p != "body")
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def create_app(
    settings: Settings | None = None, *, hub: Hub | None = None, runtimes: dict[Backend, AnyRuntime] | None = None
) -> FastAPI:
    """The envhub app. Nothing connects until it starts serving."""
    settings = settings or Settings()
    engine = create_db_engine(settings.database_url)
    leases = Leases(engine, ttl_s=settings.lease_ttl_s)
    hub = hub or hub_from_settings(settings)
    syncer = Syncer(engine, hub, workers=settings.hub_workers, leases=leases)
    secret = session_secret(settings)
    sessions = SessionStore(engine, secret, settings.session_max_age_s)
    endpoints = EndpointManager(
        engine,
        runtimes_from_settings(settings, sessions.sealer, leases.replica) if runtimes is None else runtimes,
        settings.data_dir / "endpoints",
        EndpointLimits(settings.max_endpoints, settings.max_endpoints_per_owner, settings.endpoint_idle_timeout_s),
        leases,
        Access(sign_in=settings.auth_mode != "off", anonymous_launch=settings.anonymous_may_launch()),
    )
    play_sessions = PlaySessions()

    guard = OutboundGuard(allow_private=settings.allow_private_urls)
    checker = Checker(
        engine,
        guard,
        timeout_s=settings.check_timeout_s,
        deadline_s=settings.check_deadline_s,
        max_running=settings.max_concurrent_checks,
    )
    # Publishing always acts with the user's token, never the server's HF_TOKEN.
    spaces = SpaceRuntime(settings.hf_endpoint, None, sealer=sessions.sealer, poll_s=settings.space_poll_s)
    publisher = Publisher(engine, spaces, checker, settings.hf_endpoint)
    monitor = HealthMonitor(
        engine,
        hub,
        endpoints,
        guard,
        concurrency=settings.health_concurrency,
        timeout_s=settings.health_timeout_s,
        hub_token=settings.hf_token.get_secret_value() if settings.hf_token else None,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(prepare_catalog, settings, engine, leases)
        await asyncio.to_thread(leases.start)
        await asyncio.to_thread(endpoints.keeper.reconcile)
        process = endpoints.runtimes.get(Backend.PROCESS)
        if settings.process_preload == Preload.START and isinstance(process, ProcessRuntime):
            # In the background: the first launch then finds the zygote ready, or waits for it.
            threading.Thread(target=process.warm, name="zygote-start", daemon=True).start()
        tasks = [asyncio.create_task(_watch_endpoints(endpoints)), asyncio.create_task(play_sessions.reap_forever())]
        if settings.sync_interval_s > 0:
            poll_s = settings.lease_ttl_s / 3
            tasks.append(asyncio.create_task(_sync_periodically(syncer, settings.sync_interval_s, poll_s)))
        if settings.health_interval_s > 0:
            tasks.append(asyncio.create_task(_monitor_periodically(monitor, settings.health_interval_s)))
        app.state.http = httpx.AsyncClient(timeout=httpx.Timeout(120, connect=5), limits=_HTTP_LIMITS)
        try:
            yield
        finally:
            syncer.stop()
            for task in tasks:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            await play_sessions.close_all()
            await publisher.aclose()
            await monitor.aclose()
            await app.state.http.aclose()
            await asyncio.to_thread(endpoints.keeper.shutdown)
            await asyncio.to_thread(leases.stop)
            engine.dispose()

    app = FastAPI(
        title="envhub",
        summary="Find, try and launch OpenEnv environments.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.leases = leases
    app.state.syncer = syncer
    app.state.endpoints = endpoints
    app.state.checker = checker
    app.state.monitor = monitor
    app.state.publisher = publisher
    app.state.guard = guard  # for anything else that fetches a user-supplied URL (the playground)
    app.state.session_secret = secret
    app.state.identities = identities = Identities(settings, sessions)
    app.state.oauth_provider = Provider(settings)

    @app.exception_handler(EnvhubError)
    async def envhub_error(_request: Request, exc: EnvhubError) -> JSONResponse:
        return JSONResponse(exc.payload(), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error_response(422, _describe_validation(exc))

    # Every state-changing API call that rides on a session cookie must carry its CSRF token.
    for module in (environments, datasets, sync, endpoints_api, checks, health, publications):
        app.include_router(module.router, dependencies=[Depends(require_csrf)])
    app.include_router(auth_routes.router)
    app.include_router(gateway.router)
    # Last: the UI's mount at / takes every path the routes above do not.
    mount_ui(app, UiContext(settings, engine, endpoints, play_sessions, guard, monitor, identities, publisher))
    return app
