"""Launching endpoints with the process backend and using them through the gateway, as a trainer does."""

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.settings import Preload, Settings
from tests.conftest import wait_until
from tests.environments import LAYOUTS, write_count_env
from tests.serving import Envhub, serve_templates
from tests.test_cli import cli_env
from tests.test_serve import Server


def test_template_plays_through_the_gateway_with_openenv_client(envhub: Envhub, count_template: str) -> None:
    launched = envhub.launch(count_template)
    assert launched["status"] == "starting"
    assert launched["url"] == f"{envhub.url}/endpoints/{launched['id']}"

    endpoint = envhub.wait_status(launched["id"], "running", "failed")

    assert endpoint["status"] == "running", endpoint["message"]
    with GenericEnvClient(base_url=endpoint["url"]).sync() as client:
        first = client.reset(episode_id="ep-1")
        assert first.observation["total"] == 0
        assert client.step({"add": 4}).done is False
        result = client.step({"add": 6})
        assert (result.done, result.reward, result.observation["total"]) == (True, 1.0, 10)
        assert client.state() == {"episode_id": "ep-1", "step_count": 2}
    wait_until(lambda: envhub.endpoint(endpoint["id"])["stats"]["active_sessions"] == 0)
    stats = envhub.endpoint(endpoint["id"])["stats"]
    assert (stats["sessions"], stats["steps"]) == (1, 2)
    assert stats["step_p50_ms"] is not None


def test_raw_websocket_frames_and_errors_pass_through(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    ws_url = endpoint["url"].replace("http://", "ws://") + "/ws"
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"episode_id": "raw"}}))
        assert json.loads(ws.recv())["type"] == "observation"
        ws.send(json.dumps({"type": "step", "data": {"add": 99}}))
        error = json.loads(ws.recv())
        assert (error["type"], error["data"]["code"]) == ("error", "VALIDATION_ERROR")
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv())["data"]["episode_id"] == "raw"
        ws.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1000


