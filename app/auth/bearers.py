"""Who holds a bearer token, as the gateway asks it (gateway.ports.Bearers): an endpoint's own token, or the admin
or a Hub user, checked off the event loop (a Hub token costs a whoami, cached for a minute)."""

import asyncio

from app.auth.callers import Identities
from core.sealing import EndpointTokens
from gateway.ports import Bearer

__all__ = ["GatewayBearers"]


class GatewayBearers:
    def __init__(self, identities: Identities, tokens: EndpointTokens) -> None:
        self.identities = identities
        self.tokens = tokens
        self.prefix = tokens.PREFIX

    def opens(self, endpoint_id: str, token: str) -> bool:
        return self.tokens.opens(endpoint_id, token)

    async def who(self, token: str) -> Bearer:
        caller = await asyncio.to_thread(self.identities.from_bearer, token)
        return Bearer(admin=caller.admin, name=caller.name)
