"""Let a model play: in the Play tab, a policy (a baseline, or a model on any OpenAI-compatible server)
takes the moves of this tab's session, one per tick, into the same view a person uses, with its reply
beside each move. Stop, and the person has the controls again; start again, and it resumes from where
the episode is."""

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
from pydantic import ValidationError

from app.services import Services
from app.ui.episode import Outcome
from app.usecases.play import PlayError, PlaySession
from catalog.store import find_environment
from core.errors import EnvhubError
from rollout.harness import Brief
from rollout.model import ModelConfig, ModelError, ModelPolicy
from rollout.players import BASELINES, Move, Player, Policy

MOVE_S = 0.7  # between the model's moves, so a person can follow them
RETRIES = 3  # invalid moves in a row before the model is stopped


@dataclass
class Playing:
    """The policy playing one session, and its player's memory of the episode."""

    policy: Policy
    brief: Brief
    player: Player
    episode: int  # the session's episode (its count of resets) it plays; another gets a fresh player
    problems: list[str] = field(default_factory=list)  # this move's invalid tries

    async def aclose(self) -> None:
        await self.policy.aclose()


@dataclass(frozen=True)
class AutoPlay:
    policy: gr.Dropdown
    base_url: gr.Textbox
    model: gr.Textbox
    api_key: gr.Textbox
    start: gr.Button
    stop: gr.Button
    reply: gr.Markdown
    timer: gr.Timer


def build() -> AutoPlay:
    with gr.Accordion("🤖 Let a model play", open=False, elem_id="play-model"):
        policy = gr.Dropdown(["random", "first-legal", "model"], value="first-legal", label="Policy",
                             elem_id="play-model-policy")  # fmt: skip
        base_url = gr.Textbox(label="Model server (OpenAI-compatible base URL)", placeholder="http://127.0.0.1:8000/v1",
                              elem_id="play-model-url")  # fmt: skip
        model = gr.Textbox(label="Model name", elem_id="play-model-name")
        api_key = gr.Textbox(label="API key (kept in memory for this tab only)", type="password",
                             elem_id="play-model-key")  # fmt: skip
        with gr.Row():
            start = gr.Button("▶ Let it play", variant="primary", elem_id="play-model-start")
            stop = gr.Button("■ Stop (take over)", elem_id="play-model-stop")
        reply = gr.Markdown(elem_id="play-model-reply")
    return AutoPlay(policy, base_url, model, api_key, start, stop, reply, gr.Timer(MOVE_S, active=False))


def _said(playing: "Playing", move: Move) -> str:
    if move.reply is None:
        return f"**{html.escape(playing.policy.label)}** chose `{html.escape(json.dumps(move.action))}`"
    return f"**{html.escape(playing.policy.label)}:**\n\n```\n{move.reply[:2000]}\n```"


def wire(
    services: Services,
    auto: AutoPlay,
    session_of: Callable[[gr.Request], PlaySession | None],
    show: Callable[[PlaySession, Outcome], dict[Any, Any]],
    results: list[Any],
) -> None:
    async def start(request: gr.Request, policy: str, base_url: str, model: str, api_key: str) -> dict[Any, Any]:
        session = session_of(request)
        if session is None:
            return {auto.reply: "Connect to the environment first."}
        chosen: Policy
        if policy == "model":
            try:
                config = ModelConfig(
                    base_url=(base_url or "").strip(), model=(model or "").strip(), api_key=api_key or None
                )
                await services.guard.resolve(config.base_url)
            except ValidationError as exc:
                return {auto.reply: "**Not started:** " + "; ".join(str(e["msg"]) for e in exc.errors())}
            except EnvhubError as exc:
                return {auto.reply: f"**Not started:** {exc.message}"}
            chosen = ModelPolicy(config, services.guard)
        else:
            chosen = BASELINES[policy]
        with services.db() as db:
            environment = find_environment(db, session.environment)
        info = session.info
        brief = Brief(
            session.environment, environment.readme if environment else "", info.action_schema, info.tools or ()
        )
        if session.model is not None:
            await session.model.aclose()
        session.model = Playing(chosen, brief, chosen.player(brief, None), episode=-1)
        return {auto.reply: f"{chosen.label} is playing…", auto.timer: gr.Timer(active=True)}

    async def stop(request: gr.Request) -> dict[Any, Any]:
        session = session_of(request)
        if session is not None and session.model is not None:
            await session.model.aclose()
            session.model = None
        return {auto.reply: "Stopped: the controls are yours.", auto.timer: gr.Timer(active=False)}

    async def tick(request: gr.Request) -> dict[Any, Any]:
        session = session_of(request)
        playing = session.model if session is not None else None
        if session is None or not isinstance(playing, Playing):
            return {auto.timer: gr.Timer(active=False)}
        try:
            episode = session.episode
            if not episode.started or episode.done:
                if episode.done and playing.episode == episode.resets:
                    await playing.aclose()
                    session.model = None
                    return {auto.reply: "The episode is over.", auto.timer: gr.Timer(active=False)}
                outcome = await session.reset({})
                return show(session, outcome) | {auto.reply: "Reset: a new episode."}
            if playing.episode != episode.resets:  # a new episode (or one begun by hand): a fresh player
                playing.player = playing.policy.player(playing.brief, None)
                playing.episode = episode.resets
            last = episode.records[-1]
            if playing.problems:
                move = await playing.player.retry(playing.problems[-1])
            else:
                move = await playing.player.act(last["observation"], last["reward"] if last["kind"] == "step" else None)
            if move.action is None:
                return _invalid(session, playing, move.problem or "no action", _said(playing, move))
            try:
                outcome = await session.step(move.action)
            except PlayError as exc:
                return _invalid(session, playing, exc.message, _said(playing, move))
            playing.problems.clear()
            return show(session, outcome) | {auto.reply: _said(playing, move)}
        except ModelError as exc:
            await playing.aclose()
            session.model = None
            return {auto.reply: f"**The model stopped:** {exc}", auto.timer: gr.Timer(active=False)}

    def _invalid(session: PlaySession, playing: Playing, problem: str, said: str) -> dict[Any, Any]:
        playing.problems.append(problem)
        if len(playing.problems) > RETRIES:
            session.model = None
            return {
                auto.reply: f"{said}\n\n**Stopped:** no valid move in {len(playing.problems)} tries: {problem}",
                auto.timer: gr.Timer(active=False),
            }
        return {auto.reply: f"{said}\n\n↺ {html.escape(problem)}: asking again"}

    inputs = [auto.policy, auto.base_url, auto.model, auto.api_key]
    auto.start.click(start, inputs, [auto.reply, auto.timer], show_progress="hidden")
    auto.stop.click(stop, None, [auto.reply, auto.timer], show_progress="hidden")
    auto.timer.tick(tick, None, [*results, auto.reply, auto.timer], show_progress="hidden")
