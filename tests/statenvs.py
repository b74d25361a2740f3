"""Environments built to have known statistics: one step per episode, whose reward is a rule of the action, the seed
and how many episodes the server has played (class-level counters, so that a pass rate is exact, not sampled)."""

from pathlib import Path
from textwrap import dedent

MODELS = """
from openenv.core.env_server.types import Action, Observation


class PickAction(Action):
    x: int = 0


class PickObservation(Observation):
    seed: int = 0
"""

ENVIRONMENT = """
import uuid
from collections import Counter

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

from models import PickObservation


class PickEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    played = Counter()  # episodes stepped per seed, in this process
    episodes = 0

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._seed = 0

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._seed = int(seed or 0)
        return PickObservation(seed=self._seed, reward=0.0)

    def step(self, action, timeout_s=None, **kwargs):
        seed, x = self._seed, action.x
        nth = PickEnvironment.played[seed]
        PickEnvironment.played[seed] += 1
        PickEnvironment.episodes += 1
        episodes = PickEnvironment.episodes
        reward = float({rule})
        return PickObservation(seed=seed, done=True, reward=reward)

    @property
    def state(self):
        return self._state
"""

APP = """
from openenv.core.env_server.http_server import create_app

from models import PickAction, PickObservation
from server.environment import PickEnvironment

app = create_app(PickEnvironment, PickAction, PickObservation, env_name="pick", max_concurrent_envs=64)
"""

RULES = {
    # the same reward whatever is played
    "constant": "1.0",
    # pays the empty action (x takes its default, 0) and nothing else
    "gameable": "1.0 if x == 0 else 0.0",
    # the reward follows how many episodes the server played, not the seed and the action
    "seedless": "episodes / 1000",
    # declares [0, 1] but pays at most 0.5
    "unreachable": "0.5 if x == 1 else 0.0",
    # seed 0 never passes, seed 1 always, seed 2 every other time, seed 3 one time in four
    "known_rates": "(0, 1, nth % 2 == 0, nth % 4 == 0)[seed % 4] and x == 1",
}


def write_stat_env(folder: Path, rule: str) -> Path:
    """An environment whose one step pays `RULES[rule]`, declaring rewards in [0, 1]."""
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "models.py").write_text(dedent(MODELS))
    (folder / "server" / "environment.py").write_text(dedent(ENVIRONMENT).replace("{rule}", RULES[rule]))
    (folder / "server" / "app.py").write_text(dedent(APP))
    (folder / "requirements.txt").write_text("openenv==0.10.0\n")
    (folder / "openenv.yaml").write_text(
        f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\n"
        "validation:\n  reward:\n    range: [0, 1]\n"
    )
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\ntags: [openenv]\n---\nPicks.\n")
    return folder
