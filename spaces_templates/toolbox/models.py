"""Typed actions, observations and state of the toolbox environment."""

from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State
from pydantic import Field

# openenv turns {"type": "list_tools"} and {"type": "call_tool", ...} into its MCP actions only when the
# server's action class is one of them (openenv/core/env_server/serialization.py), so the toolbox adopts
# them as they are instead of subclassing.
ToolboxAction = CallToolAction
ToolboxObservation = CallToolObservation


class TaskObservation(Observation):
    """What reset returns: the question of the episode and the tools at hand."""

    task_id: str = Field(description="Identifier of the question in the task bank, e.g. 'melting-point-f/gold'")
    question: str = Field(description="The question to answer; submit the number with the submit_answer tool")
    tools: list[str] = Field(description="Names of the MCP tools this environment offers")
    max_steps: int = Field(description="Tool calls allowed in this episode, submit_answer included")
    message: str = Field(description="How to play")


class ToolboxState(State):
    """Episode bookkeeping; step_count counts tool calls, however they arrive."""

    task_id: str = Field(default="", description="Identifier of the current question")
    question: str = Field(default="", description="The current question")
    max_steps: int = Field(default=10, description="Tool calls allowed in this episode")
    done: bool = Field(default=False, description="Whether the episode has ended")
    solved: bool = Field(default=False, description="Whether a correct answer was submitted")
    submitted_answer: float | None = Field(default=None, description="The answer given to submit_answer, if any")
    outcome: str | None = Field(default=None, description="How the episode ended: solved, wrong answer, out of steps")
