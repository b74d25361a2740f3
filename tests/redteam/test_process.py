"""Process servers, attacked: a signed-in user's launch variables that would make a server run code of their own,
and a server whose own code reaches for envhub's database, secrets and data folder, against a real envhub with
sign-in on, over its API and gateway."""

import os
import pwd
import shutil
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, needs, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import Browsers, csrf, oauth_settings

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MIB = 1024 * 1024
SERVER_USER = "envhub-env"  # the default of ENVHUB_PROCESS_USER

as_root = needs("root", os.geteuid() == 0, "process servers drop to a user of their own only when envhub is root")
with_bubblewrap = needs("bubblewrap", shutil.which("bwrap") is not None, "apt-get install bubblewrap to run it")

# A hostile server: at start it shells out (as environments that run commands do), then tries to read, list or
# connect to what its variables name, to write files (path=bytes), hold memory (bytes) or fork (how many times),
# and it tells what it got (a listing, "done", or the error) and who it ran as, with which processes, at /spy.
SPY_APP = """
import errno
import os
import signal
import socket
import subprocess
import time

from fastapi import FastAPI


def fork(times):
    children = []
    try:
        for _ in range(times):
            child = os.fork()
            if child == 0:
                time.sleep(600)
                os._exit(0)
            children.append(child)
        return "done"
    finally:
        for child in children:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)


def attempt(kind, target):
    try:
        if kind == "FORK":
            return fork(int(target))
        if kind == "HOLD":
            held = bytearray(int(target))
            del held
            return "done"
        if kind == "WRITE":
            path, size = target.rsplit("=", 1)
            with open(os.path.expanduser(path), "wb") as handle:
                handle.write(bytes(int(size)))
            return "done"
        if kind == "LIST":
            return sorted(os.listdir(target))
        if kind == "CONNECT":
            host, port = target.rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=5).close()
        else:
            with open(target, "rb") as handle:
                handle.read(1)
        return "done"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    except MemoryError:
        return "MemoryError"


subprocess.run(["bash", "-c", "true"], check=False)
TRIED = {
    f"{kind.lower()} {target}": attempt(kind, target)
    for kind in ("READ", "LIST", "CONNECT", "WRITE", "HOLD", "FORK")
    for target in os.environ.get(f"SPY_{kind}", "").split(",")
    if target
}
HOME = os.environ.get("HOME", "")
try:
    with open(os.path.join(HOME, "mine"), "w") as note:
        note.write("a server writes in its home")
    HOME_WRITABLE = True
except OSError:
    HOME_WRITABLE = False

app = FastAPI()


@app.get("/health")
def health():
    return {"status": "healthy"}


@app.get("/spy")
def spy():
    echoed = {name: os.environ.get(name) for name in os.environ.get("SPY_ECHO", "").split(",") if name}
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "uids": next(line for line in open("/proc/self/status") if line.startswith("Uid:")).split()[1:],
        "processes": sorted(int(name) for name in os.listdir("/proc") if name.isdigit()),
        "home": HOME,
        "home_writable": HOME_WRITABLE,
        "tried": TRIED,
        "echoed": echoed,
    }
"""


def write_spy_env(folder: Path) -> Path:
    """The hostile server as a template, declaring one variable of the Hub's kind (HF_SPY_LABEL)."""
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "server" / "app.py").write_text(dedent(SPY_APP))
    manifest = f"spec_version: 1\nname: {folder.name}\napp: server.app:app\nport: 8000\nvariables: [HF_SPY_LABEL]\n"
    (folder / "openenv.yaml").write_text(manifest)
    (folder / "README.md").write_text(f"---\ntitle: {folder.name}\nsdk: docker\n---\nTells what it could reach.\n")
    return folder


@pytest.fixture
def public_envhub(settings: Settings, tmp_path: Path, templates_dir: Path) -> Iterator[Envhub]:
    """envhub as a public deployment has it: sign-in on, nobody launches anonymously, a template of the attacker's."""
    write_spy_env(templates_dir / "spy")
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", max_endpoints_per_owner=4))
    yield server
    server.stop()


