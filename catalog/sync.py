"""Indexing the Hub into the catalog: incremental, fault tolerant, all or nothing.

A sync lists every environment Space and dataset, downloads README.md and
openenv.yaml only for Spaces whose commit changed, and writes everything in one
transaction, so a sync that cannot finish leaves the previous catalog as it was.
"""

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, desc, func, select, update
from sqlmodel import Session, col

from catalog.cards import MANIFEST_LIMIT, README_LIMIT, card_values, parse_manifest, parse_readme
from catalog.hub import DatasetListing, Hub, SpaceListing
from catalog.models import (
    Dataset,
    Environment,
    EnvironmentDataset,
    LinkOrigin,
    Source,
    SyncCounts,
    SyncRun,
    SyncRunPublic,
    SyncStatus,
)
from catalog.store import replace_tags, write_environments
from catalog.text import plain_text
from core.clock import utcnow
from core.db import upsert
from core.errors import ConflictError, EnvhubError, NotFoundError, ShuttingDownError
from core.leases import Leases

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
T = TypeVar("T")
_BATCH = 200
SYNC_RUNNING = "sync-running"  # the lease of whichever instance runs a sync now, whoever asked for it


@dataclass
class Indexed:
    """A Space turned into a catalog row, or the reason it could not be."""

    listing: SpaceListing
    row: dict[str, Any] = field(default_factory=dict)
    datasets: list[str] = field(default_factory=list)
    error: str | None = None


LISTING_COLUMNS = ("author", "likes", "trending_score", "sdk", "tags", "runtime_stage", "host", "last_modified")


def listing_values(listing: SpaceListing) -> dict[str, Any]:
    """The columns a listing alone refreshes, without downloading any file."""
    return {
        "author": listing.author,
        "likes": listing.likes,
        "trending_score": listing.trending_score,
        "sdk": listing.sdk,
        "tags": listing.tags,
        "runtime_stage": listing.stage,
        "host": listing.host,
        "last_modified": listing.last_modified,
    }


def index_space(hub: Hub, listing: SpaceListing) -> Indexed:
    """Download a Space's README.md and openenv.yaml and build its catalog row."""
    revision = listing.sha or "main"
    try:
        readme_file = hub.fetch_space_file(listing.id, "README.md", revision, README_LIMIT)
        manifest_file = hub.fetch_space_file(listing.id, "openenv.yaml", revision, MANIFEST_LIMIT + 1)
    except EnvhubError as exc:
        return Indexed(listing, error=exc.message)
    readme = parse_readme(readme_file.content if readme_file else None, cut=bool(readme_file and readme_file.cut))
    manifest = parse_manifest(manifest_file.content if manifest_file else None)
    values, fields = card_values(readme, manifest)
    row = {
        **values,
        **listing_values(listing),
        "id": listing.id,
        "source": Source.HUB,
        "title": fields.title or listing.id.split("/", 1)[1],
        "tags": listing.tags or fields.tags,
        "sdk": listing.sdk or fields.sdk,
        "sha": listing.sha,
        "removed_at": None,
        "indexed_at": utcnow(),
    }
    datasets = [d for d in fields.datasets if d.count("/") == 1]
    return Indexed(listing, row, datasets)


def _failure_values(indexed: Indexed) -> dict[str, Any]:
    """What is kept of a Space whose files could not be read: its listing and the reason.

    The sha is cleared so that the next sync tries the download again.
    """
    return {
        "sha": None,
        "problems": [f"could not read the Space's files: {indexed.error}"],
        "removed_at": None,
        "indexed_at": utcnow(),
        **listing_values(indexed.listing),
    }


def _dataset_row(listing: DatasetListing) -> dict[str, Any]:
    problems: list[str] = []
    description = listing.description or str(listing.card.get("pretty_name") or "")
    return {
        "id": listing.id,
        "author": listing.author,
        "description": plain_text(description, "description", 1000, problems),
        "tags": listing.tags,
        "likes": listing.likes,
        "downloads": listing.downloads,
        "last_modified": listing.last_modified,
        "sha": listing.sha,
        "card": listing.card,
        "problems": problems,
        "removed_at": None,
        "indexed_at": utcnow(),
    }


