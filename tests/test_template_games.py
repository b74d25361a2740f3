"""The toolbox, connect-four and wordle templates, played to the end over openenv's own WebSocket client."""

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect as websocket_connect

from tests.serving import TEMPLATES, serve_templates

NAMES = ("toolbox", "connect_four", "wordle")
TOOLS = {"get_question", "calculate", "convert_units", "lookup_fact", "submit_answer"}
WORDS = (TEMPLATES / "wordle" / "server" / "words.txt").read_text().split()
Grid = list[list[int]]


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    """All three launched by envhub; the URLs are its gateway URLs."""
    with serve_templates(*NAMES) as started:
        yield started


def session(url: str) -> Any:
    """A synchronous openenv client on its own WebSocket session; use it as a context manager."""
    return GenericEnvClient(base_url=url).sync()


def call_tool(env: Any, tool: str, **arguments: Any) -> Any:
    """Call a toolbox tool through step() and return its value."""
    result = env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})
    assert result.observation["error"] is None, result.observation["error"]
    return result.observation["result"]["data"]


# toolbox


def test_toolbox_is_solved_with_its_tools(urls: dict[str, str]) -> None:
    with session(urls["toolbox"]) as env:
        reset = env.reset(seed=3, episode_id="toolbox-episode", task_id="diameter-ratio/jupiter-mars")
        assert "diameter of Jupiter" in reset.observation["question"]
        assert (reset.done, reset.reward, set(reset.observation["tools"])) == (False, 0.0, TOOLS)

        listed = env.step({"type": "list_tools"}).observation["tools"]
        assert {tool["name"] for tool in listed} == TOOLS
        assert all(tool["input_schema"]["type"] == "object" for tool in listed)

        assert call_tool(env, "get_question") == reset.observation["question"]
        jupiter = call_tool(env, "lookup_fact", entity="Jupiter")["diameter_km"]
        mars = call_tool(env, "lookup_fact", entity="mars")["diameter_km"]
        failed = env.step({"type": "call_tool", "tool_name": "calculate", "arguments": {"expression": "1/0"}})
        assert "division by zero" in failed.observation["error"]["message"]
        assert (failed.done, failed.reward) == (False, 0.0)
        ratio = call_tool(env, "calculate", expression=f"{jupiter} / {mars}")
        assert call_tool(env, "convert_units", value=100, from_unit="celsius", to_unit="F") == 212

        final = env.step({"type": "call_tool", "tool_name": "submit_answer", "arguments": {"answer": ratio}})
        assert (final.done, final.reward) == (True, 1.0)
        assert final.observation["result"]["data"]["correct"] is True
        state = env.state()
        assert (state["episode_id"], state["step_count"], state["solved"]) == ("toolbox-episode", 7, True)

        after = env.step({"type": "call_tool", "tool_name": "calculate", "arguments": {"expression": "1+1"}})
        assert "episode is over" in after.observation["error"]["message"]
        assert (after.done, after.reward, env.state()["step_count"]) == (True, 0.0, 7)


def test_toolbox_episode_ends_on_a_wrong_answer_or_an_empty_budget(urls: dict[str, str]) -> None:
    with session(urls["toolbox"]) as env:
        env.reset(seed=5)
        wrong = env.step({"type": "call_tool", "tool_name": "submit_answer", "arguments": {"answer": -1e9}})
        assert (wrong.done, wrong.reward, wrong.observation["result"]["data"]["correct"]) == (True, 0.0, False)

        reset = env.reset(seed=5, max_steps=2)
        assert reset.observation["max_steps"] == 2
        assert env.step({"type": "call_tool", "tool_name": "nope", "arguments": {}}).done is False
        spent = env.step({"type": "call_tool", "tool_name": "get_question", "arguments": {}})
        assert (spent.done, spent.reward, spent.metadata["outcome"]) == (True, 0.0, "out of steps")
        assert env.state()["episode_id"]  # generated when reset is given none


def test_toolbox_seed_picks_the_task(urls: dict[str, str]) -> None:
    with session(urls["toolbox"]) as env:
        first = env.reset(seed=11).observation["task_id"]
        assert env.reset(seed=11).observation["task_id"] == first
        assert len({env.reset(seed=seed).observation["task_id"] for seed in range(8)}) > 1


def test_toolbox_tools_over_mcp(urls: dict[str, str]) -> None:
    def rpc(method: str, params: dict[str, Any]) -> Any:
        payload = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(f"{urls['toolbox']}/mcp", json=payload, timeout=10).json()

    tools = {tool["name"]: tool for tool in rpc("tools/list", {})["result"]["tools"]}
    assert set(tools) == TOOLS
    assert tools["convert_units"]["inputSchema"]["required"] == ["value", "from_unit", "to_unit"]
    assert (
        rpc("tools/call", {"name": "calculate", "arguments": {"expression": "2 * (3 + 4) ^ 2"}})["result"]["data"] == 98
    )
    refused = rpc("tools/call", {"name": "calculate", "arguments": {"expression": "__import__('os')"}})
    assert "unexpected character" in refused["error"]["message"]

    ws_url = urls["toolbox"].replace("http://", "ws://") + "/mcp"
    with websocket_connect(ws_url) as socket:
        socket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        assert {tool["name"] for tool in json.loads(socket.recv(timeout=10))["result"]["tools"]} == TOOLS


