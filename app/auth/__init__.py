"""Signing in with Hugging Face, sessions, and telling callers apart."""

from app.auth.callers import Identities
from app.auth.sign_in_sessions import ANONYMOUS, SESSION_COOKIE, Caller, SessionStore, User, session_secret

__all__ = [
    "ANONYMOUS",
    "SESSION_COOKIE",
    "Caller",
    "Identities",
    "SessionStore",
    "User",
    "session_secret",
]