def named_environments(listing: DatasetListing) -> set[str]:
    """Environment ids a dataset names: its card's spaces/environments, or space:/env: tags."""
    names: set[str] = set()

    def take(value: Any, depth: int = 0) -> None:
        if isinstance(value, str):
            names.add(value.strip())
        elif isinstance(value, list) and depth < 3:
            for item in value[:1000]:
                take(item, depth + 1)
        elif isinstance(value, dict) and depth < 3:
            for key in ("space_id", "space", "spaces", "id", "environment", "environments"):
                take(value.get(key), depth + 1)

    for key in ("spaces", "space", "environments", "environment", "openenv"):
        take(listing.card.get(key))
    for tag in listing.tags:
        prefix, _, rest = tag.partition(":")
        if prefix in ("space", "env", "environment", "openenv") and rest:
            names.add(rest)
    return names


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Syncer:
    """Runs syncs of one database against one Hub, one at a time across every instance."""

    def __init__(self, engine: Engine, hub: Hub, *, workers: int = 8, leases: Leases | None = None) -> None:
        self.engine = engine
        self.hub = hub
        self.workers = workers
        self.leases = leases or Leases(engine)
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    @property
    def running(self) -> bool:
        return self._lock.locked()

    def run(self, *, full: bool = False, progress: Progress | None = None) -> SyncRunPublic:
        """One sync, to the end. A failed sync is returned with its reason, not raised."""
        return self._finish(self._begin(full), progress)

    def start(self, *, full: bool = False) -> SyncRunPublic:
        """Begin a sync in a background thread and return its record at once."""
        run = self._begin(full)
        threading.Thread(target=self._finish, args=(run, None), name="envhub-sync", daemon=True).start()
        return run

    def stop(self) -> None:
        """Ask a running sync to give up; it rolls back and records why."""
        self._stopping.set()

    def _begin(self, full: bool) -> SyncRunPublic:
        if not self._lock.acquire(blocking=False):
            raise ConflictError("a sync is already running; wait for it to finish")
        try:
            if not self.leases.acquire(SYNC_RUNNING):
                where = self.leases.holder(SYNC_RUNNING) or "another instance"
                raise ConflictError(f"a sync is already running on {where}; wait for it to finish")
            close_interrupted_runs(self.engine, self.leases)
            self._stopping.clear()
            with Session(self.engine) as session:
                run = SyncRun(full=full, instance=self.leases.instance)
                session.add(run)
                session.commit()
                return SyncRunPublic.model_validate(run)
        except BaseException:
            self.leases.release(SYNC_RUNNING)
            self._lock.release()
            raise

    def _finish(self, run: SyncRunPublic, progress: Progress | None) -> SyncRunPublic:
        try:
            started = time.monotonic()
            requests_before = self.hub.requests
            counts = SyncCounts()
            error: str | None = None
            try:
                counts = self._index(run.full, progress)
            except EnvhubError as exc:
                error = exc.message
            except Exception as exc:  # the run record must say why, whatever broke
                log.exception("sync failed")
                error = f"{type(exc).__name__}: {exc}"
            with Session(self.engine) as session:
                record = session.get_one(SyncRun, run.id)
                record.sqlmodel_update(counts.model_dump())
                record.status = SyncStatus.FAILED if error else SyncStatus.OK
                record.error = error and f"{error}. The catalog was left as it was; try again later"
                record.requests = self.hub.requests - requests_before
                record.seconds = round(time.monotonic() - started, 3)
                record.finished_at = utcnow()
                session.add(record)
                session.commit()
                return SyncRunPublic.model_validate(record)
        finally:
            self.leases.release(SYNC_RUNNING)
            self._lock.release()

    def due(self, interval_s: float) -> bool:
        """Whether the catalog's last sync, by any instance, began `interval_s` or more ago."""
        with Session(self.engine) as session:
            last = last_sync_started(session)
        return last is None or (utcnow() - last).total_seconds() >= interval_s

    def _index(self, full: bool, progress: Progress | None) -> SyncCounts:
        listings = list({s.id: s for s in self.hub.list_environment_spaces()}.values())
        datasets = list(self.hub.list_environment_datasets())
        counts = SyncCounts()
        with Session(self.engine) as session, session.begin():
            columns = [col(getattr(Environment, c)) for c in ("id", "sha", "removed_at", *LISTING_COLUMNS)]
            known = {
                row.id: row for row in session.execute(select(*columns).where(col(Environment.source) == Source.HUB))
            }
            to_index: list[SpaceListing] = []
            refreshed: list[dict[str, Any]] = []
            for listing in listings:
                old = known.get(listing.id)
                if full or old is None or old.sha is None or old.sha != listing.sha:
                    to_index.append(listing)
                    continue
                values = listing_values(listing)
                if old.removed_at is None and all(getattr(old, k) == v for k, v in values.items()):
                    counts.unchanged += 1
                else:
                    refreshed.append({"id": listing.id, "removed_at": None, **values})
            for chunk in chunks(refreshed, _BATCH):
                session.execute(update(Environment), chunk)  # bulk UPDATE by primary key
                replace_tags(session, chunk)
            counts.updated += len(refreshed)
            self._index_spaces(session, to_index, set(known), counts, progress)

            listed = {s.id for s in listings}
            gone = [i for i, row in known.items() if i not in listed and row.removed_at is None]
            for chunk in chunks(gone, 500):
                session.execute(update(Environment).where(col(Environment.id).in_(chunk)).values(removed_at=utcnow()))
            counts.removed = len(gone)
            counts.datasets = self._index_datasets(session, datasets)
        return counts

    def _index_spaces(
        self,
        session: Session,
        listings: list[SpaceListing],
        known: set[str],
        counts: SyncCounts,
        progress: Progress | None,
    ) -> None:
        batch: list[Indexed] = []
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="envhub-sync") as pool:
            futures = [pool.submit(index_space, self.hub, s) for s in listings]
            try:
                for done, future in enumerate(as_completed(futures), start=1):
                    if self._stopping.is_set():
                        raise ShuttingDownError("the sync was stopped because envhub is shutting down")
                    indexed = future.result()
                    if indexed.error:
                        counts.failed += 1
                        self._write_failure(session, indexed, indexed.listing.id in known)
                    else:
                        counts.updated += indexed.listing.id in known
                        counts.added += indexed.listing.id not in known
                        batch.append(indexed)
                    if len(batch) >= _BATCH:
                        self._write(session, batch)
                        batch = []
                    if progress:
                        progress(done, len(listings))
            finally:
                for future in futures:
                    future.cancel()
        self._write(session, batch)

    def _write(self, session: Session, batch: list[Indexed]) -> None:
        if batch:
            write_environments(session, [i.row for i in batch], {i.listing.id: i.datasets for i in batch})

    def _write_failure(self, session: Session, indexed: Indexed, known: bool) -> None:
        values = _failure_values(indexed)
        if known:
            session.execute(update(Environment), [{"id": indexed.listing.id, **values}])
        else:
            title = indexed.listing.id.split("/", 1)[1]
            upsert(session, Environment, [{"id": indexed.listing.id, "source": Source.HUB, "title": title, **values}])
        replace_tags(session, [{"id": indexed.listing.id, **values}])

    def _index_datasets(self, session: Session, listings: list[DatasetListing]) -> int:
        rows = [_dataset_row(d) for d in listings]
        for chunk in chunks(rows, _BATCH):
            upsert(session, Dataset, chunk)
        listed = {d.id for d in listings}
        stale = [
            i
            for i in session.execute(select(col(Dataset.id)).where(col(Dataset.removed_at).is_(None))).scalars()
            if i not in listed
        ]
        for chunk in chunks(stale, 500):
            session.execute(update(Dataset).where(col(Dataset.id).in_(chunk)).values(removed_at=utcnow()))
        session.execute(delete(EnvironmentDataset).where(col(EnvironmentDataset.named_by) == LinkOrigin.DATASET))
        environment_ids = set(session.execute(select(col(Environment.id))).scalars())
        links = [
            {"environment_id": env_id, "dataset_id": d.id, "named_by": LinkOrigin.DATASET}
            for d in listings
            for env_id in sorted(named_environments(d) & environment_ids)
        ]
        for chunk in chunks(links, 500):
            upsert(session, EnvironmentDataset, chunk)
        return len(rows)


