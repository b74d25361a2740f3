"""Searching the catalog: full-text search of environments with filters and ranking, and of datasets."""

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Select,
    String,
    and_,
    case,
    cast,
    column,
    desc,
    func,
    literal_column,
    or_,
    select,
    table,
    text,
)
from sqlmodel import Session, col

from catalog import search_postgres
from catalog.models import (
    Dataset,
    DatasetPublic,
    Environment,
    EnvironmentPublic,
    EnvironmentTag,
    Source,
    SyncRun,
    SyncRunPublic,
    SyncStatus,
    Verdict,
)
from core.db import is_sqlite
from envclient.health import HealthStatus

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 16
_FTS = table("environment_fts", column("rowid"), column("rank"))


class Sort(StrEnum):
    RELEVANCE = "relevance"
    LIKES = "likes"
    TRENDING = "trending"
    UPDATED = "updated"
    QUALITY = "quality"  # the last quality report's verdict: pass, warn, fail, then none


class EnvironmentQuery(BaseModel):
    """A catalog search: words, filters, order and page."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q: str = Field(default="", max_length=500)
    tags: list[str] = Field(default_factory=list, max_length=20)
    author: str | None = None
    source: Source | None = None
    sdk: str | None = None
    stage: str | None = Field(default=None, description="runtime stage, e.g. RUNNING")
    has_tools: bool = Field(default=False, description="only environments with MCP tools")
    has_tasks: bool = Field(default=False, description="only environments serving the Task API")
    conforms: bool = Field(default=False, description="only environments whose last check passed every core check")
    up: bool = Field(default=False, description="only environments the health monitor last saw up")
    quality: list[Verdict] = Field(
        default_factory=list, max_length=3, description="only environments whose last quality report has one of these"
    )
    teaches: bool = Field(
        default=False,
        description="only environments whose newest board submission passed or warned with a training signal above 0",
    )
    sort: Sort = Sort.RELEVANCE
    limit: int = Field(default=20, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=100_000)
    include_removed: bool = Field(
        default=False, description="list removed environments too (words only ever match listed ones)"
    )


def query_terms(q: str) -> list[str]:
    return _WORD.findall(q.lower())[:_MAX_TERMS]


def fts_match(q: str) -> str:
    """An FTS5 MATCH expression: every word must appear; the last may be a prefix (as you type)."""
    quoted = [f'"{t}"' for t in query_terms(q)]
    quoted[-1] += "*"
    return " ".join(quoted)


def tag_key(tag: str) -> str:
    """The single token that stands for one whole tag in SQLite's full-text index (migrations/)."""
    return f"t{tag.encode().hex()}x"


_PUBLIC_COLUMNS = [getattr(Environment, name) for name in EnvironmentPublic.model_fields]


# Tags that Space authors use to say an environment has MCP tools or serves tasks, for
# environments whose tools and tasks the health monitor has not read yet.
TOOL_TAGS = ("mcp", "tool-use", "tools")
TASK_TAGS = ("task-api", "tasks")


def _tagged(tags: tuple[str, ...]) -> ColumnElement[bool]:
    tagged = select(col(EnvironmentTag.environment_id)).where(col(EnvironmentTag.tag).in_(tags))
    return col(Environment.id).in_(tagged)


# A JSON path that SQLite (json_extract) and Postgres (->> on json) both read; no index serves it, so a
# quality sort orders every match (the filters and words narrow them first).
_VERDICT = col(Environment.quality)["verdict"].as_string()


def _json_present(column: Any, empty: tuple[str, ...]) -> ColumnElement[bool]:
    """A JSON column holding something: not SQL NULL, JSON null or an empty container (any database)."""
    return and_(column.is_not(None), cast(column, String).not_in(["null", *empty]))


def _filters(query: EnvironmentQuery, *, sqlite_page: bool = False) -> list[ColumnElement[bool]]:
    """The query's conditions other than words; sqlite_page for a sorted page on SQLite, which must walk
    the sort column's index: "not removed" is true of nearly every row, but without statistics SQLite
    would take removed_at's index for it and sort the whole catalog (a unary + keeps it off)."""
    conditions: list[ColumnElement[bool]] = []
    if not query.include_removed:
        removed_at = _UNINDEXED_REMOVED_AT if sqlite_page else col(Environment.removed_at)
        conditions.append(removed_at.is_(None))
    for tag in query.tags:
        # Correlated on the (environment_id, tag) key: a lookup per row, never a list of every tagged id.
        tagged = select(col(EnvironmentTag.tag)).where(
            col(EnvironmentTag.environment_id) == col(Environment.id), col(EnvironmentTag.tag) == tag
        )
        conditions.append(tagged.exists())
    if query.author:
        conditions.append(col(Environment.author) == query.author)
    if query.source:
        conditions.append(col(Environment.source) == query.source)
    if query.sdk:
        conditions.append(col(Environment.sdk) == query.sdk)
    if query.stage:
        conditions.append(col(Environment.runtime_stage) == query.stage)
    if query.has_tools:
        conditions.append(or_(_json_present(col(Environment.tools), ("[]",)), _tagged(TOOL_TAGS)))
    if query.has_tasks:
        conditions.append(or_(_json_present(col(Environment.tasks), ("{}", "[]")), _tagged(TASK_TAGS)))
    if query.conforms:
        conditions.append(col(Environment.conformance)["conforms"].as_boolean().is_(True))
    if query.up:
        conditions.append(col(Environment.health)["status"].as_string() == HealthStatus.UP.value)
    if query.quality:
        conditions.append(_VERDICT.in_([v.value for v in query.quality]))
    if query.teaches:
        board = col(Environment.board)
        conditions.append(board["verdict"].as_string().in_([Verdict.PASS.value, Verdict.WARN.value]))
        conditions.append(board["training_signal"].as_float() > 0)
    return conditions