# connect four


def landing_row(grid: Grid, column: int) -> int | None:
    empty = [row for row in range(6) if grid[row][column] == 0]
    return empty[-1] if empty else None


def completes_four(grid: Grid, column: int, piece: int) -> bool:
    row = landing_row(grid, column)
    if row is None:
        return False
    for d_row, d_column in ((0, 1), (1, 0), (1, 1), (1, -1)):
        length = 1
        for sign in (1, -1):
            r, c = row + sign * d_row, column + sign * d_column
            while 0 <= r < 6 and 0 <= c < 7 and grid[r][c] == piece:
                length, r, c = length + 1, r + sign * d_row, c + sign * d_column
        if length >= 4:
            return True
    return False


def pick_column(observation: dict[str, Any]) -> int:
    """Win if possible, else block the opponent's win, else play nearest the center."""
    legal: list[int] = observation["legal_actions"]
    for piece in (1, 2):
        for column in legal:
            if completes_four(observation["grid"], column, piece):
                return column
    return min(legal, key=lambda column: abs(column - 3))


def test_connect_four_is_won_against_depth_one(urls: dict[str, str]) -> None:
    with session(urls["connect_four"]) as env:
        result = env.reset(seed=1, depth=1, episode_id="c4-episode")
        steps = 0
        while not result.done:
            assert result.reward == 0.0
            result = env.step({"column": pick_column(result.observation)})
            steps += 1
        assert (result.reward, result.observation["winner"], result.observation["legal_actions"]) == (1.0, "agent", [])
        assert "won" in result.observation["message"]
        state = env.state()
        assert (state["episode_id"], state["step_count"], state["winner"]) == ("c4-episode", steps, "agent")
        assert sum(cell != 0 for row in state["grid"] for cell in row) == len(state["moves"])

        after = env.step({"column": 3})
        assert "over" in after.observation["error"]
        assert (after.done, after.reward, env.state()["step_count"]) == (True, 0.0, steps)


def test_connect_four_refuses_bad_columns_without_ending(urls: dict[str, str]) -> None:
    with session(urls["connect_four"]) as env:
        with pytest.raises(RuntimeError, match="depth must be a whole number from 1 to 6"):
            env.reset(depth=9)
        result = env.reset(seed=2, depth=3, agent_first=True)
        while 0 in result.observation["legal_actions"]:
            result = env.step({"column": 0})
            assert not result.done
        steps, board = env.state()["step_count"], result.observation["board"]

        full = env.step({"column": 0})
        assert "Column 0 is full" in full.observation["error"]
        missing = env.step({"column": 7})
        assert "does not exist" in missing.observation["error"]
        assert (missing.done, missing.observation["board"]) == (False, board)
        for action in ({"column": "left"}, {"col": 1}, {"column": 1, "player": 2}):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                env.step(action)
        assert env.state()["step_count"] == steps + 2
        assert env.step({"column": 3}).observation["error"] is None


def test_connect_four_is_deterministic_for_a_seed(urls: dict[str, str]) -> None:
    with session(urls["connect_four"]) as first, session(urls["connect_four"]) as second:
        games = []
        for env in (first, second):
            opening = env.reset(seed=8, depth=2).observation
            replies = [env.step({"column": column}).observation["last_opponent_move"] for column in (3, 3, 2)]
            games.append((opening["board"], replies, env.state()["moves"]))
        assert games[0] == games[1]
        openers = {first.reset(seed=seed).observation["last_opponent_move"] is None for seed in range(8)}
        assert openers == {True, False}


# wordle


def feedback(guess: str, answer: str) -> list[str]:
    """Wordle colors, written independently of the server to check it."""
    colors = ["green" if g == a else "gray" for g, a in zip(guess, answer, strict=True)]
    spare = Counter(a for g, a in zip(guess, answer, strict=True) if g != a)
    for index, letter in enumerate(guess):
        if colors[index] == "gray" and spare[letter]:
            colors[index], spare[letter] = "yellow", spare[letter] - 1
    return colors


def best_guess(candidates: list[str]) -> str:
    """The candidate whose worst-case feedback leaves the fewest words."""
    return min(candidates, key=lambda g: (max(Counter(tuple(feedback(g, w)) for w in candidates).values()), g))


def solve_wordle(env: Any, seed: int, episode_id: str) -> tuple[Any, list[str]]:
    result = env.reset(seed=seed, episode_id=episode_id)
    candidates, guess, guesses = list(WORDS), "slate", []
    while not result.done:
        result = env.step({"guess": guess})
        guesses.append(guess)
        colors = result.observation["guesses"][-1]["colors"]
        candidates = [word for word in candidates if feedback(guess, word) == colors]
        guess = best_guess(candidates) if candidates else guess
    return result, guesses


