"""A hostile environment server for the quality suite: every observation it sends is close to the 1 MiB a frame
may be, over hundreds of steps. The suite runs in a process of its own, whose peak memory during the report is
what is measured."""

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Observation, State
from pydantic import Field

from app.settings import REPO_ROOT
from tests import checkservers
from tests.checkservers import CountAction, serve
from tests.test_cli import cli_env

BLOB_CHARS = 900 * 1024
EPISODE_STEPS = 40
GROWTH_BOUND_MIB = 100  # what large observations may add to the suite's peak memory, however many there are


class BulkyObservation(Observation):  # type: ignore[misc]
    total: int = 0
    blob: str = Field(default="", description="padding: the same for the same step, so episodes replay alike")


class BulkyEnvironment(Environment):  # type: ignore[misc]
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def _observation(self, done: bool = False) -> BulkyObservation:
        step = self._state.step_count
        return BulkyObservation(total=step, blob=f"{step}:" + "x" * BLOB_CHARS, done=done, reward=0.0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> BulkyObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return self._observation()

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> BulkyObservation:
        self._state.step_count += 1
        return self._observation(done=self._state.step_count >= EPISODE_STEPS)

    @property
    def state(self) -> State:
        return self._state


# Run in a process of its own: the suite once on a small server (every module imported, every path taken), then,
# with the peak forgotten (Linux's clear_refs), on the server under test; it prints what that report added.
PROGRAM = """
import asyncio, json, sys
from pathlib import Path
from conformance.quality import QualityTarget, check_quality
from core.outbound import OutboundGuard

def kib(field):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(field + ":"))
    return int(line.split()[1])

def report(url):
    return asyncio.run(check_quality(QualityTarget(url), OutboundGuard(allow_private=True), deadline_s=240))

report(sys.argv[1])
Path("/proc/self/clear_refs").write_text("5")
before = kib("VmRSS")
found = report(sys.argv[2])
print(json.dumps({"grown_kib": kib("VmHWM") - before, "report": found.model_dump(mode="json")}))
"""


def test_large_observations_cost_the_quality_suite_bounded_memory(tmp_path: Path) -> None:
    bulky = create_app(BulkyEnvironment, CountAction, BulkyObservation, env_name="bulky", max_concurrent_envs=4)
    with serve(checkservers.count_app()) as small, serve(bulky) as served:
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM, small.url, served.url],
            cwd=REPO_ROOT,
            env=cli_env(tmp_path, "http://127.0.0.1:9"),
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    results = {r["check_id"]: r for r in measured["report"]["results"]}
    # The report ran to its end, and compared whole episodes of large observations.
    assert results["runtime.episode_isolation"]["status"] == "pass", results["runtime.episode_isolation"]
    assert results["runtime.episode_termination"]["status"] == "pass", results["runtime.episode_termination"]
    assert results["runtime.episode_termination"]["measured"]["steps"] == [EPISODE_STEPS] * 3
    grown_mib = measured["grown_kib"] / 1024
    assert grown_mib < GROWTH_BOUND_MIB, f"large observations took the suite's peak up by {grown_mib:.0f} MiB"
