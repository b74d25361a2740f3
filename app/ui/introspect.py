"""A built-in template's interface read from its source, without a launch: its server run for a moment by the process
backend (no endpoint, nothing counted), asked what it serves, stopped, and what it said cached on the catalog row,
as a launch's would be. The environment page's API and Tasks tabs show it before anyone launches the template."""

import asyncio
import logging
import secrets
import weakref
from contextlib import suppress

from app.services import Services
from catalog.models import EnvironmentDetail, Source
from catalog.store import cache_interface
from core.errors import EnvhubError
from core.outbound import live_session
from hosting.models import Backend
from hosting.options import ProcessOptions
from hosting.runtimes import LaunchSpec
from hosting.runtimes.process import ProcessRuntime
from protocol.interface import Interface, read_interface

log = logging.getLogger(__name__)

# One look at a template at a time (the next finds it cached), per event loop: a lock belongs to one loop.
_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]" = weakref.WeakKeyDictionary()


def can_introspect(services: Services, environment: EnvironmentDetail) -> bool:
    """A template folder (envhub's own or the operator's) that the process backend of this server can run."""
    runtime = services.endpoints.runtimes.get(Backend.PROCESS)
    return environment.source == Source.TEMPLATE and bool(environment.path) and isinstance(runtime, ProcessRuntime)


async def template_interface(services: Services, environment: EnvironmentDetail) -> Interface:
    """What the template's server says about itself (schema, tools, tasks), cached on its row; an empty Interface
    with the problem when it could not be run."""
    runtime = services.endpoints.runtimes.get(Backend.PROCESS)
    if not isinstance(runtime, ProcessRuntime):
        return Interface()
    locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})
    async with locks.setdefault(environment.id, asyncio.Lock()):
        server_id = f"look-{secrets.token_hex(4)}"
        log_path = services.endpoints.log_path(server_id)
        try:
            options = runtime.check(environment, ProcessOptions(), None)
            spec = LaunchSpec(server_id=server_id, environment=environment, log_path=log_path, options=options)
            launched = await asyncio.to_thread(runtime.start, spec, lambda _said: None)
        except EnvhubError as exc:
            log.info("could not read %s's interface from its source: %s", environment.id, exc.message)
            return Interface(problems=[f"its server did not start here: {exc.message}"])
        outbound = live_session(services.guard, launched.url)
        try:
            info = await read_interface(launched.url, outbound)
        finally:
            await outbound.aclose()
            await asyncio.to_thread(runtime.stop, launched.handle)
            with suppress(OSError):
                log_path.unlink()
    if info.schema is not None:
        await asyncio.to_thread(_cache, services, environment.id, info)
    return info


def _cache(services: Services, environment_id: str, info: Interface) -> None:
    with services.db() as session:
        cache_interface(session, environment_id, info)
        session.commit()