def test_concurrent_sessions_stay_isolated(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    with (
        GenericEnvClient(base_url=endpoint["url"]).sync() as one,
        GenericEnvClient(base_url=endpoint["url"]).sync() as two,
    ):
        one.reset(episode_id="one")
        two.reset(episode_id="two")
        one.step({"add": 5})
        assert two.step({"add": 1}).observation["total"] == 1
        assert one.step({"add": 1}).observation["total"] == 6
        assert two.state()["episode_id"] == "two"


def test_http_routes_pass_through(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    base = f"/endpoints/{endpoint['id']}"
    assert envhub.http.get(f"{base}/health").json() == {"status": "healthy"}
    schema = envhub.http.get(f"{base}/schema").json()
    assert schema["action"]["properties"]["add"]["maximum"] == 10
    reset = envhub.http.post(f"{base}/reset", json={"seed": 1}).json()
    assert reset["observation"]["total"] == 0
    step = envhub.http.post(f"{base}/step", json={"action": {"add": 11}})
    assert step.status_code == 422
    assert envhub.http.get(f"{base}/splits-that-do-not-exist").status_code == 404


def test_the_web_interface_links_back_through_the_gateway(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template, options={"env": {"ENABLE_WEB_INTERFACE": "true"}})
    base = f"/endpoints/{endpoint['id']}"
    public = {"Host": "envhub.example:8443", "X-Forwarded-Proto": "https"}  # as behind a TLS proxy

    redirect = envhub.http.get(f"{base}/web", headers=public)
    config = envhub.http.get(f"{base}/web/config", headers=public).json()

    assert redirect.headers["location"] == f"{base}/web/"
    # The page's own requests (gradio's API, its queue) go to the gateway, not the server's loopback port.
    assert config["root"] == f"https://envhub.example:8443{base}/web"


def test_unknown_endpoint_is_a_404_json_and_a_ws_close(envhub: Envhub) -> None:
    response = envhub.http.get("/endpoints/nope/health")
    assert (response.status_code, response.json()["code"]) == (404, "endpoint_unknown")
    assert "'nope'" in response.json()["detail"]
    with connect(f"ws://127.0.0.1:{envhub.port}/endpoints/nope/ws") as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1008


def test_a_stopped_endpoints_url_says_it_is_gone_rather_than_failing(envhub: Envhub, count_template: str) -> None:
    """A URL pasted into a trainer, once its endpoint stopped: a 404 and a close that clients do not retry, not a
    502 or 1011 that they would retry for ever."""
    endpoint = envhub.running(count_template)
    assert envhub.http.delete(f"/api/endpoints/{endpoint['id']}").status_code == 200
    envhub.wait_status(endpoint["id"], "stopped")
    step = f"/endpoints/{endpoint['id']}/step"
    wait_until(lambda: envhub.http.get(step).status_code == 404, timeout_s=5)  # the gateway remembers it for 2 s
    for method in ("GET", "POST"):
        answer = envhub.http.request(method, f"/endpoints/{endpoint['id']}/step", json={"action": {}})
        assert (answer.status_code, answer.json()["code"]) == (404, "endpoint_stopped"), answer.text
    url = f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/ws"
    with connect(url) as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def _replaced(envhub: Envhub, endpoint_id: str, lost: str) -> dict[str, Any]:
    """The endpoint once a replica other than `lost` serves it and the replacement is on record."""

    def serving() -> bool:
        pool = envhub.endpoint(endpoint_id)["pool"]
        ready = any(r["id"] != lost and r["status"] == "ready" for r in pool["replicas"])
        return ready and any(e["kind"] == "replace" for e in pool["events"])

    wait_until(serving, timeout_s=20)
    return envhub.endpoint(endpoint_id)


def test_a_killed_server_ends_its_sessions_fast_and_is_replaced(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    client = GenericEnvClient(base_url=endpoint["url"], message_timeout_s=10).sync()
    client.connect()
    client.reset()
    started = time.monotonic()
    os.killpg(endpoint_pid(endpoint["id"]), signal.SIGKILL)

    with pytest.raises((ConnectionError, RuntimeError, ConnectionClosed, OSError)):
        client.step({"add": 1})

    assert time.monotonic() - started < 5
    client.close()
    row = _replaced(envhub, endpoint["id"], lost=endpoint["id"])
    assert row["status"] == "running"
    lost = next(r for r in row["pool"]["replicas"] if r["id"] == endpoint["id"])
    assert lost["status"] == "failed"
    assert "the server stopped unexpectedly: it was killed by signal 9 (SIGKILL)" in lost["last_error"]
    assert [e["kind"] for e in row["pool"]["events"]][:2] == ["replace", "lost"]  # newest first
    with GenericEnvClient(base_url=endpoint["url"], message_timeout_s=10).sync() as again:
        assert again.reset().observation["total"] == 0  # the same URL plays on the new replica


@pytest.mark.parametrize(
    "start",
    [{}, pytest.param({"PYTHONHASHSEED": "0"}, marks=pytest.mark.slow)],  # from scratch: one more interpreter
    ids=["forked from the zygote", "started from scratch"],
)
def test_a_server_that_dies_says_how_and_its_last_error(
    envhub: Envhub, count_template: str, start: dict[str, str]
) -> None:
    endpoint = envhub.running(count_template, options={"env": {"COUNT_CRASH_AT": "7", **start}})
    with GenericEnvClient(base_url=endpoint["url"], message_timeout_s=10).sync() as client:
        client.reset()
        with pytest.raises((ConnectionError, RuntimeError, ConnectionClosed, OSError)):
            client.step({"add": 7})

    _replaced(envhub, endpoint["id"], lost=endpoint["id"])
    wait_until(lambda: any(e["kind"] == "lost" for e in envhub.endpoint(endpoint["id"])["pool"]["events"]), 10)
    row = envhub.endpoint(endpoint["id"])

    # The exit code and the server's own last error are what a person needs to see: that wording is the feature.
    said = f"replica {endpoint['id']}: the server stopped unexpectedly: it exited with code 3; "
    said += "last error: RuntimeError: the counter overflowed"
    assert row["pool"]["replicas"][0]["last_error"] == said
    assert [(e["reason"], e["message"]) for e in row["pool"]["events"] if e["kind"] == "lost"] == [
        ("replica_died", said)
    ]
    assert (row["status"], row["reason"]) == ("running", "replacing_replica")
    assert said in row["message"]
    assert "RuntimeError: the counter overflowed" in row["log_tail"]  # the tail is kept beside it


def test_an_endpoint_whose_servers_keep_dying_fails(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    lost = endpoint["id"]
    for _ in range(2):
        os.killpg(endpoint_pid(lost), signal.SIGKILL)
        row = _replaced(envhub, endpoint["id"], lost=lost)
        lost = next(r["id"] for r in row["pool"]["replicas"] if r["status"] == "ready")
    os.killpg(endpoint_pid(lost), signal.SIGKILL)

    failed = envhub.wait_status(endpoint["id"], "failed", timeout_s=10)
    assert failed["reason"] == "replicas_keep_dying"
    assert [e["reason"] for e in failed["pool"]["events"] if e["kind"] == "lost"] == ["replica_died"] * 3
    assert "killed by signal 9 (SIGKILL)" in failed["message"]  # the last one's cause, as a person reads it
    down = envhub.http.get(f"/endpoints/{endpoint['id']}/health")
    assert (down.status_code, down.json()["code"]) == (404, "endpoint_stopped")  # for good: not a 502 to retry


def test_a_starting_endpoints_url_says_to_retry_rather_than_failing(
    settings: Settings, tmp_path: Path, templates_dir: Path
) -> None:
    """While its server starts (a launch, or envhub starting it again after a restart), an endpoint's URL answers
    503 endpoint_starting with Retry-After (a WebSocket closes with 1013, try again later), which clients retry, not
    a 502 that says something broke."""
    app = write_count_env(templates_dir / "gated") / "server" / "app.py"
    # The server, once started, waits at import until the test lets go of the connection it opens.
    gate = "import os, socket\nhost, port = os.environ['START_GATE'].rsplit(':', 1)\n"
    gate += "with socket.create_connection((host, int(port))) as held:\n    held.recv(1)\n"
    app.write_text(gate + app.read_text())
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            listener.settimeout(120)
            start_gate = f"127.0.0.1:{listener.getsockname()[1]}"
            endpoint = envhub.launch("template:gated", options={"env": {"START_GATE": start_gate}})
            held, _ = listener.accept()  # its server has started and is not ready
            with held:
                answer = envhub.http.post(f"/endpoints/{endpoint['id']}/reset", json={})
                assert (answer.status_code, answer.json()["code"]) == (503, "endpoint_starting")
                assert int(answer.headers["retry-after"]) > 0
                socket_url = f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/ws"
                with connect(socket_url) as ws, pytest.raises(ConnectionClosed):
                    ws.recv(timeout=30)
                assert ws.close_code == 1013  # try again later, as the 503 says
        assert envhub.wait_status(endpoint["id"], "running", "failed")["status"] == "running"
        assert envhub.http.post(f"/endpoints/{endpoint['id']}/reset", json={}).status_code == 200
    finally:
        envhub.stop()


def endpoint_pid(endpoint_id: str) -> int:
    """The server itself: the leader of its process group (what it starts inherits its marker)."""
    pids = [pid for pid in server_pids(endpoint_id) if os.getpgid(pid) == pid]
    assert len(pids) == 1, pids
    return pids[0]


def test_stop_and_the_log_tail(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    assert any("Uvicorn running" in line or "Application startup complete" in line for line in endpoint["log_tail"])
    pid = endpoint_pid(endpoint["id"])

    stopped = envhub.http.delete(f"/api/endpoints/{endpoint['id']}").json()

    assert stopped["status"] == "stopped"
    assert not _alive(pid)
    listed = envhub.http.get("/api/endpoints").json()
    assert [e["id"] for e in listed["data"]] == [endpoint["id"]]


@pytest.mark.parametrize(
    ("body", "code", "named"),
    [
        ({"environment": "nobody/nothing"}, "invalid_input", "'nobody/nothing'"),
        ({"environment": "template:count", "backend": "moon"}, "invalid_request", "backend"),
        (
            {"environment": "template:count", "options": {"gpus": 8}},
            "invalid_request",
            "['private', 'replicas', 'sandbox'], not ['gpus']",
        ),
        ({"environment": "template:count", "options": {"env": {"BAD NAME": "x"}}}, "invalid_request", "'BAD NAME'"),
        (
            {"environment": "template:count", "options": {"env": {"OPENENV_MODE": "x"}}},
            "invalid_request",
            "OPENENV_MODE",
        ),
        (
            {"environment": "template:count", "options": {"env": {"LD_PRELOAD": "/tmp/evil.so", "PATH": "/tmp"}}},
            "variables_refused",
            "LD_PRELOAD, PATH",
        ),
        (
            {"environment": "template:count", "options": {"secrets": {"PYTHONPATH": "/tmp", "PYTHONSTARTUP": "x"}}},
            "variables_refused",
            "PYTHONPATH, PYTHONSTARTUP",
        ),
    ],
)
def test_bad_launch_requests_are_422(envhub: Envhub, body: dict[str, Any], code: str, named: str) -> None:
    response = envhub.http.post("/api/endpoints", json=body)
    assert response.status_code == 422
    assert response.json()["code"] == code
    assert named in response.json()["detail"]  # what is refused is named


def test_server_that_crashes_at_import_fails_with_its_log(settings: Settings, tmp_path: Path) -> None:
    write_count_env(settings.templates_dir / "broken", crash=True)
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        launched = envhub.launch("template:broken")
        failed = envhub.wait_status(launched["id"], "failed", "running")
    finally:
        envhub.stop()
    assert (failed["status"], failed["reason"]) == ("failed", "server_exited_before_health")
    assert "this server is broken on purpose" in failed["message"]  # the server's own error, passed on
    assert any("RuntimeError: this server is broken on purpose" in line for line in failed["log_tail"])


def server_pids(endpoint_id: str) -> list[int]:
    """Processes serving the endpoint, as the process backend marks them.

    A server started from scratch has the endpoint in its environment; one forked from the
    zygote has the zygote's environment, and the endpoint in its process name.
    """
    marker = f"ENVHUB_ENDPOINT={endpoint_id}".encode()
    name = f"env-{endpoint_id}"[:15]
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (
                    marker in (entry / "environ").read_bytes().split(b"\0")
                    or (entry / "comm").read_text() == name + "\n"
                ):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return [pid for pid in pids if _alive(pid)]


def zygote_pids(work_dir: Path) -> list[int]:
    """The zygotes a process backend with this work folder started (not the servers they forked)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                comm = (entry / "comm").read_text()
            except OSError:
                continue
            ours = str(work_dir).encode() in argv and any(a.endswith(b"zygote.py") for a in argv)
            if ours and not comm.startswith("env-") and _alive(int(entry.name)):
                pids.append(int(entry.name))
    return pids


def _in_group(leader: int) -> list[int]:
    """The processes of the group `leader` leads (the server's: what it starts stays in it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == leader:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _ns_pid(pid: int) -> int:
    """The pid the process has in its own pid namespace (its last NSpid), as its server would print it."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[-1])


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def serve_env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    """The variables for `python -m app serve` on the test's templates and a data folder of its own."""
    return cli_env(tmp_path, settings.hf_endpoint) | {
        "ENVHUB_TEMPLATES_DIR": str(settings.templates_dir),
        "ENVHUB_DATA_DIR": str(tmp_path / "data"),
        "ENVHUB_SYNC_INTERVAL_S": "0",
        "ENVHUB_PROCESS_PRELOAD": "launch",  # a zygote at the first launch: a restarted envhub needs none
        "ENVHUB_UI": "false",  # these tests reach its API only
    }


def running_on(server: Server, environment: str, **body: Any) -> dict[str, Any]:
    """An endpoint launched through a served envhub, once it runs."""
    wait_until(server.healthy, timeout_s=30)
    launched = httpx.post(f"{server.url}/api/endpoints", json={"environment": environment, **body}).json()

    def endpoint() -> dict[str, Any]:
        found: dict[str, Any] = httpx.get(f"{server.url}/api/endpoints/{launched['id']}").json()
        return found

    wait_until(lambda: endpoint()["status"] == "running", timeout_s=30)
    return endpoint()


def running_on_again(server: Server, endpoint_id: str) -> dict[str, Any]:
    """An endpoint once a restarted envhub runs it again, with its whole pool ready."""

    def ready() -> bool:
        endpoint: dict[str, Any] = httpx.get(f"{server.url}/api/endpoints/{endpoint_id}").json()
        pool = endpoint["pool"]
        ready = sum(r["status"] == "ready" for r in pool["replicas"])
        return bool(endpoint["status"] == "running" and ready >= pool["min"])

    wait_until(ready, timeout_s=60)
    found: dict[str, Any] = httpx.get(f"{server.url}/api/endpoints/{endpoint_id}").json()
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finding processes by their environment needs /proc")
@pytest.mark.slow  # a long recovery scenario; leftovers of a crash removed at start: test_containers, test_instances
def test_restart_after_a_crash_stops_every_server_it_left_and_starts_the_pool_again(
    settings: Settings, tmp_path: Path, count_template: str
) -> None:
    env = serve_env(settings, tmp_path)
    crashed = Server(env)
    try:
        launched = running_on(crashed, count_template, options={"replicas": 2})
        wait_until(
            lambda: len(httpx.get(f"{crashed.url}/api/endpoints/{launched['id']}").json()["pool"]["replicas"]) == 2
        )
        first, second = launched["id"], f"{launched['id']}-2"
        wait_until(lambda: bool(server_pids(first)) and bool(server_pids(second)), timeout_s=30)
        left = server_pids(first) + server_pids(second)
        zygotes = zygote_pids(tmp_path / "data" / "runtime")
        assert zygotes == [parent_of(endpoint_pid(first))]  # the servers were forked, not started from scratch
    finally:
        crashed.process.kill()  # no shutdown: both servers are left running
        crashed.stop()
    wait_until(lambda: not any(_alive(pid) for pid in zygotes), timeout_s=10)  # EOF on its pipe ends it
    assert all(_alive(pid) for pid in left)

    restarted = Server(env)
    try:
        wait_until(restarted.healthy, timeout_s=30)
        wait_until(lambda: not any(_alive(pid) for pid in left), timeout_s=30)  # each group: SIGTERM, a grace, SIGKILL
        row = running_on_again(restarted, launched["id"])
    finally:
        restarted.stop()
    assert [r["status"] for r in row["pool"]["replicas"]] == ["stopped", "stopped", "ready", "ready"]


@pytest.mark.slow  # two envhubs of their own; the restart's cleanup is in the default run
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finding processes by their environment needs /proc")
def test_an_orphan_that_ignores_sigterm_is_killed_after_the_grace(
    settings: Settings, tmp_path: Path, count_template: str
) -> None:
    app = settings.templates_dir / "count" / "server" / "app.py"
    app.write_text(
        app.read_text() + "\nimport subprocess, sys\n"
        "helper = subprocess.Popen(['sh', '-c', \"trap '' TERM; while :; do sleep 0.1; done\"])\n"
        "print(f'helper process {helper.pid}', file=sys.stderr)\n"
    )
    env = serve_env(settings, tmp_path)
    crashed = Server(env)
    try:
        launched = running_on(crashed, count_template)
        server = endpoint_pid(launched["id"])
        tail = launched["log_tail"]
        [printed] = [int(line.split()[-1]) for line in tail if line.startswith("helper process ")]
        # A server in a view of its own prints its own processes' pids: the helper as the machine sees it.
        [helper] = [pid for pid in _in_group(server) if pid != server and _ns_pid(pid) == printed]
    finally:
        crashed.process.kill()  # no shutdown: the server and its helper are left running
        crashed.stop()
    assert _alive(server) and _alive(helper)

    restarted = Server(env)
    try:
        wait_until(restarted.healthy, timeout_s=30)
        wait_until(lambda: not _alive(server) and not _alive(helper), timeout_s=15)
    finally:
        restarted.stop()


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


@pytest.mark.slow  # pip; tests/test_venvs.py installs and reuses in the default run
def test_unmet_requirements_go_into_a_cached_virtualenv(settings: Settings, tmp_path: Path) -> None:
    # tabulate is not among envhub's requirements, so the process backend must install it.
    write_count_env(settings.templates_dir / "tabular", requirements="openenv==0.10.0\ntabulate==0.9.0\n")
    environment = settings.templates_dir / "tabular" / "server" / "environment.py"
    environment.write_text(environment.read_text() + "\nimport tabulate  # noqa: F401\n")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "launch_timeout_s": 120}))
    try:
        first = envhub.launch("template:tabular")
        wait_until(lambda: "installing 1 requirements (tabulate==0.9.0)" in envhub.endpoint(first["id"])["message"])
        running = envhub.wait_status(first["id"], "running", "failed", timeout_s=300)
        assert running["status"] == "running", running["message"]
        envhub.http.delete(f"/api/endpoints/{first['id']}")

        second = envhub.running("template:tabular")  # the virtualenv is reused: nothing to install
        assert "installing" not in " ".join(second["log_tail"][-5:])
        assert len(list((tmp_path / "data" / "runtime" / "venvs").iterdir())) == 1
    finally:
        envhub.stop()


def test_uninstallable_requirements_fail_with_pips_message(settings: Settings, tmp_path: Path) -> None:
    write_count_env(settings.templates_dir / "unbuildable", requirements="envhub-no-such-package-anywhere==1.0\n")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        launched = envhub.launch("template:unbuildable")
        failed = envhub.wait_status(launched["id"], "failed", "running", timeout_s=300)
    finally:
        envhub.stop()
    assert (failed["status"], failed["reason"]) == ("failed", "requirements_failed")
    # pip's own words are the cause a person reads
    assert "No matching distribution found for envhub-no-such-package-anywhere==1.0" in failed["message"]


def test_endpoint_limits(settings: Settings, tmp_path: Path, count_template: str) -> None:
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "max_endpoints_per_owner": 1}))
    try:
        envhub.launch(count_template)
        refused = envhub.http.post("/api/endpoints", json={"environment": count_template})
    finally:
        envhub.stop()
    assert (refused.status_code, refused.json()["code"]) == (429, "owner_endpoints_limit")


