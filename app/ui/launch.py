"""The launch page: pick a backend and its options, watch the endpoint start, copy its URL,
stop it; and the list of running endpoints."""

import html
import json
from dataclasses import dataclass
from typing import Any

import gradio as gr
from pydantic import ValidationError

from app.ui.connect import pool_note
from app.ui.endpoints import launch_refusal
from app.ui.pool_history import HISTORY
from app.ui.requests import Visitors
from core.callers import ANONYMOUS
from core.errors import EnvhubError
from hosting.endpoints import EndpointManager
from hosting.models import Backend, Endpoint, EndpointStatus, PoolPublic
from hosting.options import BACKEND_OPTIONS, BackendOptions, LaunchRequest
from hosting.runtimes.logs import log_tail


def backend_help(backend: Backend) -> str:
    """What a backend does and the options it takes, read from its options model (hosting.options)."""
    model = BACKEND_OPTIONS[backend]
    own = {name: f for name, f in model.model_fields.items() if name not in BackendOptions.model_fields}
    if backend != Backend.SPACE:  # a Space is one server
        own["replicas"] = BackendOptions.model_fields["replicas"]
    example = {name: f.get_default(call_default_factory=True) for name, f in own.items()}
    lines = [f"{model.__doc__} Options: `{json.dumps(example, default=lambda value: value.model_dump())}`"]
    lines += [f"- `{name}`: {f.description}" for name, f in own.items() if f.description]
    return "\n".join(lines)


_BADGE = {
    EndpointStatus.STARTING: "busy",
    EndpointStatus.RUNNING: "ok",
    EndpointStatus.STOPPING: "busy",
    EndpointStatus.STOPPED: "idle",
    EndpointStatus.FAILED: "bad",
}


@dataclass(frozen=True)
class Launch:
    environment: gr.Markdown
    backend: gr.Dropdown
    backend_help: gr.Markdown
    variables: gr.Textbox
    secrets: gr.Textbox
    options: gr.Code
    start: gr.Button
    message: gr.Markdown
    endpoint: gr.State
    status: gr.HTML
    url: gr.Textbox
    stop: gr.Button
    log: gr.Code
    timer: gr.Timer

    @property
    def watched(self) -> list[Any]:
        return [self.status, self.url, self.stop, self.log]


def build(backends: list[Backend]) -> Launch:
    environment = gr.Markdown("Open an environment, then launch it here.", elem_id="launch-environment")
    with gr.Row():
        with gr.Column(scale=2):
            backend = gr.Dropdown(
                [b.value for b in backends], value=backends[0].value if backends else None, label="Backend",
                elem_id="launch-backend",
            )  # fmt: skip
            help_text = gr.Markdown(backend_help(backends[0]) if backends else "")
            variables = gr.Textbox(
                label="Environment variables", placeholder="NAME=value, one per line", lines=2, elem_id="launch-env"
            )
            secrets = gr.Textbox(
                label="Secrets (passed to the server, never stored or shown)",
                placeholder="NAME=value, one per line",
                lines=2,
                elem_id="launch-secrets",
            )
            options = gr.Code("{}", language="json", lines=3, label="Backend options (JSON)", elem_id="launch-options")
            start = gr.Button("🚀 Launch", variant="primary", elem_id="launch-start")
            message = gr.Markdown(elem_id="launch-message")
        with gr.Column(scale=3):
            status = gr.HTML(elem_id="launch-status")
            url = gr.Textbox(label="Endpoint URL", buttons=["copy"], interactive=False, elem_id="launch-url")
            stop = gr.Button("■ Stop", variant="stop", visible=False, elem_id="launch-stop")
            log = gr.Code(label="Log (last lines)", language="shell", interactive=False, lines=8, max_lines=20,
                          elem_id="launch-log")  # fmt: skip
    gr.Markdown("Every endpoint you run, with its URL, Stop and Open in Play, is in **My endpoints**.")
    return Launch(
        environment, backend, help_text, variables, secrets, options, start, message, gr.State(""), status, url,
        stop, log, gr.Timer(1.0, active=False),
    )  # fmt: skip