def close_interrupted_runs(engine: Engine, leases: Leases) -> None:
    """Runs left 'running' by an instance that died are marked failed, so none looks stuck.

    A run is interrupted when its instance no longer holds the sync-running lease: the run
    of another live instance (or of this one) goes on untouched.
    """
    holder = leases.holder(SYNC_RUNNING)
    interrupted = col(SyncRun.status) == SyncStatus.RUNNING
    if holder is not None:
        interrupted &= col(SyncRun.instance).is_(None) | (col(SyncRun.instance) != holder)
    with Session(engine) as session, session.begin():
        session.execute(
            update(SyncRun)
            .where(interrupted)
            .values(status=SyncStatus.FAILED, error="interrupted: envhub stopped during this sync")
        )


def last_sync_started(session: Session) -> datetime | None:
    """When the last sync that ran to its end, or runs now, began; interrupted ones do not count."""
    started: datetime | None = session.execute(
        select(func.max(col(SyncRun.started_at))).where(
            col(SyncRun.finished_at).is_not(None) | (col(SyncRun.status) == SyncStatus.RUNNING)
        )
    ).scalar()
    if started is None:
        return None
    return started if started.tzinfo else started.replace(tzinfo=UTC)  # SQLite gives naive UTC back


def list_sync_runs(session: Session, limit: int = 20) -> list[SyncRunPublic]:
    runs = session.execute(select(SyncRun).order_by(desc(col(SyncRun.id))).limit(limit)).scalars()
    return [SyncRunPublic.model_validate(r) for r in runs]


def get_sync_run(session: Session, run_id: int) -> SyncRunPublic:
    run = session.get(SyncRun, run_id)
    if run is None:
        raise NotFoundError(f"no sync run {run_id}; list them with GET /api/sync")
    return SyncRunPublic.model_validate(run)
