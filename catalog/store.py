"""The catalog's reads and writes: environment rows by id, their links, tags and cached interface, health and checks.

Search (catalog.search) and the sync (catalog.sync) have their own modules; everything
else that reads or writes an environment row, whichever package it serves, goes through here.
"""

import asyncio
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, delete, desc, func, select
from sqlmodel import Session, col

from catalog.health import record
from catalog.models import (
    ConformanceSummary,
    Dataset,
    DatasetDetail,
    Environment,
    EnvironmentDataset,
    EnvironmentDetail,
    EnvironmentTag,
    HealthRecord,
    LinkOrigin,
    QualitySummary,
    Source,
)
from catalog.revisions import note_interface, note_revisions, resolve_revision, split_pin
from core.clock import utcnow
from core.db import upsert
from core.errors import InvalidInputError, NotFoundError
from envclient.health import Probe
from envclient.interface import Interface, Split
from protocol.tools import parse_tools

__all__ = [
    "cache_interface",
    "cache_interface_at",
    "cached_interface",
    "count_listed",
    "environment_at",
    "find_environment",
    "get_dataset",
    "get_environment",
    "interface_columns",
    "list_tags",
    "note_conformance",
    "note_quality",
    "replace_tags",
    "save_health",
    "save_registered",
    "write_environments",
]


def _linked(session: Session, *, environment_id: str | None = None, dataset_id: str | None = None) -> list[str]:
    if environment_id is not None:
        statement = select(col(EnvironmentDataset.dataset_id)).where(
            col(EnvironmentDataset.environment_id) == environment_id
        )
    else:
        statement = select(col(EnvironmentDataset.environment_id)).where(
            col(EnvironmentDataset.dataset_id) == dataset_id
        )
    return sorted(set(session.execute(statement).scalars()))


def find_environment(session: Session, environment_id: str) -> EnvironmentDetail | None:
    """An environment by id; an id pinned to a revision (`owner/name@sha`, catalog.revisions) gives it with
    that revision as its `sha`, and the catalog's own as `latest` when that is another."""
    base, pin = split_pin(environment_id)
    environment = session.get(Environment, base)
    if environment is None:
        return None
    detail = EnvironmentDetail.model_validate(environment)
    detail.datasets = _linked(session, environment_id=base)
    if pin is not None:
        revision = resolve_revision(session, base, environment.sha, pin, hub=environment.source == Source.HUB)
        detail.latest = environment.sha if revision != environment.sha else None
        detail.sha = revision
    return detail


async def read_environment(engine: Engine, environment_id: str) -> EnvironmentDetail | None:
    """`find_environment` in a session of its own, off the event loop: async handlers share the loop with the
    gateway's sessions, which a slow database must not hold up."""

    def read() -> EnvironmentDetail | None:
        with Session(engine) as session:
            return find_environment(session, environment_id)

    return await asyncio.to_thread(read)


def get_environment(session: Session, environment_id: str) -> EnvironmentDetail:
    detail = find_environment(session, environment_id)
    if detail is None:
        raise NotFoundError(
            f"no environment {environment_id!r} in the catalog; find ids with GET /api/environments?q=..."
        )
    return detail


def load_environment(engine: Engine, environment_id: str) -> EnvironmentDetail:
    """`get_environment` in a session of its own, for a worker thread."""
    with Session(engine) as session:
        return get_environment(session, environment_id)


def get_dataset(session: Session, dataset_id: str) -> DatasetDetail:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise NotFoundError(f"no dataset {dataset_id!r} in the catalog; list them with GET /api/datasets")
    detail = DatasetDetail.model_validate(dataset)
    detail.environments = _linked(session, dataset_id=dataset_id)
    return detail


def list_tags(session: Session, *, limit: int = 50) -> list[tuple[str, int]]:
    """The most used tags of listed environments, with how many use each."""
    uses = func.count().label("uses")
    statement = (
        select(col(EnvironmentTag.tag), uses)
        .join(Environment, col(Environment.id) == col(EnvironmentTag.environment_id))
        .where(col(Environment.removed_at).is_(None))
        .group_by(col(EnvironmentTag.tag))
        .order_by(desc(uses), col(EnvironmentTag.tag))
        .limit(limit)
    )
    return [(str(tag), int(count)) for tag, count in session.execute(statement)]


def count_listed(session: Session) -> int:
    """Environments in the catalog that are not marked removed."""
    listed = select(func.count()).select_from(Environment).where(col(Environment.removed_at).is_(None))
    count: int = session.execute(listed).scalar_one()
    return count


def replace_tags(session: Session, rows: list[dict[str, Any]]) -> None:
    """Make the tag index match the `tags` of these environment rows."""
    ids = [r["id"] for r in rows]
    session.execute(delete(EnvironmentTag).where(col(EnvironmentTag.environment_id).in_(ids)))
    upsert(session, EnvironmentTag, [{"environment_id": r["id"], "tag": t} for r in rows for t in set(r["tags"])])