def parse_assignments(text: str, what: str) -> dict[str, str]:
    """NAME=value lines (blank lines and # comments skipped) as a dict."""
    found: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{what}, line {number}: write NAME=value")
        found[name.strip()] = value
    return found


def status_html(endpoint: Endpoint, pool: PoolPublic | None = None, latest: str | None = None) -> str:
    """The endpoint's status, the revision it serves (and the catalog's newer one), its message and its pool."""
    kind = _BADGE.get(endpoint.status, "info")
    revision = f"@<code>{html.escape(endpoint.revision[:12])}</code>" if endpoint.revision else ""
    newer = (
        f'<p class="muted">The catalog has a newer revision, <code>{html.escape(latest[:12])}</code>: this URL '
        "keeps serving the one above; launch again to serve the newer one.</p>"
        if latest
        else ""
    )
    head = (
        f'<div class="endpoint-status"><span class="badge badge-{kind}">{html.escape(endpoint.status.value)}</span> '
        f"<code>{html.escape(endpoint.id)}</code> · {html.escape(endpoint.environment)}{revision} · "
        f"{html.escape(endpoint.backend.value)}<p>{html.escape(endpoint.message)}</p>{newer}"
    )
    if pool is not None:
        HISTORY.note(endpoint.id, pool)
    drawn = pool_html(pool, HISTORY.chart(endpoint.id)) if pool is not None and pool.replicas else ""
    return head + drawn + "</div>"


def pool_html(pool: PoolPublic, chart: str = "") -> str:
    """The endpoint's replicas, what each holds and carries, and the pool's last events."""
    rows = "".join(
        f"<tr><td><code>{html.escape(r.id)}</code></td><td>{html.escape(r.status.value)}</td>"
        f"<td>{html.escape(r.host)}</td><td>{r.sessions}/{r.capacity}{'' if r.capacity_said else '?'}</td>"
        f"<td>{r.started_at.strftime('%H:%M:%S') if r.started_at else ''}</td>"
        f"<td>{html.escape(r.last_error[:200])}</td></tr>"
        for r in pool.replicas
    )
    events = "".join(
        f"<li>{e.at.strftime('%H:%M:%S')} {html.escape(e.kind)}: {html.escape(e.message[:200])}</li>"
        for e in pool.events[:5]
    )
    return (
        f'<div class="endpoint-pool"><p>{html.escape(pool_note(pool))}'
        f"{f' {pool.waiting} waiting.' if pool.waiting else ''}</p>{chart}"
        "<table><tr><th>replica</th><th>status</th><th>host</th><th>sessions</th><th>started</th>"
        f"<th>last error</th></tr>{rows}</table>" + (f"<ul>{events}</ul>" if events else "") + "</div>"
    )


def watch(
    endpoints: EndpointManager, visitors: Visitors, launch: Launch, endpoint_id: str, request: gr.Request
) -> dict[Any, Any]:
    """The followed endpoint's status, URL and log tail. The launch's message is what the last click said: only a click
    sets it, since a tick sent before the click may answer after it."""
    if not endpoint_id:
        return {launch.status: "", launch.url: "", launch.stop: gr.Button(visible=False), launch.log: ""}
    try:
        endpoint = endpoints.get(endpoint_id)
    except EnvhubError as exc:
        return {launch.status: html.escape(exc.message)}
    running = endpoint.status == EndpointStatus.RUNNING
    active = endpoint.status in (EndpointStatus.STARTING, EndpointStatus.RUNNING)
    return {
        launch.status: status_html(
            endpoint,
            endpoints.pool_of(endpoint),
            endpoints.newer_revision(endpoint),
        ),
        launch.url: visitors.endpoint_url(request, endpoint.id) if running else "",
        launch.stop: gr.Button(visible=active),
        launch.log: "\n".join(log_tail(endpoints.log_path(endpoint.id), 40)),
    }


