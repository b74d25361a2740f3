"""The toolbox environment served over HTTP, WebSocket and MCP."""

import os

from models import TaskObservation, ToolboxAction, ToolboxObservation, ToolboxState
from openenv.core.env_server.http_server import create_app

from server.environment import ToolboxEnvironment

app = create_app(
    ToolboxEnvironment,
    ToolboxAction,
    ToolboxObservation,
    env_name="toolbox",
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "64")),
    state_cls=ToolboxState,
    reset_observation_cls=TaskObservation,
)
