"""Bad cards are data: every broken README or manifest is stored safely with a problem note."""

from collections.abc import Mapping

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from app.made_from_settings import hub_from_settings
from app.settings import Settings
from catalog.cards import README_LIMIT, Manifest, card_fields, declared_variables, parse_manifest, parse_readme
from catalog.models import Environment, SyncStatus
from catalog.search import EnvironmentQuery, search_environments
from catalog.sync import Syncer
from tests.conftest import readme, space_files
from tests.fakehub import FakeHub

MANIFEST = "spec_version: 1\nname: env\napp: server.app:app\nport: 8000\n"


def sync_one(hub: FakeHub, settings: Settings, engine: Engine, files: Mapping[str, str | bytes]) -> Environment:
    hub.add_space("someone/env", files=files)
    run = Syncer(engine, hub_from_settings(settings)).run()
    assert run.status == SyncStatus.OK, run.error
    assert run.failed == 0
    with Session(engine) as session:
        env = session.get(Environment, "someone/env")
        assert env is not None
        return env


def problems_text(env: Environment) -> str:
    return "\n".join(env.problems)


def test_good_card_has_no_problems(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    env = sync_one(hub, settings, engine, space_files("Fine"))
    assert env.problems == []


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"README.md": "# Just a heading\n\nNo card here.\n"}, "has no front matter"),
        ({"README.md": "---\ntitle: Never closed\n\n# Body\n"}, "never closes"),
        ({"README.md": "---\ntitle: [unclosed\n---\nbody\n"}, "README.md front matter is not valid YAML at line"),
        ({"README.md": "---\n- a\n- list\n---\nbody\n"}, "should be a mapping"),
        ({"README.md": "---\ntitle: x\n\tbad: tab\n---\n"}, "not valid YAML"),
        ({}, "README.md is missing"),
    ],
    ids=["no-front-matter", "unclosed", "invalid-yaml", "not-a-mapping", "tab-indent", "missing"],
)
def test_malformed_front_matter(
    hub: FakeHub, settings: Settings, engine: Engine, files: dict[str, str], problem: str
) -> None:
    env = sync_one(hub, settings, engine, {**files, "openenv.yaml": MANIFEST})
    assert problem in problems_text(env)
    assert env.card == {}
    assert env.title == "env"  # the manifest's name stands in for the missing card title


def test_wrong_types_are_ignored_field_by_field(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    card = "title: {nested: map}\nemoji: [1, 2]\napp_port: eighty\nbase_path: web\ntags: 5\nlicense: 42\n"
    env = sync_one(hub, settings, engine, {"README.md": readme(card)})
    text = problems_text(env)
    assert "card field title should be text, not dict" in text
    assert "card field emoji should be text, not list" in text
    assert "app_port should be a port number, got 'eighty'" in text
    assert "base_path should start with /" in text
    assert "card field tags should be a list of text, not int" in text
    assert (env.title, env.emoji, env.app_port, env.base_path) == ("env", None, None, None)
    assert env.license == "42"


def test_huge_readme_is_stored_truncated(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    body = ("All work and no play makes a dull environment. " * 20 + "\n\n") * 11_200
    huge = readme("title: Huge", body)
    assert len(huge.encode()) > 10 * 1024 * 1024

    env = sync_one(hub, settings, engine, {"README.md": huge})

    assert env.title == "Huge"
    assert len(env.readme.encode()) <= README_LIMIT
    assert "larger than 512 KiB; stored cut" in problems_text(env)


def test_non_utf8_bytes_are_replaced(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    raw = b"---\ntitle: Caf\xe9 \xff\n---\nBody with \x00 a NUL and \xc3\x28 bad bytes.\n"

    env = sync_one(hub, settings, engine, {"README.md": raw})

    assert "not valid UTF-8" in problems_text(env)
    assert env.title == "Caf\ufffd \ufffd"
    assert "\x00" not in env.readme
    assert "\ufffd" in env.readme


def test_html_and_script_in_fields_are_stored_as_plain_text(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    card = (
        'title: "<script>alert(1)</script><b>Chess</b>"\n'
        "short_description: '<img src=x onerror=alert(1)>Play chess'\n"
        'tags: [openenv, "<i>board</i>"]\n'
    )
    body = '# Chess\n<script>steal()</script>\n<a href="javascript:alert(1)">x</a> <img src=x onerror="alert(2)">\n'

    env = sync_one(hub, settings, engine, {"README.md": readme(card, body)})

    assert env.title == "Chess"
    assert env.description == "Play chess"
    assert env.card["tags"] == ["openenv", "<i>board</i>"]  # the raw card is kept as data
    text = problems_text(env)
    assert "card field title contained HTML markup" in text
    assert "card field short_description contained HTML markup" in text
    assert "executable HTML (<script>, javascript: URL, onerror= handler)" in text
    with Session(engine) as session:
        found, _ = search_environments(session, EnvironmentQuery(q="chess"))
    assert [e.title for e in found] == ["Chess"]


def test_yaml_alias_bomb_is_refused(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(12)]
    env = sync_one(hub, settings, engine, {"README.md": readme("\n".join(lines))})
    assert "more than 5000 values" in problems_text(env)
    assert env.card == {}


def test_bad_manifest_is_a_problem_not_a_crash(hub: FakeHub, settings: Settings, engine: Engine) -> None:
    files = {"README.md": readme("title: Env"), "openenv.yaml": "name: [\n"}
    env = sync_one(hub, settings, engine, files)
    assert "openenv.yaml is not valid YAML" in problems_text(env)
    assert env.manifest is None


def test_manifest_checks() -> None:
    manifest = parse_manifest(b"spec_version: 1\napp: server_app\nport: 99999\n")
    assert manifest.data is not None
    assert manifest.problems == [
        "openenv.yaml has no name",
        "openenv.yaml app should look like module.path:attribute, got 'server_app'",
        "openenv.yaml port should be a number from 1 to 65535, got 99999",
    ]
    assert parse_manifest(None).data is None


def test_front_matter_dates_and_odd_values_become_json() -> None:
    parsed = parse_readme(b"---\ntitle: T\ncreated: 2026-01-02\nweird: !!binary aGk=\n---\nbody")
    assert parsed.front_matter == {"title": "T", "created": "2026-01-02", "weird": "hi"}


def test_description_falls_back_to_the_first_paragraph() -> None:
    body = "# Title\n\n![badge](x.png)\n\nA maze where the agent\nlooks for the exit.\n\nMore text.\n"
    fields = card_fields(parse_readme(readme("title: Maze", body).encode()), Manifest(None))
    assert fields.description == "A maze where the agent looks for the exit."


def test_an_environment_declares_the_variables_its_server_reads(
    hub: FakeHub, settings: Settings, engine: Engine
) -> None:
    card = "title: Env\nsdk: docker\ntags: [openenv]\nvariables:\n  MODEL_NAME: the model to ask\n  HF_TOKEN: its key\n"
    manifest = MANIFEST + "variables: [OPENENV_LABEL, {name: SEED}, 'not a name', 7, HF_TOKEN]\n"
    env = sync_one(hub, settings, engine, {"README.md": readme(card), "openenv.yaml": manifest})

    # The manifest's list first, then the card's mapping; what is not a variable's name is left out.
    assert declared_variables(env.card, env.manifest) == ["OPENENV_LABEL", "SEED", "HF_TOKEN", "MODEL_NAME"]