def test_idle_endpoints_are_stopped(settings: Settings, tmp_path: Path, count_template: str) -> None:
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "endpoint_idle_timeout_s": 1}))
    try:
        endpoint = envhub.running(count_template)
        stopped = envhub.wait_status(endpoint["id"], "stopped", timeout_s=15)
    finally:
        envhub.stop()
    assert stopped["reason"] == "idle_stopped"


def test_every_import_layout_is_forked_from_the_zygote(settings: Settings, tmp_path: Path) -> None:
    for layout in LAYOUTS:
        write_count_env(settings.templates_dir / f"count_{layout}", layout=layout)
    work_dir = tmp_path / "data" / "runtime"
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "max_endpoints_per_owner": 3}))
    try:
        launched = [envhub.launch(f"template:count_{layout}") for layout in LAYOUTS]  # at once
        servers = []
        for endpoint in launched:
            running = envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=120)
            assert running["status"] == "running", running["message"]
            servers.append(endpoint_pid(endpoint["id"]))
            with GenericEnvClient(base_url=running["url"]).sync() as client:
                assert client.reset().observation["total"] == 0
                assert client.step({"add": 10}).done is True
        zygotes = zygote_pids(work_dir)
        assert len(zygotes) == 1
        assert {parent_of(pid) for pid in servers} == set(zygotes)
    finally:
        envhub.stop()
    assert not any(_alive(pid) for pid in [*servers, *zygotes])  # envhub's exit leaves neither behind


