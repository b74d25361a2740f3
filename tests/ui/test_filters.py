"""The browse filters the UI adds to catalog search: MCP tools, tasks, and the tag list."""

from pathlib import Path

from sqlalchemy import Engine, update
from sqlmodel import Session, col

from app.settings import REPO_ROOT
from catalog.models import Environment
from catalog.search import EnvironmentQuery, search_environments
from catalog.store import list_tags
from catalog.templates import index_templates


def ids(engine: Engine, **query: object) -> list[str]:
    with Session(engine) as session:
        found, count = search_environments(session, EnvironmentQuery.model_validate(query | {"sort": "updated"}))
    assert count == len(found)
    return sorted(e.id for e in found)


def test_tools_and_tasks_filters(engine: Engine) -> None:
    index_templates(engine, [REPO_ROOT / "spaces_templates"])
    assert ids(engine, has_tools=True) == ["template:toolbox"]  # tagged mcp
    assert ids(engine, has_tasks=True) == ["template:arithmetic_tasks"]  # tagged task-api
    with Session(engine) as session:
        # What the health monitor caches counts too; empty containers do not.
        for name, values in (
            ("maze", {"tools": [{"name": "look"}]}),
            ("wordle", {"tools": [], "tasks": {}}),
            ("lights_out", {"tasks": {"splits": []}}),
        ):
            session.execute(update(Environment).where(col(Environment.id) == f"template:{name}").values(**values))
        session.commit()
    assert ids(engine, has_tools=True) == ["template:maze", "template:toolbox"]
    assert ids(engine, has_tasks=True) == ["template:arithmetic_tasks", "template:lights_out"]
    assert ids(engine, has_tools=True, has_tasks=True) == []
    assert ids(engine, q="maze", has_tools=True) == ["template:maze"]


def test_tags_by_use(engine: Engine, tmp_path: Path) -> None:
    index_templates(engine, [REPO_ROOT / "spaces_templates"])
    with Session(engine) as session:
        tags = dict(list_tags(session))
        assert tags["openenv"] == 6 and tags["game"] == 2 and tags["mcp"] == 1
        assert list_tags(session, limit=1) == [("openenv", 6)]
