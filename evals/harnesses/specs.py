"""The four agent-harness CLIs envhub runs headless: each one's npm package, its pinned version, its model dialect,
and the configuration that points it at envhub's model door and an endpoint's MCP door with nothing else reached.

What each CLI would reach on its own (telemetry, update checks, model lists, plugin installs, analytics, git at
start-up) is turned off by the settings below, and tool search is off so the environment's MCP tools stay in the
model's tool list; see harness-facts.md in the project's shared references for how each was found.
"""

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["HARNESSES", "RUN_HEADER", "Command", "Harness", "HarnessRun", "Installed", "scratch_env"]

Dialect = Literal["chat", "responses", "messages"]
RUN_HEADER = "X-Envhub-Run"  # the run credential, sent to the MCP door (and the model door) to join a run
_KEY_VARIABLE = "ENVHUB_RUN_CREDENTIAL"  # where Codex reads its API key from (its provider's env_key)


@dataclass(frozen=True)
class HarnessRun:
    """What one headless run is pointed at.

    model_url: the base of envhub's model door, `{base}/model` (an OpenAI-dialect CLI is given `{model_url}/v1`,
    Claude Code `{model_url}` itself); credential: the run credential, sent as the model API key; mcp_headers:
    sent with every MCP request (X-Envhub-Run, and for a private endpoint its Authorization); tools: the
    environment's tool names (bare, as the MCP server lists them) the CLI may call without asking.
    """

    model_url: str
    credential: str
    model: str
    mcp_name: str
    mcp_url: str
    mcp_headers: Mapping[str, str]
    tools: tuple[str, ...]
    prompt: str


@dataclass(frozen=True)
class Installed:
    """An installed CLI: its binary, its install folder, and the folders of the packages installed beside it."""

    binary: Path
    folder: Path
    companions: Mapping[str, Path] = field(default_factory=dict)  # package name -> its install folder


@dataclass
class Command:
    """A headless run as it is started: argv, its whole environment, where it runs, its scratch home, the folders
    it reads beside the system's (its install folder), and (set by a wrapper) the descriptors it inherits and the
    (uid, gid) it runs as."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    home: Path
    reads: tuple[Path, ...] = ()
    pass_fds: tuple[int, ...] = ()
    user: tuple[int, int] | None = None


@dataclass(frozen=True)
class Harness:
    name: str  # the label a run records: claude-code, codex, opencode, qwen-code
    package: str
    version: str
    binary: str
    dialect: Dialect
    configure: Callable[[HarnessRun, Path, Installed], Command]  # writes its files into the home, returns the run
    companions: tuple[tuple[str, str], ...] = ()  # (package, version) installed beside it

    @property
    def install_line(self) -> str:
        return f"npm install --prefix DIR {self.package}@{self.version}"


def scratch_env(home: Path) -> dict[str, str]:
    """A CLI's variables: its home and XDG folders in the scratch home, node on the PATH, and nothing of envhub's
    own environment (no secrets, no proxy: it reaches 127.0.0.1 directly)."""
    node = shutil.which("node")
    path = ":".join(dict.fromkeys([*([str(Path(node).parent)] if node else []), "/usr/local/bin", "/usr/bin", "/bin"]))
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        "PATH": path,
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }


def _command(argv: list[str], env: dict[str, str], home: Path, installed: Installed) -> Command:
    """The run, from a working folder of its own in the home."""
    for folder in (home / "work", home / "tmp", home / ".config"):
        folder.mkdir(parents=True, exist_ok=True)
    return Command(argv, env, home / "work", home, reads=(installed.folder,))


def _write_json(path: Path, content: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2))
    return path


def _claude_code(run: HarnessRun, home: Path, installed: Installed) -> Command:
    servers = {run.mcp_name: {"type": "http", "url": run.mcp_url, "headers": dict(run.mcp_headers)}}
    mcp_config = _write_json(home / ".envhub-mcp.json", {"mcpServers": servers})
    allowed = ",".join(f"mcp__{run.mcp_name}__{tool}" for tool in run.tools)
    env = scratch_env(home) | {
        "ANTHROPIC_BASE_URL": run.model_url,
        "ANTHROPIC_API_KEY": run.credential,
        "ANTHROPIC_CUSTOM_HEADERS": f"{RUN_HEADER}: {run.credential}",
        "ANTHROPIC_MODEL": run.model,
        "ANTHROPIC_SMALL_FAST_MODEL": run.model,  # its background calls name the run's model too
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": run.model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "ENABLE_TOOL_SEARCH": "false",  # else MCP tools are kept out of the model's tool list
    }
    argv = [str(installed.binary), "-p", run.prompt, "--model", run.model, "--mcp-config", str(mcp_config)]
    argv += ["--strict-mcp-config", "--allowedTools", allowed, "--output-format", "stream-json", "--verbose"]
    return _command(argv, env, home, installed)


def _toml(value: Any) -> str:
    """A TOML value (JSON's string escapes are TOML's too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(key)} = {_toml(item)}" for key, item in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def _toml_tables(tables: Mapping[str, Mapping[str, Any]]) -> str:
    lines: list[str] = []
    for name, table in tables.items():
        if name:
            lines.append(f"\n[{name}]")
        lines += [f"{key} = {_toml(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _codex(run: HarnessRun, home: Path, installed: Installed) -> Command:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    provider = {
        "name": "envhub",
        "base_url": f"{run.model_url}/v1",
        "wire_api": "responses",  # the only one Codex accepts
        "env_key": _KEY_VARIABLE,
        "http_headers": {RUN_HEADER: run.credential},
    }
    top = {
        "model": run.model,
        "model_provider": "envhub",
        "approval_policy": "never",
        "check_for_update_on_startup": False,
    }
    tables: dict[str, dict[str, Any]] = {
        "": top,
        "model_providers.envhub": provider,
        "mcp_servers." + json.dumps(run.mcp_name): {
            "url": run.mcp_url,
            "http_headers": dict(run.mcp_headers),
            "enabled_tools": list(run.tools),
        },
        "features": {"plugins": False},  # else git reaches github.com and chatgpt.com at start-up
        "analytics": {"enabled": False},
    }
    (codex_home / "config.toml").write_text(_toml_tables(tables))
    env = scratch_env(home) | {"CODEX_HOME": str(codex_home), _KEY_VARIABLE: run.credential}
    argv = [str(installed.binary), "exec", "--skip-git-repo-check", "--json", run.prompt]
    return _command(argv, env, home, installed)


