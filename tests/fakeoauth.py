"""The Hub's OAuth / OpenID Connect routes, for the fake Hub: discovery, authorize, token, userinfo.

``authorize`` consents at once for whoever the browser is signed in to the Hub as (``signed_in``) and
redirects back with a one-time code; ``token`` checks the client, the redirect URI and the PKCE verifier,
then mints an ``hf_oauth_…`` access token that the rest of the fake Hub accepts as that user's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

__all__ = ["FakeOAuth", "Grant"]

Answer = tuple[int, bytes, list[tuple[str, str]], str]


@dataclass(frozen=True)
class Grant:
    """One access token the fake issued, and to whom."""

    token: str
    user: str
    client_id: str
    scope: str
    redirect_uri: str


def _json(status: int, body: object) -> Answer:
    return status, json.dumps(body).encode(), [("Cache-Control", "no-store")], "application/json"


def _oauth_error(status: int, error: str, description: str) -> Answer:
    return _json(status, {"error": error, "error_description": description})


class FakeOAuth:
    def __init__(self, users: Callable[[], dict[str, str]], base_url: Callable[[], str]) -> None:
        self.users = users  # the fake Hub's token -> user map: minted tokens work everywhere
        self.base_url = base_url
        self.clients: dict[str, str] = {"envhub-test-client": "envhub-test-secret"}
        self.signed_in: str | None = "alice"  # the Hub account the browser is signed in as
        self.grants: list[Grant] = []
        self.authorizations: list[dict[str, str]] = []  # the query of each /oauth/authorize
        self._codes: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], headers: Message, body: bytes
    ) -> Answer | None:
        if path == "/.well-known/openid-configuration" and method in ("GET", "HEAD"):
            return self._discovery()
        if path == "/oauth/authorize" and method == "GET":
            return self._authorize({k: v[-1] for k, v in query.items()})
        if path == "/oauth/token" and method == "POST":
            form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
            return self._token(form, headers.get("Authorization", ""))
        if path == "/oauth/userinfo" and method in ("GET", "POST"):
            return self._userinfo(headers.get("Authorization", ""))
        return None

    def _discovery(self) -> Answer:
        base = self.base_url()
        return _json(
            200,
            {
                "issuer": base,
                "authorization_endpoint": f"{base}/oauth/authorize",
                "token_endpoint": f"{base}/oauth/token",
                "userinfo_endpoint": f"{base}/oauth/userinfo",
                "jwks_uri": f"{base}/oauth/jwks",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code"],
                "code_challenge_methods_supported": ["S256"],
                "scopes_supported": ["openid", "profile", "email", "read-repos", "write-repos", "manage-repos"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            },
        )

    def _authorize(self, params: dict[str, str]) -> Answer:
        with self._lock:
            self.authorizations.append(dict(params))
        client_id, redirect_uri = params.get("client_id", ""), params.get("redirect_uri", "")
        if client_id not in self.clients:
            return _oauth_error(400, "invalid_client", f"unknown client_id {client_id!r}")
        if urlsplit(redirect_uri).scheme not in ("http", "https"):
            return _oauth_error(400, "invalid_request", "redirect_uri must be an http(s) URL")
        if params.get("response_type") != "code":
            return _oauth_error(400, "unsupported_response_type", "only response_type=code")
        if params.get("code_challenge") and params.get("code_challenge_method") != "S256":
            return _oauth_error(400, "invalid_request", "code_challenge_method must be S256")
        back: dict[str, str] = {"state": params["state"]} if "state" in params else {}
        if self.signed_in is None:
            back |= {"error": "access_denied", "error_description": "The user denied the request"}
        else:
            code = secrets.token_urlsafe(16)
            with self._lock:
                self._codes[code] = {
                    "user": self.signed_in,
                    "client_id": client_id,
                    "redirect_uri": redirect_uri,
                    "scope": params.get("scope", "openid profile"),
                    "challenge": params.get("code_challenge", ""),
                }
            back["code"] = code
        separator = "&" if urlsplit(redirect_uri).query else "?"
        return 302, b"", [("Location", f"{redirect_uri}{separator}{urlencode(back)}")], "text/plain"

    def _client(self, form: Mapping[str, str], authorization: str) -> str | None:
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() == "basic":
            try:
                client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
        known = self.clients.get(client_id)
        return client_id if known is not None and secrets.compare_digest(known, secret) else None

    def _token(self, form: dict[str, str], authorization: str) -> Answer:
        client_id = self._client(form, authorization)
        if client_id is None:
            return _oauth_error(401, "invalid_client", "client authentication failed")
        if form.get("grant_type") != "authorization_code":
            return _oauth_error(400, "unsupported_grant_type", "only authorization_code")
        with self._lock:
            pending = self._codes.pop(form.get("code", ""), None)  # one use only
        if pending is None or pending["client_id"] != client_id:
            return _oauth_error(400, "invalid_grant", "unknown, used or foreign authorization code")
        if form.get("redirect_uri") != pending["redirect_uri"]:
            return _oauth_error(400, "invalid_grant", "redirect_uri differs from the authorization request's")
        if pending["challenge"]:
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != pending["challenge"]:
                return _oauth_error(400, "invalid_grant", "code_verifier does not match the code_challenge")
        token = "hf_oauth_" + secrets.token_hex(16)
        grant = Grant(token, pending["user"], client_id, pending["scope"], pending["redirect_uri"])
        with self._lock:
            self.users()[token] = grant.user
            self.grants.append(grant)
        return _json(200, {"access_token": token, "token_type": "bearer", "expires_in": 28800, "scope": grant.scope})

    def _userinfo(self, authorization: str) -> Answer:
        scheme, _, token = authorization.partition(" ")
        user = self.users().get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            return _oauth_error(401, "invalid_token", "unknown access token")
        base = self.base_url()
        info: dict[str, Any] = {
            "sub": hashlib.sha1(f"user:{user}".encode()).hexdigest()[:24],
            "name": user[:1].upper() + user[1:],
            "preferred_username": user,
            "profile": f"{base}/{user}",
            "picture": f"https://example.invalid/{user}.png",
        }
        return _json(200, info)
