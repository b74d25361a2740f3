"""What the Evaluate tab reads for whoever looks: runs, their episodes and leaderboards, a private endpoint's for its
owner and the admin only (as the API shows them)."""

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr
from sqlalchemy import Engine

from app.ui.requests import Visitors
from app.usecases.evaluations import run_shown, visible_episode, visible_run
from evals.agent_sessions import AgentSessions
from evals.leaderboard import leaderboard
from evals.models import Episode, Evaluation, EvaluationPublic, Leaderboard
from evals.store import EvaluationStore
from hosting.endpoints import EndpointManager

__all__ = ["Runs"]


@dataclass(frozen=True)
class Runs:
    """Where the tab reads runs, their episodes and the leaderboards from, for whoever looks."""

    engine: Engine  # the leaderboards
    store: EvaluationStore
    agents: AgentSessions  # an agent session's episode is shown to whoever may read its endpoint's sessions
    endpoints: EndpointManager  # who may see a private endpoint's runs
    visitors: Visitors

    def shown(self, request: gr.Request | None) -> Callable[[Evaluation], bool]:
        return run_shown(self.endpoints.access, self.visitors.caller(request))

    def get(self, request: gr.Request | None, evaluation_id: str) -> Evaluation:
        """The run, if the visitor is shown it; else NotFoundError, as for a run that does not exist."""
        return visible_run(self.store, self.endpoints.access, self.visitors.caller(request), evaluation_id)

    def public(self, request: gr.Request | None, evaluation_id: str) -> EvaluationPublic:
        """The run with its episodes (without their steps), if the visitor is shown it."""
        return self.store.public(self.get(request, evaluation_id).id)

    def board(self, request: gr.Request | None, environment_id: str) -> Leaderboard:
        return leaderboard(self.engine, environment_id, self.shown(request))

    def episode(self, request: gr.Request | None, episode_id: str) -> Episode:
        return visible_episode(self.store, self.agents, self.endpoints, self.visitors.caller(request), episode_id)

    def share_link(self, request: gr.Request | None, episode_id: str) -> str:
        return f"{self.visitors.base(request)}/?episode={episode_id}"
