"""Environment revisions: every one the catalog has seen, and ids that pin one.

A Space's revision is its commit sha, a template's the hash of its folder's files. An id
may carry one after an `@` (`owner/name@4f2a9c1`, `template:echo@9b1e03d2`); a prefix of
7 or more characters names it when no other known revision starts the same way. An id
without one means the catalog's current revision.
"""

import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlmodel import JSON, Field, Session, SQLModel, col

from core.clock import utcnow
from core.db import upsert
from core.errors import InvalidInputError, NotFoundError

__all__ = [
    "MIN_PREFIX",
    "EnvironmentRevision",
    "RevisionPublic",
    "RevisionsPublic",
    "folder_hash",
    "note_image",
    "note_interface",
    "note_revisions",
    "resolve_revision",
    "revisions_of",
    "split_pin",
]

MIN_PREFIX = 7
_HEX = re.compile(r"[0-9a-f]+")
_SKIPPED = {"__pycache__", ".git", ".venv", "node_modules"}


class EnvironmentRevision(SQLModel, table=True):
    """One revision the catalog has seen of an environment."""

    environment_id: str = Field(primary_key=True)
    revision: str = Field(primary_key=True, description="a Space's commit sha, a template folder's hash")
    committed_at: datetime | None = Field(default=None, description="the Space's last commit date, at this sha")
    seen_at: datetime = Field(default_factory=utcnow, description="when the catalog first saw it")
    image_digest: str | None = Field(
        default=None, description="the image envhub last ran of it in a container (built, or pulled), by id"
    )
    interface: dict[str, Any] | None = Field(
        default=None, sa_type=JSON, description="a template app's interface columns at it"
    )


class RevisionPublic(SQLModel):
    revision: str
    committed_at: datetime | None
    seen_at: datetime
    image_digest: str | None
    current: bool = Field(default=False, description="the revision the catalog lists the environment at now")


class RevisionsPublic(SQLModel):
    environment: str
    current: str | None
    data: list[RevisionPublic]


def folder_hash(folder: Path) -> str:
    """A hash of every file in a folder (by path and content): a template's revision."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not _SKIPPED.intersection(path.relative_to(folder).parts):
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def split_pin(environment_id: str) -> tuple[str, str | None]:
    """`owner/name@rev` -> (`owner/name`, `rev`); an id without `@` has no pin."""
    base, at, pin = environment_id.partition("@")
    return base, (pin.strip().lower() if at else None)


def note_revisions(session: Session, rows: list[dict[str, object]]) -> None:
    """Record the revision of each written environment row (its `sha`) the first time it is seen."""
    pairs = {(str(row["id"]), str(row["sha"])): row.get("last_modified") for row in rows if row.get("sha")}
    if not pairs:
        return
    statement = select(col(EnvironmentRevision.environment_id), col(EnvironmentRevision.revision)).where(
        col(EnvironmentRevision.environment_id).in_({environment for environment, _ in pairs})
    )
    known = {(environment, revision) for environment, revision in session.execute(statement)}
    now = utcnow()
    new = [
        {"environment_id": environment, "revision": revision, "committed_at": committed, "seen_at": now}
        for (environment, revision), committed in pairs.items()
        if (environment, revision) not in known
    ]
    upsert(session, EnvironmentRevision, new)


def resolve_revision(session: Session, environment_id: str, current: str | None, pin: str, *, hub: bool) -> str:
    """The full revision a pin names; a clear error when it names none, or more than one.

    A full 40-character sha of a Hub Space is taken as given even when no sync saw it: the Hub has it or
    the launch says it does not.
    """
    if len(pin) < MIN_PREFIX or not _HEX.fullmatch(pin):
        raise InvalidInputError(
            f"{pin!r} is not a revision of {environment_id}: give {MIN_PREFIX} or more hex characters of a "
            "commit sha (a template's: of its folder hash), as GET /api/environments/{id}/revisions lists them",
            code="revision_malformed",
        )
    seen = [r.revision for r in revisions_of(session, environment_id)]
    known = list(dict.fromkeys([*([current] if current else []), *seen]))
    matches = [revision for revision in known if revision.startswith(pin)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise InvalidInputError(
            f"{pin!r} starts {len(matches)} revisions of {environment_id} ({', '.join(m[:12] for m in matches)}); "
            "give more characters"
        )
    if hub and len(pin) == 40:
        return pin
    shown = ", ".join(r[:12] for r in known[:5]) or "none yet"
    raise NotFoundError(
        f"the catalog knows no revision {pin!r} of {environment_id} (known: {shown}); "
        "sync the catalog to see newer ones, or give a Space's full 40-character sha"
    )


def note_image(session: Session, environment_id: str, revision: str, digest: str) -> None:
    """Keep the image a container ran of a revision with it (a revision the catalog never saw gets none)."""
    row = session.get(EnvironmentRevision, (split_pin(environment_id)[0], revision))
    if row is not None and row.image_digest != digest:
        row.image_digest = digest
        session.add(row)
        session.commit()


def note_interface(session: Session, environment_id: str, revision: str, columns: dict[str, Any]) -> None:
    """Keep what an environment's app said of itself at a revision, for whenever the catalog lists that one again."""
    row = session.get(EnvironmentRevision, (environment_id, revision))
    if row is not None:
        row.interface = columns
        session.add(row)


def revisions_of(session: Session, environment_id: str) -> list[EnvironmentRevision]:
    """Every revision seen of an environment, newest first."""
    statement = (
        select(EnvironmentRevision)
        .where(col(EnvironmentRevision.environment_id) == environment_id)
        .order_by(col(EnvironmentRevision.seen_at).desc())
    )
    return list(session.execute(statement).scalars())