def _portable_match(q: str) -> list[ColumnElement[bool]]:
    """Word matching for databases without an FTS index of ours yet (none for no words)."""
    fields = (Environment.title, Environment.description, Environment.author, Environment.readme)
    return [or_(*(col(f).ilike(f"%{term}%") for f in fields)) for term in query_terms(q)]


_TRENDING = [desc(col(Environment.trending_score)), desc(col(Environment.likes))]
_ORDER: dict[Sort, list[Any]] = {
    Sort.LIKES: [desc(col(Environment.likes))],
    Sort.TRENDING: _TRENDING,
    Sort.UPDATED: [desc(col(Environment.last_modified))],
    # Best verdict first, the unreported last; ties as the default order (trending) has them.
    Sort.QUALITY: [
        case({v.value: rank for rank, v in enumerate(Verdict)}, value=_VERDICT, else_=len(Verdict)),
        *_TRENDING,
    ],
}


# Above this many matches a word says little about any one environment, and ordering them
# all by bm25 costs more than it tells (~120 ms for 100,000 matches): broad queries are
# ordered by trending instead (bench/RESULTS.md).
RANK_LIMIT = 5_000
# When at least this share of the catalog matches, a sorted page is found fastest by walking
# the sort index and asking the full-text index about each row (about 20 / share probes);
# below it, by listing the matches first (bench/RESULTS.md).
DENSE_SHARE = 0.25
_ROWID: ColumnClause[int] = literal_column("environment.rowid")
# A unary + keeps SQLite from using an index for that term, so a sorted page walks the sort
# column's index and probes the matches, stopping after one page.
_UNINDEXED_ROWID: ColumnClause[int] = literal_column("+environment.rowid")
_UNINDEXED_REMOVED_AT: ColumnClause[datetime] = literal_column("+environment.removed_at")


def search_environments(
    session: Session, query: EnvironmentQuery, *, rank_limit: int = RANK_LIMIT
) -> tuple[list[EnvironmentPublic], int]:
    """One page of matching environments and the total number that match."""
    if session.get_bind().engine.dialect.name == "postgresql":
        statement, count = _postgres(session, query, rank_limit)
    elif query_terms(query.q) and is_sqlite(session.get_bind().engine):
        statement, count = _full_text(session, query, rank_limit)
    else:
        sqlite_page = is_sqlite(session.get_bind().engine)
        statement = select(*_PUBLIC_COLUMNS).where(*_filters(query, sqlite_page=sqlite_page), *_portable_match(query.q))
        count = session.execute(select(func.count()).select_from(statement.subquery())).scalar_one()
        sort = Sort.TRENDING if query.sort == Sort.RELEVANCE else query.sort
        statement = statement.order_by(*_ORDER[sort], col(Environment.id))
    if count == 0:
        return [], 0
    rows = session.execute(statement.limit(query.limit).offset(query.offset)).mappings()
    return [EnvironmentPublic.model_validate(dict(r)) for r in rows], count


def _full_text(session: Session, query: EnvironmentQuery, rank_limit: int) -> tuple[Select[tuple[object, ...]], int]:
    """The ordered statement and the count of a word search over the FTS5 index of listed environments."""
    # Each whole tag is a token of the index, so tag filters are terms of the same MATCH.
    expression = fts_match(query.q) + "".join(f" tag_keys : {tag_key(tag)}" for tag in query.tags)
    match = text("environment_fts MATCH :match").bindparams(match=expression)
    matched = select(_FTS.c.rowid).where(match)
    # The index holds listed environments only, so "not removed" is already true of every match.
    filters = _filters(query.model_copy(update={"include_removed": True, "tags": []}))
    if filters:
        counting = select(func.count()).select_from(Environment).where(*filters, _ROWID.in_(matched))
    else:
        counting = select(func.count()).select_from(_FTS).where(match)
    count: int = session.execute(counting).scalar_one()
    if query.sort == Sort.RELEVANCE and count <= rank_limit:
        ranked = select(_FTS.c.rowid, _FTS.c.rank).where(match).subquery("ranked")
        statement = (
            select(*_PUBLIC_COLUMNS)
            .select_from(ranked)
            .join(Environment, ranked.c.rowid == _ROWID)
            .where(*filters)
            .order_by(ranked.c.rank, col(Environment.id))
        )
    else:
        sort = Sort.TRENDING if query.sort == Sort.RELEVANCE else query.sort
        highest_rowid = session.execute(select(func.max(_ROWID)).select_from(Environment)).scalar() or 1
        member: ColumnElement[bool]
        if count >= DENSE_SHARE * highest_rowid:
            member = select(_FTS.c.rowid).where(_FTS.c.rowid == _ROWID, match).exists()
        else:
            member = _UNINDEXED_ROWID.in_(matched)
        statement = select(*_PUBLIC_COLUMNS).where(*filters, member).order_by(*_ORDER[sort], col(Environment.id))
    return statement, count


