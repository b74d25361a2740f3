"""Let a model play: in the Play tab, a policy (a baseline, or a model on any OpenAI-compatible server)
plays this tab's session through rollout's episode loop, one event per tick, into the same view a person
uses, with its reply beside each move. Stop, and the person has the controls again; start again, or step by
hand while it plays, and it goes on from where the episode is."""

import html
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
from pydantic import ValidationError
from sqlalchemy import Engine

from app.usecases.play import PlayError, PlaySession
from app.usecases.play_episode import Outcome
from catalog.store import read_environment
from core.errors import EnvhubError
from core.outbound import OutboundGuard
from rollout import loop
from rollout.harness import Brief
from rollout.model import ModelConfig, ModelError, ModelPolicy
from rollout.players import BASELINES, Move, Policy

MOVE_S = 0.7  # between the model's moves, so a person can follow them
MAX_STEPS = 500  # steps one start plays at most: a model left playing stops


@dataclass
class _Env:
    """The episode loop's view of a play session: what it got last is what the page shows."""

    session: PlaySession
    shown: Outcome | None = None

    async def reset(self, options: dict[str, Any]) -> loop.Turn:
        self.shown = await self.session.reset(options)
        return loop.Turn(self.shown.observation, self.shown.reward, self.shown.done)

    async def step(self, action: dict[str, Any]) -> loop.Turn:
        try:
            self.shown = await self.session.step(action)
        except PlayError as exc:
            return loop.Turn(error=exc.message)
        return loop.Turn(self.shown.observation, self.shown.reward, self.shown.done)


@dataclass
class Playing:
    """The policy playing one session, and the episode loop it plays, where that loop left the episode."""

    policy: Policy
    brief: Brief
    env: _Env
    events: AsyncGenerator[loop.Event, None] | None = None
    at: tuple[int, int] = (-1, -1)  # the episode's resets and records when the loop last moved

    def follow(self) -> AsyncGenerator[loop.Event, None]:
        """A loop from where the episode is, with a fresh player: a reset when it is over or not begun."""
        episode = self.env.session.episode
        start = None
        if episode.started and not episode.done:
            last = episode.records[-1]
            reward = last["reward"] if last["kind"] == "step" else None
            start = loop.Turn(last["observation"], reward)
        player = self.policy.player(self.brief, None)
        self.events = loop.episode(self.env, player, start=start, max_steps=MAX_STEPS)
        return self.events

    def moved(self) -> None:
        self.at = (self.env.session.episode.resets, len(self.env.session.episode.records))

    async def aclose(self) -> None:
        self.events = None  # a loop left at a yield holds nothing to release
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
    engine: Engine,
    guard: OutboundGuard,
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
                await guard.resolve(config.base_url)
            except ValidationError as exc:
                return {auto.reply: "**Not started:** " + "; ".join(str(e["msg"]) for e in exc.errors())}
            except EnvhubError as exc:
                return {auto.reply: f"**Not started:** {exc.message}"}
            chosen = ModelPolicy(config, guard)
        else:
            chosen = BASELINES[policy]
        environment = await read_environment(engine, session.environment)
        info = session.info
        brief = Brief(
            session.environment, environment.readme if environment else "", info.action_schema, info.tools or ()
        )
        if session.model is not None:
            await session.model.aclose()
        session.model = Playing(chosen, brief, _Env(session))
        return {auto.reply: f"{chosen.label} is playing…", auto.timer: gr.Timer(active=True)}

    async def stop(request: gr.Request) -> dict[Any, Any]:
        session = session_of(request)
        if session is not None and session.model is not None:
            await session.model.aclose()
            session.model = None
        return {auto.reply: "Stopped: the controls are yours.", auto.timer: gr.Timer(active=False)}

    async def halt(session: PlaySession, playing: Playing, reply: str) -> dict[Any, Any]:
        await playing.aclose()
        session.model = None
        return {auto.reply: reply, auto.timer: gr.Timer(active=False)}

    async def tick(request: gr.Request) -> dict[Any, Any]:
        session = session_of(request)
        playing = session.model if session is not None else None
        if session is None or not isinstance(playing, Playing):
            return {auto.timer: gr.Timer(active=False)}
        episode = session.episode
        events = playing.events
        if events is None or playing.at != (episode.resets, len(episode.records)):
            events = playing.follow()  # its first tick, or the person moved meanwhile
        try:
            event = await anext(events, None)
        except ModelError as exc:
            return await halt(session, playing, f"**The model stopped:** {exc}")
        except PlayError as exc:
            return await halt(session, playing, f"**Stopped:** {exc.message}")
        playing.moved()
        if event is None:
            return await halt(session, playing, "The episode is over.")
        if isinstance(event, loop.End):
            return await halt(session, playing, f"**Stopped:** {event.reason}")
        if isinstance(event, loop.Tried):
            return {auto.reply: f"{_said(playing, event.move)}\n\n↺ {html.escape(event.problem)}: asking again"}
        shown = playing.env.shown
        assert shown is not None
        said = "Reset: a new episode." if isinstance(event, loop.Reset) else _said(playing, event.move)
        return show(session, shown) | {auto.reply: said}

    inputs = [auto.policy, auto.base_url, auto.model, auto.api_key]
    auto.start.click(start, inputs, [auto.reply, auto.timer], show_progress="hidden")
    auto.stop.click(stop, None, [auto.reply, auto.timer], show_progress="hidden")
    auto.timer.tick(tick, None, [*results, auto.reply, auto.timer], show_progress="hidden")
