"""Copy-ready code for an endpoint URL: openenv's client (sync and async), TRL, curl,
raw WebSocket messages and openenv's MCP client, each of which runs as printed; and the
configurations that give agent harnesses (Claude Code, Codex, Cursor, Claude Desktop, the
MCP Inspector) the endpoint's MCP server at its URL + /mcp."""

import json
import keyword
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.ui.forms import FieldKind, FormField, form_fields, snippet_action, visible
from app.ui.harness_snippets import harness_scripts
from app.ui.wording import plural
from protocol.tools import Tool, tool_call

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BEARER = "Bearer TOKEN"  # a private endpoint's Authorization header: TOKEN stands for its access token
TOKEN_VARIABLE = "ENVHUB_ENDPOINT_TOKEN"  # noqa: S105 (a variable's name, not its value)
_PY_TYPES = {
    FieldKind.TEXT: "str",
    FieldKind.CHOICE: "str",
    FieldKind.FLAG: "bool",
    FieldKind.INTEGER: "int",
    FieldKind.NUMBER: "float",
}


@dataclass(frozen=True)
class Target:
    """What the snippets are written for."""

    url: str
    title: str = "the environment"
    fields: Sequence[FormField] = ()
    tools: Sequence[Tool] = ()
    task_env: str | None = None
    splits: Sequence[str] = field(default_factory=tuple)
    sessions: int | None = None  # what the endpoint's pool holds at its max, when it is one of envhub's
    door: bool = False  # the URL is an envhub endpoint's, whose /mcp is a standard MCP server for any environment
    private: bool = False  # the endpoint answers only a bearer of its token

    @property
    def ws_url(self) -> str:
        base = self.url.rstrip("/")
        return ("wss" + base[5:] if base.startswith("https") else "ws" + base.removeprefix("http")) + "/ws"

    @property
    def mcp_url(self) -> str:
        return self.url.rstrip("/") + "/mcp"

    @property
    def server_name(self) -> str:
        """What a harness calls the environment's MCP server: a slug of its title."""
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")[:32].strip("-") or "envhub"

    def example(self) -> dict[str, Any]:
        if self.tools:
            tool = self.tools[0]
            return tool_call(tool.name, snippet_action(form_fields(tool.input_schema)))
        return snippet_action(self.fields)

    def reset_options(self) -> dict[str, Any]:
        # Not split and index, even with the Task API: how a task is picked at reset is each
        # environment's own convention (the toolbox lists tasks but takes task_id).
        return {"seed": 0}


def _py(value: Any) -> str:
    """A JSON value as Python source: repr of the parsed value is exactly that."""
    return repr(value)


def _kwargs(options: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_py(v)}" for k, v in options.items())


def python_sync(target: Target) -> str:
    return (
        "# pip install openenv\n"
        "from openenv.core.generic_client import GenericEnvClient\n\n"
        f'with GenericEnvClient(base_url="{target.url}").sync() as env:\n'
        f"    result = env.reset({_kwargs(target.reset_options())})\n"
        "    print(result.observation)\n"
        f"    result = env.step({_py(target.example())})\n"
        "    print(result.observation, result.reward, result.done)\n"
    )


def python_async(target: Target) -> str:
    return (
        "# pip install openenv\n"
        "import asyncio\n\n"
        "from openenv.core.generic_client import GenericEnvClient\n\n\n"
        "async def main() -> None:\n"
        f'    async with GenericEnvClient(base_url="{target.url}") as env:\n'
        f"        result = await env.reset({_kwargs(target.reset_options())})\n"
        "        print(result.observation)\n"
        f"        result = await env.step({_py(target.example())})\n"
        "        print(result.observation, result.reward, result.done)\n\n\n"
        "asyncio.run(main())\n"
    )


def _method_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name).strip("_").lower() or "act"
    if cleaned[0].isdigit() or keyword.iskeyword(cleaned) or cleaned in ("reset", "step"):
        cleaned = f"tool_{cleaned}"
    return cleaned