_OPENCODE_PLUGIN = "@opencode-ai/plugin"


def _opencode(run: HarnessRun, home: Path, installed: Installed) -> Command:
    config_dir = home / ".config" / "opencode"
    # opencode npm-installs its plugin package into its config folder at every start unless it is there already.
    shutil.copytree(installed.companions[_OPENCODE_PLUGIN], config_dir, symlinks=True, dirs_exist_ok=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "envhub",
        "options": {
            "baseURL": f"{run.model_url}/v1",
            "apiKey": run.credential,
            "headers": {RUN_HEADER: run.credential},
        },
        "models": {run.model: {"name": run.model}},
    }
    config = {
        "autoupdate": False,
        "share": "disabled",
        "permission": {"*": "allow"},
        "model": f"envhub/{run.model}",
        "small_model": f"envhub/{run.model}",
        "provider": {"envhub": provider},
        "mcp": {run.mcp_name: {"type": "remote", "url": run.mcp_url, "headers": dict(run.mcp_headers)}},
    }
    config_file = _write_json(home / ".envhub-opencode.json", config)
    env = scratch_env(home) | {
        "OPENCODE_CONFIG": str(config_file),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }
    argv = [str(installed.binary), "run", "--format", "json", "--model", f"envhub/{run.model}", "--port", "0"]
    return _command([*argv, run.prompt], env, home, installed)


def _qwen_code(run: HarnessRun, home: Path, installed: Installed) -> Command:
    server = {"httpUrl": run.mcp_url, "headers": dict(run.mcp_headers), "includeTools": list(run.tools), "trust": True}
    settings = {
        "mcpServers": {run.mcp_name: server},
        "model": {"name": run.model, "generationConfig": {"customHeaders": {RUN_HEADER: run.credential}}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        "tools": {"toolSearch": {"enabled": False}},  # else MCP tools are deferred, out of the model's tool list
    }
    _write_json(home / ".qwen" / "settings.json", settings)
    env = scratch_env(home) | {
        "OPENAI_BASE_URL": f"{run.model_url}/v1",
        "OPENAI_API_KEY": run.credential,
        "OPENAI_MODEL": run.model,
        "QWEN_USAGE_STATISTICS_ENABLED": "false",
    }
    argv = [str(installed.binary), "--auth-type", "openai", "--approval-mode", "yolo", "--output-format", "stream-json"]
    return _command([*argv, "--model", run.model, "-p", run.prompt], env, home, installed)


HARNESSES: dict[str, Harness] = {
    harness.name: harness
    for harness in (
        Harness("claude-code", "@anthropic-ai/claude-code", "2.1.328", "claude", "messages", _claude_code),
        Harness("codex", "@openai/codex", "0.169.0", "codex", "responses", _codex),
        Harness("opencode", "opencode-ai", "1.18.33", "opencode", "chat", _opencode, ((_OPENCODE_PLUGIN, "1.18.33"),)),
        Harness("qwen-code", "@qwen-code/qwen-code", "0.24.4", "qwen", "chat", _qwen_code),
    )
}
