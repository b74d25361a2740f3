"""Who is calling: signed-in users' sessions, kept server-side with their Hub token sealed, and CSRF tokens."""

import hashlib
import hmac
import logging
import secrets
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete
from sqlmodel import Field, Session, SQLModel, col

from app.settings import Settings
from core.callers import ANONYMOUS, Caller, User
from core.clock import as_utc, utcnow
from core.sealing import Sealer

__all__ = ["ANONYMOUS", "SESSION_COOKIE", "Caller", "SessionStore", "User", "session_secret"]

log = logging.getLogger(__name__)

SESSION_COOKIE = "envhub_session"


class UserSession(SQLModel, table=True):
    """A signed-in browser. The cookie holds a random id; only its hash and the sealed Hub token are kept."""

    id: str = Field(primary_key=True, description="sha256 of the session cookie's value")
    username: str = Field(index=True)
    fullname: str = ""
    avatar_url: str | None = None
    token_sealed: str = Field(description="the user's Hub access token, sealed; never stored or shown in clear")
    scopes: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(index=True)


def session_secret(settings: Settings) -> bytes:
    """The configured secret, else one derived from the OAuth client secret, else a random one for this process."""
    if settings.session_secret is not None and settings.session_secret.get_secret_value():
        return settings.session_secret.get_secret_value().encode()
    if settings.oauth_client_secret is not None and settings.oauth_client_secret.get_secret_value():
        client_secret = settings.oauth_client_secret.get_secret_value()
        return hashlib.sha256(f"envhub-session:{client_secret}".encode()).digest()
    if settings.auth_mode != "off":
        log.warning("ENVHUB_SESSION_SECRET is not set: sign-ins and sealed tokens end when this process does")
    return secrets.token_bytes(32)


def _key(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


class SessionStore:
    """Sessions in the database: the cookie is a random id, the row holds its hash and the sealed token."""

    def __init__(self, engine: Engine, secret: bytes, max_age_s: int) -> None:
        self.engine = engine
        self.sealer = Sealer(secret)
        self.max_age_s = max_age_s
        self._csrf_key = hmac.new(secret, b"envhub: csrf v1", hashlib.sha256).digest()

    def create(self, user: User, token: str, scopes: str = "") -> str:
        """Start a session; returns the cookie value, which nothing stores."""
        cookie = secrets.token_urlsafe(32)
        now = utcnow()
        row = UserSession(
            id=_key(cookie),
            username=user.name,
            fullname=user.fullname,
            avatar_url=user.avatar_url,
            token_sealed=self.sealer.seal(token),
            scopes=scopes,
            created_at=now,
            expires_at=now + timedelta(seconds=self.max_age_s),
        )
        with Session(self.engine) as session:
            session.execute(delete(UserSession).where(col(UserSession.expires_at) < now))
            session.add(row)
            session.commit()
        return cookie

    def find(self, cookie: str) -> Caller | None:
        """The signed-in caller of a live session; None for an unknown, expired or unreadable one."""
        if not cookie or len(cookie) > 200:
            return None
        with Session(self.engine) as session:
            row = session.get(UserSession, _key(cookie))
        if row is None or as_utc(row.expires_at) <= utcnow():
            return None
        token = self.sealer.open(row.token_sealed)
        if token is None:  # sealed under another secret: the server restarted without ENVHUB_SESSION_SECRET
            return None
        user = User(row.username, row.fullname, row.avatar_url)
        return Caller(user=user, token=token, session=cookie)

    def end(self, cookie: str) -> None:
        with Session(self.engine) as session:
            session.execute(delete(UserSession).where(col(UserSession.id) == _key(cookie)))
            session.commit()

    def csrf_token(self, cookie: str) -> str:
        """The value a state-changing request with this session cookie must send as X-CSRF-Token."""
        return hmac.new(self._csrf_key, cookie.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, cookie: str, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(self.csrf_token(cookie), sent)
