"""Agent runs as the gateway reads them off a request: the run credential `envhub-run.<run id>.<secret>` (its run id
told by its shape alone: whether the secret is the run's is the control plane's to check) and the harness's own
session id."""

import re
from collections.abc import Mapping

__all__ = ["CLIENT_SESSION_HEADERS", "RUN_HEADER", "client_session", "run_of"]

_CREDENTIAL = re.compile(r"envhub-run\.(ar-[0-9a-f]{12})\.[A-Za-z0-9_-]+")


def run_of(credential: str) -> str | None:
    """The run id a run credential names, or None when it is not one."""
    found = _CREDENTIAL.fullmatch(credential.strip())
    return found.group(1) if found else None


RUN_HEADER = "x-envhub-run"  # a harness's run credential, sent to the MCP door
# A harness's own session id, as the harnesses that send one name it (Claude Code's first).
CLIENT_SESSION_HEADERS = ("x-claude-code-session-id", "session-id", "x-session-id")


def client_session(headers: Mapping[str, str]) -> str | None:
    """The harness's own session id: the first of its headers present (as long as a name may be)."""
    for name in CLIENT_SESSION_HEADERS:
        value = headers.get(name, "").strip()
        if value:
            return value[:200]
    return None
