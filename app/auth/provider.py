"""The OpenID provider people sign in with: OPENID_PROVIDER_URL, else the Hub (HF_ENDPOINT), found by discovery."""

from typing import Any

import httpx

from app.settings import Settings
from core.errors import HubUnavailableError

__all__ = ["Provider"]


class Provider:
    """The OpenID provider's endpoints, discovered once."""

    def __init__(self, settings: Settings) -> None:
        self.base = (settings.openid_provider_url or settings.hf_endpoint).rstrip("/")
        self._config: dict[str, Any] | None = None

    async def config(self, http: httpx.AsyncClient) -> dict[str, Any]:
        if self._config is None:
            url = f"{self.base}/.well-known/openid-configuration"
            try:
                response = await http.get(url, timeout=10)
                response.raise_for_status()
                found = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise HubUnavailableError(f"could not read the sign-in provider's configuration at {url}") from exc
            if not all(isinstance(found.get(k), str) for k in ("authorization_endpoint", "token_endpoint")):
                raise HubUnavailableError(f"the sign-in provider's configuration at {url} has no OAuth endpoints")
            self._config = found
        return self._config
