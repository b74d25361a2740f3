"""In a real browser: sign in with Hugging Face through the fake Hub, then 'Deploy as Space' a template
and follow it until the Space runs and its conformance shows."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import needs, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import oauth_settings
from tests.ui.browser import browser_page, chromium_available, expect, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture
def oauth_envhub(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", space_poll_s=0.05), ui=True)
    yield server
    server.stop()


@pytest.fixture
def page() -> Iterator[Any]:
    with browser_page() as page:
        yield page


def test_sign_in_and_deploy_a_template_as_a_space(
    oauth_envhub: Envhub, hub: FakeHub, page: Any, space_app: str
) -> None:
    hub.oauth.signed_in = "bob"
    hub.boot_sequence = ["BUILDING"]
    open_page(page, oauth_envhub.url + "/?env=template:count")
    # The first page a fresh server builds takes a while on a loaded machine.
    expect(page.locator("#publish-status")).to_contain_text("to deploy it in your namespace", timeout=60_000)

    page.locator("#account #sign-in").click()  # envhub -> the Hub's authorize -> envhub's callback -> /

    expect(page.locator("#account-name")).to_have_text("bob")
    assert [g.user for g in hub.oauth.grants] == ["bob"]
    open_page(page, oauth_envhub.url + "/?env=template:count")
    expect(page.locator("#publish-panel")).to_be_visible()
    page.locator("#publish-name").locator("input, textarea").first.fill("counter")
    page.locator("#publish-start").click()
    expect(page.locator("#publish-status")).to_contain_text("bob/counter")
    expect(page.locator("#publish-status")).to_contain_text("BUILDING")
    assert {(w.user, w.action) for w in hub.writes if w.repo_id == "bob/counter"} >= {("bob", "create")}

    hub.set_host("bob/counter", space_app)
    hub.set_stage("bob/counter", "RUNNING")

    expect(page.locator("#publish-conformance")).to_be_visible(timeout=60_000)
    expect(page.locator("#publish-url")).to_have_text(space_app)
    screenshot(page, "deploy-as-space")

    page.locator("#account #sign-out").click()  # a POST carrying the session's CSRF token

    expect(page.locator("#account #sign-in")).to_be_visible()
    assert page.request.get(oauth_envhub.url + "/api/me").json()["signed_in"] is False


def test_the_play_tab_launches_only_for_a_signed_in_user_who_then_owns_it(
    oauth_envhub: Envhub, hub: FakeHub, page: Any
) -> None:
    open_page(page, oauth_envhub.url + "/?env=template:count")
    page.locator("#open-play").click()
    page.locator("#play-launch").click()  # not signed in, and anonymous launches are off with sign-in on

    expect(page.locator("#play-status")).to_contain_text("Could not launch")
    expect(page.locator("#play-status")).to_contain_text("sign in with Hugging Face")
    assert oauth_envhub.http.get("/api/endpoints").json()["count"] == 0

    hub.oauth.signed_in = "bob"
    page.locator("#account #sign-in").click()
    expect(page.locator("#account-name")).to_have_text("bob")
    open_page(page, oauth_envhub.url + "/?env=template:count")
    page.locator("#open-play").click()
    page.locator("#play-launch").click()

    expect(page.locator("#play-status")).to_contain_text("Connected to", timeout=90_000)
    [endpoint] = oauth_envhub.http.get("/api/endpoints").json()["data"]
    [launched] = oauth_envhub.services.endpoints.list()  # its owner is shown only to the owner and the admin
    assert (launched.environment, launched.owner) == ("template:count", "bob")
    assert endpoint["owner"] is None
    # Nobody else may stop it: not without credentials, and not another signed-in user.
    assert oauth_envhub.http.delete(f"/api/endpoints/{endpoint['id']}").status_code == 403
    assert oauth_envhub.endpoint(endpoint["id"])["status"] == "running"


@pytest.mark.timeout(300)  # two endpoints start and play, on a machine that may be busy
def test_a_private_endpoints_run_opens_for_its_owner_only(oauth_envhub: Envhub, hub: FakeHub, page: Any) -> None:
    hub.users |= {"hf_victim": "victim"}
    victim = {"Authorization": "Bearer hf_victim"}
    launched = oauth_envhub.http.post(
        "/api/endpoints", json={"environment": "template:count", "options": {"private": True}}, headers=victim
    )
    assert launched.status_code == 201, launched.text
    endpoint_id = launched.json()["id"]

    def read(path: str) -> Any:
        return oauth_envhub.http.get(path, headers=victim).json()

    wait_until(lambda: read(f"/api/endpoints/{endpoint_id}")["status"] != "starting", 120)
    runs = []
    for target in ({"endpoint": endpoint_id}, {"environment": "template:count"}):  # the second one is public
        body = {"policy": "random", "episodes": 1, **target}
        created = oauth_envhub.http.post("/api/evaluations", json=body, headers=victim)
        assert created.status_code == 201, created.text
        runs.append(created.json()["id"])
    private, shared = runs
    wait_until(lambda: {read(f"/api/evaluations/{run_id}")["status"] for run_id in runs} == {"finished"}, 120)

    # Not signed in: the private run's link opens nothing, and the leaderboard shows only the public run.
    open_page(page, oauth_envhub.url + f"/?run={private}")
    expect(page.locator("#eval-message")).to_contain_text(private, timeout=60_000)  # no such run, it says
    expect(page.locator("#eval-progress")).not_to_contain_text(private)
    open_page(page, oauth_envhub.url + f"/?episode={private}-0")
    expect(page.locator("#eval-viewer")).to_contain_text(f"{private}-0")  # no such episode
    expect(page.locator("#eval-viewer")).not_to_contain_text("reset 0 of")
    open_page(page, oauth_envhub.url + f"/?run={shared}")
    expect(page.locator("#eval-progress")).to_contain_text(shared)
    expect(page.locator(f'#eval-leaderboard a[data-run="{shared}"]')).to_have_count(1)
    expect(page.locator(f'#eval-leaderboard a[data-run="{private}"]')).to_have_count(0)

    hub.oauth.signed_in = "victim"
    page.locator("#account #sign-in").click()
    expect(page.locator("#account-name")).to_have_text("victim")
    open_page(page, oauth_envhub.url + f"/?run={private}")
    expect(page.locator("#eval-progress")).to_contain_text(private)
    expect(page.locator("#eval-viewer")).to_contain_text("reset 0 of")
    expect(page.locator(f'#eval-leaderboard a[data-run="{shared}"]')).to_have_count(1)
    expect(page.locator(f'#eval-leaderboard a[data-run="{private}"]')).to_have_count(1)
