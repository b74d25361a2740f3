"""Who may use an endpoint's URL: a private endpoint's needs a bearer token, and web pages need an allowed origin.

A private endpoint (`options.private`) answers only a bearer of its own token (shown to its owner), or the Hub
token (or admin token) of someone who may manage it (core.callers.Access, the rule of every door); the bearer is
envhub's and never reaches the server. A web page may open sessions (WebSockets, MCP calls) only from envhub's own
origin or one in ENVHUB_ALLOWED_ORIGINS, so a site someone visits cannot squat an endpoint's slots or drive a local
envhub through DNS rebinding.
Clients that send no Origin (trainers, scripts, MCP clients outside a browser) are not affected.
"""

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import EnvhubError, UnauthorizedError
from core.headers import bearer, page_origin, reached_hosts
from gateway.pools import Pool
from gateway.slots import user_client
from gateway.wiring import Gateway

__all__ = ["Refusal", "admit", "client_of", "origin_refusal"]


@dataclass(frozen=True)
class Refusal:
    status: int  # 401, 403 or 503 over HTTP; a WebSocket closes with 1008 and the message
    message: str
    code: str  # the error's code over HTTP (core.errors)

    def error(self) -> EnvhubError:
        error = EnvhubError(self.message, code=self.code)
        error.status_code = self.status
        return error


async def admit(gateway: Gateway, pool: Pool, headers: Mapping[str, str]) -> tuple[Refusal | None, str | None]:
    """Whether the request may reach the endpoint, and the user it proved to be (None: nobody in particular). On a
    public endpoint only the endpoint's own token proves anyone (its owner, who holds as many sessions as it has):
    any other bearer is not asked of the Hub, and the request goes on as nobody in particular's."""
    endpoint_id = pool.endpoint_id
    token = bearer(headers)
    if token is not None and token.startswith(gateway.bearers.prefix):
        if gateway.bearers.opens(endpoint_id, token):
            return None, pool.owner
        if pool.private:
            refused = f"that token is not endpoint {endpoint_id}'s; ask its owner for the right one"
            return Refusal(403, refused, "bearer_refused"), None
    if not pool.private:
        return None, None
    if token is None:
        return Refusal(
            401,
            f"endpoint {endpoint_id} is private: send 'Authorization: Bearer <token>' with its own token "
            "(its owner finds it in GET /api/endpoints/{id}) or its owner's Hub token",
            "bearer_required",
        ), None
    try:
        who = await gateway.bearers.who(token)
    except UnauthorizedError:
        refused = f"endpoint {endpoint_id} is private, and the Hub did not accept that token"
        return Refusal(401, refused, "hub_token_refused"), None
    except EnvhubError as exc:
        return Refusal(exc.status_code, f"endpoint {endpoint_id} is private, and {exc.message}", exc.code), None
    if gateway.bearers.access.may_use(who, pool.owner, private=True):
        return None, who.name
    return Refusal(
        403,
        f"endpoint {endpoint_id} is private to {pool.owner or 'the admin'}; {who.name} may not use it",
        "private_endpoint",
    ), None


def _is_literal(host: str) -> bool:
    """An address (or localhost) cannot be re-pointed by DNS, so a page served from it is what it says."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def origin_refusal(gateway: Gateway, headers: Mapping[str, str], endpoint_id: str) -> Refusal | None:
    """A web page's session from an origin that is neither envhub's own nor allowed; None when it may go on."""
    page = page_origin(headers)
    if page is None:
        return None
    if page.scheme in ("http", "https") and page.netloc:
        host = page.netloc.lower()
        if host in gateway.settings.allowed_hosts:
            return None
        if host in reached_hosts(headers)[:1] and _is_literal(page.hostname or ""):
            return None
    return Refusal(
        403,
        f"a web page at {page.geturl()[:100]!r} may not open sessions on endpoint {endpoint_id}; clients that send no "
        "Origin (trainers, scripts) may, and so may pages of envhub's own origin or of one in ENVHUB_ALLOWED_ORIGINS",
        "origin_refused",
    )


def client_of(headers: Mapping[str, str], peer: str, user: str | None, behind_proxy: bool) -> str:
    """Whom a waiting session counts against: the user it proved to be, else its address (on a Space, the one
    the Hub's proxy saw, which it appends last to X-Forwarded-For)."""
    if user is not None:
        return user_client(user)
    if behind_proxy:
        forwarded = [a.strip() for a in (headers.get("x-forwarded-for") or "").split(",") if a.strip()]
        if forwarded:
            return f"address:{forwarded[-1]}"
    return f"address:{peer}"
