"""Every template and every environment of the third-party corpus, played to the end of an episode by the official
`mcp` SDK's client through the MCP door: tools listed, then a random agent (the random baseline's choices) calls
them until the environment says done."""

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import ClientSession

from protocol.tools import Tool
from rollout.harness import Brief
from rollout.players import RandomPolicy
from tests.corpus import NAMES as THIRD_PARTY
from tests.corpus import copy_corpus, needs_corpus
from tests.mcpclients import mcp, structured, text_of
from tests.serving import TEMPLATES, serve_templates

OURS = tuple(sorted(p.name for p in TEMPLATES.iterdir() if (p / "openenv.yaml").is_file()))
# Reset options that keep a random agent's episode short where the environment takes them: chess from a position
# a move or two from its end, so that its engine (whose search can hold its server past envhub's liveness probe on
# a loaded machine) has little to search.
SHORT: dict[str, dict[str, Any]] = {
    "lights_out": {"max_steps": 6},
    "maze": {"max_steps": 12},
    "chess_env": {"fen": "7k/5Q2/6K1/8/8/8/8/8 w - - 0 1"},
}
MAX_CALLS = 2000  # a random snake (its server takes no seed) may wander for hundreds of moves before it dies

pytestmark = [
    pytest.mark.timeout(900),
    needs_corpus,
]


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each environment launched by envhub (the corpus copied first: the shared folder is read-only)."""
    extra = copy_corpus(tmp_path_factory.mktemp("corpus"))
    with serve_templates(*OURS, *THIRD_PARTY, timeout_s=900, extra=extra) as started:
        yield started


async def play(session: ClientSession, name: str) -> tuple[set[str], int, dict[str, Any]]:
    """Tools listed, an episode begun (with reset when the tools are generated), then random calls until done."""
    listed = (await session.list_tools()).tools
    names = {t.name for t in listed}
    generated = names == {"reset", "step", "state"}
    observation: Any = {}
    if generated:
        step = next(t for t in listed if t.name == "step")
        brief = Brief(name, action_schema=step.inputSchema)
        reset = await session.call_tool("reset", {"seed": 0, "options": SHORT.get(name, {})})
        assert not reset.isError, text_of(reset)
        observation = structured(reset)["observation"]
    else:
        brief = Brief(name, tools=tuple(Tool(t.name, t.description or "", t.inputSchema) for t in listed))
    player = RandomPolicy.player(brief, 0)
    for calls in range(1, MAX_CALLS + 1):
        action = (await player.act(observation, None)).action
        assert action is not None, f"the random agent found no action in {brief}"
        if generated:
            result = await session.call_tool("step", action)
        else:
            result = await session.call_tool(action["tool_name"], action["arguments"])
        if structured(result)["done"]:
            return names, calls, structured(result)
        observation = structured(result)["observation"]
    raise AssertionError(f"{name} was not done after {MAX_CALLS} calls; the last: {text_of(result)[:300]}")


@pytest.mark.parametrize("name", [*OURS, *THIRD_PARTY])
def test_an_episode_is_played_to_its_end_over_mcp(urls: dict[str, str], name: str) -> None:
    async def run() -> tuple[set[str], int, dict[str, Any]]:
        async with mcp(urls[name]) as session:
            return await play(session, name)

    names, calls, last = asyncio.run(run())
    assert names == {"reset", "step", "state"} or name == "toolbox", names  # only the toolbox brings its own tools
    assert calls >= 1 and last["done"] is True and (last["reward"] is None or isinstance(last["reward"], float))
