"""Telling callers apart: the admin token, a Hub token (checked with whoami, briefly cached), a session cookie."""

import hashlib
import secrets
import threading
import time
from collections.abc import Mapping

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from app.auth.sign_in_sessions import ANONYMOUS, SESSION_COOKIE, Caller, SessionStore, User
from app.settings import Settings
from core.errors import HubUnavailableError, UnauthorizedError
from core.headers import bearer

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
                raise UnauthorizedError("the Hub did not accept this token", code="hub_token_refused") from None
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
        token = bearer(headers)
        if token is not None:
            return self.from_bearer(token)
        cookie = cookies.get(SESSION_COOKIE)
        if cookie:
            return self.store.find(cookie) or ANONYMOUS
        return ANONYMOUS
