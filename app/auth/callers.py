"""Telling callers apart: the admin token, a Hub token (checked with whoami, briefly cached), a session cookie."""

import hashlib
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from app.auth.sessions import ANONYMOUS, SESSION_COOKIE, Caller, SessionStore, User
from app.settings import Settings
from core.errors import ForbiddenError, HubUnavailableError, UnauthorizedError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_WHOAMI_TTL_S = 60


class Identities:
    """Resolves a request's credentials to a Caller."""

    def __init__(self, settings: Settings, store: SessionStore) -> None:
        self.settings = settings
        self.store = store
        self._whoami: dict[str, tuple[float, User]] = {}
        self._lock = threading.Lock()

    def hub_user(self, token: str) -> User:
        """The Hub account a token belongs to, asked of HF_ENDPOINT at most once a minute per token."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._whoami.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        api = HfApi(endpoint=self.settings.hf_endpoint, token=token, library_name="envhub")
        try:
            info = api.whoami(cache=False)
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status in (401, 403):
                raise UnauthorizedError("the Hub did not accept this token") from None
            raise HubUnavailableError(f"could not ask the Hub who this token belongs to (HTTP {status})") from None
        except OSError as exc:
            raise HubUnavailableError(f"could not reach the Hub to check the token: {type(exc).__name__}") from None
        user = User(str(info["name"]), str(info.get("fullname") or ""), info.get("avatarUrl"))
        with self._lock:
            if len(self._whoami) > 10_000:
                self._whoami.clear()
            self._whoami[key] = (now + _WHOAMI_TTL_S, user)
        return user

    def from_bearer(self, token: str) -> Caller:
        admin = self.settings.admin_token.get_secret_value() if self.settings.admin_token else ""
        if admin and secrets.compare_digest(token.encode(), admin.encode()):
            return Caller(admin=True)
        return Caller(user=self.hub_user(token), token=token)

    def resolve(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> Caller:
        """Bearer first, then the session cookie; anyone else is anonymous."""
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self.from_bearer(token.strip())
        cookie = cookies.get(SESSION_COOKIE)
        if cookie:
            return self.store.find(cookie) or ANONYMOUS
        return ANONYMOUS


def _bearer(request: Request) -> str | None:
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def require_csrf(request: Request) -> None:
    """Router-wide: a state-changing request that rides on a session cookie must also send its CSRF token.

    A bearer token is not sent by browsers on their own, so it needs none; neither does a cookie-less call.
    """
    if request.method in SAFE_METHODS or _bearer(request) is not None:
        return
    cookie = request.cookies.get(SESSION_COOKIE)
    identities: Identities = request.app.state.identities
    if not cookie or identities.store.csrf_ok(cookie, request.headers.get("x-csrf-token")):
        return
    if identities.store.find(cookie) is not None:  # a stale cookie carries no authority: nothing to protect
        raise ForbiddenError(
            "a signed-in request that changes something needs the X-CSRF-Token header "
            "(its value is csrf_token in GET /api/me), or send 'Authorization: Bearer <token>' instead"
        )


def get_caller(request: Request) -> Caller:
    """Who is calling; checked against the CSRF token first when it changes something."""
    require_csrf(request)
    identities: Identities = request.app.state.identities
    return identities.resolve(request.headers, request.cookies)


CallerDep = Annotated[Caller, Depends(get_caller)]
