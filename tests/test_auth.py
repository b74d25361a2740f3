"""Sign in with Hugging Face against the fake Hub's OAuth routes: redirect, callback, session, logout, CSRF."""

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import CLIENT_ID, Browsers, csrf, oauth_settings


@pytest.fixture
def oauth_envhub(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data"))
    yield server
    server.stop()


def test_login_redirects_to_the_hub_and_the_callback_starts_a_session(
    browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub
) -> None:
    browser = browsers.new(oauth_envhub.url)

    login = browser.get("/auth/login", params={"next": "/?env=template:count"})

    assert login.status_code == 302
    authorize = urlsplit(login.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == f"{hub.url}/oauth/authorize"
    query = {k: v[0] for k, v in parse_qs(authorize.query).items()}
    assert query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == f"{oauth_envhub.url}/auth/callback"
    assert query["response_type"] == "code"
    assert query["scope"] == "openid profile manage-repos write-repos"
    assert query["code_challenge_method"] == "S256" and query["state"]
    assert "envhub_login" in browser.cookies

    hub.oauth.signed_in = "alice"
    consent = httpx.get(login.headers["location"])
    assert consent.status_code == 302
    back = urlsplit(consent.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == f"{oauth_envhub.url}/auth/callback"
    assert parse_qs(back.query)["state"] == [query["state"]]

    callback = browser.get(consent.headers["location"])

    assert callback.status_code == 303
    assert callback.headers["location"] == "/?env=template:count"
    cookie = next(h for h in callback.headers.get_list("set-cookie") if h.startswith("envhub_session="))
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert [g.user for g in hub.oauth.grants] == ["alice"]
    me = browser.get("/api/me").json()
    assert me["signed_in"] is True
    assert (me["name"], me["fullname"], me["sign_in"]) == ("alice", "Alice", "oauth")
    assert me["csrf_token"] and me["logout_url"] == "/auth/logout"
    assert me["can_launch"] is True
    anonymous = httpx.get(f"{oauth_envhub.url}/api/me").json()
    assert (anonymous["signed_in"], anonymous["login_url"], anonymous["can_launch"]) == (False, "/auth/login", False)


def test_callback_with_another_state_or_no_login_cookie_is_refused(
    browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub
) -> None:
    browser = browsers.new(oauth_envhub.url)
    login = browser.get("/auth/login")
    consent = httpx.get(login.headers["location"])
    code = parse_qs(urlsplit(consent.headers["location"]).query)["code"][0]

    forged = browser.get("/auth/callback", params={"code": code, "state": "not-the-state"})
    assert (forged.status_code, forged.json()["code"]) == (400, "sign_in_state")
    elsewhere = httpx.get(consent.headers["location"])  # the right URL, in a browser that did not start the login
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (400, "sign_in_expired")
    assert "envhub_session" not in browser.cookies
    assert hub.oauth.grants == []  # no code was exchanged


def test_a_code_is_exchanged_only_with_the_right_client_secret(
    browsers: Browsers, settings: Settings, tmp_path: Path
) -> None:
    with FakeHub() as hub:
        wrong = oauth_settings(settings, hf_endpoint=hub.url, data_dir=tmp_path / "data")
        wrong = wrong.model_copy(update={"oauth_client_secret": SecretStr("not-the-secret")})
        server = Envhub(wrong)
        try:
            browser = browsers.new(server.url)
            consent = httpx.get(browser.get("/auth/login").headers["location"])
            refused = browser.get(consent.headers["location"])
        finally:
            server.stop()
    assert (refused.status_code, refused.json()["code"]) == (400, "sign_in_code_refused")
    assert "(HTTP 401)" in refused.json()["detail"]


def test_the_hub_denying_access_is_reported(browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub) -> None:
    browser = browsers.new(oauth_envhub.url)
    hub.oauth.signed_in = None
    consent = httpx.get(browser.get("/auth/login").headers["location"])

    denied = browser.get(consent.headers["location"])

    assert (denied.status_code, denied.json()["code"]) == (400, "sign_in_denied")
    assert "The user denied the request" in denied.json()["detail"]  # the Hub's own reason


def test_login_only_returns_to_paths_on_this_server(browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub) -> None:
    browser = browsers.sign_in(oauth_envhub.url, hub, "alice", target="/")
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        login = browser.get("/auth/login", params={"next": target})
        consent = httpx.get(login.headers["location"])
        assert browser.get(consent.headers["location"]).headers["location"] == "/"


def test_logout_ends_the_session_on_the_server(browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub) -> None:
    browser = browsers.sign_in(oauth_envhub.url, hub, "alice")
    cookie = browser.cookies["envhub_session"]

    assert browser.get("/auth/logout").status_code == 200  # a page with the button: a GET signs nobody out
    refused = browser.post("/auth/logout")  # another site's form has no CSRF token
    assert (refused.status_code, refused.json()["code"]) == (403, "csrf_token_required")
    assert browser.get("/api/me").json()["signed_in"] is True

    out = browser.post("/auth/logout", data={"csrf_token": csrf(browser)["X-CSRF-Token"]})

    assert out.status_code == 303
    assert browser.get("/api/me").json()["signed_in"] is False
    replayed = httpx.get(f"{oauth_envhub.url}/api/me", cookies={"envhub_session": cookie})
    assert replayed.json()["signed_in"] is False


def test_state_changing_calls_with_the_cookie_need_the_csrf_header(
    browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub
) -> None:
    browser = browsers.sign_in(oauth_envhub.url, hub, "alice")
    body = {"environment": "template:count"}

    without = browser.post("/api/endpoints", json=body)
    wrong = browser.post("/api/endpoints", json=body, headers={"X-CSRF-Token": "0" * 64})
    with_header = browser.post("/api/endpoints", json=body, headers=csrf(browser))

    assert (without.status_code, without.json()["code"]) == (403, "csrf_token_required")
    assert (wrong.status_code, wrong.json()["code"]) == (403, "csrf_token_required")
    assert with_header.status_code == 201, with_header.text
    assert with_header.json()["owner"] == "alice"
    stop = browser.delete(f"/api/endpoints/{with_header.json()['id']}")
    assert (stop.status_code, stop.json()["code"]) == (403, "csrf_token_required")
    assert browser.delete(f"/api/endpoints/{with_header.json()['id']}", headers=csrf(browser)).status_code == 200


def test_a_hub_token_as_bearer_acts_as_its_user_without_csrf(
    browsers: Browsers, oauth_envhub: Envhub, hub: FakeHub
) -> None:
    launched = httpx.post(
        f"{oauth_envhub.url}/api/endpoints",
        json={"environment": "template:count"},
        headers={"Authorization": "Bearer hf_test"},
    )
    unknown = httpx.post(
        f"{oauth_envhub.url}/api/endpoints",
        json={"environment": "template:count"},
        headers={"Authorization": "Bearer hf_nobody"},
    )

    assert launched.status_code == 201, launched.text
    assert launched.json()["owner"] == "alice"
    assert (unknown.status_code, unknown.json()["code"]) == (401, "hub_token_refused")
    stopped = httpx.delete(
        f"{oauth_envhub.url}/api/endpoints/{launched.json()['id']}", headers={"Authorization": "Bearer hf_test"}
    )
    assert stopped.status_code == 200


def test_anonymous_callers_browse_and_check_but_do_not_launch_once_sign_in_is_on(
    browsers: Browsers, oauth_envhub: Envhub
) -> None:
    api = browsers.new(oauth_envhub.url)

    assert api.get("/api/environments").status_code == 200
    launch = api.post("/api/endpoints", json={"environment": "template:count"})
    check = api.post("/api/checks", json={"url": "http://127.0.0.1:9/"})

    assert (launch.status_code, launch.json()["code"]) == (401, "sign_in_required")
    assert check.status_code not in (401, 403)
    assert api.post("/api/sync", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).status_code == 202


def test_the_space_variables_configure_sign_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAUTH_CLIENT_ID", "space-client")
    monkeypatch.setenv("OAUTH_CLIENT_SECRET", "space-secret")
    monkeypatch.setenv("OAUTH_SCOPES", "openid profile manage-repos")
    monkeypatch.setenv("OPENID_PROVIDER_URL", "https://huggingface.co")
    monkeypatch.setenv("SPACE_ID", "someone/envhub")

    settings = Settings()

    assert (settings.auth_mode, settings.oauth_client_id, settings.oauth_scopes) == (
        "oauth",
        "space-client",
        "openid profile manage-repos",
    )
    assert settings.openid_provider_url == "https://huggingface.co"
    assert settings.anonymous_may_launch() is False
    with pytest.raises(ValidationError) as refused:
        Settings(dev_login=True)
    assert [e["type"] for e in refused.value.errors()] == ["dev_login_on_space"]


def test_on_a_space_cookies_work_in_its_iframe_and_the_callback_is_on_its_host(
    settings: Settings, tmp_path: Path, browsers: Browsers, hub: FakeHub
) -> None:
    on_space = oauth_settings(
        settings, data_dir=tmp_path / "data", space_id="someone/envhub", space_host="someone-envhub.hf.space"
    )
    server = Envhub(on_space)
    try:
        login = browsers.new(server.url).get("/auth/login")
    finally:
        server.stop()

    query = parse_qs(urlsplit(login.headers["location"]).query)
    assert query["redirect_uri"] == ["https://someone-envhub.hf.space/auth/callback"]
    cookie = login.headers["set-cookie"]
    assert "SameSite=none" in cookie and "Secure" in cookie and "HttpOnly" in cookie


def test_local_development_signs_in_as_the_owner_of_hf_token(
    settings: Settings, tmp_path: Path, browsers: Browsers, hub: FakeHub
) -> None:
    local = settings.model_copy(update={"dev_login": True, "hf_token": SecretStr("hf_test"), "data_dir": tmp_path})
    server = Envhub(local)
    try:
        browser = browsers.new(server.url)
        signed = browser.get("/auth/login", params={"next": "/?env=x"})
        me = browser.get("/api/me").json()
    finally:
        server.stop()

    assert signed.status_code == 303 and signed.headers["location"] == "/?env=x"
    assert (me["signed_in"], me["name"], me["sign_in"]) == (True, "alice", "dev")
    assert hub.oauth.authorizations == []  # no OAuth: the token is trusted because the developer set it
