"""Agent sessions: the MCP sessions played through an endpoint's MCP door, each with its episodes (tool calls,
observations, rewards, done), and their exports. A private endpoint's are its owner's and the admin's only."""

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.api.deps import AgentsDep, CallerDep, EndpointsDep
from app.usecases.evaluations import ensure_sessions_visible
from evals.models import AgentSessionPublic, AgentSessionsPublic
from evals.transcripts import episodes_jsonl, messages_jsonl, session_json

router = APIRouter(prefix="/api/endpoints", tags=["agent sessions"])


@router.get("/{endpoint_id}/sessions")
def list_sessions(
    endpoint_id: str, endpoints: EndpointsDep, agents: AgentsDep, caller: CallerDep
) -> AgentSessionsPublic:
    """The endpoint's agent sessions, newest first, with their figures (episodes, reward, steps)."""
    ensure_sessions_visible(endpoints, caller, endpoint_id)
    listed = agents.list_for(endpoint_id)
    return AgentSessionsPublic(data=listed, count=len(listed))


@router.get("/{endpoint_id}/sessions/{session_id}", response_model=AgentSessionPublic)
def read_session(
    endpoint_id: str, session_id: str, endpoints: EndpointsDep, agents: AgentsDep, caller: CallerDep
) -> StreamingResponse:
    """One agent session with every episode and its records; each episode opens in the viewer at /?episode=ID.
    It is written as it is read, a few episodes at a time."""
    ensure_sessions_visible(endpoints, caller, endpoint_id)
    session = agents.get(endpoint_id, session_id)
    return StreamingResponse(session_json(session, agents.episodes(session_id)), media_type="application/json")


@router.get("/{endpoint_id}/sessions/{session_id}/episodes.jsonl")
def export_episodes(
    endpoint_id: str, session_id: str, endpoints: EndpointsDep, agents: AgentsDep, caller: CallerDep
) -> StreamingResponse:
    """The session's episodes, one JSON object per line with the session's metadata, as a run's export has them."""
    ensure_sessions_visible(endpoints, caller, endpoint_id)
    session = agents.get(endpoint_id, session_id)
    return StreamingResponse(
        episodes_jsonl(session, agents.episodes(session_id)),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{session_id}-episodes.jsonl"'},
    )


@router.get("/{endpoint_id}/sessions/{session_id}/messages.jsonl")
def export_messages(
    endpoint_id: str, session_id: str, endpoints: EndpointsDep, agents: AgentsDep, caller: CallerDep
) -> StreamingResponse:
    """The session's episodes as chat transcripts, one per line, as `openenv collect` writes results.jsonl: its
    `messages` column is what TRL's SFTTrainer reads."""
    ensure_sessions_visible(endpoints, caller, endpoint_id)
    session = agents.get(endpoint_id, session_id)
    return StreamingResponse(
        messages_jsonl(session, agents.episodes(session_id)),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{session_id}-messages.jsonl"'},
    )
