"""The arithmetic tasks environment: answer a bundled word problem, scored 1.0 for the exact integer."""

import random
from pathlib import Path
from typing import Any

from models import ArithmeticAction, ArithmeticObservation, ArithmeticState, ArithmeticTask
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from server.options import bounded_int, episode_id_or_new, reject_unknown, seed_or_random
from server.tasks import SPLITS, get_task, load_split, parse_integer

README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_ATTEMPTS = 3
RESET_OPTIONS = ("seed", "episode_id", "split", "index", "max_attempts")
NO_EPISODE = "No episode is running: call reset() first."
EPISODE_OVER = "The episode is over: call reset() to start a new one."


class ArithmeticEnvironment(Environment[ArithmeticAction, ArithmeticObservation, ArithmeticState]):
    """One task per episode, picked by split and index (or by the seed), with a few attempts to answer it."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = ArithmeticState()
        self._task: ArithmeticTask | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        split: str = "train",
        index: int | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        **unknown: Any,
    ) -> ArithmeticObservation:
        """Start an episode on task `index` of `split`, or on a task drawn from the seed when no index is given."""
        reject_unknown(unknown, RESET_OPTIONS)
        seed = seed_or_random(seed)
        count = len(load_split(split))
        index = random.Random(seed).randrange(count) if index is None else bounded_int("index", index, 0, count - 1)
        max_attempts = bounded_int("max_attempts", max_attempts, 1, 10)
        new_episode_id = episode_id_or_new(episode_id)
        self._task = get_task(split, index)
        self._state = ArithmeticState(
            episode_id=new_episode_id,
            step_count=0,
            seed=seed,
            split=split,
            index=index,
            task_id=self._task.id,
            max_attempts=max_attempts,
        )
        message = f"Answer with an integer. You have {max_attempts} attempt{'s' if max_attempts > 1 else ''}."
        return self._observe(self._task, reward=0.0, message=message)

    def step(self, action: ArithmeticAction, timeout_s: float | None = None, **kwargs: Any) -> ArithmeticObservation:
        if self._task is None:
            return ArithmeticObservation(done=True, reward=0.0, message=NO_EPISODE, error=NO_EPISODE)
        if self._state.done:
            return self._observe(self._task, reward=0.0, message=EPISODE_OVER, error=EPISODE_OVER)
        self._state.step_count += 1
        self._state.attempts_used += 1
        given = parse_integer(action.answer)
        self._state.solved = given == self._task.answer
        self._state.done = self._state.solved or self._state.attempts_used >= self._state.max_attempts
        return self._observe(
            self._task,
            reward=1.0 if self._state.solved else 0.0,
            message=self._verdict(action.answer, given),
            correct=self._state.solved,
        )

    @property
    def state(self) -> ArithmeticState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="arithmetic_tasks",
            description="Multi-step arithmetic word problems with exact integer answers, served through the Task API.",
            readme_content=README.read_text(encoding="utf-8") if README.exists() else None,
            version="1.0.0",
        )

    def list_splits(self) -> list[str]:
        return list(SPLITS)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [task.model_dump() for task in load_split(split)]

    def num_tasks(self, split: str) -> int:
        return len(load_split(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        return get_task(split, index).model_dump()

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        return [task.model_dump() for task in load_split(split)[start:stop]]

    def _verdict(self, answer: str, given: int | None) -> str:
        if self._state.solved:
            return "Correct."
        left = self._state.max_attempts - self._state.attempts_used
        judged = f"{answer!r} is not an integer" if given is None else f"{given} is not the answer"
        return f"{judged}; {left} attempt{'s' if left != 1 else ''} left." if left else f"{judged}; no attempts left."

    def _observe(
        self,
        task: ArithmeticTask,
        *,
        reward: float,
        message: str,
        correct: bool | None = None,
        error: str | None = None,
    ) -> ArithmeticObservation:
        return ArithmeticObservation(
            done=self._state.done,
            reward=reward,
            task_id=task.id,
            split=task.split,
            index=task.index,
            question=task.question,
            attempts_left=self._state.max_attempts - self._state.attempts_used,
            correct=correct,
            expected_answer=task.answer if self._state.done else None,
            message=message,
            error=error,
        )
