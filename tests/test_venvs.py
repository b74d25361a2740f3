"""Virtualenvs of the process backend: layered on envhub's installed packages, and found from any working folder."""

import sysconfig
from pathlib import Path

import pytest
from openenv.core.generic_client import GenericEnvClient

from app.settings import Settings
from hosting.runtimes.venvs import LAYER_FILE
from tests.conftest import wait_until
from tests.environments import write_count_env
from tests.serving import Envhub
from tests.test_endpoints import endpoint_pid, parent_of


def write_tabulating_env(folder: Path, requirements: str) -> Path:
    """The count environment, importing tabulate (not among envhub's requirements) as its one extra."""
    write_count_env(folder, requirements=requirements)
    environment = folder / "server" / "environment.py"
    environment.write_text(environment.read_text() + "\nimport tabulate  # noqa: F401\n")
    return folder


def site_packages(venv: Path) -> Path:
    return Path(sysconfig.get_path("purelib", "venv", vars={"base": str(venv), "platbase": str(venv)}))


def test_requirements_naming_only_their_extras_start_on_envhubs_packages(settings: Settings, tmp_path: Path) -> None:
    # As the official environments do: no openenv, no uvicorn; their base image brings those.
    write_tabulating_env(settings.templates_dir / "tabular", requirements="tabulate==0.9.0\n")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "launch_timeout_s": 120}))
    try:
        endpoint = envhub.running("template:tabular")
        with GenericEnvClient(base_url=endpoint["url"]).sync() as client:
            assert client.step({"add": 10}).done is True
    finally:
        envhub.stop()
    [venv] = [v for v in (tmp_path / "data" / "runtime" / "venvs").iterdir() if v.is_dir()]
    installed = {p.name.split("-")[0].lower() for p in site_packages(venv).glob("*.dist-info")}
    assert "tabulate" in installed
    # Only what was missing: openenv, uvicorn and gradio come from envhub's own site-packages.
    assert not installed & {"openenv", "uvicorn", "gradio", "fastapi", "pydantic"}, installed
    assert (site_packages(venv) / LAYER_FILE).is_file()


def test_a_relative_data_folder_launches_a_virtualenvs_server(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as `make run` does: ./data
    write_tabulating_env(settings.templates_dir / "tabular", requirements="openenv==0.10.0\ntabulate==0.9.0\n")
    envhub = Envhub(settings.model_copy(update={"data_dir": Path("data"), "launch_timeout_s": 120}))
    try:
        launched = envhub.launch("template:tabular")
        endpoint = envhub.wait_status(launched["id"], "running", "failed", timeout_s=300)
        assert endpoint["status"] == "running", endpoint["message"]
        with GenericEnvClient(base_url=endpoint["url"]).sync() as client:
            assert client.reset().observation["total"] == 0
    finally:
        envhub.stop()


def test_a_virtualenvs_pool_grows_in_forks_of_its_own_zygote(settings: Settings, tmp_path: Path) -> None:
    write_tabulating_env(settings.templates_dir / "tabular", requirements="tabulate==0.9.0\n")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "launch_timeout_s": 120}))
    try:
        endpoint = envhub.running("template:tabular", options={"replicas": {"min": 2, "max": 2}})
        wait_until(lambda: len(envhub.ready_replicas(endpoint["id"])) == 2, timeout_s=120)
        [venv] = [v for v in (tmp_path / "data" / "runtime" / "venvs").iterdir() if v.is_dir()]
        parents = {parent_of(endpoint_pid(server)) for server in (endpoint["id"], f"{endpoint['id']}-2")}
        assert len(parents) == 1  # one zygote forked both servers
        [zygote] = parents
        argv = Path(f"/proc/{zygote}/cmdline").read_bytes().split(b"\0")
        assert argv[0] == str(venv / "bin" / "python").encode() and argv[2].endswith(b"zygote.py")
        with GenericEnvClient(base_url=endpoint["url"]).sync() as client:
            assert client.step({"add": 10}).done is True
    finally:
        envhub.stop()
