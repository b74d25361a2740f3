"""The harness CLIs' install: one not installed is refused naming the command that installs it, and installing
without npm says that npm is what is missing."""

import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import EnvhubError
from evals.harnesses import HARNESSES, HarnessRun, run_headless


def test_a_harness_not_installed_is_named_with_the_command_that_installs_it(tmp_path: Path) -> None:
    run = HarnessRun(
        "http://127.0.0.1:9", "envhub-run.ar-0123456789ab.s", "m", "envhub", "http://127.0.0.1:9/mcp", {}, (), "hi"
    )
    with pytest.raises(EnvhubError) as missing:
        run_headless(HARNESSES["codex"], run, cache_dir=tmp_path / "empty", wall_s=5)
    assert missing.value.code == "harness_missing" and missing.value.status_code == 503
    assert "python -m app harnesses install codex" in missing.value.message


def test_installing_a_harness_without_npm_fails_saying_so(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent), "ENVHUB_HARNESS_DIR": str(tmp_path / "harnesses")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "harnesses", "install", "qwen-code"],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "(npm_missing)" in done.stderr, done.stderr
    assert not (tmp_path / "harnesses" / "qwen-code-qwen-code-0.24.4").exists()
