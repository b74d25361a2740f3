"""Every built-in template held to one session per server (MAX_CONCURRENT_ENVS=1, what openenv's default holds the
official environments to): envhub's protocol check passes core and its quality suite runs every check, each giving
its slot back (the pool is at 0 sessions within 2 s, and a new session's reset is answered at once); openenv's own
CLI validates each URL."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.corpus import back_to_zero, check, corpus_envhub, failing_core, launch_all, openenv_validate
from tests.serving import TEMPLATES, Envhub

NAMES = tuple(sorted(p.name for p in TEMPLATES.iterdir() if (p / "openenv.yaml").is_file()))

pytestmark = [pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    server = corpus_envhub(tmp_path_factory.mktemp("one-slot"), corpus=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def templates(envhub: Envhub) -> dict[str, dict[str, Any]]:
    return launch_all(envhub, NAMES, options={"env": {"MAX_CONCURRENT_ENVS": "1"}})


@pytest.mark.parametrize("name", NAMES)
def test_the_protocol_check_passes_core_and_gives_the_slot_back(
    envhub: Envhub, templates: dict[str, dict[str, Any]], name: str
) -> None:
    report = check(envhub, templates[name]["id"], "protocol")
    assert report["conforms"], failing_core(report)
    back_to_zero(envhub, templates[name]["id"])


# The quality suite on a board game and on a tool environment; the other templates in `make test-all`.
@pytest.mark.parametrize(
    "name", [n if n in ("maze", "toolbox") else pytest.param(n, marks=pytest.mark.slow) for n in NAMES]
)
def test_the_quality_suite_runs_every_check_and_gives_the_slot_back(
    envhub: Envhub, templates: dict[str, dict[str, Any]], name: str
) -> None:
    report = check(envhub, templates[name]["id"], "quality")
    not_run = {r["check_id"]: r["evidence"] for r in report["report"]["results"] if r["status"] == "error"}
    assert not not_run, not_run
    back_to_zero(envhub, templates[name]["id"])


@pytest.mark.parametrize("name", NAMES)
def test_openenv_validate_passes(templates: dict[str, dict[str, Any]], name: str) -> None:
    code, report = openenv_validate(templates[name]["url"])
    assert code == 0 and report["passed"], [c for c in report["criteria"] if not c["passed"]]
