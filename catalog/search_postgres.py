"""Catalog search on Postgres: the stored tsvector and its GIN index, the JSONB tags, ts_rank_cd."""

from typing import Any

from sqlalchemy import ColumnElement, Select, func, literal_column, select, type_coerce
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Session, col

from catalog.models import Environment

# The tsvector the first migration stores on each environment (catalog/migrations), and
# its weights in ts_rank_cd order {D, C, B, A}: README, author, tags and description, title;
# the proportions of the bm25 weights that rank SQLite's results.
_SEARCH: ColumnElement[Any] = literal_column("environment.search")
_WEIGHTS: ColumnElement[Any] = literal_column("'{0.1, 0.3, 0.6, 1.0}'::float4[]")
_ENGLISH: ColumnElement[Any] = literal_column("'english'::regconfig")
_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")


def tsquery(words: list[str]) -> ColumnElement[Any]:
    """Every word must appear (stemmed); the last may be a prefix, as you type.

    The unfinished word is also looked up unstemmed, so that one the English configuration
    drops as a stop word ("a", "in") still matches the words it begins.
    """
    *whole, last = words
    prefix = f"'{last}':*"  # words are \\w+ runs, so quoting them is enough
    query = func.tsquery_or(func.to_tsquery(_ENGLISH, prefix), func.to_tsquery(_SIMPLE, prefix))
    if whole:
        query = func.tsquery_and(func.to_tsquery(_ENGLISH, " & ".join(f"'{w}'" for w in whole)), query)
    return query


def tagged(tags: list[str]) -> ColumnElement[bool]:
    """Environments carrying every one of these tags: JSONB containment, served by the GIN index on tags."""
    return type_coerce(col(Environment.tags), JSONB).contains(tags)


def search(
    session: Session,
    columns: list[Any],
    *,
    words: list[str],
    filters: list[ColumnElement[bool]],
    order: list[Any],
    rank: bool,
    rank_limit: int,
) -> tuple[Select[tuple[object, ...]], int]:
    """The ordered statement and the count of a search; ranked by relevance when asked and at most rank_limit match."""
    conditions = list(filters)
    matches: ColumnElement[Any] | None = None
    if words:
        matches = tsquery(words)
        # Words only ever match listed environments (as on SQLite), which is also the
        # condition of the partial GIN index.
        conditions += [_SEARCH.op("@@")(matches), col(Environment.removed_at).is_(None)]
    count: int = session.execute(select(func.count()).select_from(Environment).where(*conditions)).scalar_one()
    statement = select(*columns).where(*conditions)
    if rank and matches is not None and count <= rank_limit:
        relevance = func.ts_rank_cd(_WEIGHTS, _SEARCH, matches)
        return statement.order_by(relevance.desc(), col(Environment.id)), count
    return statement.order_by(*order, col(Environment.id)), count
