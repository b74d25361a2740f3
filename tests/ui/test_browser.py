"""The web UI in a real browser (system Chromium through Playwright) against envhub on loopback,
with the built-in environments launched for real by the process backend."""

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.conftest import eventually, needs, wait_until
from tests.fakemodel import FakeModel, Reply
from tests.mcpclients import mcp
from tests.serving import Envhub
from tests.ui.browser import (
    LAUNCH_S,
    WAIT,
    choose,
    chromium_available,
    expect,
    field,
    fill_code,
    fill_form,
    history_rows,
    launch_and_connect,
    open_page,
    reset,
    screenshot,
    stat,
    steps_become,
)

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    """envhub with the built-in templates and one whose README is hostile."""
    scratch = tmp_path_factory.mktemp("ui")
    shutil.copytree(Path(__file__).parent / "evil", scratch / "extra" / "evil")
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=REPO_ROOT / "spaces_templates",
        extra_templates=str(scratch / "extra"),
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        launch_timeout_s=LAUNCH_S / 1000,
        max_endpoints_per_owner=10,
        allow_private_urls=True,  # the fake model server is on loopback
    )
    server = Envhub(settings, ui=True)
    yield server
    server.stop()


def test_search_open_launch_play_and_download(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/")
    expect(page.locator(".env-card")).to_have_count(7, timeout=WAIT)  # six built-in and the hostile one
    expect(page.locator("#result-summary")).to_contain_text("7 environments")
    field(page, "search").press_sequentially("connect fo")  # results follow typing; the last word may be unfinished
    expect(page.locator(".env-card")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"\?q=connect\+fo$"))
    screenshot(page, "browse")

    page.locator('.env-card[data-env="template:connect_four"]').click()
    expect(page.locator("#env-header h1")).to_contain_text("Connect Four")
    expect(page).to_have_url(re.compile(r"\?env=template%3Aconnect_four$"))
    expect(page.locator("#readme h2").first).to_have_text("What the agent sees")
    screenshot(page, "detail")

    launch_and_connect(page)
    field(page, "play-seed").fill("1")
    reset(page)
    assert (stat(page, "steps"), stat(page, "done")) == ("0", "no")
    expect(page.locator("#play-legal button.legal")).to_have_count(7)
    page.locator("#play-legal button.legal", has_text="3").click()  # a legal action, as a button
    expect(page.locator("#play-stats [data-stat=steps] b")).to_have_text("1")
    field(page, "field-column").fill("2")  # the form made from the action schema
    page.locator("#play-step").click()
    expect(page.locator("#play-stats [data-stat=steps] b")).to_have_text("2")
    field(page, "field-column").fill("9")  # the environment refuses it, and says why next to the form
    page.locator("#play-step").click()
    expect(page.locator("#play-stats [data-stat=steps] b")).to_have_text("3")
    expect(page.locator("#play-errors")).to_contain_text("Column 9 does not exist")
    page.get_by_text("Raw action JSON").click()  # openenv's schema validation refuses this before any step
    fill_code(page, "play-raw", '{"column": "left"}')
    page.locator("#play-raw-step").click()
    expect(page.locator("#play-errors")).to_contain_text("Refused: column: Input should be a valid integer")
    expect(page.locator("#play-stats [data-stat=steps] b")).to_have_text("3")
    assert stat(page, "reward") == "0" and stat(page, "cumulative-reward") == "0"
    expect(page.locator("#play-observation")).to_contain_text("0 1 2 3 4 5 6")
    expect(history_rows(page)).to_have_count(4)  # reset and three steps
    screenshot(page, "play")

    with page.expect_download() as download:
        page.locator("#episode-download").click()
    lines = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert download.value.suggested_filename == "connect_four-episode.jsonl"
    assert lines[0]["kind"] == "episode" and lines[0]["environment"] == "template:connect_four"
    assert [line["kind"] for line in lines[1:]] == ["reset", "step", "step", "step"]
    assert lines[1]["options"] == {"seed": 1}
    assert [line["action"] for line in lines[2:]] == [{"column": 3}, {"column": 2}, {"column": 9}]
    assert all("board" in line["observation"] and line["reward"] == 0.0 for line in lines[2:])
    assert "Column 9 does not exist" in lines[-1]["observation"]["error"]
    assert lines[-1]["step"] == 3 and lines[-1]["cumulative_reward"] == 0.0


