"""Publishing a template: a new Space in the user's namespace, made with their token, followed until it
runs, then checked for conformance. The Space is theirs to keep; envhub never pauses or deletes it."""

import asyncio
import logging
import secrets
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlmodel import Session, col

from catalog.models import EnvironmentDetail, Source
from catalog.store import find_environment
from conformance.checker import Checker
from core.clock import utcnow
from core.errors import EnvhubError, InvalidInputError, NotFoundError
from hosting.models import Publication, PublicationStatus
from hosting.options import SpaceOptions
from hosting.runtimes.base import wait_healthy
from hosting.runtimes.spaces import SpaceRuntime

log = logging.getLogger(__name__)

# The stable codes beside a publication's message (its `reason`) while it goes well; a failure carries its error's.
CHECKING = "checking"  # the Space runs; its conformance is being checked
CHECKED = "checked"  # the Space runs and was checked: `conforms` and `check_id` say how


class Publisher:
    def __init__(self, engine: Engine, spaces: SpaceRuntime, checker: Checker, hub_endpoint: str) -> None:
        self.engine = engine
        self.spaces = spaces
        self.checker = checker
        self.hub_endpoint = hub_endpoint.rstrip("/")
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, publication_id: str) -> Publication:
        with Session(self.engine) as session:
            found = session.get(Publication, publication_id)
        if found is None:
            raise NotFoundError(f"no publication {publication_id!r}")
        return found

    def list(self, *, environment: str | None = None, owner: str | None = None, limit: int = 20) -> list[Publication]:
        statement = select(Publication).order_by(col(Publication.created_at).desc()).limit(limit)
        if environment is not None:
            statement = statement.where(col(Publication.environment) == environment)
        if owner is not None:
            statement = statement.where(col(Publication.owner) == owner)
        with Session(self.engine) as session:
            return list(session.execute(statement).scalars())

    async def publish(self, environment_id: str, owner: str, token: str, name: str | None = None) -> Publication:
        """Check the request, record it, and create and follow the Space in the background."""
        with Session(self.engine) as session:
            environment = find_environment(session, environment_id)
        if environment is None:
            raise NotFoundError(f"no environment {environment_id!r} in the catalog")
        if environment.source != Source.TEMPLATE or not environment.path:
            raise InvalidInputError(
                f"{environment.id} is not a template; only templates can be deployed as a Space", code="not_a_template"
            )
        try:
            options = SpaceOptions(name=name)
        except ValidationError as exc:
            raise InvalidInputError(f"{name!r} is not a valid Space name") from exc
        checked = await asyncio.to_thread(self.spaces.check, environment, options, token)
        space = checked.space_id
        if space.split("/")[0] != owner:
            raise InvalidInputError(f"the Space would be {space}, outside your namespace {owner}")
        publication = Publication(
            id=secrets.token_hex(5),
            environment=environment.id,
            space=space,
            owner=owner,
            message=f"creating {space}",
            space_url=f"{self.hub_endpoint}/spaces/{space}",
        )
        with Session(self.engine) as session:
            session.add(publication)
            session.commit()
            session.refresh(publication)
        task = asyncio.create_task(self._follow(publication.id, environment, space, token))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return publication

    async def _follow(self, publication_id: str, environment: EnvironmentDetail, space: str, token: str) -> None:
        def note(message: str) -> None:
            self._update(publication_id, message=message)

        try:
            await asyncio.to_thread(self.spaces.create, environment, space, token, note)
            url = await asyncio.to_thread(self.spaces.follow, space, token, note)
            await asyncio.to_thread(
                wait_healthy, url, timeout_s=120, alive=lambda: True, what=f"Space {space}", headers=None
            )
            checking = {"status": PublicationStatus.CHECKING, "message": "checking conformance", "reason": CHECKING}
            self._update(publication_id, url=url, **checking)
            report = await self.checker.check(url, environment=space, trusted=(url,))
        except EnvhubError as exc:
            self._finish(publication_id, PublicationStatus.FAILED, exc.message, exc.code)
            return
        except Exception as exc:
            log.exception("publishing %s failed", space)
            unexpected = f"failed unexpectedly: {type(exc).__name__}"
            self._finish(publication_id, PublicationStatus.FAILED, unexpected, EnvhubError.code)
            return
        verdict = "conforms" if report.conforms else "does not conform"
        summary = f"running; {verdict} ({report.core_passed}/{report.core_total} core checks)"
        self._finish(
            publication_id, PublicationStatus.RUNNING, summary, CHECKED, check_id=report.id, conforms=report.conforms
        )

    def _update(self, publication_id: str, **values: Any) -> None:
        with Session(self.engine) as session:
            row = session.get(Publication, publication_id)
            if row is None:
                return
            row.sqlmodel_update(values)
            session.add(row)
            session.commit()

    def _finish(self, publication_id: str, status: PublicationStatus, message: str, reason: str, **values: Any) -> None:
        self._update(publication_id, status=status, message=message, reason=reason, finished_at=utcnow(), **values)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
