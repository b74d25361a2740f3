"""What the MCP door needs from the rest of envhub, as small Protocols the control plane implements: the environment's
card, and somewhere to keep the sessions and the episodes they play. (Its place in the pool is the gateway's own:
gateway.placement.)"""

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Card", "EpisodeRecord", "Recorder", "SessionRecord"]


@dataclass(frozen=True)
class Card:
    """What the catalog says of the endpoint's environment."""

    environment: str
    revision: str | None = None
    title: str = ""
    readme: str = ""
    datasets: tuple[str, ...] = ()  # linked datasets whose rows can reset an episode


@dataclass(frozen=True)
class SessionRecord:
    """An agent session as it is recorded: one MCP session on one endpoint."""

    id: str  # the record's id (never the Mcp-Session-Id, which is the session's credential)
    endpoint: str
    environment: str
    revision: str | None
    client: str  # the MCP client that initialized it, as it named itself
    protocol_version: str
    user: str | None  # who its bearer proved to be, if anyone
    tools: tuple[str, ...]
    holder: str = ""  # whose recording budget its episodes count against: the placement's client
    run: str | None = None  # the agent run it plays for (its X-Envhub-Run credential's run id; never the credential)
    client_session: str | None = None  # the harness's own session id, as its header said


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode of an agent session, as far as it went: what the store keeps of it."""

    session: str
    index: int
    seed: int | None
    task: dict[str, Any] | None
    status: str  # done, cut (the session ended or reset first) or running
    error: str | None
    code: str  # why it was cut, beside the error: the session's end code, reset_before_done or slot_given_back
    reward: float
    final_reward: float | None
    success: bool | None
    steps: int
    invalid: int
    wall_s: float
    records: list[dict[str, Any]]


class Recorder(Protocol):
    """What the door asks of envhub's control plane: the environment's card, a dataset's task, and storage."""

    async def card(self, endpoint_id: str) -> Card: ...

    async def dataset_task(self, endpoint_id: str, dataset: str, split: str, index: int) -> dict[str, Any]:
        """The reset options of one row of a linked dataset; ValueError saying why when there are none."""

    async def opened(self, session: SessionRecord) -> None: ...

    async def episode(self, episode: EpisodeRecord) -> None:
        """Keep the episode as it is now (written again as it goes on)."""

    async def closed(self, session_id: str, reason: str, code: str) -> None: ...
