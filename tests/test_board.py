"""The board for hackathons: Spaces submitted at a revision go through the queue (download, the validator, launch,
the hub lane, the statistical lane) to a verdict or a failure with its own code, one revision once, nothing held up
or lost, and the board ranks them by what the statistical lane measured."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, eventually, settings_for
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, Reply
from tests.serving import Envhub
from tests.signin import oauth_settings
from tests.test_process_hub import count_space

USERS = {f"hf_{name}": name for name in ("alice", "bob", "carol", "dave", "erin", "frank")}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MAX_BYTES = 1_000_000
FINISHED = ("done", "failed")


def as_user(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer hf_{name}"}


def crashing() -> dict[str, str]:
    """The count environment, whose server exits as it starts."""
    files = count_space("package")
    files["server/app.py"] = 'raise SystemExit("this server gives up at start")\n' + files["server/app.py"]
    return files


def hanging() -> dict[str, str]:
    """The count environment, whose server never gets as far as listening."""
    files = count_space("package")
    files["server/app.py"] = "import time\ntime.sleep(3600)\n" + files["server/app.py"]
    return files


def huge() -> dict[str, str]:
    """The count environment with a file past the size the board downloads."""
    return count_space("package") | {"weights.txt": "0" * (MAX_BYTES + 1)}


@pytest.fixture(scope="module")
def board_hub() -> Iterator[FakeHub]:
    with FakeHub(users=USERS) as hub:
        yield hub


def board_settings(hub: FakeHub, folder: Path) -> Settings:
    """Sign-in on, one submission at a time, two per user, short stages."""
    templates = folder / "templates"
    templates.mkdir(exist_ok=True)
    base = settings_for(f"sqlite:///{folder / 'envhub.db'}", hub, templates)
    return oauth_settings(
        base,
        data_dir=folder / "data",
        board_per_user=2,
        board_max_space_bytes=MAX_BYTES,
        board_launch_timeout_s=30,  # a hanging Space holds the queue this long; the good ones start in seconds
        board_checks_timeout_s=120,
        launch_timeout_s=120,  # past the launch stage's: a server that never answers runs out the stage first
        max_endpoints_per_owner=10,
        # The statistical lane at its smallest: one task a player, two samples of it for the reference model.
        statistical_episodes=1,
        statistical_k=2,
        statistical_group_size=2,
        statistical_replays=1,
        statistical_max_steps=3,
    )


@pytest.fixture(scope="module")
def envhub(board_hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    """The board's envhub, whose admin set a reference model for the statistical lane: it adds 10, and wins."""
    model = FakeModel(lambda body: Reply(text='{"add": 10}'))
    settings = board_settings(board_hub, tmp_path_factory.mktemp("board"))
    reference = {"statistical_reference_preset": "reference", "allow_private_urls": True}  # the model is on loopback
    server = Envhub(settings.model_copy(update=reference))
    saved = server.http.put("/api/models/reference", json={"base_url": model.url, "model": "m"}, headers=ADMIN)
    assert saved.status_code in (200, 201), saved.text
    yield server
    server.stop()
    model.close()


def add_spaces(hub: FakeHub, envhub: Envhub, spaces: dict[str, dict[str, str]]) -> dict[str, str]:
    """The Spaces on the fake Hub and in envhub's catalog; their shas."""
    for space_id, files in spaces.items():
        hub.add_space(space_id, files=files)
    return synced_shas(envhub, list(spaces))


def synced_shas(envhub: Envhub, spaces: list[str]) -> dict[str, str]:
    synced = envhub.http.post("/api/sync?wait=true", headers=ADMIN)
    assert synced.json()["status"] == "ok", synced.text
    return {space_id: envhub.http.get(f"/api/environments/{space_id}").json()["sha"] for space_id in spaces}


def submit(envhub: Envhub, user: str, space: str, revision: str | None = None, status: int = 201) -> dict[str, Any]:
    body = {"space": space} | ({"revision": revision} if revision else {})
    response = envhub.http.post("/api/submissions", json=body, headers=as_user(user))
    assert response.status_code == status, response.text
    submission: dict[str, Any] = response.json()
    return submission


