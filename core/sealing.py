"""Secrets at rest: users' Hub tokens are sealed (authenticated encryption) before they reach a table."""

import base64
import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken

__all__ = ["Sealer"]


class Sealer:
    """Fernet with a key derived from envhub's secret; a changed secret makes old seals unreadable, not wrong."""

    def __init__(self, secret: bytes) -> None:
        key = hmac.new(secret, b"envhub: sealed tokens v1", hashlib.sha256).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, text: str) -> str:
        return self._fernet.encrypt(text.encode()).decode("ascii")

    def open(self, sealed: str) -> str | None:
        """The text, or None when it was sealed with another secret or tampered with."""
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode()
        except (InvalidToken, ValueError):
            return None
