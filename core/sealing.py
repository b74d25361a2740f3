"""Secrets at rest and derived from envhub's secret: sealed Hub tokens, and endpoints' own bearer tokens."""

import base64
import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken

__all__ = ["EndpointTokens", "Sealer"]


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


class EndpointTokens:
    """Each endpoint's own bearer token, derived from envhub's secret and the endpoint's id.

    Nothing is stored: every envhub sharing the secret derives the same token, and a token names the one
    endpoint it opens. A token that leaked is revoked by stopping the endpoint (a new launch has a new id).
    """

    PREFIX = "envhub_ep_"

    def __init__(self, secret: bytes) -> None:
        self._key = hmac.new(secret, b"envhub: endpoint tokens v1", hashlib.sha256).digest()

    def of(self, endpoint_id: str) -> str:
        digest = hmac.new(self._key, endpoint_id.encode(), hashlib.sha256).digest()
        return self.PREFIX + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def opens(self, endpoint_id: str, token: str) -> bool:
        return hmac.compare_digest(self.of(endpoint_id).encode(), token.encode())

    def header(self, endpoint_id: str) -> dict[str, str]:
        """What envhub itself sends to reach the endpoint through its gateway."""
        return {"Authorization": f"Bearer {self.of(endpoint_id)}"}
