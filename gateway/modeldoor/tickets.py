"""What the model door needs from the rest of envhub, as a small Protocol the control plane implements: which run a
credential is of (with where its model is served), somewhere to keep each call, and a way to end a run."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

__all__ = ["Call", "Runs", "Ticket"]


@dataclass
class Ticket:
    """An admitted run's model: where it is served and how, its limits, and its figures so far. One ticket stands for
    its run in this process while it is kept: the door counts each call on it (in the event loop, so two calls at
    once never both take the last one) and it says at once when the run has ended."""

    run: str
    base_url: str  # the preset's OpenAI-compatible base, ending in /v1
    headers: dict[str, str] = field(repr=False)  # what reaching it takes (the preset's key): sent there only
    model: str
    token_ids: bool  # a vLLM server: a chat call asks for token ids and log-probs
    timeout_s: float
    max_calls: int
    max_output_tokens: int
    deadline: datetime  # the run's wall time ends then
    calls: int
    output_tokens: int
    ended: bool = False


@dataclass
class Call:
    """One request a harness sent through the door and what came back (a ModelCall's fields but its id and index,
    which the store gives)."""

    run: str
    dialect: str
    stream: bool
    started_at: datetime
    status: int = 200
    code: str = ""
    wall_s: float = 0.0
    first_token_s: float | None = None
    request: dict[str, Any] = field(default_factory=dict)
    response: dict[str, Any] | None = None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    client_session: str | None = None


class Runs(Protocol):
    async def admit(self, credential: str) -> Ticket:
        """The running run of the credential; an EnvhubError (401 run_unknown, run_ended) when there is none."""
        ...

    def record(self, call: Call) -> None:
        """Keep the call: written after its answer has gone, in the order calls were given here."""
        ...

    async def end(self, run: str, status: str, code: str, message: str) -> None:
        """End the run: its ticket says so before this returns."""
        ...

    async def aclose(self) -> None:
        """Write every call given so far."""
        ...
