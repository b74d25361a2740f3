"""Signing in with Hugging Face, sessions, and telling callers apart."""

from app.auth.callers import CallerDep, Identities, get_caller, require_csrf
from app.auth.sessions import ANONYMOUS, SESSION_COOKIE, Caller, SessionStore, User, session_secret

__all__ = [
    "ANONYMOUS",
    "SESSION_COOKIE",
    "Caller",
    "CallerDep",
    "Identities",
    "SessionStore",
    "User",
    "get_caller",
    "require_csrf",
    "session_secret",
]
