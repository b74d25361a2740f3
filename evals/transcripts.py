"""Agent sessions' episodes leave envhub as an evaluation's do: JSONL of episodes (each line with the session's
metadata), and chat transcripts in the shape `openenv collect` writes (one episode per line, its `messages` as
TRL's SFTTrainer reads them, with the reward, done and the tool trace).

A transcript holds what the door saw: each tool call as an assistant message with one tool call, and its result as
the tool message; an observation the environment gave before the agent's first call (the reset the door sends an
MCP environment's session) is the user message the conversation starts with. The harness's own prompts and the
model's text between calls never reach the door, so they are not there.
"""

import json
from collections.abc import Iterable, Iterator
from typing import Any

from evals.models import AgentSession, AgentSessionBase, Episode, EpisodePublic

__all__ = ["collect_line", "episodes_jsonl", "messages_jsonl", "session_json"]


def _metadata(session: AgentSession) -> dict[str, Any]:
    return {
        "session": session.id,
        "endpoint": session.endpoint,
        "environment": session.environment,
        "revision": session.revision,
        "client": session.client,
        "tools": session.tools,
    }


def session_json(session: AgentSession, episodes: Iterable[Episode]) -> Iterator[str]:
    """The session with every episode and its records, as one JSON object (an `AgentSessionPublic`), written an
    episode at a time."""
    fields = AgentSessionBase.model_validate(session.model_dump()).model_dump_json()
    yield fields[:-1] + ',"episodes":['
    for n, episode in enumerate(episodes):
        yield ("," if n else "") + EpisodePublic.model_validate(episode.model_dump()).model_dump_json()
    yield "]}"


def episodes_jsonl(session: AgentSession, episodes: Iterable[Episode]) -> Iterator[str]:
    """One episode per line, with every record and the session's metadata, as an evaluation's export has them."""
    metadata = _metadata(session)
    for e in episodes:
        line = {"session": metadata, **EpisodePublic.model_validate(e.model_dump()).model_dump(mode="json")}
        yield json.dumps(line, ensure_ascii=False, default=str) + "\n"


def _data(record: dict[str, Any]) -> Any:
    """What a tool returned, as openenv's harness serializes it: an MCP tool's data, else the observation."""
    observation = record.get("observation")
    result = observation.get("result") if isinstance(observation, dict) else None
    if isinstance(result, dict) and "data" in result:
        return result["data"]
    return observation


def _content(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def collect_line(session: AgentSession, episode: Episode) -> dict[str, Any]:
    """One episode as `openenv collect` writes it to results.jsonl."""
    messages: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    for record in episode.records:
        tool = record.get("tool")
        if not isinstance(tool, str):  # the environment spoke first: the reset the door sent
            messages.append({"role": "user", "content": _content(record.get("observation"))})
            continue
        call_id = f"call_{record.get('index', len(trace))}"
        arguments = record.get("arguments") if isinstance(record.get("arguments"), dict) else {}
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
                ],
            }
        )
        data = _data(record)
        messages.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": _content(data)})
        trace.append(
            {
                "tool_name": tool,
                "arguments": arguments,
                "result": {
                    "data": data,
                    "done": bool(record.get("done")),
                    "metadata": {"reward": record.get("reward")},
                    "error": record.get("refused"),
                },
            }
        )
    return {
        "episode_id": episode.id,
        "messages": messages,
        "reward": episode.reward,
        "done": episode.status == "done",
        "tool_trace": trace,
        "metrics": {"steps": episode.steps, "invalid": episode.invalid, "wall_s": episode.wall_s},
        "verify_metrics": {},
        "artifacts": {},
        "task": episode.task,
        "extra": _metadata(session) | {"status": episode.status, "error": episode.error},
    }


def messages_jsonl(session: AgentSession, episodes: Iterable[Episode]) -> Iterator[str]:
    for e in episodes:
        yield json.dumps(collect_line(session, e), ensure_ascii=False, default=str) + "\n"
