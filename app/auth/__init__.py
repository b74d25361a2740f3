"""Signing in with Hugging Face, sessions, and telling callers apart."""

from app.auth.callers import CallerDep, Identities, ensure_may_launch, ensure_may_stop, get_caller, require_csrf
from app.auth.sessions import ANONYMOUS, SESSION_COOKIE, Caller, SessionStore, User, session_secret

__all__ = [
    "ANONYMOUS",
    "SESSION_COOKIE",
    "Caller",
    "CallerDep",
    "Identities",
    "SessionStore",
    "User",
    "ensure_may_launch",
    "ensure_may_stop",
    "get_caller",
    "require_csrf",
    "session_secret",
]
