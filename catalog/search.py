"""Reading the catalog: full-text search with filters and ranking, and lookups by id."""

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ColumnElement, Select, column, desc, func, literal_column, or_, select, table, text
from sqlmodel import Session, col

from catalog.db import is_sqlite
from catalog.errors import NotFoundError
from catalog.models import (
    Dataset,
    DatasetDetail,
    DatasetPublic,
    Environment,
    EnvironmentDataset,
    EnvironmentDetail,
    EnvironmentPublic,
    EnvironmentTag,
    Source,
)

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 16
_FTS = table("environment_fts", column("rowid"), column("rank"))


class Sort(StrEnum):
    RELEVANCE = "relevance"
    LIKES = "likes"
    TRENDING = "trending"
    UPDATED = "updated"


class EnvironmentQuery(BaseModel):
    """A catalog search: words, filters, order and page."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q: str = Field(default="", max_length=500)
    tags: list[str] = Field(default_factory=list, max_length=20)
    author: str | None = None
    source: Source | None = None
    sdk: str | None = None
    stage: str | None = Field(default=None, description="runtime stage, e.g. RUNNING")
    sort: Sort = Sort.RELEVANCE
    limit: int = Field(default=20, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=100_000)
    include_removed: bool = False


def query_terms(q: str) -> list[str]:
    return _WORD.findall(q.lower())[:_MAX_TERMS]


def fts_match(q: str) -> str:
    """An FTS5 MATCH expression: every word must appear; the last may be a prefix (as you type)."""
    quoted = [f'"{t}"' for t in query_terms(q)]
    quoted[-1] += "*"
    return " ".join(quoted)


_PUBLIC_COLUMNS = [getattr(Environment, name) for name in EnvironmentPublic.model_fields]


def _filters(query: EnvironmentQuery) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if not query.include_removed:
        conditions.append(col(Environment.removed_at).is_(None))
    for tag in query.tags:
        tagged = select(col(EnvironmentTag.environment_id)).where(col(EnvironmentTag.tag) == tag)
        conditions.append(col(Environment.id).in_(tagged))
    if query.author:
        conditions.append(col(Environment.author) == query.author)
    if query.source:
        conditions.append(col(Environment.source) == query.source)
    if query.sdk:
        conditions.append(col(Environment.sdk) == query.sdk)
    if query.stage:
        conditions.append(col(Environment.runtime_stage) == query.stage)
    return conditions


def _portable_match(q: str) -> list[ColumnElement[bool]]:
    """Word matching for databases without an FTS index of ours yet."""
    fields = (Environment.title, Environment.description, Environment.author, Environment.readme)
    return [or_(*(col(f).ilike(f"%{term}%") for f in fields)) for term in query_terms(q)]


_ORDER: dict[Sort, list[Any]] = {
    Sort.LIKES: [desc(col(Environment.likes))],
    Sort.TRENDING: [desc(col(Environment.trending_score)), desc(col(Environment.likes))],
    Sort.UPDATED: [desc(col(Environment.last_modified))],
}


def search_environments(session: Session, query: EnvironmentQuery) -> tuple[list[EnvironmentPublic], int]:
    """One page of matching environments and the total number that match."""
    statement: Select[tuple[object, ...]] = select(*_PUBLIC_COLUMNS).where(*_filters(query))
    ranked = False
    if query_terms(query.q):
        if is_sqlite(session.get_bind().engine):
            statement = statement.join(_FTS, _FTS.c.rowid == literal_column("environment.rowid")).where(
                text("environment_fts MATCH :match").bindparams(match=fts_match(query.q))
            )
            ranked = True
        else:
            statement = statement.where(*_portable_match(query.q))
    count = session.execute(select(func.count()).select_from(statement.subquery())).scalar_one()
    order: list[Any] = (
        _ORDER[query.sort] if query.sort != Sort.RELEVANCE else ([_FTS.c.rank] if ranked else _ORDER[Sort.TRENDING])
    )
    rows = session.execute(
        statement.order_by(*order, col(Environment.id)).limit(query.limit).offset(query.offset)
    ).mappings()
    return [EnvironmentPublic.model_validate(dict(r)) for r in rows], count


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
    environment = session.get(Environment, environment_id)
    if environment is None:
        return None
    detail = EnvironmentDetail.model_validate(environment)
    detail.datasets = _linked(session, environment_id=environment_id)
    return detail


def get_environment(session: Session, environment_id: str) -> EnvironmentDetail:
    detail = find_environment(session, environment_id)
    if detail is None:
        raise NotFoundError(
            f"no environment {environment_id!r} in the catalog; find ids with GET /api/environments?q=..."
        )
    return detail


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


def get_dataset(session: Session, dataset_id: str) -> DatasetDetail:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise NotFoundError(f"no dataset {dataset_id!r} in the catalog; list them with GET /api/datasets")
    detail = DatasetDetail.model_validate(dataset)
    detail.environments = _linked(session, dataset_id=dataset_id)
    return detail


def count_listed(session: Session) -> int:
    """Environments in the catalog that are not marked removed."""
    listed = select(func.count()).select_from(Environment).where(col(Environment.removed_at).is_(None))
    count: int = session.execute(listed).scalar_one()
    return count
