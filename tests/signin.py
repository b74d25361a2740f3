"""Signing a test browser in to envhub through the fake Hub's OAuth routes, as a person's browser does."""

from typing import Any

import httpx
from pydantic import SecretStr

from app.settings import Settings
from tests.fakehub import FakeHub

CLIENT_ID = "envhub-test-client"
CLIENT_SECRET = "envhub-test-secret"


def oauth_settings(settings: Settings, **update: Any) -> Settings:
    """Settings as a Space with `hf_oauth: true` gets them, pointed at the fake Hub."""
    return settings.model_copy(
        update={
            "oauth_client_id": CLIENT_ID,
            "oauth_client_secret": SecretStr(CLIENT_SECRET),
            "oauth_scopes": "openid profile manage-repos write-repos",
            "openid_provider_url": None,  # HF_ENDPOINT, the fake Hub
            "session_secret": SecretStr("a test session secret"),
        }
        | update
    )


class Browsers:
    """HTTP clients standing in for browsers, each with its own cookies; closed with the test."""

    def __init__(self) -> None:
        self._open: list[httpx.Client] = []

    def new(self, base_url: str) -> httpx.Client:
        browser = httpx.Client(base_url=base_url, timeout=30)
        self._open.append(browser)
        return browser

    def sign_in(self, envhub_url: str, hub: FakeHub, user: str, target: str = "/") -> httpx.Client:
        """A browser that signs in as user: login, the Hub's consent, the callback."""
        hub.oauth.signed_in = user
        browser = self.new(envhub_url)
        login = browser.get("/auth/login", params={"next": target})
        assert login.status_code == 302, login.text
        consent = httpx.get(login.headers["location"], timeout=30)  # the Hub's page, in the same browser
        assert consent.status_code == 302, consent.text
        done = browser.get(consent.headers["location"])
        assert done.status_code == 303, done.text
        assert done.headers["location"] == target
        return browser

    def close(self) -> None:
        for browser in self._open:
            browser.close()


def csrf(browser: httpx.Client) -> dict[str, str]:
    """The header a signed-in browser's state-changing calls carry."""
    token = browser.get("/api/me").json()["csrf_token"]
    assert token
    return {"X-CSRF-Token": token}