@pytest.fixture
def mallory(public_envhub: Envhub, hub: FakeHub, browsers: Browsers) -> httpx.Client:
    return browsers.sign_in(public_envhub.url, hub, "mallory")


def launch(envhub: Envhub, browser: httpx.Client | None, env: dict[str, str]) -> httpx.Response:
    """template:spy on the process backend, by mallory's browser or (None) by the admin."""
    body = {"environment": "template:spy", "backend": "process", "options": {"env": env}}
    if browser is None:
        return envhub.http.post("/api/endpoints", json=body, headers=ADMIN)
    return browser.post("/api/endpoints", json=body, headers=csrf(browser))


def running(envhub: Envhub, launched: httpx.Response) -> dict[str, Any]:
    """The endpoint once it runs, as the admin sees it."""
    assert launched.status_code == 201, launched.text
    endpoint_id = launched.json()["id"]

    def read() -> dict[str, Any]:
        endpoint: dict[str, Any] = envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=ADMIN).json()
        return endpoint

    wait_until(lambda: read()["status"] in ("running", "failed"), timeout_s=180)
    endpoint = read()
    assert endpoint["status"] == "running", endpoint["message"]
    return endpoint


def spy_report(envhub: Envhub, endpoint: dict[str, Any]) -> dict[str, Any]:
    """What the server told of itself, through envhub's gateway (which it keeps serving)."""
    assert envhub.http.get(f"/endpoints/{endpoint['id']}/health").json() == {"status": "healthy"}
    report: dict[str, Any] = envhub.http.get(f"/endpoints/{endpoint['id']}/spy").json()
    return report


def server_pid(envhub: Envhub, endpoint: dict[str, Any]) -> int:
    """The pid envhub holds for the endpoint's server, on the machine."""
    return int(envhub.services.endpoints.replicas(endpoint["id"])[0].handle["pid"])


def forked(envhub: Envhub, endpoint: dict[str, Any]) -> bool:
    """Whether the endpoint's server was forked by the zygote (rather than started from scratch)."""
    parent = Path(f"/proc/{server_pid(envhub, endpoint)}/status").read_text().split("PPid:\t")[1].split()[0]
    return b"zygote.py" in Path(f"/proc/{parent}/cmdline").read_bytes()


def envhubs_own(tmp_path: Path) -> dict[str, str]:
    """What the spy reaches for: envhub's database, its data folder, and its process's environment (where the
    secret that seals users' tokens lives, as ENVHUB_SESSION_SECRET or OAUTH_CLIENT_SECRET)."""
    data = tmp_path / "data"
    return {
        "SPY_READ": f"{data / 'envhub.db'},/proc/{os.getpid()}/environ",
        "SPY_LIST": f"{data},{data / 'endpoints'}",
    }


