"""The built-in environment templates, served for real and played to the end over openenv's WebSocket protocol."""

import base64
import io
from collections import deque
from collections.abc import Iterator
from typing import Any, Protocol, Self, cast

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from PIL import Image

from tests.serving import serve_templates

TEMPLATES = ("maze", "arithmetic_tasks", "lights_out")
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
Json = dict[str, Any]
Square = tuple[int, int]


class Result(Protocol):
    observation: Json
    reward: float | None
    done: bool


class Session(Protocol):
    """The part of openenv's SyncEnvClient these tests use, typed (openenv ships no type information)."""

    def reset(self, **options: object) -> Result: ...
    def step(self, action: Json) -> Result: ...
    def state(self) -> Json: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc_info: object) -> None: ...


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """Every template launched by envhub; the URLs are its gateway URLs."""
    with serve_templates(*TEMPLATES) as urls:
        yield urls


def connect(url: str) -> Session:
    return cast(Session, GenericEnvClient(base_url=url).sync())


def shortest_path(grid: str) -> list[str]:
    """Breadth-first search over the text grid from 'A' to 'E'; the border is all wall."""
    rows = grid.splitlines()
    squares = {symbol: (r, c) for r, line in enumerate(rows) for c, symbol in enumerate(line)}
    start, goal = squares["A"], squares["E"]
    came_from: dict[Square, tuple[Square, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        square = queue.popleft()
        for direction, (d_row, d_col) in MOVES.items():
            nearby = (square[0] + d_row, square[1] + d_col)
            if rows[nearby[0]][nearby[1]] != "#" and nearby not in came_from:
                came_from[nearby] = (square, direction)
                queue.append(nearby)
    path: list[str] = []
    link = came_from[goal]
    while link is not None:
        square, direction = link
        path.append(direction)
        link = came_from[square]
    return path[::-1]


def lights_out_solution(board: list[list[int]]) -> list[Square]:
    """Gaussian elimination over GF(2): the presses (each at most once) that switch every light off."""
    size = len(board)
    cells = size * size
    equations = []
    for row in range(size):
        for col in range(size):
            presses = 0
            for r, c in ((row, col), (row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)):
                if 0 <= r < size and 0 <= c < size:
                    presses |= 1 << (r * size + c)
            equations.append(presses | board[row][col] << cells)
    pivots: list[int] = []
    for variable in range(cells):
        chosen = next((i for i in range(len(pivots), cells) if equations[i] >> variable & 1), None)
        if chosen is None:
            continue
        top = len(pivots)
        equations[top], equations[chosen] = equations[chosen], equations[top]
        for i in range(cells):
            if i != top and equations[i] >> variable & 1:
                equations[i] ^= equations[top]
        pivots.append(variable)
    assert all(equation != 1 << cells for equation in equations), "the board has no solution"
    return [divmod(variable, size) for i, variable in enumerate(pivots) if equations[i] >> cells & 1]


def test_maze_is_walked_to_the_exit_by_breadth_first_search(servers: dict[str, str]) -> None:
    with connect(servers["maze"]) as env:
        result = env.reset(seed=11, episode_id="maze-episode", size=6)
        first = result.observation
        assert (result.reward, result.done, first["error"]) == (0.0, False, None)
        image = Image.open(io.BytesIO(base64.b64decode(first["image_png_base64"])))
        assert (first["image_mime"], image.format) == ("image/png", "PNG")
        assert image.size == (first["image_width"], first["image_height"]) == (13 * 16, 13 * 16)
        assert first["grid"].splitlines()[first["position"][0]][first["position"][1]] == "A"

        path = shortest_path(first["grid"])
        rewards = [env.step({"direction": direction}).reward for direction in path[:-1]]
        last = env.step({"direction": path[-1]})

        assert rewards == pytest.approx([-0.01] * (len(path) - 1))
        assert last.reward == pytest.approx(0.99) and last.done
        assert last.observation["position"] == first["exit"]
        state = env.state()
        assert (state["episode_id"], state["step_count"], state["seed"], state["solved"]) == (
            "maze-episode",
            len(path),
            11,
            True,
        )
        after = env.step({"direction": "up"})
        assert after.done and after.reward == 0.0 and "reset()" in after.observation["error"]
        assert env.state()["step_count"] == len(path)


def test_maze_wall_invalid_actions_and_bad_options_leave_the_session_open(servers: dict[str, str]) -> None:
    with connect(servers["maze"]) as env:
        env.reset(seed=4, size=3)
        bump = env.step({"direction": "up"})  # the start is in the top row, under the border wall
        assert bump.observation["position"] == [1, 1] and "wall" in bump.observation["error"]
        assert bump.reward == pytest.approx(-0.01) and not bump.done
        for action in ({"direction": "north"}, {"direction": "up", "speed": 2}, {}):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                env.step(action)
        with pytest.raises(RuntimeError, match="size must be an integer from 2 to 20"):
            env.reset(size=99)
        with pytest.raises(RuntimeError, match="unknown reset option"):
            env.reset(sise=4)
        assert env.state()["step_count"] == 1
        moved = env.step({"direction": shortest_path(bump.observation["grid"])[0]})
        assert moved.observation["error"] is None and env.state()["step_count"] == 2


def test_maze_runs_out_of_steps(servers: dict[str, str]) -> None:
    with connect(servers["maze"]) as env:
        env.reset(seed=4, size=5, max_steps=2)
        assert not env.step({"direction": "up"}).done
        last = env.step({"direction": "up"})
        assert last.done and last.observation["steps_left"] == 0 and not env.state()["solved"]


def test_maze_is_a_function_of_the_seed(servers: dict[str, str]) -> None:
    with connect(servers["maze"]) as env:
        unseeded = env.reset().observation
        state = env.state()
        assert state["episode_id"] and state["step_count"] == 0
        replayed = env.reset(seed=state["seed"], size=state["size"]).observation
        assert replayed["grid"] == unseeded["grid"]
        first = env.reset(seed=5, size=8).observation
        again = env.reset(seed=5, size=8).observation
        other = env.reset(seed=6, size=8).observation
    assert first == again
    assert other["grid"] != first["grid"]


def test_task_api_routes(servers: dict[str, str]) -> None:
    with httpx.Client(base_url=servers["arithmetic_tasks"]) as http:
        assert http.get("/list_environments").json() == ["arithmetic_tasks"]
        assert http.get("/arithmetic_tasks/splits").json() == [
            {"name": "train", "type": "train"},
            {"name": "test", "type": "test"},
        ]
        counts = {
            s: http.post("/arithmetic_tasks/num_tasks", json={"split": s}).json()["num_tasks"]
            for s in ("train", "test")
        }
        assert counts["train"] >= 60 and counts["test"] >= 20
        tasks = http.post("/arithmetic_tasks/tasks", json={"split": "test"}).json()
        assert tasks["env_name"] == "arithmetic_tasks" and len(tasks["tasks"]) == counts["test"]
        task = http.post("/arithmetic_tasks/task", json={"split": "test", "index": 3}).json()["task"]
        assert task == tasks["tasks"][3]
        assert (task["id"], task["split"], task["index"], type(task["answer"])) == ("test-0003", "test", 3, int)
        page = http.post("/arithmetic_tasks/task_range", json={"split": "test", "start": 2, "stop": 6}).json()
        assert page["tasks"] == tasks["tasks"][2:6]
        for index in (counts["test"], -1):
            missing = http.post("/arithmetic_tasks/task", json={"split": "test", "index": index})
            assert (missing.status_code, missing.json()) == (400, {"detail": "Invalid task index"})
        unknown = http.post("/arithmetic_tasks/num_tasks", json={"split": "dev"})
        assert (unknown.status_code, unknown.json()["code"]) == (404, "split_unknown")
        assert http.get("/nope/splits").status_code == 404


def test_every_test_task_is_answered_from_the_task_data(servers: dict[str, str]) -> None:
    url = servers["arithmetic_tasks"]
    tasks = httpx.post(f"{url}/arithmetic_tasks/tasks", json={"split": "test"}).json()["tasks"]
    with connect(url) as env:
        for task in tasks:
            question = env.reset(split="test", index=task["index"]).observation
            assert (question["task_id"], question["question"]) == (task["id"], task["question"])
            result = env.step({"answer": str(task["answer"]), "reasoning": "read from the task data"})
            assert (result.reward, result.done, result.observation["correct"]) == (1.0, True, True)


def test_task_episode_by_split_and_index(servers: dict[str, str]) -> None:
    url = servers["arithmetic_tasks"]
    task = httpx.post(f"{url}/arithmetic_tasks/task", json={"split": "test", "index": 3}).json()["task"]
    with connect(url) as env:
        opened = env.reset(split="test", index=3, episode_id="task-episode").observation
        assert (opened["task_id"], opened["question"], opened["attempts_left"]) == ("test-0003", task["question"], 3)
        assert opened["expected_answer"] is None
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            env.step({"reasoning": "no answer given"})
        wrong = env.step({"answer": str(task["answer"] + 1)})
        assert (wrong.reward, wrong.done, wrong.observation["correct"], wrong.observation["attempts_left"]) == (
            0.0,
            False,
            False,
            2,
        )
        right = env.step({"answer": f" {task['answer']:,} "})
        assert (right.reward, right.done, right.observation["expected_answer"]) == (1.0, True, task["answer"])
        state = env.state()
        assert (state["episode_id"], state["step_count"], state["task_id"], state["solved"]) == (
            "task-episode",
            2,
            "test-0003",
            True,
        )
        assert "reset()" in env.step({"answer": "1"}).observation["error"]
        assert env.state()["step_count"] == 2
        with pytest.raises(RuntimeError, match="unknown split 'dev'"):
            env.reset(split="dev")


def test_task_attempts_run_out(servers: dict[str, str]) -> None:
    with connect(servers["arithmetic_tasks"]) as env:
        env.reset(split="train", index=0, max_attempts=2)
        assert env.step({"answer": "forty"}).observation["message"].startswith("'forty' is not an integer")
        last = env.step({"answer": "-1"})
        assert (last.reward, last.done, last.observation["attempts_left"]) == (0.0, True, 0)
        assert isinstance(last.observation["expected_answer"], int)


def test_task_is_drawn_from_the_seed(servers: dict[str, str]) -> None:
    with connect(servers["arithmetic_tasks"]) as env:
        drawn = [env.reset(seed=seed, split="train").observation["task_id"] for seed in (1, 2, 3, 4, 5, 1)]
    assert drawn[0] == drawn[-1]
    assert len(set(drawn)) > 1


def test_lights_out_is_switched_off_by_a_solver(servers: dict[str, str]) -> None:
    with connect(servers["lights_out"]) as env:
        first = env.reset(seed=21, episode_id="lights-episode", size=5).observation
        assert first["lights_on"] > 0 and first["board_text"].count("O") == first["lights_on"]
        lights, total, steps, result = first["lights_on"], 0.0, 0, None
        for row, col in lights_out_solution(first["board"]):
            result = env.step({"row": row, "col": col})
            steps += 1
            now = result.observation["lights_on"]
            assert result.reward == pytest.approx(1.0 if now == 0 else (lights - now) / 25)
            before_last, lights, total = lights, now, total + (result.reward or 0.0)
            if result.done:
                break
        assert result is not None and result.done and lights == 0
        assert total == pytest.approx((first["lights_on"] - before_last) / 25 + 1.0)
        state = env.state()
        assert (state["episode_id"], state["step_count"], state["solved"]) == ("lights-episode", steps, True)
        assert "reset()" in env.step({"row": 0, "col": 0}).observation["error"]


def test_lights_out_errors_budget_and_seed(servers: dict[str, str]) -> None:
    with connect(servers["lights_out"]) as env:
        board = env.reset(seed=3, size=3, max_steps=2).observation["board"]
        assert env.reset(seed=3, size=3, max_steps=2).observation["board"] == board
        off_board = env.step({"row": 3, "col": 0})
        assert "off the board" in off_board.observation["error"]
        assert (off_board.reward, off_board.done, off_board.observation["board"]) == (0.0, False, board)
        for action in ({"row": -1, "col": 0}, {"row": "a", "col": 0}, {"row": 0}):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                env.step(action)
        last = env.step({"row": 1, "col": 1})
        assert last.done and env.state()["step_count"] == 2


@pytest.mark.parametrize(
    ("template", "options", "action"),
    [
        ("maze", {"size": 4}, {"direction": "down"}),
        ("arithmetic_tasks", {"split": "train", "index": 1}, {"answer": "0"}),
        ("lights_out", {"size": 4}, {"row": 0, "col": 0}),
    ],
)
def test_concurrent_sessions_stay_isolated(servers: dict[str, str], template: str, options: Json, action: Json) -> None:
    with connect(servers[template]) as one, connect(servers[template]) as two:
        first = one.reset(seed=1, episode_id="one", **options).observation
        two.reset(seed=2, episode_id="two", **options)
        one.step(action)
        one.step(action)
        assert (two.state()["episode_id"], two.state()["step_count"]) == ("two", 0)
        assert (one.state()["episode_id"], one.state()["step_count"]) == ("one", 2)
        assert two.reset(seed=1, episode_id="one-again", **options).observation == first


@pytest.mark.parametrize("template", TEMPLATES)
def test_http_surface(servers: dict[str, str], template: str) -> None:
    with httpx.Client(base_url=servers[template]) as http:
        schema = http.get("/schema").json()
        fields = {name: spec for name, spec in schema["action"]["properties"].items() if name != "metadata"}
        assert fields and all(spec.get("description") for spec in fields.values())
        assert {"episode_id", "step_count", "seed"} <= set(schema["state"]["properties"])
        assert http.get("/metadata").json()["name"] == template
        bad = http.post("/reset", json={"seed": 1, "no_such_option": True})
        assert (bad.status_code, bad.json()["code"]) == (422, "reset_option_unknown")