def submission(envhub: Envhub, submission_id: int) -> dict[str, Any]:
    body: dict[str, Any] = envhub.http.get(f"/api/submissions/{submission_id}").json()
    return body


def finished(envhub: Envhub, submission_id: int, timeout_s: float = 180) -> dict[str, Any]:
    return eventually(lambda: submission(envhub, submission_id), lambda s: s["status"] in FINISHED, timeout_s)


def test_a_good_space_goes_from_the_queue_to_a_verdict_with_its_reports(board_hub: FakeHub, envhub: Envhub) -> None:
    sha = add_spaces(board_hub, envhub, {"alice/count": count_space("package")})["alice/count"]

    queued = submit(envhub, "alice", "alice/count", sha[:7])
    assert (queued["status"], queued["revision"], queued["submitter"]) == ("queued", sha, "alice")
    done = finished(envhub, queued["id"])

    assert done["status"] == "done", done["message"]
    assert done["verdict"] in ("pass", "warn", "fail") and done["code"] is None
    protocol, quality = done["reports"]["hub_lane"]
    assert envhub.http.get(f"/api/checks/{protocol}").json()["suite"] == "protocol"
    assert envhub.http.get(f"/api/checks/{quality}").json()["revision"] == sha
    # The endpoint it ran on is envhub's own, and stopped.
    ran = [
        e for e in envhub.http.get("/api/endpoints", headers=ADMIN).json()["data"] if e["environment"] == "alice/count"
    ]
    assert [(e["owner"], e["revision"], e["status"]) for e in ran] == [(None, sha, "stopped")]
    # On the board, and on its catalog entry; not among those that teach: the reference model always wins.
    row = next(r for r in envhub.http.get("/api/board").json()["data"] if r["space"] == "alice/count")
    assert (row["submission"], row["verdict"], row["training_signal"]) == (done["id"], done["verdict"], 0)
    entry = envhub.http.get("/api/environments/alice/count").json()
    assert (entry["board"]["submission"], entry["board"]["verdict"]) == (done["id"], done["verdict"])
    teaching = envhub.http.get("/api/environments", params={"teaches": "true"}).json()
    assert "alice/count" not in [e["id"] for e in teaching["data"]]


def test_a_submission_gets_its_statistical_report_and_the_figures_the_board_ranks_by(
    board_hub: FakeHub, envhub: Envhub
) -> None:
    files = count_space("package")
    files["openenv.yaml"] += "validation:\n  reward:\n    range: [0, 1]\n"
    sha = add_spaces(board_hub, envhub, {"carol/declared": files})["carol/declared"]

    done = finished(envhub, submit(envhub, "carol", "carol/declared")["id"])

    assert done["status"] == "done", done["message"]
    [report_id] = done["reports"]["statistical"]
    filed = envhub.http.get(f"/api/statistics/{report_id}").json()
    assert (filed["environment"], filed["revision"], filed["report"]["status"]) == ("carol/declared", sha, "finished")
    assert filed["report"]["statistics"]["settings"]["presets"] == ["reference"]
    measured = {r["check_id"]: r["measured"] for r in filed["report"]["results"]}
    figures = {name: done[name] for name in ("training_signal", "headroom", "gameability_gap")}
    assert figures == {
        "training_signal": measured["statistical.training_signal"]["share_of_groups"],
        "headroom": measured["statistical.headroom"]["headroom"],
        "gameability_gap": measured["statistical.gameability_gap"]["gap"],
    }
    assert (figures["training_signal"], figures["headroom"]) == (0, 0)  # the reference model always reaches 10
    # Its verdict counts: the submission's is the worst of its stages'.
    assert filed["verdict"] in ("pass", "warn", "fail")
    assert done["verdict"] == "fail" or filed["verdict"] != "fail"
    row = next(r for r in envhub.http.get("/api/board").json()["data"] if r["space"] == "carol/declared")
    assert (row["training_signal"], row["headroom"], row["gameability_gap"]) == tuple(figures.values())


