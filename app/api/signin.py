"""Sign in with Hugging Face: /auth/login, /auth/callback, /auth/logout, and GET /api/me.

OAuth is the authorization-code flow with PKCE and a state bound to the browser by a signed,
short-lived cookie; the provider is OPENID_PROVIDER_URL (HF_ENDPOINT when unset), found by
OpenID discovery. The user's access token stays server-side, sealed in the session row.
"""

import asyncio
import base64
import hashlib
import secrets
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import httpx
from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pydantic import BaseModel

from app.api.deps import AccessDep, CallerDep, HttpDep, IdentitiesDep, OAuthDep, SessionSecretDep, SettingsDep
from app.auth.callers import Identities
from app.auth.pages import logout_form, safe_next
from app.auth.sign_in_sessions import SESSION_COOKIE, SessionStore, User
from app.settings import Settings
from app.urls import connection_base
from core.errors import (
    BadRequestError,
    ForbiddenError,
    HubUnavailableError,
    InvalidInputError,
    NotFoundError,
)

router = APIRouter(tags=["auth"])

LOGIN_COOKIE = "envhub_login"
_LOGIN_MAX_AGE_S = 600


class MePublic(BaseModel):
    """Who the caller is, and what the page needs to sign in, out, or send a state-changing request."""

    signed_in: bool
    name: str | None = None
    fullname: str | None = None
    avatar_url: str | None = None
    admin: bool = False
    sign_in: Literal["oauth", "dev", "off"]
    can_launch: bool
    csrf_token: str | None = None
    login_url: str | None = None
    logout_url: str | None = None


def cookie_policy(settings: Settings) -> dict[str, Any]:
    """A Space shows the app in an iframe on huggingface.co, so its cookies must be SameSite=None (and Secure)."""
    if settings.space_id:
        return {"httponly": True, "secure": True, "samesite": "none"}
    secure = (settings.public_url or "").startswith("https://")
    return {"httponly": True, "secure": secure, "samesite": "lax"}


def redirect_uri(settings: Settings, request: Request) -> str:
    return connection_base(settings, request) + "/auth/callback"


def _signer(secret: bytes) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt="envhub-login")


def _http(http: httpx.AsyncClient | None) -> httpx.AsyncClient:
    assert http is not None, "envhub's HTTP client is made when it starts serving"
    return http


def _signed_in(
    request: Request, settings: Settings, store: SessionStore, user: User, token: str, scopes: str, target: str
) -> Response:
    previous = request.cookies.get(SESSION_COOKIE)
    if previous:
        store.end(previous)  # a new sign-in replaces the old session rather than leaving it alive
    cookie = store.create(user, token, scopes)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, cookie, max_age=settings.session_max_age_s, **cookie_policy(settings))
    response.delete_cookie(LOGIN_COOKIE, path="/auth", **cookie_policy(settings))
    return response


@router.get("/auth/login", include_in_schema=False)
async def login(
    request: Request,
    settings: SettingsDep,
    identities: IdentitiesDep,
    oauth: OAuthDep,
    http: HttpDep,
    secret: SessionSecretDep,
    next: str = "/",
) -> Response:
    target = safe_next(next)
    if settings.auth_mode == "off":
        raise NotFoundError("sign-in is off on this server: it needs OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET")
    if settings.auth_mode == "dev":
        if settings.hf_token is None or not settings.hf_token.get_secret_value():
            raise InvalidInputError("ENVHUB_DEV_LOGIN signs in as the owner of HF_TOKEN: set HF_TOKEN")
        token = settings.hf_token.get_secret_value()
        user = await asyncio.to_thread(identities.hub_user, token)
        return _signed_in(request, settings, identities.store, user, token, "dev", target)
    config = await oauth.config(_http(http))
    state = secrets.token_urlsafe(24)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "client_id": settings.oauth_client_id,
        "redirect_uri": redirect_uri(settings, request),
        "response_type": "code",
        "scope": settings.oauth_scopes,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    response = RedirectResponse(f"{config['authorization_endpoint']}?{urlencode(query)}", status_code=302)
    pending = _signer(secret).dumps({"state": state, "verifier": verifier, "next": target})
    response.set_cookie(LOGIN_COOKIE, pending, max_age=_LOGIN_MAX_AGE_S, path="/auth", **cookie_policy(settings))
    return response


