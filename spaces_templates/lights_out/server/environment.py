"""The Lights Out environment: switch every light off, earning reward for each light put out."""

import random
from pathlib import Path
from typing import Any

from models import LightsOutAction, LightsOutObservation, LightsOutState
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from server.board import Board, as_text, lights_on, press, scrambled
from server.options import bounded_int, episode_id_or_new, reject_unknown, seed_or_random

README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_SIZE = 5
MIN_SIZE, MAX_SIZE = 2, 10
SOLVED_BONUS = 1.0
RESET_OPTIONS = ("seed", "episode_id", "size", "presses", "max_steps")


def _light_html(light: int) -> str:
    colour = "#f5c518" if light else "#222"
    return f'<td style="width: 28px; height: 28px; border: 1px solid #555; background: {colour}"></td>'


class LightsOutEnvironment(Environment[LightsOutAction, LightsOutObservation, LightsOutState]):
    """Lights Out on a seeded, always solvable N x N board, with reward shaped per press."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = LightsOutState()
        self._board: Board = []

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        size: int = DEFAULT_SIZE,
        presses: int | None = None,
        max_steps: int | None = None,
        **unknown: Any,
    ) -> LightsOutObservation:
        """Scramble a dark board with random presses; defaults: size*size//2 presses, a 2*size*size budget."""
        reject_unknown(unknown, RESET_OPTIONS)
        seed = seed_or_random(seed)
        size = bounded_int("size", size, MIN_SIZE, MAX_SIZE)
        cells = size * size
        presses = cells // 2 if presses is None else bounded_int("presses", presses, 1, cells)
        budget = 2 * cells if max_steps is None else bounded_int("max_steps", max_steps, 1, 10_000)
        new_episode_id = episode_id_or_new(episode_id)
        self._board = scrambled(size, presses, random.Random(seed))
        self._state = LightsOutState(
            episode_id=new_episode_id,
            step_count=0,
            seed=seed,
            size=size,
            scramble_presses=presses,
            max_steps=budget,
        )
        self._sync_state()
        message = f"{self._state.lights_on} of {cells} lights are on. Switch them all off within {budget} presses."
        return self._observe(reward=0.0, message=message)

    def step(self, action: LightsOutAction, timeout_s: float | None = None, **kwargs: Any) -> LightsOutObservation:
        if not self._board:
            return self._refuse("No episode is running: call reset() first.")
        if self._state.done:
            return self._refuse("The episode is over: call reset() to start a new one.")
        self._state.step_count += 1
        before = self._state.lights_on
        error = self._press(action.row, action.col)
        self._sync_state()
        after = self._state.lights_on
        # The solving press pays the bonus alone, so that it is the most any press pays (validation.reward.range).
        reward = SOLVED_BONUS if self._state.solved else (before - after) / (self._state.size**2)
        return self._observe(reward=reward, message=self._outcome(action, before, after, error), error=error)

    @property
    def state(self) -> LightsOutState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="lights_out",
            description="Switch off every light of a seeded Lights Out board, with reward for each light put out.",
            readme_content=README.read_text(encoding="utf-8") if README.exists() else None,
            version="1.0.0",
        )

    def render_web(self, observation: dict[str, Any]) -> str | None:
        board = observation.get("board") or []
        rows = "".join("<tr>" + "".join(_light_html(light) for light in row) + "</tr>" for row in board)
        return f'<table style="border-collapse: collapse">{rows}</table>' if board else None

    def web_actions(self, observation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        size = len(observation.get("board") or [])
        return [(f"press ({row}, {col})", {"row": row, "col": col}) for row in range(size) for col in range(size)]

    def _press(self, row: int, col: int) -> str | None:
        size = self._state.size
        if row >= size or col >= size:
            return f"({row}, {col}) is off the board; rows and columns run from 0 to {size - 1}."
        press(self._board, row, col)
        return None

    def _sync_state(self) -> None:
        self._state.board = [list(row) for row in self._board]
        self._state.lights_on = lights_on(self._board)
        self._state.solved = self._state.lights_on == 0
        self._state.done = self._state.solved or self._state.step_count >= self._state.max_steps

    def _outcome(self, action: LightsOutAction, before: int, after: int, error: str | None) -> str:
        if self._state.solved:
            return f"All lights are off after {self._state.step_count} presses."
        if self._state.done:
            return f"The step budget is spent with {after} lights still on; the episode is over."
        return error or f"You pressed ({action.row}, {action.col}): {before} -> {after} lights on."

    def _refuse(self, error: str) -> LightsOutObservation:
        """Answer an action that cannot be played, leaving the episode untouched."""
        done = self._state.done or not self._board
        return self._observe(reward=0.0, message=error, error=error, done=done)

    def _observe(
        self, *, reward: float, message: str, error: str | None = None, done: bool | None = None
    ) -> LightsOutObservation:
        return LightsOutObservation(
            done=self._state.done if done is None else done,
            reward=reward,
            board=[list(row) for row in self._board],
            board_text=as_text(self._board),
            size=self._state.size,
            lights_on=self._state.lights_on,
            steps_left=self._state.max_steps - self._state.step_count,
            message=message,
            error=error,
        )
