"""The fake Hub answers as the Hub does, so that it cannot drift into a Hub of envhub's own: each answer envhub
reads (Space and dataset listings with the fields it expands, a Space's and a dataset's info, a repo's file tree,
a Space's runtime, whoami) is held against the Hub's answer to the same call in tests/hub_answers/. The fake may
leave out what the Hub sends, never send what it does not, nor a value of another type; and both answers, parsed
by the huggingface_hub classes envhub reads them with, give attributes of the same types.

The Hub's answers there are written from the shapes shared/reference/hub-gradio-facts.md records (§1.2 for
SpaceInfo's keys, §1.3 for DatasetInfo's, §1.4 for a runtime, §2.2 for each route's answer), with values as the
Hub gives them; huggingface_hub's own tests record no Hub answers to reuse (its cassettes are the Inference API's).
tests/hub_answers/README.md says, file by file, which request each answers and what it was written from.
"""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from huggingface_hub import DatasetInfo, RepoFile, RepoFolder, SpaceInfo, SpaceRuntime

from catalog.hub import _DATASET_EXPAND, _SPACE_EXPAND
from tests.conftest import space_files
from tests.fakehub import FakeHub

ANSWERS = Path(__file__).parent / "hub_answers"
FREE_FORM = {"cardData"}  # a repo's README front matter: whatever its author wrote
TOKEN = {"authorization": "Bearer hf_test"}  # alice's, on the fake Hub


def recorded(name: str) -> Any:
    return json.loads((ANSWERS / name).read_text())


def kind(value: object) -> str:
    """A JSON value's type as JSON has it (numbers are one type, as the Hub writes 0 or 0.0 alike)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def merged(items: list[Any]) -> Any:
    """The items of a list as one: a key's first non-null value among the items that have it."""
    if not items or not all(isinstance(item, dict) for item in items):
        return items[0] if items else None
    out: dict[str, Any] = {}
    for item in items:
        for key, value in item.items():
            if out.get(key) is None:
                out[key] = value
    return out


def drift(fake: Any, hub: Any, where: str = "") -> list[str]:
    """Where the fake's answer is not one the Hub could give: a key the Hub never sends, a value of another type."""
    if fake is None or hub is None:
        return []  # either may be null
    if kind(fake) != kind(hub):
        return [f"{where or 'the answer'} is a {kind(fake)} in the fake, a {kind(hub)} on the Hub"]
    if isinstance(fake, list):
        return [problem for item in fake for problem in drift(item, merged(hub), f"{where}[]")]
    if isinstance(fake, dict):
        problems = [f"{where}.{key} is the fake's own" for key in fake if key not in hub]
        for key in fake.keys() & hub.keys():
            if key not in FREE_FORM:
                problems += drift(fake[key], hub[key], f"{where}.{key}")
        return problems
    return []


def parsed_types(obj: object) -> dict[str, str]:
    return {name: type(value).__name__ for name, value in vars(obj).items() if value is not None}


@pytest.fixture(scope="module")
def fake() -> Any:
    with FakeHub() as hub:
        hub.add_space("openenv/echo_env", files=space_files("Echo Env") | {"Dockerfile": "FROM python:3.11\n"})
        hub.add_dataset(
            "openenv/arith-tasks",
            description="Arithmetic tasks for an OpenEnv environment.",
            files={"README.md": "---\ntags: [openenv]\n---\n# Arith\n", "data/train-00000-of-00001.parquet": b"PAR1"},
        )
        yield hub


def answer(hub: FakeHub, path: str, params: Any = None) -> Any:
    response = httpx.get(f"{hub.url}{path}", params=params, headers=TOKEN)
    assert response.status_code == 200, response.text
    return response.json()


def spaces_expanded() -> list[tuple[str, str]]:
    return [("filter", "openenv"), *(("expand", field) for field in _SPACE_EXPAND)]


def datasets_expanded() -> list[tuple[str, str]]:
    return [("filter", "openenv"), *(("expand", field) for field in _DATASET_EXPAND)]


def made(cls: Any, data: Any) -> object:
    """What huggingface_hub makes of one answer (its classes take the answer's JSON as keywords)."""
    return cls(**data)


CALLS: dict[str, tuple[str, Callable[[], list[tuple[str, str]]] | None, Callable[[Any], object]]] = {
    # fixture file: (the route envhub's client calls, its query, the huggingface_hub class that parses one answer)
    "space_info.json": ("/api/spaces/openenv/echo_env", None, lambda data: made(SpaceInfo, data)),
    "spaces_list.json": ("/api/spaces", spaces_expanded, lambda data: made(SpaceInfo, data[0])),
    "dataset_info.json": ("/api/datasets/openenv/arith-tasks", None, lambda data: made(DatasetInfo, data)),
    "datasets_list.json": ("/api/datasets", datasets_expanded, lambda data: made(DatasetInfo, data[0])),
    "tree.json": (
        "/api/datasets/openenv/arith-tasks/tree/main",
        lambda: [("recursive", "true")],
        lambda data: [made(RepoFile if i["type"] == "file" else RepoFolder, i) for i in data],
    ),
    "runtime.json": ("/api/spaces/openenv/echo_env/runtime", None, SpaceRuntime),
    "whoami.json": ("/api/whoami-v2", None, lambda data: data),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_fake_hub_answers_nothing_the_hub_would_not(fake: FakeHub, name: str) -> None:
    path, query, _ = CALLS[name]
    fakes = answer(fake, path, query() if query else None)

    assert drift(fakes, recorded(name)) == []


@pytest.mark.parametrize("name", sorted(CALLS))
def test_both_answers_parse_to_attributes_of_the_same_types(fake: FakeHub, name: str) -> None:
    path, query, parse = CALLS[name]
    ours: Any = parse(answer(fake, path, query() if query else None))
    theirs: Any = parse(recorded(name))

    pairs = list(zip(ours, theirs, strict=False)) if isinstance(ours, list) else [(ours, theirs)]
    for one, other in pairs:
        if isinstance(one, dict):
            continue  # whoami is read as a dict: its keys and types are held above
        mine, hubs = parsed_types(one), parsed_types(other)
        assert {k: t for k, t in mine.items() if k in hubs and t != hubs[k]} == {}, (mine, hubs)


@pytest.mark.parametrize(
    ("name", "expanded"), [("spaces_list.json", _SPACE_EXPAND), ("datasets_list.json", _DATASET_EXPAND)]
)
def test_a_listing_carries_every_field_envhub_expands(fake: FakeHub, name: str, expanded: list[str]) -> None:
    path, query, _ = CALLS[name]
    assert query is not None
    [item] = [i for i in answer(fake, path, query()) if i["id"].startswith("openenv/")]
    hub_item = recorded(name)[0]

    assert set(expanded) <= set(hub_item), "the Hub's answer holds each field asked for"
    assert {field for field in expanded if field not in item} == set()


def test_a_drifted_answer_is_caught() -> None:
    hub = recorded("space_info.json")
    invented = {**hub, "url": "https://openenv-echo-env.hf.space"}  # SpaceInfo has no url: the Hub sends none
    retyped = {**hub, "runtime": {**hub["runtime"], "gcTimeout": "48h"}}

    assert drift(invented, hub) == [".url is the fake's own"]
    assert drift(retyped, hub) == [".runtime.gcTimeout is a str in the fake, a number on the Hub"]
