"""Catalog search on Postgres: the stored tsvector and its GIN index, the JSONB tags, ts_rank_cd."""

from typing import Any

from sqlalchemy import ColumnElement, Select, case, func, literal_column, select, text, type_coerce
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Session, col

from catalog.models import Environment

# The tsvector the first migration stores on each environment (migrations/), and
# its weights in ts_rank_cd order {D, C, B, A}: README, author, tags and description, title;
# the proportions of the bm25 weights that rank SQLite's results.
_SEARCH: ColumnElement[Any] = literal_column("environment.search")
_WEIGHTS: ColumnElement[Any] = literal_column("'{0.1, 0.3, 0.6, 1.0}'::float4[]")
# English stemming and no stemming, both folding accents where Postgres has unaccent (migration 0005).
_ENGLISH: ColumnElement[Any] = literal_column("'envhub_english'::regconfig")
_SIMPLE: ColumnElement[Any] = literal_column("'envhub_simple'::regconfig")
# Ranking reads each match's tsvector from TOAST (~20 µs a match on a quiet machine): past
# this many matches, fewer than catalog.search.RANK_LIMIT, the chosen order is used instead.
RANK_LIMIT = 2_000


def tsquery(words: list[str]) -> ColumnElement[Any]:
    """Every word must appear (stemmed); the last may be a prefix, as you type.

    An unfinished word that the English configuration drops as a stop word ("a", "to") is
    looked up unstemmed instead, so that it still matches the words it begins. Every part is
    immutable, so Postgres folds the query to a constant when planning and can use the index.
    """
    *whole, last = words
    prefix = f"'{last}':*"  # words are \w+ runs, so quoting them is enough
    stemmed = func.to_tsquery(_ENGLISH, prefix)
    query: ColumnElement[Any] = case((func.numnode(stemmed) == 0, func.to_tsquery(_SIMPLE, prefix)), else_=stemmed)
    if whole:
        query = func.tsquery_and(func.to_tsquery(_ENGLISH, " & ".join(f"'{w}'" for w in whole)), query)
    return query


def tagged(tags: list[str]) -> ColumnElement[bool]:
    """Environments carrying every one of these tags: JSONB containment, served by the GIN index on tags."""
    return type_coerce(col(Environment.tags), JSONB).contains(tags)


def with_tag_words(query: ColumnElement[Any], tags: list[str]) -> ColumnElement[Any]:
    """A word query that also asks for the words of these tags, which the tsvector holds too."""
    for tag in tags:
        query = func.tsquery_and(query, func.plainto_tsquery(_ENGLISH, tag))
    return query


def tagged_among_matches(tags: list[str]) -> ColumnElement[bool]:
    """The exact tag check for rows that the search index found, read from each row.

    Deliberately not through the GIN index on tags: every JSONB index asks for its matches to
    be rechecked, and a recheck re-reads each match's tsvector from TOAST (~15 µs a row). The
    tag words in the tsquery already narrowed the rows from the search index, which is exact.
    """
    return func.coalesce(col(Environment.tags), literal_column("'[]'::jsonb")).op("@>")(type_coerce(tags, JSONB))


def _count_through_the_index(session: Session, counting: Select[int]) -> int:
    """Count matches from the GIN index, never by a sequential scan.

    The planner costs `@@` as a cheap operator and, when a word matches most of the catalog,
    prefers reading every row; that means detoasting every tsvector (~1 s at 100,000
    environments) where the bitmap from the index needs only the narrow heap rows.
    """
    session.execute(text("SELECT set_config('enable_seqscan', 'off', true)"))
    try:
        count: int = session.execute(counting).scalar_one()
    finally:
        session.execute(text("SELECT set_config('enable_seqscan', 'on', true)"))
    return count


def search(
    session: Session,
    columns: list[Any],
    *,
    words: list[str],
    tags: list[str],
    filters: list[ColumnElement[bool]],
    order: list[Any],
    rank: bool,
    rank_limit: int,
) -> tuple[Select[tuple[object, ...]], int]:
    """The ordered statement and the count of a search; ranked by relevance when asked and at most rank_limit match."""
    conditions = list(filters)
    matches: ColumnElement[Any] | None = None
    if words:
        matches = with_tag_words(tsquery(words), tags)
        # Words only ever match listed environments (as on SQLite), which is also the
        # condition of the partial GIN index.
        conditions += [_SEARCH.op("@@")(matches), col(Environment.removed_at).is_(None)]
        if tags:
            conditions.append(tagged_among_matches(tags))
    elif tags:
        conditions.append(tagged(tags))
    counting = select(func.count()).select_from(Environment).where(*conditions)
    count = _count_through_the_index(session, counting) if words else session.execute(counting).scalar_one()
    statement = select(*columns).where(*conditions)
    if rank and matches is not None and count <= min(rank_limit, RANK_LIMIT):
        relevance = func.ts_rank_cd(_WEIGHTS, _SEARCH, matches)
        return statement.order_by(relevance.desc(), col(Environment.id)), count
    return statement.order_by(*order, col(Environment.id)), count