@router.get("/auth/callback", include_in_schema=False)
async def callback(
    request: Request,
    settings: SettingsDep,
    identities: IdentitiesDep,
    oauth: OAuthDep,
    http: HttpDep,
    secret: SessionSecretDep,
    code: str | None = None,
    state: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
) -> Response:
    if settings.auth_mode != "oauth":
        raise NotFoundError("OAuth sign-in is off on this server")
    try:
        pending = _signer(secret).loads(request.cookies.get(LOGIN_COOKIE, ""), max_age=_LOGIN_MAX_AGE_S)
    except BadSignature:
        raise BadRequestError(
            "this sign-in expired or was started in another browser; sign in again", code="sign_in_expired"
        ) from None
    if error:
        raise BadRequestError(
            f"the Hub did not sign you in: {(error_description or error)[:200]}", code="sign_in_denied"
        )
    if not state or not secrets.compare_digest(state.encode(), str(pending.get("state", "")).encode()):
        raise BadRequestError("the sign-in state does not match this browser's; sign in again", code="sign_in_state")
    if not code:
        raise BadRequestError("the Hub sent no authorization code; sign in again", code="sign_in_code_missing")
    client = _http(http)
    config = await oauth.config(client)
    assert settings.oauth_client_id and settings.oauth_client_secret
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri(settings, request),
        "code_verifier": str(pending.get("verifier", "")),
        "client_id": settings.oauth_client_id,
    }
    auth = (settings.oauth_client_id, settings.oauth_client_secret.get_secret_value())
    try:
        answer = await client.post(config["token_endpoint"], data=form, auth=auth, timeout=15)
        grant = answer.json() if answer.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        raise HubUnavailableError("could not reach the Hub to finish signing in; try again") from None
    token = grant.get("access_token") if isinstance(grant, dict) else None
    if not isinstance(token, str) or not token:
        raise BadRequestError(
            f"the Hub refused the authorization code (HTTP {answer.status_code}); sign in again",
            code="sign_in_code_refused",
        )
    user = await _userinfo(client, config, token, identities)
    scopes = str(grant.get("scope") or settings.oauth_scopes)
    return _signed_in(request, settings, identities.store, user, token, scopes, str(pending["next"]))


async def _userinfo(http: httpx.AsyncClient, config: dict[str, Any], token: str, identities: Identities) -> User:
    url = config.get("userinfo_endpoint")
    if not isinstance(url, str):
        return await asyncio.to_thread(identities.hub_user, token)
    try:
        answer = await http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=15)
        answer.raise_for_status()
        info = answer.json()
    except (httpx.HTTPError, ValueError):
        raise HubUnavailableError("could not read your profile from the Hub; sign in again") from None
    name = info.get("preferred_username") if isinstance(info, dict) else None
    if not isinstance(name, str) or not name:
        raise BadRequestError("the Hub's profile of you has no user name")
    return User(name, str(info.get("name") or ""), info.get("picture"))


@router.post("/auth/logout", include_in_schema=False)
def logout(
    request: Request,
    settings: SettingsDep,
    identities: IdentitiesDep,
    csrf_token: Annotated[str | None, Form()] = None,
    next: Annotated[str, Form()] = "/",
) -> Response:
    """End the session; the form (or X-CSRF-Token header) carries its CSRF token, so no other site signs you out."""
    cookie = request.cookies.get(SESSION_COOKIE)
    store = identities.store
    if cookie and store.find(cookie) is not None:
        if not store.csrf_ok(cookie, csrf_token or request.headers.get("x-csrf-token")):
            raise ForbiddenError(
                "signing out needs the session's CSRF token: use the Sign out button", code="csrf_token_required"
            )
        store.end(cookie)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.delete_cookie(SESSION_COOKIE, **cookie_policy(settings))
    return response


@router.get("/auth/logout", include_in_schema=False)
def logout_page(request: Request, identities: IdentitiesDep) -> Response:
    """A link to /auth/logout shows the Sign out button rather than signing out on a GET."""
    cookie = request.cookies.get(SESSION_COOKIE)
    store = identities.store
    if not cookie or store.find(cookie) is None:
        return RedirectResponse("/", status_code=303)
    return HTMLResponse(f"<!doctype html><title>Sign out of envhub</title>{logout_form(store.csrf_token(cookie))}")


@router.get("/api/me", tags=["auth"])
def read_me(settings: SettingsDep, identities: IdentitiesDep, access: AccessDep, caller: CallerDep) -> MePublic:
    """Who you are here; `csrf_token` goes in the X-CSRF-Token header of state-changing calls made with the cookie."""
    mode = settings.auth_mode
    csrf = identities.store.csrf_token(caller.session) if caller.session else None
    return MePublic(
        signed_in=caller.user is not None,
        name=caller.name,
        fullname=caller.user.fullname if caller.user else None,
        avatar_url=caller.user.avatar_url if caller.user else None,
        admin=caller.admin,
        sign_in=mode,
        can_launch=access.may_launch(caller),
        csrf_token=csrf,
        login_url="/auth/login" if mode != "off" and caller.user is None else None,
        logout_url="/auth/logout" if caller.session else None,
    )
