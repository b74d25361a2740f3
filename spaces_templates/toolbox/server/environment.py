"""The toolbox environment: answer a question with MCP tools (calculator, unit converter, fact table), then submit."""

import random
from pathlib import Path
from typing import Annotated, Any
from uuid import uuid4

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.types import CallToolRequestParams
from models import TaskObservation, ToolboxState
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation
from pydantic import Field

from server.calculator import CalculationError, evaluate
from server.facts import Facts, find_facts, list_entities
from server.tasks import TASKS, TASKS_BY_ID, Task
from server.units import ConversionError, convert

DEFAULT_MAX_STEPS = 10
MAX_STEPS_LIMIT = 100
EPISODE_OVER = "The episode is over; reset to start a new one."
README = Path(__file__).resolve().parents[1] / "README.md"


def tidy(value: float) -> float:
    """Round away binary floating-point noise (0.1 + 0.2 -> 0.3) while keeping 12 significant digits."""
    return float(f"{value:.12g}")


class StepBudget(Middleware):
    """Counts every tool call, by step() or by MCP directly, against the episode's budget."""

    def __init__(self, environment: "ToolboxEnvironment") -> None:
        self.environment = environment

    async def on_call_tool(
        self, context: MiddlewareContext[CallToolRequestParams], call_next: CallNext[Any, Any]
    ) -> Any:
        self.environment.begin_tool_call()
        try:
            return await call_next(context)
        finally:
            self.environment.end_tool_call()


