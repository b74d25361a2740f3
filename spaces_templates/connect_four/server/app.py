"""The connect-four environment served over HTTP and WebSocket."""

import os

from models import ConnectFourAction, ConnectFourObservation, ConnectFourState
from openenv.core.env_server.http_server import create_app

from server.environment import ConnectFourEnvironment

app = create_app(
    ConnectFourEnvironment,
    ConnectFourAction,
    ConnectFourObservation,
    env_name="connect_four",
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "64")),
    state_cls=ConnectFourState,
)
