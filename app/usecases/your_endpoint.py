"""The caller's endpoint of an environment, which Play, Evaluate and the detail page's reports use: found, or
launched when there is none, and followed until it runs; each read made off the event loop."""

import asyncio
from collections.abc import AsyncIterator

from catalog.models import EnvironmentDetail
from core.callers import Caller
from hosting.endpoints import EndpointManager
from hosting.models import Backend, Endpoint, EndpointStatus
from hosting.options import LaunchRequest

POLL_S = 0.3  # between reads of a starting endpoint: a launch's progress shows as it changes


def yours(endpoints: EndpointManager, caller: Caller) -> list[Endpoint]:
    """The active endpoints the caller launched (newest first); the admin's are everyone's. Without sign-in nobody
    is told apart, so every endpoint nobody owns is anyone's. Reads the database: call it off the loop."""
    active = endpoints.list(active_only=True)
    return active if caller.admin else [e for e in active if e.owner == caller.name]


def _reusable(endpoints: EndpointManager, caller: Caller, environment: EnvironmentDetail) -> Endpoint | None:
    for endpoint in yours(endpoints, caller):
        same = endpoint.environment == environment.id and endpoint.revision == environment.sha
        if same and endpoint.status in (EndpointStatus.RUNNING, EndpointStatus.STARTING):
            return endpoint
    return None


async def reusable(endpoints: EndpointManager, caller: Caller, environment: EnvironmentDetail) -> Endpoint | None:
    """The caller's newest running (or starting) endpoint of this environment at this revision."""
    return await asyncio.to_thread(_reusable, endpoints, caller, environment)


async def running(endpoints: EndpointManager, caller: Caller, environment: EnvironmentDetail) -> Endpoint | None:
    """The endpoint `reusable` picks, when it runs already."""
    endpoint = await reusable(endpoints, caller, environment)
    return endpoint if endpoint is not None and endpoint.status == EndpointStatus.RUNNING else None


async def launch_or_reuse(
    endpoints: EndpointManager, caller: Caller, environment: EnvironmentDetail
) -> tuple[Endpoint, bool]:
    """The caller's endpoint of the environment, and whether it was there already; one is launched for play (on the
    process backend, ended after play's idle time) when there is none. EnvhubError when the launch is refused."""
    endpoint = await reusable(endpoints, caller, environment)
    if endpoint is not None:
        return endpoint, True
    body = LaunchRequest(environment=environment.id, backend=Backend.PROCESS)
    return await asyncio.to_thread(endpoints.launch, body, caller, for_play=True), False


async def until_running(endpoints: EndpointManager, endpoint_id: str, timeout_s: float) -> AsyncIterator[Endpoint]:
    """The endpoint as it starts, read every POLL_S for up to `timeout_s`; the last one yielded is running, or
    failed, stopped, or still starting when the time ran out."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        endpoint = await asyncio.to_thread(endpoints.get, endpoint_id)
        yield endpoint
        if endpoint.status != EndpointStatus.STARTING or asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(POLL_S)