def start_up_files(tmp_path: Path, marker: Path) -> dict[str, str]:
    """Python's start-up file, and bash's, which every shell the server starts runs first."""
    (tmp_path / "start-up.sh").write_text(f"touch {marker}\n")
    (tmp_path / "start-up.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return {"BASH_ENV": str(tmp_path / "start-up.sh"), "PYTHONSTARTUP": str(tmp_path / "start-up.py")}


def uvicorn_log_config(tmp_path: Path, marker: Path) -> dict[str, str]:
    """A logging config whose handler arguments uvicorn's CLI evaluates as Python."""
    config = tmp_path / "logging.ini"
    config.write_text(
        "[loggers]\nkeys=root\n[handlers]\nkeys=ran\n[formatters]\nkeys=\n[logger_root]\nhandlers=ran\n"
        f"[handler_ran]\nclass=FileHandler\nargs=(__import__('pathlib').Path('{marker}').write_text('ran') and "
        "'/dev/null',)\n"
    )
    return {"UVICORN_LOG_CONFIG": str(config)}


def antigravity(tmp_path: Path, marker: Path) -> dict[str, str]:
    """Python imports antigravity to resolve the warning category, and antigravity opens a browser: $BROWSER."""
    return {"PYTHONWARNINGS": "ignore::antigravity.Warning", "BROWSER": f"touch {marker} %s"}


def loaded_modules(tmp_path: Path, marker: Path) -> dict[str, str]:
    """Modules a library loads by name when the environment imports it: matplotlib's backend, GTK's modules."""
    (tmp_path / "backend.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return {"MPLBACKEND": "module://backend", "GTK_MODULES": str(tmp_path / "module.so")}


@pytest.mark.parametrize("payload", [antigravity, uvicorn_log_config, start_up_files, loaded_modules])
def test_launch_variables_that_would_run_code_are_refused_with_a_422_naming_them(
    public_envhub: Envhub, mallory: httpx.Client, tmp_path: Path, payload: Any
) -> None:
    marker = tmp_path / "ran"
    env = payload(tmp_path, marker)

    refused = launch(public_envhub, mallory, env)

    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert all(name in detail for name in env), detail
    assert "only the admin sets these variables on a process server" in detail
    assert "launch with the docker backend" in detail
    assert mallory.get("/api/endpoints").json()["count"] == 0
    assert not marker.exists()


def test_the_hubs_variables_reach_a_server_only_when_its_environment_declares_them(
    public_envhub: Envhub, mallory: httpx.Client
) -> None:
    refused = launch(public_envhub, mallory, {"HF_ENDPOINT": "http://attacker.example", "COUNT_START": "1"})

    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "HF_ENDPOINT: names the Hub, openenv and Spaces give a meaning to" in detail
    assert "template:spy declares HF_SPY_LABEL" in detail
    assert "COUNT_START" not in detail  # a plain name is fine


@as_root
@with_bubblewrap
@pytest.mark.parametrize("start", [{}, {"PYTHONHASHSEED": "0"}], ids=["forked from the zygote", "from scratch"])
def test_a_servers_own_code_runs_as_an_unprivileged_user_that_reads_none_of_envhubs_data(
    public_envhub: Envhub, tmp_path: Path, start: dict[str, str]
) -> None:
    user = pwd.getpwnam(SERVER_USER)
    endpoint = running(public_envhub, launch(public_envhub, None, envhubs_own(tmp_path) | start))

    report = spy_report(public_envhub, endpoint)

    assert (report["uid"], report["gid"], report["groups"]) == (user.pw_uid, user.pw_gid, [])
    assert report["uids"] == [str(user.pw_uid)] * 4  # real, effective, saved, filesystem: no way back to root
    assert forked(public_envhub, endpoint) == (not start)
    data = tmp_path / "data"
    tried = report["tried"]
    assert tried[f"read {data / 'envhub.db'}"] in ("ENOENT", "EACCES")  # out of its sight, or closed to it
    assert tried[f"read /proc/{os.getpid()}/environ"] == "ENOENT"  # envhub is not among its processes
    assert "envhub.db" not in tried[f"list {data}"]
    assert tried[f"list {data / 'endpoints'}"] in ("ENOENT", "EACCES", [])  # nor the servers' logs (gone, shut, hidden)
    assert report["home_writable"] is True
    assert report["home"] not in ("", os.environ.get("HOME"))


@with_bubblewrap
def test_a_non_admins_server_is_sandboxed_away_from_envhub_its_data_and_the_network(
    public_envhub: Envhub, mallory: httpx.Client, tmp_path: Path
) -> None:
    plain = {"OPENENV_MODE": "simulation", "ENABLE_WEB_INTERFACE": "false", "MAX_CONCURRENT_ENVS": "2"}
    declared = {"HF_SPY_LABEL": "declared", "SPY_ECHO": "HF_SPY_LABEL,MAX_CONCURRENT_ENVS"}
    reach = envhubs_own(tmp_path) | {"SPY_CONNECT": f"127.0.0.1:{public_envhub.port}"}
    endpoint = running(public_envhub, launch(public_envhub, mallory, plain | declared | reach))

    report = spy_report(public_envhub, endpoint)

    assert endpoint["options"]["sandbox"] is True
    assert report["echoed"] == {"HF_SPY_LABEL": "declared", "MAX_CONCURRENT_ENVS": "2"}
    data = tmp_path / "data"
    assert report["tried"] == {
        f"read {data / 'envhub.db'}": "ENOENT",  # not even there
        f"read /proc/{os.getpid()}/environ": "ENOENT",  # processes of its own: envhub's is not among them
        f"list {data}": ["runtime"],  # the way to its home, and nothing else of envhub's
        f"list {data / 'endpoints'}": "ENOENT",
        f"connect 127.0.0.1:{public_envhub.port}": "ECONNREFUSED",  # a loopback of its own, where envhub is not
    }
    assert report["home_writable"] is True
    if os.geteuid() == 0:
        assert report["uid"] == pwd.getpwnam(SERVER_USER).pw_uid


FORKED_OR_NOT = pytest.mark.parametrize("start", [{}, {"PYTHONHASHSEED": "0"}], ids=["forked", "from scratch"])


@as_root
@with_bubblewrap
@FORKED_OR_NOT
def test_a_server_out_of_the_sandbox_sees_no_other_servers_processes_homes_or_snapshots(
    public_envhub: Envhub, mallory: httpx.Client, tmp_path: Path, start: dict[str, str]
) -> None:
    sandboxed = running(public_envhub, launch(public_envhub, mallory, {}))
    admins = running(public_envhub, launch(public_envhub, None, {}))
    victims = [sandboxed, admins]
    homes = tmp_path / "data" / "runtime" / "homes"
    victim_homes = [spy_report(public_envhub, victim)["home"] for victim in victims]
    environs = [f"/proc/{server_pid(public_envhub, victim)}/environ" for victim in victims]
    snapshots = tmp_path / "data" / "runtime" / "spaces"
    reach = {"SPY_READ": ",".join(environs), "SPY_LIST": ",".join([*victim_homes, str(snapshots), str(homes)])}

    spy = running(public_envhub, launch(public_envhub, None, reach | start))
    report = spy_report(public_envhub, spy)

    assert forked(public_envhub, spy) == (not start)
    assert report["processes"] == [report["pid"]]  # a /proc of its own, where it is alone
    tried = report["tried"]
    assert [tried[f"read {environ}"] for environ in environs] == ["ENOENT", "ENOENT"]
    assert [tried[f"list {home}"] for home in victim_homes] == ["ENOENT", "ENOENT"]
    assert tried[f"list {snapshots}"] == "ENOENT"
    assert tried[f"list {homes}"] == [Path(report["home"]).name]  # its own home alone


@as_root
@with_bubblewrap
@pytest.mark.parametrize(
    ("start", "sandboxed"),
    [({}, False), ({"PYTHONHASHSEED": "0"}, False), ({}, True)],
    ids=["forked", "from scratch", "sandboxed"],
)
def test_a_server_that_forks_holds_memory_or_writes_past_its_limits_is_stopped_and_envhub_serves_on(
    settings: Settings,
    tmp_path: Path,
    templates_dir: Path,
    hub: FakeHub,
    browsers: Browsers,
    start: dict[str, str],
    sandboxed: bool,
) -> None:
    write_spy_env(templates_dir / "spy")
    limits = {"process_pids": 128, "process_memory": 1024 * MIB, "process_disk": MIB}
    envhub = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", **limits))
    try:
        browser = browsers.sign_in(envhub.url, hub, "mallory") if sandboxed else None
        past = {"SPY_FORK": "4096", "SPY_HOLD": str(2048 * MIB), "SPY_WRITE": f"~/big={2 * MIB},/tmp/big={2 * MIB}"}
        endpoint = running(envhub, launch(envhub, browser, past | start))

        report = spy_report(envhub, endpoint)

        assert endpoint["options"]["sandbox"] is sandboxed
        tried = report["tried"]
        assert tried["fork 4096"] == "EAGAIN"
        assert tried[f"hold {2048 * MIB}"] == "MemoryError"
        assert tried[f"write ~/big={2 * MIB}"] == "EFBIG"
        assert tried[f"write /tmp/big={2 * MIB}"] in ("EFBIG", "ENOSPC")  # the file's limit, or the /tmp's size
        assert envhub.http.get("/api/endpoints", headers=ADMIN).status_code == 200
    finally:
        envhub.end_endpoints()
        envhub.stop()
