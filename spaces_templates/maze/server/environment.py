"""The maze environment: walk from the top-left corner to the exit within a step budget."""

import base64
import html
import random
from pathlib import Path
from typing import Any

from models import MazeAction, MazeObservation, MazeState
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from server.drawing import draw_png, image_size
from server.maze import MOVES, Maze, Square, generate, step_from
from server.options import bounded_int, episode_id_or_new, reject_unknown, seed_or_random

README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_SIZE = 6
MIN_SIZE, MAX_SIZE = 2, 20
STEP_COST = 0.01
EXIT_REWARD = 1.0
RESET_OPTIONS = ("seed", "episode_id", "size", "max_steps")


class MazeEnvironment(Environment[MazeAction, MazeObservation, MazeState]):
    """A seeded perfect maze; each observation carries the grid as text and as a PNG."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = MazeState()
        self._maze: Maze | None = None
        self._position: Square = (0, 0)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        size: int = DEFAULT_SIZE,
        max_steps: int | None = None,
        **unknown: Any,
    ) -> MazeObservation:
        """Start a new maze of size x size cells; the step budget defaults to 4 * size * size."""
        reject_unknown(unknown, RESET_OPTIONS)
        seed = seed_or_random(seed)
        size = bounded_int("size", size, MIN_SIZE, MAX_SIZE)
        budget = 4 * size * size if max_steps is None else bounded_int("max_steps", max_steps, 1, 10_000)
        new_episode_id = episode_id_or_new(episode_id)
        self._maze = generate(size, random.Random(seed))
        self._position = self._maze.start
        self._state = MazeState(
            episode_id=new_episode_id,
            step_count=0,
            seed=seed,
            size=size,
            max_steps=budget,
            position=list(self._position),
            exit=list(self._maze.exit),
        )
        message = f"A {size}x{size} maze. Reach the exit 'E' within {budget} moves."
        return self._observe(self._maze, reward=0.0, message=message)

    def step(self, action: MazeAction, timeout_s: float | None = None, **kwargs: Any) -> MazeObservation:
        if self._maze is None:
            return self._refuse("No episode is running: call reset() first.")
        if self._state.done:
            return self._refuse("The episode is over: call reset() to start a new one.")
        self._state.step_count += 1
        target = step_from(self._position, action.direction)
        error = None
        if self._maze.is_open(target):
            self._position = target
        else:
            error = f"There is a wall {action.direction} of you; you did not move."
        self._state.position = list(self._position)
        self._state.solved = self._position == self._maze.exit
        self._state.done = self._state.solved or self._state.step_count >= self._state.max_steps
        reward = -STEP_COST + (EXIT_REWARD if self._state.solved else 0.0)
        return self._observe(self._maze, reward=reward, message=self._outcome(action.direction, error), error=error)

    @property
    def state(self) -> MazeState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="maze",
            description="Walk a seeded grid maze to its exit; observations carry text and a PNG image.",
            readme_content=README.read_text(encoding="utf-8") if README.exists() else None,
            version="1.0.0",
        )

    def render_web(self, observation: dict[str, Any]) -> str | None:
        image = observation.get("image_png_base64")
        if not image:
            return None
        return (
            f'<img alt="maze" style="image-rendering: pixelated; max-width: 100%" '
            f'src="data:image/png;base64,{html.escape(image)}">'
        )

    def web_actions(self, observation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [(direction, {"direction": direction}) for direction in MOVES]

    def _outcome(self, direction: str, error: str | None) -> str:
        if self._state.solved:
            return f"You reached the exit in {self._state.step_count} moves."
        if self._state.done:
            return "The step budget is spent; the episode is over."
        return error or f"You moved {direction}."

    def _refuse(self, error: str) -> MazeObservation:
        """Answer an action that cannot be played, leaving the episode untouched."""
        if self._maze is None:
            return MazeObservation(done=True, reward=0.0, message=error, error=error)
        return self._observe(self._maze, reward=0.0, message=error, error=error)

    def _observe(self, maze: Maze, *, reward: float, message: str, error: str | None = None) -> MazeObservation:
        rows = maze.rows(self._position)
        width, height = image_size(rows)
        return MazeObservation(
            done=self._state.done,
            reward=reward,
            grid="\n".join(rows),
            position=list(self._position),
            exit=list(maze.exit),
            image_png_base64=base64.b64encode(draw_png(rows)).decode("ascii"),
            image_width=width,
            image_height=height,
            steps_left=self._state.max_steps - self._state.step_count,
            message=message,
            error=error,
        )