class ToolboxEnvironment(MCPEnvironment):
    """One question per episode; the agent calls tools and ends the episode with submit_answer."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    _task: Task
    _state: ToolboxState

    def __init__(self) -> None:
        server = FastMCP("toolbox")
        tools = (self.get_question, self.calculate, self.convert_units, self.lookup_fact, self.submit_answer)
        for tool in tools:
            server.tool(tool)
        server.add_middleware(StepBudget(self))
        super().__init__(server)
        self._tool_names = [tool.__name__ for tool in tools]
        # Tools must work before any reset: POST /mcp without a session calls them on a fresh instance.
        self.reset()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        task_id: str | None = None,
        **options: Any,
    ) -> TaskObservation:
        _check_options(max_steps, options)
        self._task = self._choose_task(seed, task_id)
        self._state = ToolboxState(
            episode_id=episode_id or str(uuid4()),
            task_id=self._task.task_id,
            question=self._task.question,
            max_steps=max_steps,
        )
        return TaskObservation(
            task_id=self._task.task_id,
            question=self._task.question,
            tools=list(self._tool_names),
            max_steps=max_steps,
            message=f"Answer the question with the tools, then call submit_answer; {max_steps} tool calls allowed.",
            reward=0.0,
        )

    @staticmethod
    def _choose_task(seed: int | None, task_id: str | None) -> Task:
        if task_id is None:
            return random.Random(seed).choice(TASKS)
        if not isinstance(task_id, str) or task_id not in TASKS_BY_ID:
            raise ValueError(f"unknown task_id {task_id!r}; POST /toolbox/tasks lists them")
        return TASKS_BY_ID[task_id]

    @property
    def state(self) -> ToolboxState:
        return self._state

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        was_done = self._state.done
        return self._report(super().step(action, timeout_s=timeout_s, **kwargs), was_done)

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        was_done = self._state.done
        return self._report(await super().step_async(action, timeout_s=timeout_s, **kwargs), was_done)

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError("toolbox actions are {'type': 'list_tools'} or {'type': 'call_tool', ...}")

    def _report(self, observation: Observation, was_done: bool) -> Observation:
        """Stamp the episode's progress on a step's observation; the reward is paid once, on the final step."""
        state = self._state
        ended_now = state.done and not was_done
        observation.done = state.done
        observation.reward = 1.0 if ended_now and state.solved else 0.0
        progress: dict[str, Any] = {"steps_left": state.max_steps - state.step_count}
        if state.done:
            progress["outcome"] = state.outcome if ended_now else EPISODE_OVER
        observation.metadata = {**observation.metadata, **progress}
        return observation

    def begin_tool_call(self) -> None:
        if self._state.done:
            raise ToolError(EPISODE_OVER)
        self._state.step_count += 1

    def end_tool_call(self) -> None:
        state = self._state
        if not state.done and state.step_count >= state.max_steps:
            self._finish("out of steps")

    def _finish(self, outcome: str, solved: bool = False) -> None:
        self._state.done = True
        self._state.solved = solved
        self._state.outcome = outcome

    def get_question(self) -> str:
        """Return the question of the current episode."""
        return self._task.question

    def calculate(
        self,
        expression: Annotated[str, Field(description="Arithmetic such as '(2.5 + 3) * 4 / sqrt(2)'")],
    ) -> float:
        """Evaluate an arithmetic expression: + - * / % ** (or ^), parentheses, pi, e, and the functions
        sqrt, abs, exp, log (natural, or log(x, base)), log10, round(x[, digits]), min and max."""
        try:
            return tidy(evaluate(expression))
        except CalculationError as error:
            raise ToolError(f"cannot calculate {expression!r}: {error}") from error

    def convert_units(
        self,
        value: Annotated[float, Field(description="The quantity to convert")],
        from_unit: Annotated[str, Field(description="Unit of the value, e.g. 'km', 'lb', 'C', 'day', 'gal'")],
        to_unit: Annotated[str, Field(description="Unit to convert to, of the same kind")],
    ) -> float:
        """Convert a quantity between units of length, mass, time, volume, speed, energy, pressure or
        temperature (C, F, K). Symbols and names both work: 'mi' or 'miles', 'C' or 'celsius'."""
        try:
            return tidy(convert(value, from_unit, to_unit))
        except ConversionError as error:
            raise ToolError(str(error)) from error

    def lookup_fact(
        self,
        entity: Annotated[str, Field(description="A chemical element or a planet, e.g. 'gold' or 'Mars'")],
    ) -> Facts:
        """Look up the bundled fact table: physical data of a chemical element or a planet. Field names carry
        their unit, e.g. melting_point_c (degrees Celsius) or distance_from_sun_km."""
        facts = find_facts(entity)
        if facts is None:
            raise ToolError(f"no facts about {entity!r}; known entities: {list_entities()}")
        return facts

    def submit_answer(
        self,
        answer: Annotated[float, Field(description="Your final numeric answer")],
    ) -> dict[str, Any]:
        """Submit the final answer and end the episode: reward 1.0 if it is within 0.1% of the truth, else 0.0."""
        solved = self._task.accepts(answer)
        self._state.submitted_answer = answer
        self._finish("solved" if solved else "wrong answer", solved=solved)
        return {"correct": solved, "expected": tidy(self._task.answer), "reward": 1.0 if solved else 0.0}

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="toolbox",
            description="Answer a question with MCP tools (calculator, unit converter, fact table), then submit.",
            version="1.0.0",
            readme_content=README.read_text(encoding="utf-8") if README.exists() else None,
        )

    def list_splits(self) -> list[str]:
        return ["test"]

    def list_tasks(self, split: str) -> list[dict[str, str]]:
        return [_describe(task) for task in _tasks_of(split)]

    def num_tasks(self, split: str) -> int:
        return len(_tasks_of(split))

    def get_task(self, split: str, index: int) -> dict[str, str]:
        return _describe(_tasks_of(split)[index])

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, str]]:
        return [_describe(task) for task in _tasks_of(split)[start:stop]]


def _check_options(max_steps: Any, unknown: dict[str, Any]) -> None:
    """Reset options arrive as raw JSON over the WebSocket, unvalidated by openenv."""
    if unknown:
        raise ValueError(f"unknown reset option(s): {', '.join(sorted(unknown))}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 1 <= max_steps <= MAX_STEPS_LIMIT:
        raise ValueError(f"max_steps must be a whole number from 1 to {MAX_STEPS_LIMIT}, got {max_steps!r}")


def _tasks_of(split: str) -> tuple[Task, ...]:
    """The Task API's view of the bank: one split, 'test'; reset(task_id=...) plays a listed task."""
    return TASKS if split == "test" else ()


def _describe(task: Task) -> dict[str, str]:
    return {"task_id": task.task_id, "question": task.question}