def test_mcp_tool_call(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:toolbox")
    expect(page.locator("#env-header h1")).to_contain_text("Toolbox")
    launch_and_connect(page)
    expect(page.locator("#play-tool")).to_be_visible()
    reset(page)
    expect(page.locator("#play-observation")).to_contain_text("question")
    choose(page, "play-tool", "calculate")
    expect(page.locator("#play-tool-help")).to_contain_text("calculate")
    fill_form(page, "expression", "2 * (3 + 4) ^ 2")
    page.locator("#play-step").click()
    steps_become(page, 1)
    expect(page.locator("#play-observation")).to_contain_text("98")
    expect(page.locator("#play-observation")).to_contain_text("question (from the reset)")  # still in view
    expect(history_rows(page).first).to_contain_text('"tool_name": "calculate"')
    page.get_by_role("tab", name="Environment").click()
    page.get_by_role("tab", name="API").click()
    expect(page.locator("#env-api")).to_contain_text("MCP tools (")
    expect(page.locator("#env-api")).to_contain_text("convert_units")


def test_task_api_reset_by_index(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:arithmetic_tasks")
    launch_and_connect(page)
    expect(page.locator("#play-split")).to_be_visible()
    choose(page, "play-split", "Task API · test (24 tasks)")
    field(page, "play-index").fill("3")
    reset(page)
    expect(page.locator("#play-observation")).to_contain_text("test-0003")
    fill_form(page, "answer", "not a number")
    page.locator("#play-step").click()
    expect(page.locator("#play-stats [data-stat=steps] b")).to_have_text("1")
    page.get_by_role("tab", name="Environment").click()
    page.get_by_role("tab", name="API").click()
    expect(page.locator("#env-api")).to_contain_text("Task API")
    expect(page.locator("#env-api table").last).to_contain_text("test")


def test_readme_payloads_do_not_run(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:evil")
    expect(page.locator("#readme")).to_contain_text("Only this sentence should remain readable.")
    page.locator("#readme").hover()
    page.locator("#readme", has_text="hover here").hover()
    link = page.locator("#readme a", has_text="a javascript: link")
    if link.count():
        link.click()
    page.wait_for_timeout(500)  # give an onerror handler time to fire, were there one
    assert page.evaluate("window.pwned") is None
    assert not [m for m in page.console if "pwned" in m], page.console
    readme = page.locator("#readme")
    assert readme.locator("script, iframe, svg").count() == 0
    attributes = readme.evaluate(
        "el => [...el.querySelectorAll('*')].flatMap(n => [...n.attributes].map(a => a.name + '=' + a.value))"
    )
    assert not [a for a in attributes if a.startswith("on") or "javascript:" in a.lower() or "data:text" in a]


def test_launch_page_starts_lists_and_stops_an_endpoint(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:lights_out")
    expect(page.locator("#env-header h1")).to_contain_text("Lights Out")
    page.locator("#open-launch").click()
    expect(page.locator("#launch-environment")).to_contain_text("template:lights_out")
    field(page, "launch-env").fill("OPENENV_MODE=simulation\nMAX_CONCURRENT_ENVS=4")
    fill_code(page, "launch-options", '{"replicas": 2}')
    page.locator("#launch-start").click()
    expect(page.locator("#launch-status")).to_contain_text("running", timeout=LAUNCH_S)
    # The pool, live: both replicas once they serve, and what the pool holds for a trainer.
    pool = page.locator("#launch-status .endpoint-pool")
    expect(pool.locator("tr")).to_have_count(3, timeout=LAUNCH_S)  # a header and two replicas
    expect(pool).to_contain_text("0/8 sessions on 2 replicas")
    expect(pool).to_contain_text("generation_batch_size (or your trainer's parallel rollouts) to at most 8")
    url = field(page, "launch-url").input_value()
    assert re.fullmatch(re.escape(envhub.url) + r"/endpoints/[0-9a-f]{10}", url), url
    assert envhub.http.get(url.removeprefix(envhub.url) + "/health").json() == {"status": "healthy"}
    expect(page.locator("#launch-log")).to_contain_text("Uvicorn running")
    over_time = page.locator("#launch-status svg.chart")  # the pool's sessions and replicas, as the page follows it
    expect(over_time.locator('path[data-series="replicas"]')).to_be_attached()
    expect(over_time.locator('path[data-series="sessions"]')).to_be_attached()
    expect(page.locator("#launch-message")).not_to_contain_text("Launching")  # the status above says it runs
    page.locator("#launch-stop").click()
    expect(page.locator("#launch-status")).to_contain_text("stopped")
    # The page says so once the stop is under way; the endpoint's row follows when its replicas have gone.
    eventually(lambda: envhub.endpoint(url.rsplit("/", 1)[1])["status"], lambda status: status == "stopped")
    fill_code(page, "launch-options", '{"replicas": "2"}')  # refused: said alone, not over the old one
    page.locator("#launch-start").click()
    expect(page.locator("#launch-message")).to_contain_text("Not launched: option replicas: takes servers behind")
    expect(page.locator("#launch-status")).to_be_empty()


def test_deep_links_filters_and_the_empty_state(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?q=wordle")
    expect(field(page, "search")).to_have_value("wordle")
    expect(page.locator(".env-card")).to_have_count(1)
    field(page, "search").clear()
    field(page, "search").press("Enter")
    expect(page.locator(".env-card")).to_have_count(7)
    page.locator("#has-tasks input").check()
    # The ones whose tasks envhub knows: arithmetic_tasks by its tags, and toolbox once a page has read its source.
    with_tasks = [e["title"] for e in envhub.http.get("/api/environments", params={"has_tasks": True}).json()["data"]]
    assert "Arithmetic Tasks" in with_tasks and "Wordle" not in with_tasks
    expect(page.locator(".env-card")).to_have_count(len(with_tasks))
    for title in with_tasks:
        expect(page.locator(".env-card", has_text=title)).to_have_count(1)
    page.locator("#has-tasks input").uncheck()
    field(page, "search").press_sequentially("zzzz nothing")
    expect(page.locator("#results .empty-state")).to_contain_text("No environments found")
    open_page(page, envhub.url + "/?env=nobody/nothing")
    expect(page.locator("#env-header")).to_contain_text("Not found")
    # A link to a revision the catalog does not know says so where the environment would be, and the page still opens.
    open_page(page, envhub.url + "/?env=template:maze@0000000")
    expect(page.locator("#env-header h1")).to_contain_text("Not found")
    expect(page.locator("#env-header")).to_contain_text("'0000000' of template:maze")
    page.get_by_role("tab", name="Browse").click()
    expect(page.locator(".env-card")).to_have_count(7)


def test_the_environment_tab_offers_actions_only_on_an_open_environment(envhub: Envhub, page: Any) -> None:
    actions = ["open-play", "open-evaluate", "open-launch", "quality-run"]
    open_page(page, envhub.url + "/")
    page.get_by_role("tab", name="Environment").click()
    expect(page.locator("#env-header")).to_be_visible()
    for action in actions:
        expect(page.locator(f"#{action}")).to_be_hidden()
    open_page(page, envhub.url + "/?env=nobody/nothing")
    expect(page.locator("#env-header h1")).to_be_visible()
    for action in actions:
        expect(page.locator(f"#{action}")).to_be_hidden()
    open_page(page, envhub.url + "/?env=template:wordle")
    for action in actions[:3]:
        expect(page.locator(f"#{action}")).to_be_visible()


# Everything Gradio's status trackers put in their screen-reader live regions, kept as it is announced.
RECORD_ANNOUNCEMENTS = """
window.announced = [];
new MutationObserver(() => {
  for (const region of document.querySelectorAll('.sr-only[aria-live]')) {
    const text = region.textContent.trim();
    if (text && window.announced.at(-1) !== text) window.announced.push(text);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def test_screen_readers_hear_no_untranslated_key_when_an_event_completes(envhub: Envhub, page: Any) -> None:
    page.add_init_script(RECORD_ANNOUNCEMENTS)
    open_page(page, envhub.url + "/?env=template:wordle")
    page.get_by_role("tab", name="Play").click()  # its event shows a minimal progress, so it is announced
    page.wait_for_function("() => window.announced.length > 1")  # what it is doing, then that it is done
    announced = page.evaluate("() => window.announced")
    assert not [text for text in announced if re.fullmatch(r"[a-z_]+\.[a-z_]+", text)], announced


def test_evaluate_a_baseline_then_replay_and_share_an_episode(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:wordle")
    expect(page.locator("#env-header h1")).to_contain_text("Wordle")
    page.locator("#open-evaluate").click()
    expect(page.locator("#eval-environment")).to_contain_text("template:wordle")
    for name, value in (("eval-episodes", "3"), ("eval-max-steps", "4")):
        expect(field(page, name)).to_be_visible()  # mounted with the tab, so the value typed is the one sent
        field(page, name).fill(value)
        expect(field(page, name)).to_have_value(value)
    page.locator("#eval-run").click()
    expect(page.locator("#eval-progress")).to_contain_text("finished", timeout=LAUNCH_S)
    expect(page.locator("#eval-progress")).to_contain_text("3 of 3 episodes")
    rows = page.locator("#eval-results [role=row]:not(thead [role=row])")
    expect(rows).to_have_count(3)
    expect(page.locator("#eval-leaderboard")).to_contain_text("random")
    expect(page.locator("#eval-leaderboard")).to_contain_text("baseline")
    chart = page.locator("#eval-leaderboard svg.chart").first  # mean reward with its interval, per policy
    expect(chart).to_have_attribute("aria-label", re.compile("mean reward with its 95% interval"))
    expect(chart.locator("rect.bar")).to_have_count(1)
    counts = page.locator("#eval-progress svg.chart rect[data-count]")  # the rewards' histogram holds every episode
    expect(counts.first).to_be_attached()
    assert sum(int(c.get_attribute("data-count") or 0) for c in counts.all()) == 3
    screenshot(page, "evaluate")
    # Sign-in is off here: the push says beside its button, whole, how to push from this server.
    page.locator("#eval-repo textarea, #eval-repo input").first.fill("me/wordle-rollouts")
    page.locator("#eval-push").click()
    pushed = page.locator("#eval-push-message")
    expect(pushed.locator("code", has_text="ENVHUB_DEV_LOGIN=true")).to_be_visible()
    expect(pushed.locator("code", has_text="HF_TOKEN")).to_be_visible()

    rows.first.locator("[role=gridcell], td").first.click()  # the episode opens in the viewer
    viewer = page.locator("#eval-viewer")
    expect(viewer).to_contain_text("reset 0 of 4")
    page.locator("#eval-next").click()
    expect(viewer).to_contain_text("step 1 of 4")
    expect(viewer).to_contain_text("Action")
    share = viewer.locator("a", has_text="share link").get_attribute("href")
    assert share is not None and "/?episode=ev-" in share

    shared = page.context.new_page()  # the share link opens the same episode, on its environment
    open_page(shared, share)
    expect(shared.locator("#eval-viewer")).to_contain_text("reset 0 of 4")
    expect(shared.locator("#eval-viewer")).to_contain_text(share.rsplit("=", 1)[1])
    expect(shared.locator("#eval-leaderboard")).to_contain_text("random")
    shared.locator("#eval-replay").click()  # it plays the episode through, step by step, then stops
    expect(shared.locator("#eval-viewer")).to_contain_text("step 4 of 4", timeout=15_000)
    expect(shared.locator("#eval-replay")).to_have_text("▶ Play")
    screenshot(shared, "episode-viewer")
    shared.get_by_role("tab", name="Environment").click()  # the environment's page has its leaderboard too
    shared.get_by_role("tab", name="Leaderboard").click()
    expect(shared.locator("#env-leaderboard")).to_contain_text("random")
    assert not [m for m in page.console if "pageerror" in m]


def test_a_model_plays_in_the_play_tab_and_a_person_takes_over(envhub: Envhub, page: Any) -> None:
    guesses = iter(['I would say ```json\n{"guess": "crane"}\n```', "no idea"] + ['{"guess": "slate"}'] * 50)
    fake = FakeModel(lambda body: Reply(text=next(guesses)))
    try:
        open_page(page, envhub.url + "/?env=template:wordle")
        launch_and_connect(page)
        # An episode under way, its word one the model never guesses (a random word is now and then "crane"): the
        # model goes on from it.
        page.get_by_text("More reset options (JSON)").click()
        fill_code(page, "play-reset-options", '{"answer": "ghost"}')
        reset(page)
        page.get_by_text("Let a model play").click()
        choose(page, "play-model-policy", "model")
        field(page, "play-model-url").fill(fake.url)
        field(page, "play-model-name").fill("fake-player")
        page.locator("#play-model-start").click()
        # It plays: its reply beside the move, an invalid reply asked again.
        expect(page.locator("#play-model-reply")).to_contain_text("slate", timeout=30_000)
        expect(page.locator("#play-history")).to_contain_text("crane")
        resets = history_rows(page).filter(has_text="reset")
        expect(resets).to_have_count(1)  # it played on in the episode it found
        expect(resets).to_contain_text("ghost")
        screenshot(page, "play-model")
        page.locator("#play-model-stop").click()
        expect(page.locator("#play-model-reply")).to_contain_text("the controls are yours")
        steps = int(stat(page, "steps"))
        page.wait_for_timeout(1500)  # nothing moves by itself once stopped
        assert int(stat(page, "steps")) == steps
        field(page, "field-guess").fill("plant")  # the person takes over mid-episode
        page.locator("#play-step").click()
        steps_become(page, steps + 1)
        expect(page.locator("#play-history")).to_contain_text("plant")
    finally:
        fake.close()
    assert any("no JSON object" in json.dumps(body["messages"][-1]) for _, body in fake.requests)


def test_evaluate_saves_a_model_as_a_preset_and_runs_it_without_showing_its_key(envhub: Envhub, page: Any) -> None:
    key = "sk-test-ui-5f0c2a9e7b"
    fake = FakeModel(lambda body: Reply(text='{"guess": "crane"}'))
    try:
        open_page(page, envhub.url + "/?env=template:wordle")
        page.locator("#open-evaluate").click()
        choose(page, "eval-policy", "model")
        field(page, "eval-base-url").fill(fake.url)
        field(page, "eval-model").fill("fake-ui")
        field(page, "eval-api-key").fill(key)
        field(page, "eval-preset-name").fill("fake-ui-preset")
        page.locator("#eval-preset-save").click()
        expect(page.locator("#eval-message")).to_contain_text("Saved model fake-ui-preset: its API key is sealed")
        expect(field(page, "eval-api-key")).to_have_value("")

        page.reload()  # a new page: the preset is on the server, its key never comes back
        page.locator("#open-evaluate").click()
        choose(page, "eval-policy", "model")
        choose(page, "eval-preset", "fake-ui-preset")
        expect(field(page, "eval-base-url")).to_have_value(fake.url)
        expect(field(page, "eval-model")).to_have_value("fake-ui")
        expect(field(page, "eval-api-key")).to_have_value("")
        expect(page.locator("#eval-message")).to_contain_text("its API key is saved (and never shown)")
        for name, value in (("eval-episodes", "1"), ("eval-max-steps", "2")):
            field(page, name).fill(value)
        page.locator("#eval-run").click()
        expect(page.locator("#eval-progress")).to_contain_text("finished", timeout=LAUNCH_S)
        expect(page.locator("#eval-progress")).to_contain_text("fake-ui")
        assert key not in page.content()
    finally:
        fake.close()
    assert fake.requests and {headers["authorization"] for headers, _ in fake.requests} == {f"Bearer {key}"}
    assert not [m for m in page.console if "pageerror" in m]


def test_a_past_run_opens_from_the_leaderboard(envhub: Envhub, page: Any) -> None:
    body = {"environment": "template:wordle", "policy": "first-legal", "episodes": 2, "max_steps": 2}
    started = envhub.http.post("/api/evaluations", json=body)
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    wait_until(lambda: envhub.http.get(f"/api/evaluations/{run_id}").json()["status"] == "finished", LAUNCH_S / 1000)
    open_page(page, envhub.url + "/?env=template:wordle")
    page.get_by_role("tab", name="Leaderboard").click()
    page.locator(f'#env-leaderboard a[data-run="{run_id}"]').click()  # from the environment's own leaderboard
    expect(page.locator("#eval-progress")).to_contain_text(run_id)
    expect(page.locator("#eval-results [role=row]:not(thead [role=row])")).to_have_count(2)
    expect(page.locator("#eval-viewer")).to_contain_text(f"{run_id}-0")
    page.locator("#eval-leaderboard a[data-run]").first.click()  # and from the Evaluate tab's
    expect(page.locator("#eval-viewer")).to_contain_text("reset 0 of")

    shared = page.context.new_page()  # the link itself opens the run
    open_page(shared, envhub.url + f"/?run={run_id}")
    expect(shared.locator("#eval-progress")).to_contain_text(run_id)
    expect(shared.locator("#eval-viewer")).to_contain_text(f"{run_id}-0")
    expect(field(shared, "eval-policy")).to_have_value("first-legal")  # the run's own, not the default


def test_a_models_run_link_opens_the_form_with_its_model(envhub: Envhub, page: Any) -> None:
    model = {"base_url": "http://127.0.0.1:9/v1", "model": "gone-model"}  # nothing answers: the run still is one
    body = {"environment": "template:wordle", "policy": {"model": model}, "episodes": 1, "max_steps": 3}
    started = envhub.http.post("/api/evaluations", json=body)
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    wait_until(lambda: envhub.http.get(f"/api/evaluations/{run_id}").json()["status"] == "finished", LAUNCH_S / 1000)
    open_page(page, envhub.url + f"/?run={run_id}")
    expect(page.locator("#eval-progress")).to_contain_text(run_id)
    expect(field(page, "eval-policy")).to_have_value("model")
    expect(field(page, "eval-base-url")).to_have_value(model["base_url"])
    expect(field(page, "eval-model")).to_have_value(model["model"])
    expect(field(page, "eval-max-steps")).to_have_value("3")


def test_a_tag_on_a_card_filters_by_it(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/")
    expect(page.locator(".env-card")).to_have_count(7)
    page.locator('.env-card[data-env="template:wordle"] .tag[data-tag="game"]').click()
    expect(page.locator(".env-card")).to_have_count(2)  # wordle and connect four
    expect(page.locator("#tags")).to_contain_text("game")
    expect(page.locator("#main-tabs [role=tab][aria-selected=true]")).to_have_text("Browse")  # nothing was opened


def test_an_agents_mcp_session_opens_in_the_episode_viewer(envhub: Envhub, page: Any) -> None:
    endpoint = envhub.running("template:wordle")

    async def play() -> None:  # an agent harness's session: the official mcp client on the endpoint's MCP door
        async with mcp(endpoint["url"]) as session:
            await session.call_tool("reset", {"seed": 5, "options": {"answer": "plant"}})
            await session.call_tool("step", {"guess": "crane"})
            await session.call_tool("step", {"guess": "plant"})

    with ThreadPoolExecutor(1) as other:  # this thread's event loop is Playwright's
        other.submit(asyncio.run, play()).result()
    base = f"/api/endpoints/{endpoint['id']}/sessions"
    (listed,) = envhub.http.get(base).json()["data"]
    (episode,) = envhub.http.get(f"{base}/{listed['id']}").json()["episodes"]
    open_page(page, f"{envhub.url}/?episode={episode['id']}")
    viewer = page.locator("#eval-viewer")
    expect(viewer).to_contain_text("reset 0 of 2")
    expect(viewer).to_contain_text(episode["id"])
    page.locator("#eval-next").click()
    expect(viewer).to_contain_text("step 1 of 2")  # each click is answered before the next is made
    page.locator("#eval-next").click()
    expect(viewer).to_contain_text("step 2 of 2")
    expect(viewer).to_contain_text("plant")
    assert not [m for m in page.console if "pageerror" in m]
    envhub.http.delete(f"/api/endpoints/{endpoint['id']}")  # the tests after it launch their own