def _docstring(summary: str, arguments: Sequence[tuple[str, str]]) -> str:
    """Google style, as transformers' get_json_schema reads a tool: `Args:` names every argument."""
    summary = " ".join(summary.split()) or "Take one action in the environment."
    lines = ['        """', f"        {summary.replace(chr(34) * 3, '')}", ""]
    if arguments:
        lines.append("        Args:")
        lines += [f"            {name}: {' '.join(said.split())}".rstrip() for name, said in arguments]
        lines.append("")
    lines += ["        Returns:", "            The observation after the action.", '        """']
    return "\n".join(lines) + "\n"


def _tool_method(name: str, summary: str, fields: Sequence[FormField], build: str) -> str:
    arguments = [(f.name, f.description or f.type_label) for f in fields]
    if not all(_IDENTIFIER.match(f.name) and not keyword.iskeyword(f.name) for f in fields):
        fields, params, build = [], ", action: dict", "action"
        arguments = [("action", "The action, a JSON object as the environment's schema describes it.")]
    else:
        required = [f for f in fields if f.required]
        optional = [f for f in fields if not f.required]
        params = "".join(f", {f.name}: {_PY_TYPES.get(f.kind, 'dict')}" for f in required)
        params += "".join(f", {f.name}: {_PY_TYPES.get(f.kind, 'dict')} | None = None" for f in optional)
    optional_names = [f.name for f in fields if not f.required]
    body = f"        action = {build}\n"
    if optional_names:
        body += "        action = {k: v for k, v in action.items() if v is not None}\n"
    return (
        f"    def {name}(self{params}) -> str:\n" + _docstring(summary, arguments) + "        if self.done:\n"
        '            raise ValueError("The episode is over.")\n' + body + "        result = self.client.step(action)\n"
        "        self.reward += result.reward or 0.0\n"
        "        self.done = result.done\n"
        "        return json.dumps(result.observation)\n"
    )


def _fields_dict(fields: Sequence[FormField]) -> str:
    return "{" + ", ".join(f'"{f.name}": {f.name}' for f in fields) + "}"


def trl(target: Target) -> str:
    """TRL's environment_factory: one tool method per MCP tool, or one `act` for the action."""
    methods = []
    if target.tools:
        for tool in target.tools:
            fields = visible(form_fields(tool.input_schema))
            build = f'{{"type": "call_tool", "tool_name": "{tool.name}", "arguments": {_fields_dict(fields)}}}'
            if not fields:
                build = f'{{"type": "call_tool", "tool_name": "{tool.name}", "arguments": {{}}}}'
            methods.append(_tool_method(_method_name(tool.name), tool.description, fields, build))
    else:
        fields = list(target.fields)
        shown = visible(fields)
        consts = {f.name: f.default for f in fields if f.kind == FieldKind.CONST}
        build = _fields_dict(shown)
        if consts:
            build = f"{_py(consts)} | {build}"
        methods.append(_tool_method("act", f"Act in {target.title}.", shown, build))
    return (
        "# pip install trl openenv\n"
        "import json\n\n"
        "from datasets import Dataset\n"
        "from openenv.core.generic_client import GenericEnvClient\n"
        "from trl import GRPOConfig, GRPOTrainer\n\n"
        f'ENV_URL = "{target.url}"\n\n\n'
        "class Environment:\n"
        '    """One episode per generation; TRL offers the public methods to the model as tools."""\n\n'
        "    def __init__(self):\n"
        "        self.client = GenericEnvClient(base_url=ENV_URL).sync()\n"
        "        self.reward = 0.0\n"
        "        self.done = False\n\n"
        "    def reset(self, **kwargs) -> str | None:\n"
        "        self.reward, self.done = 0.0, False\n"
        "        # TRL appends this to the prompt's last message as it is: the blank line keeps them apart.\n"
        '        return "\\n\\n" + json.dumps(self.client.reset().observation)\n\n' + "\n".join(methods) + "\n\n"
        "def reward_func(environments, **kwargs) -> list[float]:\n"
        '    """The environment\'s own reward: what its steps returned, summed over the episode."""\n'
        "    return [env.reward for env in environments]\n\n\n"
        f"prompt = [{{'role': 'user', 'content': {_py(f'Play {target.title} with the tools you have.')}}}]\n"
        "trainer = GRPOTrainer(\n"
        '    model="Qwen/Qwen3-0.6B",\n'
        '    train_dataset=Dataset.from_dict({"prompt": [prompt] * 64}),\n'
        "    reward_funcs=reward_func,\n" + _trl_args(target.sessions) + "    environment_factory=Environment,\n"
        ")\n"
        "trainer.train()\n"
    )


