"""Small OpenEnv environment folders written for a test, in each import layout seen in the wild."""

from pathlib import Path
from textwrap import dedent

MODELS = """
from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class CountAction(Action):
    add: int = Field(ge=0, le=10, description="how much to add")


class CountObservation(Observation):
    total: int = 0
"""

ENVIRONMENT = """
import asyncio
import os
import uuid

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

{import_models}

GOAL = 10


class CountEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._total = 0

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._total = int(os.environ.get("COUNT_START", "0"))
        return CountObservation(total=self._total, reward=0.0)

    async def reset_async(self, seed=None, episode_id=None, **kwargs):
        # COUNT_GATE (host:port) holds a quality report's resets until the test listening there lets go of the
        # connection (or is not listening): the test knows when a report holds a session, and for how long.
        gate = os.environ.get("COUNT_GATE")
        if gate and str(episode_id or "").startswith("envhub-quality"):
            host, port = gate.rsplit(":", 1)
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
                await reader.read()
                writer.close()
            except OSError:
                pass
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    def step(self, action, timeout_s=None, **kwargs):
        if os.environ.get("COUNT_CRASH_AT") == str(action.add):  # a server that dies of a bug
            print("RuntimeError: the counter overflowed", flush=True)
            os._exit(3)
        self._state.step_count += 1
        self._total += action.add
        done = self._total >= GOAL
        return CountObservation(total=self._total, done=done, reward=1.0 if done else 0.0)

    @property
    def state(self):
        return self._state
"""

APP = """
import os

from openenv.core.env_server.http_server import create_app

{import_both}
{crash}
# COUNT_CAP caps sessions without telling envhub; MAX_CONCURRENT_ENVS is the convention envhub reads too.
cap = int(os.environ.get("COUNT_CAP") or os.environ.get("MAX_CONCURRENT_ENVS") or 64)
app = create_app(CountEnvironment, CountAction, CountObservation, env_name="count", max_concurrent_envs=cap)
"""

LAYOUTS = {
    # server/app.py imports `models` with the folder as the working directory
    "plain": ("from models import CountAction, CountObservation",
              "from models import CountAction, CountObservation\nfrom server.environment import CountEnvironment"),
    # the folder is a package and its server imports it relatively
    "relative": ("from ..models import CountAction, CountObservation",
                 "from ..models import CountAction, CountObservation\nfrom .environment import CountEnvironment"),
    # the folder is a package and its server imports it by name
    "by_name": ("from {name}.models import CountAction, CountObservation",
                "from {name}.models import CountAction, CountObservation\n"
                "from {name}.server.environment import CountEnvironment"),
}  # fmt: skip


DOCKERFILE = """ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
WORKDIR /app/env
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
EXPOSE 8000
CMD ["uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "8000"]
"""


def write_count_env(
    folder: Path,
    *,
    layout: str = "plain",
    requirements: str = "openenv==0.10.0\n",
    crash: bool = False,
) -> Path:
    """A counting game: add up to 10 per step, done at 10. Returns the folder."""
    import_models, import_both = (text.format(name=folder.name) for text in LAYOUTS[layout])
    (folder / "server").mkdir(parents=True)
    if layout != "plain":
        (folder / "__init__.py").write_text("")
    (folder / "server" / "__init__.py").write_text("")
    (folder / "models.py").write_text(dedent(MODELS))
    (folder / "server" / "environment.py").write_text(dedent(ENVIRONMENT).format(import_models=import_models))
    crash_line = 'raise RuntimeError("this server is broken on purpose")' if crash else ""
    (folder / "server" / "app.py").write_text(dedent(APP).format(import_both=import_both, crash=crash_line))
    (folder / "requirements.txt").write_text(requirements)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "openenv.yaml").write_text(f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\n")
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\ntags: [openenv]\n---\nCounts to 10.\n")
    return folder


MCP_MODELS = """
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

ToolsAction = CallToolAction
ToolsObservation = CallToolObservation
"""

MCP_ENVIRONMENT = """
import uuid

from fastmcp import FastMCP
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Observation, State


class ToolsEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        server = FastMCP("tools")

        @server.tool
        def calculate(expression: str) -> float:
            \"\"\"Add up whole numbers written as 'a + b' or 'a * b'.\"\"\"
            left, operator, right = expression.split()
            return float(int(left) + int(right) if operator == "+" else int(left) * int(right))

        super().__init__(server)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(reward=0.0)

    def _step_impl(self, action, timeout_s=None, **kwargs):
        raise ValueError("actions are tool calls")

    @property
    def state(self):
        return self._state
"""

MCP_APP = """
import os

from openenv.core.env_server.http_server import create_app

from models import ToolsAction, ToolsObservation
from server.environment import ToolsEnvironment

cap = int(os.environ.get("MAX_CONCURRENT_ENVS") or 64)
app = create_app(ToolsEnvironment, ToolsAction, ToolsObservation, env_name="tools", max_concurrent_envs=cap)
"""


def write_tools_env(folder: Path) -> Path:
    """An MCP environment with one tool (calculate) and no end to its episodes. Returns the folder."""
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "models.py").write_text(dedent(MCP_MODELS))
    (folder / "server" / "environment.py").write_text(dedent(MCP_ENVIRONMENT))
    (folder / "server" / "app.py").write_text(dedent(MCP_APP))
    (folder / "requirements.txt").write_text("openenv==0.10.0\n")
    (folder / "openenv.yaml").write_text(f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\n")
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\ntags: [openenv]\n---\nCalculates.\n")
    return folder


ECHO_APP = """
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import RedirectResponse

app = FastAPI()


@app.websocket("/echo")
async def echo(ws: WebSocket):
    await ws.accept()
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is not None and text.startswith("close:"):  # close:<code>:<reason>
            _, code, reason = text.split(":", 2)
            await ws.close(int(code), reason)
            return
        if text is not None:
            await ws.send_text(text)
        else:
            await ws.send_bytes(message["bytes"])


@app.get("/health")
def health():
    return {"status": "healthy"}


@app.get("/headers")
def headers(request: Request):
    return dict(request.headers)


@app.get("/go")
def go(to: str):
    return RedirectResponse(to, status_code=307)


@app.api_route("/boom", methods=["GET", "POST"])
def boom():
    raise RuntimeError("a bug: uvicorn answers 500 and closes the connection")


@app.get("/{path:path}")
def anything(path: str):
    return {"path": path}
"""


def write_echo_env(folder: Path) -> Path:
    """Not an OpenEnv environment: a server that tells what reached it (headers, path), redirects on request and
    echoes WebSocket messages at /echo."""
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "server" / "app.py").write_text(dedent(ECHO_APP))
    (folder / "openenv.yaml").write_text(f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\n")
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\n---\nEchoes requests.\n")
    return folder