def write_environments(session: Session, rows: list[dict[str, Any]], datasets: dict[str, list[str]]) -> None:
    """Upsert full environment rows with their tags and the datasets their cards name."""
    upsert(session, Environment, rows)
    note_revisions(session, rows)
    replace_tags(session, rows)
    session.execute(
        delete(EnvironmentDataset).where(
            col(EnvironmentDataset.environment_id).in_([r["id"] for r in rows]),
            col(EnvironmentDataset.named_by) == LinkOrigin.ENVIRONMENT,
        )
    )
    links = [
        {"environment_id": env_id, "dataset_id": d, "named_by": LinkOrigin.ENVIRONMENT}
        for env_id, names in datasets.items()
        for d in names
    ]
    upsert(session, EnvironmentDataset, links)


def environment_at(session: Session, url: str) -> str | None:
    """The Hub Space or registered URL the catalog knows at this address."""
    statement = select(col(Environment.id)).where(
        col(Environment.host).in_([url, url + "/"]), col(Environment.source).in_([Source.HUB, Source.URL])
    )
    return session.execute(statement.limit(1)).scalars().first()


def note_conformance(session: Session, environment_id: str, summary: ConformanceSummary) -> None:
    """The summary of an environment's last conformance check, on its row."""
    row = session.get(Environment, environment_id)
    if row is not None:
        row.conformance = summary.model_dump(mode="json")
        session.add(row)


def note_quality(session: Session, environment_id: str, summary: QualitySummary) -> None:
    """The summary of an environment's last quality report, on its row."""
    row = session.get(Environment, environment_id)
    if row is not None:
        row.quality = summary.model_dump(mode="json")
        session.add(row)


def cache_interface(session: Session, environment_id: str, interface: Interface) -> bool:
    """What an environment's server says about itself, cached on its row; False when there is no row."""
    row = session.get(Environment, environment_id)
    if row is None:
        return False
    row.sqlmodel_update(interface_columns(interface))
    session.add(row)
    return True


def cache_interface_at(session: Session, environment_id: str, revision: str | None, columns: dict[str, Any]) -> None:
    """What an environment's app said of itself at `revision` (its `interface_columns`): on its row while the row is
    at that revision, and with the revision, for a later sync that lists that revision again."""
    row = session.get(Environment, environment_id)
    if row is not None and row.sha == revision:
        row.sqlmodel_update(columns)
        session.add(row)
    if revision:
        note_interface(session, environment_id, revision, columns)


def save_health(
    session: Session,
    environment_id: str,
    health: HealthRecord,
    interface: Interface | None = None,
    updates: dict[str, Any] | None = None,
) -> bool:
    """What the health monitor saw of an environment: its health, the interface it read, and Hub facts.

    False when the environment is not in the catalog (any more).
    """
    row = session.get(Environment, environment_id)
    if row is None:
        return False
    cached = interface_columns(interface) if interface is not None else {}
    for column, value in {**(updates or {}), **cached}.items():
        setattr(row, column, value)
    row.health = health
    session.add(row)
    return True


def save_registered(session: Session, environment_id: str, url: str, seen: Probe) -> bool:
    """Make or refresh the row of a self-hosted endpoint registered by URL, from what its probe saw of it.

    True when the row is new.
    """
    interface = seen.interface
    metadata = (interface.metadata if interface else None) or {}
    name = str(metadata["name"]) if isinstance(metadata.get("name"), str) else None
    description = str(metadata["description"]) if isinstance(metadata.get("description"), str) else ""
    row = session.get(Environment, environment_id)
    created = row is None
    if row is None:
        row = Environment(id=environment_id, source=Source.URL, title=name or urlsplit(url).netloc)
    elif row.source != Source.URL:
        raise InvalidInputError(f"{environment_id} is already in the catalog as a {row.source.value} environment")
    row.title = (name or row.title)[:200]
    row.description = description[:2000]
    row.host = url
    row.author = None
    row.removed_at = None
    row.indexed_at = utcnow()
    for column, value in (interface_columns(interface) if interface else {}).items():
        setattr(row, column, value)
    row.health = record(row.health, seen)
    session.add(row)
    return created


def interface_columns(interface: Interface) -> dict[str, Any]:
    """The environment row's columns that cache what its server says about itself."""
    splits = [{"name": s.name, "type": s.type, "num_tasks": s.count, "first": list(s.first)} for s in interface.splits]
    return {
        "env_metadata": interface.metadata,
        "env_schema": interface.schema,
        "tools": None if interface.tools is None else [tool.listed() for tool in interface.tools],
        "tasks": {"env_name": interface.task_env, "splits": splits} if interface.task_env and splits else None,
    }


def cached_interface(environment: EnvironmentDetail) -> Interface:
    """What the catalog last cached of an environment's interface (the health monitor keeps it)."""
    tasks = environment.tasks or {}
    splits = []
    for item in tasks.get("splits") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            count = item.get("num_tasks", item.get("count"))
            first = item.get("first")
            splits.append(
                Split(
                    item["name"],
                    str(item.get("type") or ""),
                    count if isinstance(count, int) else None,
                    tuple(first) if isinstance(first, list) else (),
                )
            )
    task_env = tasks.get("env_name")
    return Interface(
        metadata=environment.env_metadata,
        schema=environment.env_schema,
        tools=None if environment.tools is None else tuple(parse_tools(environment.tools)),
        task_env=task_env if isinstance(task_env, str) else None,
        splits=tuple(splits),
    )