def _postgres(session: Session, query: EnvironmentQuery, rank_limit: int) -> tuple[Select[tuple[object, ...]], int]:
    """A search on Postgres, where the tsvector and the tags have GIN indexes of their own."""
    return search_postgres.search(
        session,
        _PUBLIC_COLUMNS,
        words=query_terms(query.q),
        tags=query.tags,
        filters=_filters(query.model_copy(update={"tags": []})),
        order=_ORDER[Sort.TRENDING if query.sort == Sort.RELEVANCE else query.sort],
        rank=query.sort == Sort.RELEVANCE,
        rank_limit=rank_limit,
    )


def list_datasets(
    session: Session, *, q: str = "", limit: int = 20, offset: int = 0
) -> tuple[list[DatasetPublic], int]:
    statement = select(Dataset).where(col(Dataset.removed_at).is_(None))
    for term in query_terms(q):
        statement = statement.where(
            or_(col(Dataset.id).ilike(f"%{term}%"), col(Dataset.description).ilike(f"%{term}%"))
        )
    count = session.execute(select(func.count()).select_from(statement.subquery())).scalar_one()
    page = session.execute(
        statement.order_by(desc(col(Dataset.likes)), col(Dataset.id)).limit(limit).offset(offset)
    ).scalars()
    return [DatasetPublic.model_validate(d) for d in page], count


# -- what a search runs over


_FROM = {Source.HUB: "from the Hub", Source.TEMPLATE: "built-in", Source.URL: "added by URL"}


class CatalogExtent(BaseModel):
    """What the catalog holds, by source, and how its Hub part was last refreshed: what an empty search says."""

    model_config = ConfigDict(frozen=True)

    by_source: dict[Source, int]
    last_sync: SyncRunPublic | None = Field(description="the newest sync run, finished or not")
    last_synced_at: datetime | None = Field(description="when the newest sync that succeeded finished")

    @property
    def total(self) -> int:
        return sum(self.by_source.values())

    @property
    def sync_failed(self) -> bool:
        return self.last_sync is not None and self.last_sync.status == SyncStatus.FAILED

    def holdings(self) -> str:
        """'6 built-in and 1 added by URL', biggest first."""
        parts = [f"{count:,} {_FROM[source]}" for source, count in self.by_source.items() if count]
        if len(parts) > 1:
            return ", ".join(parts[:-1]) + " and " + parts[-1]
        return parts[0] if parts else "nothing"

    def describe(self) -> str:
        """One sentence: how many environments, from where, and whether the Hub's are there and how fresh."""
        noun = "environment" if self.total == 1 else "environments"
        said = f"The catalog holds {self.total:,} {noun}: {self.holdings()}" if self.total else "The catalog is empty"
        if self.by_source.get(Source.HUB):
            synced = f"{self.last_synced_at:%Y-%m-%d %H:%M} UTC" if self.last_synced_at else "an earlier sync"
            hub = f"Hub Spaces as of {synced}" + ("; the last sync failed" if self.sync_failed else "")
        elif self.sync_failed:
            hub = "no Hub Spaces: the last sync with the Hub failed"
        elif self.last_sync is None:
            hub = "no Hub Spaces yet: the Hub has not been synced"
        else:
            hub = "the Hub listed no environment Spaces"
        return f"{said} ({hub})."


def catalog_extent(session: Session) -> CatalogExtent:
    counted = session.execute(
        select(col(Environment.source), func.count())
        .where(col(Environment.removed_at).is_(None))
        .group_by(col(Environment.source))
    ).all()
    by_source = {Source(source): count for source, count in counted}
    newest = session.execute(select(SyncRun).order_by(desc(col(SyncRun.id))).limit(1)).scalars().first()
    synced = session.execute(
        select(func.max(col(SyncRun.finished_at))).where(col(SyncRun.status) == SyncStatus.OK)
    ).scalar()
    return CatalogExtent(
        by_source=dict(sorted(by_source.items(), key=lambda item: -item[1])),
        last_sync=SyncRunPublic.model_validate(newest) if newest is not None else None,
        last_synced_at=synced.replace(tzinfo=synced.tzinfo or UTC) if synced else None,
    )