def grpo_batch(sessions: int | None) -> tuple[int, int]:
    """(num_generations, generation_batch_size) for a pool holding `sessions` at once (None: not known): the largest
    multiple of num_generations (8 at most, 2 at least, as GRPO needs) the pool holds. TRL keeps every session of a
    generation batch open for the whole run."""
    if sessions is None:
        return 8, 8
    generations = min(8, max(2, sessions))
    return generations, max(1, sessions // generations) * generations


def _trl_args(sessions: int | None) -> str:
    """GRPOConfig's arguments: a generation batch GRPOConfig accepts (a multiple of num_generations and of the train
    batch, which is num_generations here) and, when the pool says what it holds, one it holds."""
    generations, batch = grpo_batch(sessions)
    if sessions is None:
        held = f"    # The server must hold {batch} sessions at once (MAX_CONCURRENT_ENVS) for the whole run.\n"
    elif sessions < generations:
        held = (
            f"    # This endpoint holds {plural(sessions, 'session')} at once as far as envhub knows, and GRPO\n"
            "    # keeps at least 2 (num_generations) open for the whole run: this runs only if its server holds\n"
            "    # more than it said. Launch it with MAX_CONCURRENT_ENVS=8 (environment variables) or more\n"
            "    # replicas, then copy this again.\n"
        )
    else:
        held = f"    # TRL keeps {batch} sessions open for the whole run; this endpoint's pool holds {sessions}.\n"
    return (
        held + "    # generation_batch_size: a multiple of num_generations and of per_device_train_batch_size\n"
        "    # times the processes (it counts them all). On a CPU, add use_cpu=True and bf16=False.\n"
        "    args=GRPOConfig(\n"
        f"        num_generations={generations},\n"
        f"        per_device_train_batch_size={generations},\n"
        f"        generation_batch_size={batch},\n"
        "        max_steps=200,\n"
        '        chat_template_kwargs={"enable_thinking": False},\n'
        "    ),\n"
    )


def curl(target: Target) -> str:
    lines = [f"curl -s {target.url}/health", f"curl -s {target.url}/schema"]
    if target.tools:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        lines.append(f"curl -s -X POST {target.url}/mcp -H 'content-type: application/json' -d '{body}'")
    if target.task_env:
        lines.append(f"curl -s {target.url}/{target.task_env}/splits")
    return "\n".join(lines) + "\n"


def websocket_messages(target: Target) -> list[dict[str, Any]]:
    return [
        {"type": "reset", "data": target.reset_options()},
        {"type": "step", "data": target.example()},
        {"type": "state"},
        {"type": "close"},
    ]


def websocket(target: Target) -> str:
    """The raw frames, and a few lines of Python that send them."""
    messages = websocket_messages(target)
    frames = "\n".join(f"#   {json.dumps(m, ensure_ascii=False)}" for m in messages)
    return (
        f"# Connect to {target.ws_url} and send one JSON text frame per message;\n"
        '# each but close gets one reply frame ({"type": "observation" | "state" | "error", "data": ...}).\n'
        f"{frames}\n"
        "import asyncio\n"
        "import json\n\n"
        "from websockets.asyncio.client import connect\n\n\n"
        "async def main() -> None:\n"
        f'    async with connect("{target.ws_url}") as ws:\n'
        f"        for message in {_py(messages[:-1])}:\n"
        "            await ws.send(json.dumps(message))\n"
        "            print(await ws.recv())\n"
        '        await ws.send(json.dumps({"type": "close"}))\n\n\n'
        "asyncio.run(main())\n"
    )


def mcp(target: Target) -> str:
    """openenv's MCP client over the endpoint's /mcp (JSON-RPC tools/list and tools/call)."""
    tool = target.tools[0] if target.tools else None
    call = ""
    if tool is not None:
        arguments = snippet_action(form_fields(tool.input_schema))
        keywords = "".join(f", {k}={_py(v)}" for k, v in arguments.items())
        call = f"        print(await env.call_tool({tool.name!r}{keywords}))\n"
    return (
        "# pip install openenv\n"
        "import asyncio\n\n"
        "from openenv.core.mcp_client import MCPToolClient\n\n\n"
        "async def main() -> None:\n"
        f'    async with MCPToolClient(base_url="{target.url}") as env:\n'
        "        for tool in await env.list_tools():\n"
        "            print(tool.name, tool.input_schema)\n" + call + "\n\nasyncio.run(main())\n"
    )


def claude_code(target: Target) -> str:
    header = f' --header "Authorization: {BEARER}"' if target.private else ""
    return f"claude mcp add --transport http{header} {target.server_name} {shlex.quote(target.mcp_url)}\n"


def codex(target: Target) -> str:
    """~/.codex/config.toml's table; Codex reads a bearer token from an environment variable, never from the file."""
    table = f"[mcp_servers.{target.server_name}]\nurl = {json.dumps(target.mcp_url)}\n"
    if target.private:
        table += f'bearer_token_env_var = "{TOKEN_VARIABLE}"  # export {TOKEN_VARIABLE}=TOKEN before starting codex\n'
    return table


def cursor(target: Target) -> str:
    server: dict[str, Any] = {"url": target.mcp_url}
    if target.private:
        server["headers"] = {"Authorization": BEARER}
    return json.dumps({"mcpServers": {target.server_name: server}}, indent=2) + "\n"


def claude_desktop(target: Target) -> str:
    """claude_desktop_config.json starts local (stdio) servers: mcp-remote bridges one to the URL. Its header goes
    through an environment variable, as mcp-remote documents: Claude Desktop on Windows splits arguments at spaces."""
    args = ["-y", "mcp-remote", target.mcp_url]
    if target.mcp_url.startswith("http://"):
        args.append("--allow-http")  # mcp-remote refuses plain HTTP to any host but localhost without it
    server: dict[str, Any] = {"command": "npx", "args": args}
    if target.private:
        args += ["--header", "Authorization:${AUTH_HEADER}"]
        server["env"] = {"AUTH_HEADER": BEARER}
    return json.dumps({"mcpServers": {target.server_name: server}}, indent=2) + "\n"


def inspector(target: Target) -> str:
    """The MCP Inspector's command line, listing the endpoint's tools."""
    header = f' --header "Authorization: {BEARER}"' if target.private else ""
    return (
        f"npx @modelcontextprotocol/inspector --cli {shlex.quote(target.mcp_url)} --transport http{header}"
        " --method tools/list\n"
    )


# The recorded runs' scripts, by their tab's name: each harness's model and tools both through envhub.
RECORDED = {
    "Claude Code run": "claude-code",
    "Codex run": "codex",
    "opencode run": "opencode",
    "Qwen Code run": "qwen-code",
}


def agents(target: Target) -> dict[str, str]:
    """Each harness's configuration for the endpoint's MCP server, by harness; then, for the four harness CLIs,
    the script that records a run of it (its model calls too)."""
    tools = tuple(tool.name for tool in target.tools)
    scripts = harness_scripts(target.url, target.server_name, tools, target.private)
    return {
        "Claude Code": claude_code(target),
        "Codex": codex(target),
        "Cursor": cursor(target),
        "Claude Desktop": claude_desktop(target),
        "MCP Inspector": inspector(target),
    } | {name: scripts[harness] for name, harness in RECORDED.items()}


def all_snippets(target: Target) -> dict[str, str]:
    snippets = {
        "Python": python_sync(target),
        "Python (async)": python_async(target),
        "TRL": trl(target),
        "curl": curl(target),
        "WebSocket": websocket(target),
    }
    if target.tools:
        snippets["MCP"] = mcp(target)
    if target.door:
        snippets |= agents(target)
    return snippets
