"""The standard MCP door: every endpoint as an MCP server (Streamable HTTP) that any agent harness can use.

door: the door itself (initialize, sessions by id, tools/list and tools/call, DELETE); transport: the HTTP side's
messages (JSON-RPC read and written, JSON or SSE answers); environment_session: one MCP session as one environment
session on one replica; placing: its slot and socket; reset_arguments: a reset's arguments; upstream: its socket to
the replica; interfaces: what the door reads of an environment over HTTP; tools: what each environment offers;
results: observations as tool results; episodes: what a session played, for the recorder; recorder: what the door
needs from envhub (the card, the recorder).
"""

from gateway.mcp.door import Door
from gateway.mcp.recorder import (
    Card,
    EpisodeRecord,
    Recorder,
    SessionRecord,
)
from gateway.mcp.transport import HttpReply, HttpRequest, is_standard

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