def test_wordle_is_solved_by_filtering_the_word_list(urls: dict[str, str]) -> None:
    assert len(WORDS) >= 300
    assert all(len(word) == 5 and word.isalpha() for word in WORDS)
    with session(urls["wordle"]) as env:
        result, guesses = solve_wordle(env, seed=42, episode_id="wordle-episode")
        assert (result.reward, result.observation["answer"]) == (1.0, guesses[-1])
        assert result.observation["guesses"][-1]["pattern"] == "GGGGG"
        assert result.observation["guesses_left"] == 6 - len(guesses)
        state = env.state()
        assert (state["episode_id"], state["step_count"], state["solved"]) == ("wordle-episode", len(guesses), True)

        after = env.step({"guess": "crane"})
        assert "over" in after.observation["error"]
        assert (after.done, after.reward, env.state()["step_count"]) == (True, 0.0, len(guesses))

        again, replay = solve_wordle(env, seed=42, episode_id="wordle-replay")
        assert (again.observation["answer"], replay) == (result.observation["answer"], guesses)


def test_wordle_feedback_handles_repeated_letters(urls: dict[str, str]) -> None:
    with session(urls["wordle"]) as env:
        env.reset(answer="crane")
        assert env.step({"guess": "eerie"}).observation["guesses"][-1]["pattern"] == "--Y-G"
        env.reset(answer="eerie")
        observation = env.step({"guess": "geese"}).observation
        assert observation["guesses"][-1]["colors"] == ["gray", "green", "yellow", "gray", "green"]
        assert observation["letters"] == {"e": "green", "g": "gray", "s": "gray"}


def test_wordle_refuses_invalid_guesses_without_using_one(urls: dict[str, str]) -> None:
    with session(urls["wordle"]) as env:
        env.reset(seed=1)
        for guess, problem in (("cr4ne", "only the letters"), ("cran", "exactly 5"), ("zzzzz", "not in the word list")):
            result = env.step({"guess": guess})
            assert problem in result.observation["error"]
            assert (result.done, result.observation["guesses_left"]) == (False, 6)
        for action in ({"guess": 12345}, {"word": "crane"}):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                env.step(action)
        assert (env.state()["step_count"], env.state()["refused"]) == (3, 3)
        assert env.step({"guess": " SLATE "}).observation["guesses"][0]["word"] == "slate"


def test_wordle_refused_guess_spends_no_turn(urls: dict[str, str]) -> None:
    with session(urls["wordle"]) as env:
        env.reset(answer="crane")
        refused = env.step({"guess": "qzqzq"})
        assert (refused.done, refused.observation["guesses_left"], env.state()["refused"]) == (False, 6, 1)
        for word in ("dumpy", "sworn"):  # outside the common words the hidden one is drawn from
            assert word not in WORDS
            assert env.step({"guess": word}).observation["error"] is None
        assert (env.state()["step_count"], env.state()["guesses"]) == (3, ["dumpy", "sworn"])


def test_wordle_ends_unsolved_after_twenty_refused_guesses(urls: dict[str, str]) -> None:
    with session(urls["wordle"]) as env:
        env.reset(seed=4)
        results = [env.step({"guess": "xx"}) for _ in range(20)]
        assert [result.done for result in results] == [False] * 19 + [True]
        state = env.state()
        assert (results[-1].reward, state["step_count"], state["refused"], state["solved"]) == (0.0, 20, 20, False)


def test_connect_four_refused_moves_still_spend_the_step_budget(urls: dict[str, str]) -> None:
    with session(urls["connect_four"]) as env:
        env.reset(seed=4, agent_first=True)
        results = [env.step({"column": 9}) for _ in range(42)]
        assert [result.done for result in results] == [False] * 41 + [True]
        assert (results[-1].reward, env.state()["step_count"]) == (-1.0, 42)


# all three


@pytest.mark.parametrize(("name", "field"), [("toolbox", "tool_name"), ("connect_four", "column"), ("wordle", "guess")])
def test_schema_describes_the_action(urls: dict[str, str], name: str, field: str) -> None:
    schema = httpx.get(f"{urls[name]}/schema", timeout=10).json()
    assert schema["action"]["properties"][field]["description"]
    assert field in schema["action"]["required"]
    assert schema["state"]["properties"]["step_count"]
    metadata = httpx.get(f"{urls[name]}/metadata", timeout=10).json()
    assert (metadata["name"], metadata["readme_content"].startswith("---")) == (name, True)


FIRST_MOVES: dict[str, dict[str, Any]] = {
    "toolbox": {"type": "call_tool", "tool_name": "calculate", "arguments": {"expression": "6 * 7"}},
    "connect_four": {"column": 3},
    "wordle": {"guess": "slate"},
}


@pytest.mark.parametrize("name", NAMES)
def test_concurrent_sessions_are_isolated(urls: dict[str, str], name: str) -> None:
    with session(urls[name]) as first, session(urls[name]) as second:
        first.reset(seed=1, episode_id="first")
        second.reset(seed=2, episode_id="second")
        first.step(FIRST_MOVES[name])
        second.step(FIRST_MOVES[name])
        first.step(FIRST_MOVES[name])
        assert (first.state()["episode_id"], first.state()["step_count"]) == ("first", 2)
        assert (second.state()["episode_id"], second.state()["step_count"]) == ("second", 1)
