"""openenv's validator on what envhub can reach: an environment's folder (a template's, or a Space's snapshot at
its revision) and a running server's URL, each report filed per revision; and the background rounds that run the
static level once on every revision that has no report.

A round looks at the templates, then at the Spaces whose snapshot envhub has downloaded (a launch downloads one),
and validates up to `per_round` revisions, one at a time. A revision whose validation failed to run is not tried
again by this process; the deeper levels and URL reports run on request only.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from openenv.validation import ValidationProvider
from sqlalchemy import Engine, select
from sqlmodel import Session, col

from catalog.models import Environment, EnvironmentDetail, Source
from catalog.revisions import folder_hash
from catalog.store import load_environment
from conformance.models import ValidatorReportPublic, ValidatorSuite
from conformance.validator import OPENENV_VERSION, ValidationLevel, Validator, file_report, validated_revisions
from core.errors import ConflictError, EnvhubError, InvalidInputError
from core.outbound import OutboundGuard
from hosting.runtimes.snapshots import Snapshots

__all__ = ["Validations", "validation_round"]

log = logging.getLogger("envhub")

_SCANNED = 500  # environments a round looks at, templates first


class Validations:
    """Runs openenv's validator on catalog environments and files each report under the revision it ran on."""

    def __init__(
        self,
        engine: Engine,
        validator: Validator,
        guard: OutboundGuard,
        snapshots: Snapshots | None,
        provider: Callable[[], ValidationProvider | None] = lambda: None,
    ) -> None:
        self.engine = engine
        self.validator = validator
        self.guard = guard
        self.snapshots = snapshots  # where Spaces are downloaded at their commits (None: no Space has a folder)
        # Builds and runs an image for the deeper levels, asked each time: a Docker engine may come and go (None:
        # their checks are the validator's named skips).
        self.provider = provider

    def folder_at_hand(self, environment: EnvironmentDetail, revision: str | None) -> Path | None:
        """The environment's files at `revision` when envhub has them, without downloading: a template's folder while
        it holds that revision, or a Space's snapshot downloaded at that commit."""
        if revision is None:
            return None
        if environment.source == Source.TEMPLATE and environment.path:
            folder = Path(environment.path)
            return folder if folder.is_dir() and folder_hash(folder) == revision else None
        if environment.source == Source.HUB and self.snapshots is not None:
            return self.snapshots.find(environment.id, revision)
        return None

    def folder(self, environment: EnvironmentDetail, token: str | None = None) -> Path:
        """The environment's files at its revision: a template's folder, or a Space's snapshot (downloaded with
        `token` when envhub has none)."""
        if environment.source == Source.TEMPLATE and environment.path:
            if environment.latest is not None:
                raise ConflictError(
                    f"{environment.id}'s folder holds its current revision {environment.latest[:12]} only: "
                    "validate it without a pinned revision",
                    code="validation_revision_gone",
                )
            return Path(environment.path)
        if environment.source == Source.HUB and environment.sha and self.snapshots is not None:
            found = self.snapshots.find(environment.id, environment.sha)
            return found or self.snapshots.fetch(environment.id, environment.sha, token, log.info)
        raise InvalidInputError(
            f"envhub has no files of {environment.id} to validate: validate its running server with a URL instead",
            code="validation_no_folder",
        )

    async def validate(
        self, environment_id: str, *, level: ValidationLevel = ValidationLevel.STATIC, token: str | None = None
    ) -> ValidatorReportPublic:
        """Validate an environment's folder up to `level` and file the report under its revision."""
        environment = await asyncio.to_thread(load_environment, self.engine, environment_id)
        folder = await asyncio.to_thread(self.folder, environment, token)
        started = time.monotonic()
        provider = await asyncio.to_thread(self.provider) if level != ValidationLevel.STATIC else None
        report = await self.validator.validate_folder(folder, level=level, provider=provider)
        return await asyncio.to_thread(
            file_report,
            self.engine,
            ValidatorSuite.FOLDER,
            report,
            environment=environment.id,
            revision=environment.sha,
            tool=OPENENV_VERSION,
            seconds=time.monotonic() - started,
        )

    async def validate_url(self, environment_id: str, url: str) -> ValidatorReportPublic:
        """Validate a running server of the environment and file the report beside its folder's."""
        environment = await asyncio.to_thread(load_environment, self.engine, environment_id)
        started = time.monotonic()
        report = await self.validator.validate_url(url, self.guard)
        return await asyncio.to_thread(
            file_report,
            self.engine,
            ValidatorSuite.URL,
            report,
            environment=environment.id,
            revision=environment.sha,
            tool=OPENENV_VERSION,
            seconds=time.monotonic() - started,
        )

    def due(self, tried: set[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
        """Up to `limit` environments whose current revision has no folder report: templates, then Spaces whose
        snapshot envhub has."""
        statement = (
            select(Environment)
            .where(
                col(Environment.source).in_([Source.TEMPLATE, Source.HUB]),
                col(Environment.removed_at).is_(None),
                col(Environment.sha).is_not(None),
            )
            .order_by(col(Environment.source).desc(), col(Environment.id))  # "template" sorts after "hub"
            .limit(_SCANNED)
        )
        with Session(self.engine) as session:
            rows = list(session.execute(statement).scalars())
        skip = tried | validated_revisions(self.engine, [r.id for r in rows])
        due = []
        for row in rows:
            if (row.id, str(row.sha)) in skip:
                continue
            has_folder = row.source == Source.TEMPLATE or (
                self.snapshots is not None and self.snapshots.find(row.id, str(row.sha)) is not None
            )
            if has_folder:
                due.append((row.id, str(row.sha)))
        return due[:limit]


def validation_round(validations: Validations, per_round: int) -> Callable[[], Awaitable[None]]:
    tried: set[tuple[str, str]] = set()

    async def validate() -> None:
        for environment, revision in await asyncio.to_thread(validations.due, tried, per_round):
            tried.add((environment, revision))
            try:
                filed = await validations.validate(f"{environment}@{revision}")
            except EnvhubError as exc:
                log.info("openenv's validator did not run on %s@%s: %s", environment, revision[:12], exc.message)
                continue
            log.info("openenv validate of %s@%s: %s", environment, revision[:12], filed.verdict)

    return validate
