"""The Connect panel: the endpoint URL to copy and snippets that use it."""

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui.forms import form_fields
from app.ui.snippets import RECORDED, Target, all_snippets
from app.ui.wording import plural
from app.urls import endpoint_url
from envclient.interface import Interface
from hosting.models import PoolPublic, ReplicaStatus

PLACEHOLDER_ID = "ENDPOINT_ID"  # in the URL the snippets show before an endpoint runs
LANGUAGES = {
    "Python": "python",
    "Python (async)": "python",
    "TRL": "python",
    "curl": "shell",
    "WebSocket": "python",
    "MCP": "python",
}
AGENTS = "Agents (MCP)"  # the tab of harness configurations, for every envhub endpoint
HARNESSES = {  # harness -> (language, where its text goes)
    "Claude Code": ("shell", "run in a terminal"),
    "Codex": (None, "~/.codex/config.toml"),
    "Cursor": ("json", ".cursor/mcp.json"),
    "Claude Desktop": ("json", "claude_desktop_config.json (Settings, Developer, Edit Config)"),
    "MCP Inspector": ("shell", "run in a terminal to list the tools"),
    **{name: ("shell", "a recorded run: its model calls and its episode, through envhub") for name in RECORDED},
}
AGENTS_NOTE = (
    "Every envhub endpoint is an MCP server at its URL + `/mcp` (Streamable HTTP): an MCP environment offers its "
    "own tools, any other `reset`, `step` and `state`. A private endpoint's configurations carry `TOKEN`: put its "
    "access token there (`access_token` in `GET /api/endpoints/{id}`, shown to its owner). The *run* scripts send "
    "the harness's model calls through envhub too, recorded as an agent run with its episode and reward, for "
    "training: they start a run with your saved model `NAME` and keep its credential in `$ENVHUB_RUN`."
)


@dataclass(frozen=True)
class Connect:
    note: gr.Markdown
    url: gr.Textbox
    snippets: dict[str, gr.Code]
    mcp_tab: gr.Tab
    agents_tab: gr.Tab

    @property
    def outputs(self) -> list[Any]:
        return [self.note, self.url, *self.snippets.values(), self.mcp_tab, self.agents_tab]


def _elem_id(name: str) -> str:
    return f"snippet-{name.lower().replace(' ', '-').strip('()')}"


def build() -> Connect:
    note = gr.Markdown(elem_id="connect-note")
    url = gr.Textbox(label="Endpoint URL", buttons=["copy"], interactive=False, elem_id="connect-url")
    snippets: dict[str, gr.Code] = {}
    mcp_tab: gr.Tab | None = None
    with gr.Tabs():
        for name, language in LANGUAGES.items():
            with gr.Tab(name, visible=name != "MCP") as tab:
                snippets[name] = gr.Code(
                    language=language,  # type: ignore[arg-type]
                    interactive=False,
                    buttons=["copy"],
                    label=f"{name} snippet",
                    show_label=False,
                    elem_id=_elem_id(name),
                )
            if name == "MCP":
                mcp_tab = tab
        with gr.Tab(AGENTS, elem_id="connect-agents-tab") as agents_tab:
            gr.Markdown(AGENTS_NOTE)
            for name, (syntax, where) in HARNESSES.items():
                snippets[name] = gr.Code(
                    language=syntax,  # type: ignore[arg-type]
                    interactive=False,
                    buttons=["copy"],
                    label=f"{name}: {where}",
                    elem_id=_elem_id(name),
                )
    assert mcp_tab is not None
    return Connect(note, url, snippets, mcp_tab, agents_tab)


def target_for(
    url: str | None,
    title: str,
    info: Interface,
    pool: PoolPublic | None = None,
    *,
    base: str = "",
    private: bool = False,
) -> Target:
    """What the snippets are written for. The URL is an envhub endpoint's when its pool is known, or when there is
    none yet (a placeholder endpoint on `base`, where the visitor reaches envhub); otherwise it is a Space's own host,
    whose /mcp is openenv's and no MCP server."""
    return Target(
        sessions=pool.generation_batch_size if pool is not None else None,
        url=url or endpoint_url(base, PLACEHOLDER_ID),
        title=title,
        fields=form_fields(info.action_schema) if info.action_schema else (),
        tools=info.tools or (),
        task_env=info.task_env,
        splits=tuple(s.name for s in info.splits),
        door=url is None or pool is not None,
        private=private,
    )


def pool_note(pool: PoolPublic) -> str:
    """What an endpoint's pool holds, and the trainer setting that fits it."""
    ready = sum(r.status == ReplicaStatus.READY for r in pool.replicas)
    grows = f", up to {pool.max} replicas" if pool.max > pool.min else ""
    note = (
        f"Its pool: {pool.sessions}/{pool.capacity} sessions on {plural(ready, 'replica')}{grows}. "
        f"It holds {plural(pool.generation_batch_size, 'session')} at once at its most: set TRL's "
        f"generation_batch_size (or your trainer's parallel rollouts) to at most {pool.generation_batch_size}."
    )
    if pool.generation_batch_size < 2:  # TRL keeps num_generations (2 at least) sessions open for a GRPO run
        note += (
            " GRPO needs at least 2 at once: launch it again with `MAX_CONCURRENT_ENVS=8` in its environment "
            "variables (what each server holds) or more replicas (backend options "
            '`{"replicas": {"min": 1, "max": 8}}`).'
        )
    return note


def updates(
    connect: Connect,
    url: str | None,
    title: str,
    info: Interface,
    pool: PoolPublic | None = None,
    *,
    base: str,
    private: bool = False,
) -> dict[Any, Any]:
    """The panel for a URL, or for an endpoint on `base` (where the visitor reaches envhub) before one runs;
    `private`: the endpoint needs its token, so the agents' configurations say where."""
    target = target_for(url, title, info, pool, base=base, private=private)
    texts = all_snippets(target)
    note = (
        "Paste this URL into openenv's client or your trainer."
        if url
        else "Not running yet: launch it (Launch tab, or **Launch locally** in Play) to get its URL. "
        "The snippets below show where the URL goes."
    )
    if url and pool is not None:
        note += " " + pool_note(pool)
    values: dict[Any, Any] = {
        connect.note: note,
        connect.url: url or "",
        connect.mcp_tab: gr.Tab(visible="MCP" in texts),
        connect.agents_tab: gr.Tab(visible=target.door),
    }
    for name, code in connect.snippets.items():
        values[code] = texts.get(name, "")
    return values
