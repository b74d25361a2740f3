"""Who holds a bearer token, as the gateway asks it (gateway.wiring.Bearers): an endpoint's own token, or the admin
or a Hub user, checked off the event loop (a Hub token costs a whoami, cached for a minute)."""

import asyncio

from app.auth.callers import Identities
from core.callers import Access, Caller
from core.sealing import EndpointTokens

__all__ = ["GatewayBearers"]


class GatewayBearers:
    def __init__(self, identities: Identities, tokens: EndpointTokens, access: Access) -> None:
        self.identities = identities
        self.access = access
        self.tokens = tokens
        self.prefix = tokens.PREFIX

    def opens(self, endpoint_id: str, token: str) -> bool:
        return self.tokens.opens(endpoint_id, token)

    async def who(self, token: str) -> Caller:
        return await asyncio.to_thread(self.identities.from_bearer, token)
