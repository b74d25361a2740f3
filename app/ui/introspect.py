"""A built-in template's interface read from its source, without a launch: its app served for a moment by a process
of its own (app.ui.interface_probe, no endpoint, nothing counted), asked what it serves, and what it said cached on
the catalog row as a launch's would be, and with its revision. The environment page's API and Tasks tabs show it
before any launch."""

import asyncio
import json
import logging
import os
import sys
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from app.settings import REPO_ROOT
from catalog.models import EnvironmentDetail, Source
from catalog.store import cache_interface_at, cached_interface, read_environment
from envclient.interface import Interface
from hosting.runtimes.layouts import template_layout
from hosting.runtimes.venvs import requirements_of, unmet

log = logging.getLogger(__name__)

PROBE_S = 90  # for the probe to import the app, serve it and read it
_SETTINGS = ("ENVHUB_", "HF_", "HUGGING_FACE_", "OAUTH_", "OPENID_")  # none of envhub's settings or secrets
# One look at a template at a time (the next finds it cached), per event loop: a lock belongs to one loop.
_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]" = weakref.WeakKeyDictionary()


def can_introspect(environment: EnvironmentDetail) -> bool:
    """A template folder (envhub's own or the operator's) whose requirements envhub's interpreter meets, laid out as
    a plain app (not a package to link under its name): its source can be served by envhub's interpreter as it is."""
    if environment.source != Source.TEMPLATE or not environment.path:
        return False
    folder = Path(environment.path)
    layout = template_layout(folder, [folder.name])
    return layout.package is None and not unmet(requirements_of(folder / layout.requirements))


async def template_interface(engine: Engine, environment: EnvironmentDetail) -> Interface:
    """What the template's app says about itself (schema, tools, tasks), cached on its row; an empty Interface with
    the problem when it could not be read."""
    folder = Path(str(environment.path))
    layout = template_layout(folder, [folder.name])
    locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})
    async with locks.setdefault(environment.id, asyncio.Lock()):
        current = await read_environment(engine, environment.id)
        if current is not None and current.env_schema is not None:  # read while this one waited
            return cached_interface(current)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SETTINGS)} | {"PYTHONPATH": str(REPO_ROOT)}
        paths = [str(folder / entry) for entry in layout.path]
        probe = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.ui.interface_probe", layout.app, str(folder / layout.cwd), *paths,
            cwd=REPO_ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            out, err = await asyncio.wait_for(probe.communicate(), PROBE_S)
        except TimeoutError:
            probe.kill()
            await probe.wait()
            return Interface(problems=[f"its app did not answer within {PROBE_S} s; launch it to read its schemas"])
        except asyncio.CancelledError:  # the page went, or envhub is stopping: the probe goes too, its pipes closed
            probe.kill()
            await probe.wait()
            raise
        if probe.returncode != 0:
            last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            log.info("could not read %s's interface from its source: %s", environment.id, last[0])
            return Interface(problems=[f"its app could not be read from its source ({last[0][:300]})"])
        columns: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        await asyncio.to_thread(_cache, engine, environment.id, environment.sha, columns)
    found = await read_environment(engine, environment.id)
    return cached_interface(found) if found is not None else Interface()


def _cache(engine: Engine, environment_id: str, revision: str | None, columns: dict[str, Any]) -> None:
    with Session(engine) as session:
        cache_interface_at(session, environment_id, revision, columns)
        session.commit()
