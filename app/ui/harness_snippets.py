"""The Connect panel's recorded runs: for each harness CLI, a shell script that starts an agent run on the endpoint
and runs the CLI with its model at envhub's model door and its tools at the endpoint's MCP door, on a user's own
machine. The configuration is the one envhub's own harness job writes (evals/harnesses' specs), written here into
the user's home with the run's credential as `$ENVHUB_RUN`, which the shell puts in when it writes the files."""

import json
import shlex
import tempfile
from pathlib import Path

from evals.harnesses import HARNESSES, RUN_HEADER, Harness, HarnessRun, Installed
from evals.harnesses.specs import scratch_env
from gateway.paths import GATEWAY_PREFIX

__all__ = ["CREDENTIAL_VARIABLE", "harness_script", "harness_scripts"]

CREDENTIAL_VARIABLE = "ENVHUB_RUN"
_CREDENTIAL = "$" + CREDENTIAL_VARIABLE
_PROMPT = "Play one episode of the environment to its end with its tools."
# The door's, for an environment that lists no tools of its own: reset too, since the URL starts no episode.
_GENERATED_TOOLS = ("reset", "step", "state")


def _mint(base: str, endpoint_id: str, harness: str) -> str:
    body = json.dumps({"endpoint": endpoint_id, "preset": "NAME", "harness": harness})
    return (
        "# 1. Start an agent run with your model preset NAME (PUT /api/models/NAME); its credential is shown once.\n"
        '#    (On a server with sign-in, send your Hub token: -H "Authorization: Bearer $HF_TOKEN".)\n'
        f"export {CREDENTIAL_VARIABLE}=$(curl -s -X POST {shlex.quote(base + '/api/agent-runs')} "
        f"-H 'content-type: application/json' -d {shlex.quote(body)} \\\n"
        "  | python3 -c 'import json, sys; print(json.load(sys.stdin)[\"credential\"])')\n"
    )


def harness_script(harness: Harness, endpoint_url: str, server_name: str, tools: tuple[str, ...], private: bool) -> str:
    """The script for one harness: start a run, write its configuration, run it (end the run with
    POST /api/agent-runs/{id}/end, or let its time run out)."""
    base, _, endpoint_id = endpoint_url.rstrip("/").rpartition(GATEWAY_PREFIX + "/")
    headers = {RUN_HEADER: _CREDENTIAL} | ({"Authorization": "Bearer TOKEN"} if private else {})
    run = HarnessRun(
        model_url=f"{base}/model",
        credential=_CREDENTIAL,
        model="preset-model",  # the door sends the preset's own model name, whatever the CLI asks for
        mcp_name=server_name,
        mcp_url=f"{endpoint_url.rstrip('/')}/mcp",
        mcp_headers=headers,
        tools=tools,
        prompt=_PROMPT,
    )
    with tempfile.TemporaryDirectory() as folder:
        home, packages = Path(folder) / "home", Path(folder) / "packages"
        companions = {package: packages / package for package, _ in harness.companions}
        for companion in companions.values():
            companion.mkdir(parents=True)
        command = harness.configure(run, home, Installed(Path(harness.binary), packages, companions))
        written = sorted(p for p in home.rglob("*") if p.is_file())
        files = [(f"$HOME/{p.relative_to(home)}", p.read_text()) for p in written]
        own = scratch_env(home)
        env = {k: v.replace(str(home), "$HOME") for k, v in command.env.items() if own.get(k) != v}
        argv = [harness.binary, *(arg.replace(str(home), "$HOME") for arg in command.argv[1:])]
    lines = [
        _mint(base, endpoint_id, harness.name),
        "# 2. Its configuration, the credential put in by the shell (it replaces these files: keep yours aside).\n",
    ]
    for path, text in files:
        folder = path.rpartition("/")[0]
        lines.append(
            (f'mkdir -p "{folder}"\n' if folder != "$HOME" else "") + f'cat > "{path}" <<EOF\n{text.rstrip()}\nEOF\n'
        )
    lines.append(f"# 3. Run it ({harness.install_line.replace('--prefix DIR ', '-g ')}).\n")
    lines += [f'export {name}="{value}"\n' for name, value in env.items()]
    command_line = " ".join(f'"{arg}"' if arg.startswith("$HOME") else shlex.quote(arg) for arg in argv)
    lines.append(command_line + " < /dev/null\n")  # some read more of their prompt from an open stdin
    return "".join(lines)


def harness_scripts(endpoint_url: str, server_name: str, tools: tuple[str, ...], private: bool) -> dict[str, str]:
    """Each harness's script, by its name."""
    return {
        name: harness_script(harness, endpoint_url, server_name, tools or _GENERATED_TOOLS, private)
        for name, harness in HARNESSES.items()
    }