def test_stop_ends_a_forked_servers_whole_group_and_its_stderr_is_logged(
    envhub: Envhub, settings: Settings, tmp_path: Path, count_template: str
) -> None:
    app = settings.templates_dir / "count" / "server" / "app.py"
    app.write_text(
        app.read_text() + "\nimport subprocess, sys\n"
        "helper = subprocess.Popen(['sleep', '600'])\n"
        "print(f'helper process {helper.pid}', file=sys.stderr)\n"
    )
    endpoint = envhub.running(count_template)
    server = endpoint_pid(endpoint["id"])
    assert parent_of(server) in zygote_pids(tmp_path / "data" / "runtime")
    lines = [line for line in endpoint["log_tail"] if line.startswith("helper process ")]
    assert len(lines) == 1, endpoint["log_tail"]
    # The pid the server saw is its own processes' (it has a /proc of its own): the helper, as the machine sees
    # it, is the one in the server's group that runs `sleep 600` and has that pid in there.
    [helper] = [pid for pid in _in_group(server) if _ns_pid(pid) == int(lines[0].split()[-1])]
    assert Path(f"/proc/{helper}/cmdline").read_bytes() == b"sleep\x00600\x00"

    stopped = envhub.http.delete(f"/api/endpoints/{endpoint['id']}").json()

    assert stopped["status"] == "stopped"
    assert not _alive(server)
    wait_until(lambda: not _alive(helper), timeout_s=5)


