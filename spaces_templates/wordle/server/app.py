"""The wordle environment served over HTTP and WebSocket."""

import os

from models import WordleAction, WordleObservation, WordleState
from openenv.core.env_server.http_server import create_app

from server.environment import WordleEnvironment

app = create_app(
    WordleEnvironment,
    WordleAction,
    WordleObservation,
    env_name="wordle",
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "64")),
    state_cls=WordleState,
)
