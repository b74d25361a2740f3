"""Search: ranking, filters, sorting and paging over a real catalog (SQLite and Postgres)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text, update
from sqlmodel import Session, col

from catalog.models import Environment, QualitySummary, Source, Verdict
from catalog.search import EnvironmentQuery, Sort, fts_match, search_environments
from catalog.store import note_quality, write_environments

pytestmark = pytest.mark.databases

BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def row(environment_id: str, title: str, **fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": environment_id,
        "source": Source.HUB,
        "title": title,
        "emoji": None,
        "description": "",
        "author": environment_id.split("/")[0],
        "tags": ["openenv"],
        "likes": 0,
        "trending_score": 0.0,
        "sdk": "docker",
        "host": None,
        "runtime_stage": "RUNNING",
        "last_modified": BASE_TIME,
        "license": None,
        "problems": [],
        "removed_at": None,
        "app_port": 8000,
        "base_path": None,
        "path": None,
        "sha": "0" * 40,
        "card": {},
        "manifest": None,
        "readme": "",
        "indexed_at": BASE_TIME,
    }
    values.update(fields)
    return values


CATALOG = [
    row(
        "games/chess", "Chess", description="Play chess against a minimax opponent", tags=["openenv", "game"], likes=50
    ),
    row(
        "games/connect4",
        "Connect Four",
        description="Drop discs",
        tags=["openenv", "game"],
        likes=80,
        readme="A board game like chess, but simpler.",
        trending_score=9,
    ),
    row("words/wordle", "Wordle", description="Guess the five-letter word", tags=["openenv", "word"], likes=10),
    row(
        "words/wordsmith",
        "Wordsmith",
        description="Build words from letters",
        tags=["openenv", "word"],
        likes=5,
        last_modified=BASE_TIME + timedelta(days=3),
        runtime_stage="SLEEPING",
    ),
    row("tools/calculator", "Calculator tools", description="An MCP tool environment", tags=["openenv", "mcp"]),
    row("template:maze", "Maze", source=Source.TEMPLATE, author=None, sdk=None, runtime_stage=None, likes=0),
    row("gone/chess-old", "Old chess", removed_at=BASE_TIME),
]


@pytest.fixture
def engine(engine: Engine) -> Engine:
    with Session(engine) as session, session.begin():
        write_environments(session, CATALOG, {})
    return engine


def ids(engine: Engine, **query: Any) -> list[str]:
    with Session(engine) as session:
        found, count = search_environments(session, EnvironmentQuery.model_validate(query))
    assert count >= len(found)
    return [e.id for e in found]


def test_title_match_ranks_above_readme_match(engine: Engine) -> None:
    assert ids(engine, q="chess") == ["games/chess", "games/connect4"]


def test_every_word_must_match(engine: Engine) -> None:
    assert ids(engine, q="chess minimax") == ["games/chess"]
    assert ids(engine, q="chess wordle") == []


def test_last_word_matches_as_a_prefix_while_typing(engine: Engine) -> None:
    assert sorted(ids(engine, q="word")) == ["words/wordle", "words/wordsmith"]
    assert ids(engine, q="wordl") == ["words/wordle"]


def test_an_unfinished_word_that_is_also_a_stop_word_still_matches(engine: Engine) -> None:
    # "to", while typing "tools": a stop word to Postgres's English configuration
    assert ids(engine, q="to") == ["tools/calculator"]
    assert ids(engine, q="calculator to") == ["tools/calculator"]


def test_stemming_and_case(engine: Engine) -> None:
    assert ids(engine, q="DROPPING disc") == ["games/connect4"]


def test_words_match_whatever_their_accents(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        write_environments(session, [row("bistro/cafe", "Café Crème", description="Commandez au café")], {})
    assert ids(engine, q="cafe") == ["bistro/cafe"]
    assert ids(engine, q="CRÈME") == ["bistro/cafe"]
    assert ids(engine, q="creme caf") == ["bistro/cafe"]  # the last word as a prefix, folded too


def test_tag_author_source_sdk_and_stage_filters(engine: Engine) -> None:
    assert ids(engine, tags=["game"], sort="likes") == ["games/connect4", "games/chess"]
    assert ids(engine, tags=["game", "word"]) == []
    assert ids(engine, author="words", sort="likes") == ["words/wordle", "words/wordsmith"]
    assert ids(engine, source="template") == ["template:maze"]
    assert ids(engine, sdk="docker", q="calculator") == ["tools/calculator"]
    assert ids(engine, stage="SLEEPING") == ["words/wordsmith"]
    assert ids(engine, q="mcp", tags=["mcp"]) == ["tools/calculator"]


def test_sorts(engine: Engine) -> None:
    assert ids(engine, sort=Sort.LIKES)[:3] == ["games/connect4", "games/chess", "words/wordle"]
    assert ids(engine, sort=Sort.TRENDING)[0] == "games/connect4"
    assert ids(engine, sort=Sort.UPDATED)[0] == "words/wordsmith"
    assert ids(engine, q="chess", sort=Sort.LIKES) == ["games/connect4", "games/chess"]


def test_paging_keeps_the_total(engine: Engine) -> None:
    with Session(engine) as session:
        first, total = search_environments(session, EnvironmentQuery(sort=Sort.LIKES, limit=2))
        second, total_again = search_environments(session, EnvironmentQuery(sort=Sort.LIKES, limit=2, offset=2))
    assert total == total_again == 6
    assert len(first) == len(second) == 2
    assert {e.id for e in first}.isdisjoint(e.id for e in second)


def test_removed_entries_are_hidden_unless_asked_for(engine: Engine) -> None:
    assert "gone/chess-old" not in ids(engine, q="chess")
    assert "gone/chess-old" not in ids(engine)
    assert "gone/chess-old" in ids(engine, include_removed=True)


def test_removed_and_restored_entries_leave_and_rejoin_the_index(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        session.execute(update(Environment).where(col(Environment.id) == "games/chess").values(removed_at=BASE_TIME))
    assert ids(engine, q="minimax") == []
    with Session(engine) as session, session.begin():
        session.execute(update(Environment).where(col(Environment.id) == "games/chess").values(removed_at=None))
    assert ids(engine, q="minimax") == ["games/chess"]


def test_broad_words_are_ordered_by_trending(engine: Engine) -> None:
    assert ids(engine, q="chess") == ["games/chess", "games/connect4"]  # ranked: the title match first
    with Session(engine) as session:
        found, count = search_environments(session, EnvironmentQuery(q="chess"), rank_limit=1)
    assert count == 2
    assert [e.id for e in found] == ["games/connect4", "games/chess"]  # more matches than ranked: trending


@pytest.mark.parametrize(
    ("q", "words"),
    [
        ('"', "!"),
        ("chess AND", "chess and"),
        ("NEAR(a b)", "near a b"),
        ("col:umn", "col umn"),
        ("*", "!"),
        ("-chess", "chess"),
        ("((", "!"),
        ("'; DROP TABLE environment; --", "drop table environment"),
        ("é ü ß", "é ü ß"),
    ],
)
def test_query_syntax_is_searched_as_the_words_it_holds(engine: Engine, q: str, words: str) -> None:
    # Full-text operators, quotes and SQL are no syntax to search: a query finds what its words alone find
    # ("!" holds none, and finds everything).
    assert ids(engine, q=q) == ids(engine, q=words)
    assert len(ids(engine)) == 6  # and the catalog is still all there


def test_punctuation_only_query_means_no_words(engine: Engine) -> None:
    assert len(ids(engine, q="!!! ???")) == 6


def test_search_follows_updates(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        session.execute(update(Environment).where(col(Environment.id) == "words/wordle").values(title="Lexicon puzzle"))
    assert ids(engine, q="lexicon") == ["words/wordle"]
    assert ids(engine, q="wordle") == []


def test_fts_match_quotes_every_term() -> None:
    assert fts_match('chess "AND" board-game') == '"chess" "and" "board" "game"*'


def test_tag_filter_with_words_is_exact(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        write_environments(
            session, [row("games/go", "Go", description="chess-like", tags=["openenv", "board-game"])], {}
        )
    assert ids(engine, q="chess", tags=["game"]) == ["games/chess", "games/connect4"]
    assert ids(engine, q="chess", tags=["board-game"]) == ["games/go"]
    assert ids(engine, q="chess", tags=["board"]) == []


def test_tag_filter_with_words_follows_tag_changes_and_matches_whole_tags_only(engine: Engine) -> None:
    tags = ["openenv", "Échecs", "jeux de plateau"]
    with Session(engine) as session, session.begin():
        write_environments(session, [row("games/shogi", "Shogi", description="chess of Japan", tags=tags)], {})
    assert ids(engine, q="chess", tags=["Échecs"]) == ["games/shogi"]
    assert ids(engine, q="chess", tags=["jeux de plateau"]) == ["games/shogi"]
    assert ids(engine, q="chess", tags=["échecs"]) == []  # tags are exact, as the filter without words
    assert ids(engine, q="chess", tags=["jeux"]) == []
    with Session(engine) as session, session.begin():  # the next sync finds the tag gone
        write_environments(session, [row("games/shogi", "Shogi", description="chess of Japan")], {})
    assert ids(engine, q="chess", tags=["Échecs"]) == []
    assert sorted(ids(engine, q="chess", tags=["openenv"])) == ["games/chess", "games/connect4", "games/shogi"]


def test_a_search_leaves_the_session_as_it_found_it(engine: Engine) -> None:
    with Session(engine) as session:
        found, count = search_environments(session, EnvironmentQuery(q="chess", tags=["game"]))
        assert (len(found), count) == (2, 2)
        if engine.dialect.name == "postgresql":  # the count turns sequential scans off for itself only
            assert session.execute(text("SHOW enable_seqscan")).scalar_one() == "on"


def note(engine: Engine, verdicts: dict[str, Verdict]) -> None:
    with Session(engine) as session, session.begin():
        for environment_id, verdict in verdicts.items():
            failing = [] if verdict == Verdict.PASS else ["runtime.seed_control"]
            summary = QualitySummary(
                verdict=verdict, passed=6, failed=len(failing), skipped=0, errors=0, failing=failing,
                checked_at=BASE_TIME,
            )  # fmt: skip
            note_quality(session, environment_id, summary)


def listed(client: TestClient, **params: Any) -> list[str]:
    response = client.get("/api/environments", params=params)
    assert response.status_code == 200, response.text
    return [e["id"] for e in response.json()["data"]]


def test_quality_filter_and_sort_through_the_api(engine: Engine, client: TestClient) -> None:
    note(engine, {"words/wordle": Verdict.PASS, "games/chess": Verdict.WARN, "tools/calculator": Verdict.FAIL})
    note(engine, {"games/connect4": Verdict.PASS})
    assert listed(client, quality="pass", sort="likes") == ["games/connect4", "words/wordle"]
    assert listed(client, quality=["pass", "warn"], sort="likes") == ["games/connect4", "games/chess", "words/wordle"]
    assert listed(client, quality="fail") == ["tools/calculator"]
    assert listed(client, quality="warn", q="chess") == ["games/chess"]  # with words: the full-text path
    assert listed(client, quality="pass", q="chess") == ["games/connect4"]
    # Pass, then warn, then fail, then no report; ties by trending (then likes), as the default order.
    # (The app's start-up found no template folder, so template:maze is listed no more.)
    assert listed(client, sort="quality") == [
        "games/connect4", "words/wordle", "games/chess", "tools/calculator", "words/wordsmith"
    ]  # fmt: skip
    assert listed(client, sort="quality", q="chess") == ["games/connect4", "games/chess"]
    row = client.get("/api/environments", params={"quality": "fail"}).json()["data"][0]
    assert row["quality"]["verdict"] == "fail" and row["quality"]["failing"] == ["runtime.seed_control"]
    assert client.get("/api/environments", params={"quality": "great"}).status_code == 422