def wire(endpoints: EndpointManager, visitors: Visitors, launch: Launch, selected: gr.Textbox) -> None:
    def start(
        request: gr.Request, environment_id: str, backend: str, variables: str, secrets: str, options: str
    ) -> Any:
        if not environment_id:
            return {launch.message: "Open an environment first."}
        caller = ANONYMOUS
        try:
            caller = visitors.acting_caller(request)
            extra = parse_options(options)
            body = LaunchRequest.model_validate(
                {
                    "environment": environment_id,
                    "backend": backend,
                    "options": extra
                    | {
                        "env": parse_assignments(variables, "Environment variables"),
                        "secrets": parse_assignments(secrets, "Secrets"),
                    },
                }
            )
            endpoint = endpoints.launch(body, caller)
        except (ValueError, ValidationError) as exc:
            return not_launched(_reason(exc))
        except EnvhubError as exc:
            return not_launched(launch_refusal(endpoints, caller, exc))
        followed = {launch.endpoint: endpoint.id, launch.timer: gr.Timer(active=True), launch.message: ""}
        return followed | watch(endpoints, visitors, launch, endpoint.id, request)

    def not_launched(reason: str) -> dict[Any, Any]:
        """A refusal, in place of the endpoint followed before (whose status is in My endpoints)."""
        stopped_following = {launch.status: "", launch.url: "", launch.stop: gr.Button(visible=False), launch.log: ""}
        return {
            launch.message: f"**Not launched:** {reason}",
            launch.endpoint: "",
            launch.timer: gr.Timer(active=False),
        } | stopped_following

    def tick(request: gr.Request, endpoint_id: str) -> Any:
        followed = False  # while it starts, runs (its pool over time) or stops
        if endpoint_id:
            try:
                followed = endpoints.get(endpoint_id).status in (
                    EndpointStatus.STARTING,
                    EndpointStatus.RUNNING,
                    EndpointStatus.STOPPING,
                )
            except EnvhubError:
                followed = False
        return watch(endpoints, visitors, launch, endpoint_id, request) | {launch.timer: gr.Timer(active=followed)}

    def stop(request: gr.Request, endpoint_id: str) -> Any:
        try:
            stopped = endpoints.stop(endpoint_id, visitors.acting_caller(request))
        except EnvhubError as exc:
            return {launch.message: f"**Not stopped:** {exc.message}"}
        said = (
            f"Stopped `{endpoint_id}`."
            if stopped.status == EndpointStatus.STOPPED
            else f"Stopping `{endpoint_id}`: its replicas are shutting down."
        )
        return watch(endpoints, visitors, launch, endpoint_id, request) | {launch.message: said}

    outputs = [launch.endpoint, launch.timer, launch.message, *launch.watched]
    launch.backend.change(lambda b: backend_help(Backend(b)) if b else "", [launch.backend], [launch.backend_help])
    launch.start.click(start, [selected, launch.backend, launch.variables, launch.secrets, launch.options], outputs)
    launch.timer.tick(tick, [launch.endpoint], [launch.timer, *launch.watched], show_progress="hidden")
    launch.stop.click(stop, [launch.endpoint], [launch.message, *launch.watched])


def parse_options(text: str) -> dict[str, Any]:
    """The backend options box: one JSON object."""
    example = 'e.g. {"replicas": 2}'
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the backend options are not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
            f"write one object, {example}"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"the backend options must be one JSON object, {example}")
    return value


def _reason(exc: Exception) -> str:
    """A launch request's errors as a person reads them: the option, and what it takes."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    said = []
    for error in exc.errors():
        # ("options", "<backend>", name, ...): the backend is the model pydantic picked, not something typed
        where = [str(p) for p in error["loc"]]
        if where[:1] == ["options"]:
            where = where[2:]
        name = ".".join(where)
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] in ("model_type", "dict_type", "model_attributes_type") and where:
            option = BackendOptions.model_fields.get(where[0])
            described = option is not None and option.description
            message = f"takes {option.description}" if option is not None and described else "takes a JSON object"
        said.append(f"option {name}: {message}" if name else message)
    return "; ".join(said)
