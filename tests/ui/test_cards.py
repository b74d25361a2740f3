"""Result cards: escaped text, badges, the empty state and the summary line."""

from datetime import UTC, datetime

from app.ui.cards import Badge, badges, card_html, empty_state, pages, results_html, summary
from catalog.models import EnvironmentPublic, Source


def environment(**values: object) -> EnvironmentPublic:
    return EnvironmentPublic.model_validate(
        {"id": "alice/maze", "source": Source.HUB, "title": "Maze", "author": "alice", "likes": 1234} | values
    )


def test_a_card_shows_what_a_result_needs() -> None:
    html = card_html(environment(emoji="🌀", description="Walk it", tags=["openenv", "maze", "mcp"]), "running")
    assert 'href="?env=alice/maze"' in html and 'data-env="alice/maze"' in html
    assert "🌀" in html and "Maze" in html and "by alice" in html and "♥ 1,234" in html and "Walk it" in html
    assert 'data-tag="maze"' in html and ">maze</span>" in html and ">openenv<" not in html
    assert "Launched here" in html and "MCP tools" in html


def test_card_text_is_escaped() -> None:
    html = card_html(environment(title="<script>x</script>", description="<img src=x onerror=alert(1)>", id='a/"b'))
    assert "<script>" not in html and "<img" not in html and 'data-env="a/&quot;b"' in html


def test_badges() -> None:
    assert badges(environment(runtime_stage="RUNNING")) == [Badge("Hub Space", "info"), Badge("Running", "ok")]
    assert Badge("Runtime error", "bad") in badges(environment(runtime_stage="RUNTIME_ERROR"))
    assert Badge("Task API", "info") in badges(environment(source=Source.TEMPLATE, tags=["task-api"]))
    assert Badge("2 problems", "bad") in badges(environment(problems=["a", "b"]))


def quality(verdict: str, failing: list[str], skipped: int = 0) -> dict[str, object]:
    checked_at = datetime(2026, 12, 1, tzinfo=UTC)
    counts = {"passed": 5, "failed": len(failing), "skipped": skipped, "errors": 0}
    return {"verdict": verdict, "failing": failing, "revision": "abcdef0123", "checked_at": checked_at} | counts


def test_the_quality_badge_names_the_failing_checks() -> None:
    failed = badges(environment(quality=quality("fail", ["runtime.seed_control", "runtime.episode_isolation"])))
    assert failed[-1] == Badge(
        "Quality: fail",
        "bad",
        "Quality report of 2026-12-01 on abcdef0: failing runtime.seed_control, runtime.episode_isolation",
    )
    assert badges(environment(quality=quality("warn", [], skipped=1)))[-1][:2] == ("Quality: warn", "busy")
    assert badges(environment(quality=quality("pass", [])))[-1].title.endswith("every check passed")
    assert not any(b.text.startswith("Quality") for b in badges(environment()))  # no report, no badge
    html = card_html(environment(quality=quality("fail", ['<b id="x">'])))
    assert 'title="Quality report of 2026-12-01 on abcdef0: failing &lt;b id=&quot;x&quot;&gt;"' in html


def test_empty_state_and_summary() -> None:
    assert "No environments found for <b>&lt;zzz&gt;</b>" in results_html([], {}, "<zzz>")
    assert "No environments found." in empty_state("")
    assert summary(0, 0, 0) == "No environments"
    assert summary(1, 0, 1) == "1 environment · showing 1–1"
    assert summary(10_000, 24, 12) == "10,000 environments · showing 25–36"
    assert (pages(0, 12), pages(12, 12), pages(13, 12)) == (1, 1, 2)
