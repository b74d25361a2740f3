"""SQLite query plans that keep a page fast however big the catalog: read from the planner, not timed."""

from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from sqlmodel import Session

from catalog.search import EnvironmentQuery, Sort, search_environments

SORT_INDEX = {
    Sort.LIKES: "ix_environment_likes",
    Sort.TRENDING: "ix_environment_trending_score",
    Sort.UPDATED: "ix_environment_last_modified",
}


def page_plan(engine: Engine, query: EnvironmentQuery) -> list[str]:
    """The plan of the statement that reads the page (the one with LIMIT), as SQLite would run it."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        with Session(engine) as session:
            search_environments(session, query)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    [(statement, parameters)] = [(s, p) for s, p in seen if "LIMIT" in s]
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    return [str(row[-1]) for row in rows]


@pytest.mark.parametrize("sort", list(SORT_INDEX))
def test_a_browse_page_walks_its_sort_index_instead_of_sorting_the_catalog(engine: Engine, sort: Sort) -> None:
    with engine.begin() as connection:  # a row, so the count does not end the search early
        connection.execute(
            text(
                "INSERT INTO environment (id, source, title, description, tags, likes, trending_score, problems,"
                " card, readme, indexed_at) VALUES ('a/b', 'hub', 'B', '', '[]', 1, 0, '[]', '{}', '', '2026-01-01')"
            )
        )
    plan = page_plan(engine, EnvironmentQuery(sort=sort, offset=40))
    assert f"SCAN environment USING INDEX {SORT_INDEX[sort]}" in plan, plan
    assert "USE TEMP B-TREE FOR ORDER BY" not in plan, plan
