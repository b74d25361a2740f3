"""Keys to private Spaces' own hosts: the Hub's short-lived Space JWT, never a Hub token a Space's code could use.

Whatever a Space runs reads every header it is sent. So envhub sends a public Space no credential at all, and
a private one a JWT the Hub issues (`GET /api/spaces/{id}/jwt`, asked with a token that may read the Space):
it opens that one Space, for minutes. A Hub token, with whatever scopes its owner gave it, stays with envhub.
"""

import base64
import binascii
import hashlib
import json
import threading
import time
from urllib.parse import quote

import httpx2
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from core.errors import HubUnavailableError

__all__ = ["SpaceKeys"]


_DEFAULT_LIFE_S = 300  # when a JWT does not say when it expires
_EARLY_S = 60  # a key is renewed this long before it expires


def _expiry(jwt: str) -> float | None:
    """The `exp` claim of a JWT (not verified: the Hub's proxy does that), as a Unix time."""
    try:
        payload = jwt.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class SpaceKeys:
    """Space JWTs from the Hub at `endpoint`, each kept until shortly before it expires."""

    def __init__(self, endpoint: str, *, timeout_s: float = 10) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout_s = timeout_s
        self._keys: dict[tuple[str, str], tuple[str, float]] = {}  # (Space, token digest) -> (JWT, renew at)
        self._lock = threading.Lock()

    def header(self, space_id: str, token: str) -> dict[str, str]:
        """What to send the Space's host: `Authorization: Bearer <its JWT>` (HubUnavailableError when the Hub
        would not issue one)."""
        return {"Authorization": f"Bearer {self.jwt(space_id, token)}"}

    def jwt(self, space_id: str, token: str) -> str:
        key = (space_id, hashlib.sha256(token.encode()).hexdigest())
        now = time.time()
        with self._lock:
            known = self._keys.get(key)
        if known is not None and known[1] > now:
            return known[0]
        url = f"{self.endpoint}/api/spaces/{quote(space_id, safe='/')}/jwt"
        try:
            response = get_session().get(
                url, headers=build_hf_headers(token=token, library_name="envhub"), timeout=self.timeout_s
            )
            hf_raise_for_status(response)
            jwt = response.json().get("token")
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "?"
            raise HubUnavailableError(
                f"the Hub would not give envhub a key to the private Space {space_id} (HTTP {status}); check that "
                "the token it was launched with may still read the Space"
            ) from None
        except (httpx2.HTTPError, OSError, ValueError, AttributeError) as exc:
            raise HubUnavailableError(
                f"could not ask the Hub for a key to the private Space {space_id}: {type(exc).__name__}"
            ) from None
        if not isinstance(jwt, str) or not jwt:
            raise HubUnavailableError(f"the Hub answered no key to the private Space {space_id}")
        expires = _expiry(jwt) or now + _DEFAULT_LIFE_S
        with self._lock:
            if len(self._keys) > 10_000:
                self._keys.clear()
            self._keys[key] = (jwt, max(now, expires - _EARLY_S))
        return jwt