@pytest.mark.slow  # three interpreters importing openenv
def test_a_crashed_zygote_falls_back_to_starting_from_scratch(settings: Settings, tmp_path: Path) -> None:
    write_count_env(settings.templates_dir / "count")
    work_dir = tmp_path / "data" / "runtime"
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "max_endpoints_per_owner": 3}))
    try:
        forked = envhub.running("template:count")
        [zygote] = zygote_pids(work_dir)
        os.kill(zygote, signal.SIGKILL)
        wait_until(lambda: not _alive(zygote))

        fresh = envhub.running("template:count")  # started from scratch, as without a zygote
        again = envhub.running("template:count")  # a new zygote forks this one

        started = parent_of(endpoint_pid(fresh["id"]))  # envhub (it runs in this test's process), or the
        assert os.getpid() in (started, parent_of(started))  # bubblewrap it started the server in
        assert parent_of(endpoint_pid(again["id"])) in zygote_pids(work_dir)
        for endpoint in (forked, fresh, again):  # the orphaned server kept serving
            assert envhub.http.get(f"/endpoints/{endpoint['id']}/health").json() == {"status": "healthy"}
    finally:
        envhub.stop()
    assert not zygote_pids(work_dir)
    assert not any(server_pids(e["id"]) for e in (forked, fresh, again))


