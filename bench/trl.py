"""TRL-shaped load on the official environments for bench.pool's corpus part: a throwaway virtualenv with their
packages, typed-client rollouts through a pool, and the time a pool takes to let go of a check's sessions.

The rollouts are tests/typed_clients.py's: GRPOTrainer's environment_factory pattern, one instance of a class
wrapping the environment's typed client (found by openenv's AutoEnv) per rollout, all of a generation batch at
once on threads of their own.
"""

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from app.settings import REPO_ROOT
from bench.report import percentile
from tests.corpus import NAMES, copy_corpus, installed, run_in

__all__ = ["Rollouts", "clients", "released", "rollouts"]

CLIENTS = (REPO_ROOT / "tests" / "typed_clients.py").read_text()


def clients(scratch: Path, stack: ExitStack) -> Path:
    """A throwaway virtualenv's Python, with every corpus environment's package installed (for their typed clients)."""
    folder = scratch / "typed-clients"
    folder.mkdir()
    packages = copy_corpus(folder / "packages")
    return stack.enter_context(installed([packages / name for name in NAMES], folder))


class Rollouts:
    """What a batch of rollouts met: each one's steps, error and seconds."""

    def __init__(self, done: dict[str, Any]) -> None:
        self.results: list[dict[str, Any]] = done["rollouts"]
        self.wall_s: float = done["wall_s"]

    @property
    def errors(self) -> list[str]:
        return [r["error"] for r in self.results if "error" in r]

    def refused(self) -> int:
        return sum("CAPACITY_REACHED" in e for e in self.errors)

    def keepalive(self) -> int:
        return sum("keepalive" in e for e in self.errors)

    def complete(self, steps: int) -> int:
        return sum(r.get("steps") == steps or r.get("done") is True for r in self.results if "error" not in r)

    def seconds(self, share: float) -> float:
        return percentile([r["s"] for r in self.results if "s" in r], share)


def rollouts(python: Path, scratch: Path, name: str, url: str, count: int, steps: int) -> Rollouts:
    """`count` rollouts at once against the URL, each a reset and `steps` tool calls."""
    done = run_in(python, CLIENTS, scratch, mode="trl", name=name, url=url, rollouts=count, steps=steps)
    return Rollouts(done)


def released(http: httpx.Client, endpoint_id: str, suite: str) -> tuple[str, float, int]:
    """envhub's check of its endpoint (POST /api/checks), then the seconds until its pool holds no session (up to 10);
    the verdict, those seconds, and the sessions it held at the end."""
    filed = http.post("/api/checks", json={"endpoint": endpoint_id, "suite": suite}, timeout=300)
    filed.raise_for_status()
    verdict = str(filed.json().get("verdict"))
    started = time.monotonic()
    while True:
        sessions: int = http.get(f"/api/endpoints/{endpoint_id}").json()["pool"]["sessions"]
        waited = time.monotonic() - started
        if sessions == 0 or waited > 10:
            return verdict, waited, sessions
        time.sleep(0.02)