def test_a_revision_is_submitted_once_and_a_new_commit_is_a_new_submission(board_hub: FakeHub, envhub: Envhub) -> None:
    first = add_spaces(board_hub, envhub, {"bob/count": count_space("package")})["bob/count"]
    made = submit(envhub, "bob", "bob/count", first)

    again = submit(envhub, "carol", "bob/count", first, status=200)
    assert (again["id"], again["submitter"]) == (made["id"], "bob")

    board_hub.update_space("bob/count", files=count_space("package", version="v2"))
    second = synced_shas(envhub, ["bob/count"])["bob/count"]
    newer = submit(envhub, "bob", "bob/count", second)
    assert newer["id"] != made["id"] and newer["revision"] == second
    assert finished(envhub, made["id"])["status"] == "done"
    assert finished(envhub, newer["id"])["status"] == "done"
    # The board holds the Space once: its newest finished revision.
    rows = [r for r in envhub.http.get("/api/board").json()["data"] if r["space"] == "bob/count"]
    assert [r["revision"] for r in rows] == [second]


def test_crashing_hanging_and_huge_spaces_fail_with_their_codes_and_hold_up_nothing(
    board_hub: FakeHub, envhub: Envhub
) -> None:
    spaces = {
        "dave/hangs": hanging(),
        "dave/crashes": crashing(),
        "erin/huge": huge(),
        "erin/count": count_space("package"),
    }
    shas = add_spaces(board_hub, envhub, spaces)
    ids = {space: submit(envhub, space.split("/")[0], space)["id"] for space in spaces}

    ends = {space: finished(envhub, submission_id) for space, submission_id in ids.items()}

    codes = {space: (end["status"], end["stage"], end["code"]) for space, end in ends.items()}
    assert codes == {
        "dave/hangs": ("failed", "launch", "stage_timeout"),
        "dave/crashes": ("failed", "launch", "launch_failed"),
        "erin/huge": ("failed", "download", "space_too_large"),
        "erin/count": ("done", None, None),
    }
    # Nothing of the huge one was downloaded; no endpoint of theirs runs on.
    assert not (envhub.settings.data_dir / "runtime" / "spaces" / "erin" / "huge" / shas["erin/huge"]).exists()
    endpoints = envhub.http.get("/api/endpoints", headers=ADMIN).json()["data"]
    assert not [e for e in endpoints if e["environment"] in spaces and e["status"] in ("starting", "running")]


def test_the_per_user_limit_and_sign_in_refuse_with_their_codes(board_hub: FakeHub, envhub: Envhub) -> None:
    spaces = {f"frank/huge-{n}": huge() for n in range(3)}
    add_spaces(board_hub, envhub, spaces)

    anonymous = envhub.http.post("/api/submissions", json={"space": "frank/huge-0"})
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "sign_in_required")
    # A hanging Space holds the queue, so that frank's two wait behind it.
    add_spaces(board_hub, envhub, {"alice/hangs": hanging()})
    holding = submit(envhub, "alice", "alice/hangs")
    waiting = [submit(envhub, "frank", space)["id"] for space in list(spaces)[:2]]
    refused = envhub.http.post("/api/submissions", json={"space": "frank/huge-2"}, headers=as_user("frank"))
    assert (refused.status_code, refused.json()["code"]) == (429, "submissions_limit")

    assert finished(envhub, holding["id"])["code"] == "stage_timeout"
    assert [finished(envhub, n)["code"] for n in waiting] == ["space_too_large"] * 2
    assert submit(envhub, "frank", "frank/huge-2")["status"] == "queued"  # room again once they ended


def test_an_envhub_restarted_mid_queue_finishes_what_was_queued(board_hub: FakeHub, tmp_path: Path) -> None:
    settings = board_settings(board_hub, tmp_path)
    first = Envhub(settings)
    try:
        add_spaces(board_hub, first, {"bob/again": count_space("package"), "carol/count": count_space("package")})
        running = submit(first, "bob", "bob/again")
        queued = submit(first, "carol", "carol/count")
        eventually(lambda: submission(first, running["id"]), lambda s: s["status"] == "running")
    finally:
        first.stop()

    second = Envhub(settings)
    try:
        assert finished(second, running["id"])["status"] == "done"
        assert finished(second, queued["id"])["status"] == "done"
        endpoints = second.http.get("/api/endpoints", headers=ADMIN).json()["data"]
        assert not [e for e in endpoints if e["status"] in ("starting", "running")]
    finally:
        second.end_endpoints()
        second.stop()
