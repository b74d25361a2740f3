"""The standard MCP door: every endpoint as an MCP server (Streamable HTTP) that any agent harness can use.

transport: the HTTP side (POST/GET/DELETE, JSON or SSE, session ids, protocol versions); sessions: one MCP
session as one environment session on one replica; upstream: its socket to the replica; interfaces: what the
door reads of an environment over HTTP; tools: what each environment offers; results: observations
as tool results; episodes: what a session played, for the recorder; ports: what the door needs from envhub.
"""

from gateway.mcp.ports import (
    Card,
    EpisodeRecord,
    Recorder,
    SessionRecord,
)
from gateway.mcp.transport import Door, HttpReply, HttpRequest, is_standard

__all__ = [
    "Card",
    "Door",
    "EpisodeRecord",
    "HttpReply",
    "HttpRequest",
    "Recorder",
    "SessionRecord",
    "is_standard",
]