def test_a_built_in_template_is_forked_and_plays_over_the_gateway() -> None:
    with serve_templates("wordle") as urls:
        server = endpoint_pid(urls["wordle"].rsplit("/", 1)[-1])
        assert b"zygote.py" in Path(f"/proc/{parent_of(server)}/cmdline").read_bytes()
        with GenericEnvClient(base_url=urls["wordle"]).sync() as client:
            reset = client.reset(seed=7, episode_id="forked")
            assert reset.done is False
            result = client.step({"guess": "slate"})
            assert [len(result.observation["guesses"]), len(result.observation["guesses"][0]["colors"])] == [1, 5]
            assert client.state()["episode_id"] == "forked"
    assert not _alive(server)


def test_the_zygote_starts_with_envhub_so_the_first_launch_is_forked(settings: Settings, tmp_path: Path) -> None:
    write_count_env(settings.templates_dir / "count")
    work_dir = tmp_path / "data" / "runtime"
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "process_preload": Preload.START}))
    try:
        wait_until(lambda: len(zygote_pids(work_dir)) == 1, timeout_s=120)  # before anything is launched
        assert (work_dir / "zygote.log").exists()
        first = envhub.running("template:count")
        assert parent_of(endpoint_pid(first["id"])) in zygote_pids(work_dir)
    finally:
        envhub.stop()
    assert not zygote_pids(work_dir)


def test_relative_data_and_template_folders_launch_forked(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as `make run` does: ./data, and extra templates named from the checkout
    write_count_env(tmp_path / "mine" / "count")
    envhub = Envhub(settings.model_copy(update={"data_dir": Path("data"), "extra_templates": "mine"}))
    try:
        endpoint = envhub.running("template:count")
        assert parent_of(endpoint_pid(endpoint["id"])) in zygote_pids(tmp_path / "data" / "runtime")
        with GenericEnvClient(base_url=endpoint["url"]).sync() as client:
            assert client.reset().observation["total"] == 0
    finally:
        envhub.stop()


def test_launch_variables_that_only_tune_python_are_accepted(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template, options={"env": {"PYTHONHASHSEED": "0", "COUNT_START": "3"}})
    with GenericEnvClient(base_url=endpoint["url"]).sync() as client:
        assert client.reset().observation["total"] == 3
